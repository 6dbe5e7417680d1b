package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// A decision is taken on content: the policy's generation and the skill's
// content hash, recorded in status.decision. The Job is built from exactly
// that content. When the content changed between the decision and the
// start of the Job, the command is judged again on the new content, and a
// person who approved the earlier decision is asked again when the new one
// says Ask: an approval answers one decision (Approval.Answers), so what
// runs is always what was judged, and approved when it had to be.

// contentChange says how the policy and skill, as they are now, differ from
// those the decision was taken on; "" when they do not.
func contentChange(d *skillsv1.PolicyDecision, pol *skillsv1.CommandPolicy, skl *skillsv1.Skill) string {
	switch {
	case d.Policy != pol.Name:
		return fmt.Sprintf("the agent's policy is now CommandPolicy %q, not %q", pol.Name, d.Policy)
	case d.PolicyGeneration != pol.Generation:
		return fmt.Sprintf("CommandPolicy %q changed (generation %d, now %d)", pol.Name, d.PolicyGeneration, pol.Generation)
	case skl != nil && d.SkillHash != skl.Status.ContentHash:
		return fmt.Sprintf("Skill %q changed (content %s, now %s)", skl.Name, shortHash(d.SkillHash), shortHash(skl.Status.ContentHash))
	}
	return ""
}

// checkContent compares the content the run's decision was taken on with
// the policy and skill read from the cache. A difference is confirmed on
// the API server first, since a lagging cache (of a second manager, say)
// must not pass for a change. It returns the content to go on with and what
// changed, "" when nothing did.
func (r *CommandRunReconciler) checkContent(ctx context.Context, run *skillsv1.CommandRun, pol *skillsv1.CommandPolicy, skl *skillsv1.Skill) (*skillsv1.CommandPolicy, *skillsv1.Skill, string, error) {
	if contentChange(run.Status.Decision, pol, skl) == "" {
		return pol, skl, "", nil
	}
	objs := []client.Object{pol}
	if skl != nil {
		objs = append(objs, skl)
	}
	for _, obj := range objs {
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			// Gone since the cache read it: the next pass says so.
			return nil, nil, "", fmt.Errorf("failed to get %s: it was deleted", klog.KObj(obj))
		}
		if err != nil {
			return nil, nil, "", fmt.Errorf("failed to get %s: %w", klog.KObj(obj), err)
		}
	}
	return pol, skl, contentChange(run.Status.Decision, pol, skl), nil
}

// judgeAgain replaces the run's decision with one taken on the content as
// it is now, and says so in the decision, in an Event once the pass is
// recorded and, when a person must decide again, in the run's conditions.
func (r *CommandRunReconciler) judgeAgain(p *runPass, pol *skillsv1.CommandPolicy, skl *skillsv1.Skill, changed string) {
	run := p.run
	before := run.Status.Decision.Action
	r.decide(run, pol, skl, changed)
	after := skillsv1.ActionNever
	if run.Status.Decision != nil {
		after = run.Status.Decision.Action
	}
	note := eventNote(fmt.Sprintf("Judged again before the command ran, because %s: %s, was %s", changed, after, before))
	p.event(func() { r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, "JudgedAgain", "Judge", "%s", note) })
}

// awaitingMessage tells a person what the run waits for, how many
// approvals it has and, when an approval is there that answers an earlier
// decision, why it does not count.
func awaitingMessage(run *skillsv1.CommandRun, t skillsv1.Tally) string {
	ask := fmt.Sprintf("Waiting for a person to approve or deny: kubectl skills approve %s", run.Name)
	if t.Required > 1 || len(t.Approvers) > 0 {
		ask = fmt.Sprintf("Waiting for %d of %d approvals (%d so far%s): kubectl skills approve %s",
			t.Required-len(t.Approvers), t.Required, len(t.Approvers), byWhom(t.Approvers), run.Name)
	}
	d := run.Status.Decision
	var stale *skillsv1.Approval
	for _, a := range run.AllApprovals() {
		if a.Decision == skillsv1.Approved && !a.Answers(d, run.Generation) {
			stale = &a
		}
	}
	switch {
	case d.JudgedAgain != "" && stale != nil:
		return fmt.Sprintf("Judged again because %s: the approval by %s was given for the earlier decision and does not cover "+
			"what would run now. %s", d.JudgedAgain, stale.Approver, ask)
	case d.JudgedAgain != "":
		return fmt.Sprintf("Judged again because %s. %s", d.JudgedAgain, ask)
	case stale != nil:
		return fmt.Sprintf("The approval by %s names another decision (policy generation %d, skill %s) than the run's "+
			"(policy generation %d, skill %s). %s", stale.Approver, stale.PolicyGeneration, noneIfEmpty(shortHash(stale.SkillHash)),
			d.PolicyGeneration, noneIfEmpty(shortHash(d.SkillHash)), ask)
	}
	return ask
}

// byWhom lists approvers after a count, "" for none.
func byWhom(approvers []string) string {
	if len(approvers) == 0 {
		return ""
	}
	return ", by " + strings.Join(approvers, ", ")
}

// shortHash shortens a "sha256:..." content hash for messages.
func shortHash(h string) string {
	if rest, ok := strings.CutPrefix(h, "sha256:"); ok && len(rest) > 12 {
		return "sha256:" + rest[:12]
	}
	return h
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
