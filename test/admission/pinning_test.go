package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// askCommand is a command the test policies ask about.
const askCommand = "kubectl rollout restart deploy/web"

// approve sets the run's approval as user, naming the decision seen, as
// `kubectl skills approve` does with the decision it read; it returns the
// API server's answer.
func approve(c client.Client, ns, name, user string, seen *skillsv1.PolicyDecision) error {
	run := &skillsv1.CommandRun{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, run); err != nil {
		return err
	}
	saw := &skillsv1.CommandRun{Status: skillsv1.CommandRunStatus{Decision: seen}}
	patch := client.MergeFrom(run.DeepCopy())
	run.Spec.Approval = saw.ApproveDecision(skillsv1.Approved, user, "looked at it")
	return c.Patch(context.Background(), run, patch)
}

// approveCurrent approves the decision the run shows now.
func approveCurrent(g Gomega, c client.Client, ns, name, user string) {
	g.Expect(approve(c, ns, name, user, getRun(g, ns, name).Status.Decision)).To(Succeed())
}

// switchPolicy points the Agent ops at a new CommandPolicy with the rules,
// as the admin. Nothing watches that change: the run meets it only when it
// is reconciled again, on an approval.
func switchPolicy(t *testing.T, ns, name string, rules ...skillsv1.PolicyRule) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pol := &skillsv1.CommandPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: skillsv1.CommandPolicySpec{Rules: rules}}
	g.Expect(admin.Create(ctx, pol)).To(Succeed())
	a := &skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"}}
	g.Expect(update(admin, a, func(a *skillsv1.Agent) { a.Spec.PolicyRef = &skillsv1.LocalRef{Name: name} })).To(Succeed())
}

// noJob asserts that the run gets no Job for a while.
func noJob(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Consistently(func(g Gomega) {
		var jobs batchv1.JobList
		g.Expect(admin.List(context.Background(), &jobs, client.InNamespace(ns))).To(Succeed())
		g.Expect(jobs.Items).To(BeEmpty())
	}, time.Second, interval).Should(Succeed(), "a Job was created for run %s", name)
}

// job returns the run's Job once it exists.
func job(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	NewWithT(t).Eventually(func() error {
		return admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j)
	}, timeout, interval).Should(Succeed())
	return j
}

// editPolicy changes the policy ops-policy as the admin and waits until the
// operator has seen the change (its status observes the new generation), so
// that what follows meets the operator's view of it.
func editPolicy(t *testing.T, ns string, edit func(*skillsv1.CommandPolicy)) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	pol := &skillsv1.CommandPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-policy"}}
	g.Expect(update(admin, pol, edit)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(pol), pol)).To(Succeed())
		g.Expect(pol.Status.ObservedGeneration).To(Equal(pol.Generation))
	}, timeout, interval).Should(Succeed())
}

// runnerPolicy returns the policy the Job hands to the runner.
func runnerPolicy(t *testing.T, j *batchv1.Job) runner.PolicySnapshot {
	t.Helper()
	for _, c := range j.Spec.Template.Spec.Containers {
		for _, arg := range c.Command {
			if text, ok := strings.CutPrefix(arg, "--policy="); ok {
				snap, err := runner.ParsePolicySnapshot(text)
				if err != nil {
					t.Fatal(err)
				}
				return snap
			}
		}
	}
	t.Fatalf("Job %s hands no policy to the runner", j.Name)
	return runner.PolicySnapshot{}
}

// condMessage is the message of the run's Succeeded condition.
func condMessage(run *skillsv1.CommandRun) string {
	for _, c := range run.Status.Conditions {
		if c.Type == skillsv1.SucceededCondition {
			return c.Message
		}
	}
	return ""
}

// pinSetup creates an Agent "ops" whose policy asks about askCommand and
// serves the Skill "triage", the approver alice, and a run of askCommand
// for the skill, filed by the agent, awaiting approval. It returns the
// namespace, alice's client and the run's first decision.
func pinSetup(t *testing.T) (string, client.Client, *skillsv1.PolicyDecision) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	skl := &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "triage"},
		Spec: skillsv1.SkillSpec{
			Description:  "Restarts a stuck rollout after reading its events.",
			Instructions: "# Rollouts\n\nRead the events first.\n",
			Files:        []skillsv1.SkillFile{{Path: "scripts/events.sh", Content: ptr.To("#!/bin/sh\nkubectl get events\n"), Executable: true}},
		},
	}
	g.Expect(admin.Create(ctx, skl)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(skl), skl)).To(Succeed())
		g.Expect(skl.Status.ContentHash).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
	policyAndAgent(t, ns, "ops", "triage")
	bind(t, ns, "ClusterRole", "kubeskills-approver", "alice")
	alice := as(t, "alice")

	run := newRun(ns, "restart", "ops", askCommand, agentUser(ns, "ops"))
	run.Spec.Skill = "triage"
	g.Expect(asAgent(t, ns, "ops").Create(ctx, run)).To(Succeed())
	first := waitPhase(t, ns, "restart", skillsv1.PhaseAwaitingApproval).Status.Decision
	g.Expect(first.Action).To(Equal(skillsv1.ActionAsk))
	g.Expect(first.PolicyGeneration).To(Equal(int64(1)))
	g.Expect(first.SkillHash).To(Equal(skl.Status.ContentHash), "the decision records the skill content it was taken on")
	return ns, alice, first
}

// TestApprovedPolicyEditedBeforeJobStartsIsAskedAgain: the policy changes
// while the run waits for a person. The run is judged again under the new
// generation at once and waits again, saying why; an approval of what the
// person saw before the change is refused by admission, and an approval of
// the new decision runs the command under that generation.
func TestApprovedPolicyEditedBeforeJobStartsIsAskedAgain(t *testing.T) {
	g := NewWithT(t)
	ns, alice, first := pinSetup(t)

	editPolicy(t, ns, func(pol *skillsv1.CommandPolicy) {
		pol.Spec.Rules = append(pol.Spec.Rules, skillsv1.PolicyRule{Pattern: "kubectl scale *", Action: skillsv1.ActionNever})
	})
	var run *skillsv1.CommandRun
	g.Eventually(func(g Gomega) {
		run = getRun(g, ns, "restart")
		g.Expect(run.Status.Decision.PolicyGeneration).To(Equal(int64(2)))
	}, timeout, interval).Should(Succeed(), "the run was never judged again")
	g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval))
	g.Expect(run.Status.Decision.JudgedAgain).To(Equal(`CommandPolicy "ops-policy" changed (generation 1, now 2)`))
	g.Expect(condMessage(run)).To(And(
		ContainSubstring(`Judged again because CommandPolicy "ops-policy" changed (generation 1, now 2)`),
		ContainSubstring("kubectl skills approve restart")))
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, run)).To(ContainElement("JudgedAgain"))
	}, timeout, interval).Should(Succeed())

	// What alice saw before the edit is not what would run.
	refusedApproval(t, alice, ns, "restart", first,
		"spec.approval names a decision (policy ops-policy, policyGeneration 1", "the command was judged again")
	noJob(t, ns, "restart")

	approveCurrent(g, alice, ns, "restart", "alice")
	waitPhase(t, ns, "restart", skillsv1.PhaseRunning)
	snap := runnerPolicy(t, job(t, ns, "restart"))
	g.Expect(snap.Rules).To(ContainElement(runner.SnapshotRule{Pattern: "kubectl scale *", Action: policy.Never}),
		"the runner gets the policy of the approved generation")
	g.Expect(snap.Approved).To(BeTrue())
}

// TestApprovalOfEarlierDecisionIsAskedAgain: the approval reaches the run
// after its content changed but before the operator judged it again (here
// the Agent was pointed at another policy, which nothing watches). The
// approval does not start the Job: the command is judged again and waits,
// saying that the approval was for the earlier decision.
func TestApprovalOfEarlierDecisionIsAskedAgain(t *testing.T) {
	g := NewWithT(t)
	ns, alice, first := pinSetup(t)

	switchPolicy(t, ns, "ops-strict", skillsv1.PolicyRule{Pattern: "kubectl get *", Action: skillsv1.ActionAlways})
	g.Expect(approve(alice, ns, "restart", "alice", first)).To(Succeed())

	var run *skillsv1.CommandRun
	g.Eventually(func(g Gomega) {
		run = getRun(g, ns, "restart")
		g.Expect(run.Status.Decision.Policy).To(Equal("ops-strict"))
	}, timeout, interval).Should(Succeed(), "the run was never judged again")
	g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval))
	g.Expect(condMessage(run)).To(And(
		ContainSubstring(`Judged again because the agent's policy is now CommandPolicy "ops-strict", not "ops-policy"`),
		ContainSubstring("the approval by alice was given for the earlier decision and does not cover what would run now")))
	noJob(t, ns, "restart")

	approveCurrent(g, alice, ns, "restart", "alice")
	waitPhase(t, ns, "restart", skillsv1.PhaseRunning)
}

// TestApprovalOfEarlierDecisionNeverReachesTheSandbox: judged again, a
// command the new policy allows runs, but the approval given for the
// earlier decision is not handed to the sandbox, so what the new policy
// asks about is not run on its word.
func TestApprovalOfEarlierDecisionNeverReachesTheSandbox(t *testing.T) {
	g := NewWithT(t)
	ns, alice, first := pinSetup(t)

	switchPolicy(t, ns, "ops-open", skillsv1.PolicyRule{Pattern: "kubectl rollout *", Action: skillsv1.ActionAlways})
	g.Expect(approve(alice, ns, "restart", "alice", first)).To(Succeed())

	run := waitPhase(t, ns, "restart", skillsv1.PhaseRunning)
	g.Expect(run.Status.Decision.Action).To(Equal(skillsv1.ActionAlways))
	g.Expect(run.Status.Decision.Policy).To(Equal("ops-open"))
	snap := runnerPolicy(t, job(t, ns, "restart"))
	g.Expect(snap.Rules).To(ContainElement(runner.SnapshotRule{Pattern: "kubectl rollout *", Action: policy.Always}))
	g.Expect(snap.Approved).To(BeFalse(), "an approval of the earlier decision reached the sandbox")
}

// TestApprovedSkillEditedBeforeJobStartsIsAskedAgain: the skill's content
// changes while the run waits for a person. The command is judged again on
// the new content and waits again; an approval of the content the person
// saw before is refused, and once the new decision is approved, the Job
// unpacks the skill only if it holds exactly the approved content.
func TestApprovedSkillEditedBeforeJobStartsIsAskedAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, alice, first := pinSetup(t)

	skl := &skillsv1.Skill{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "triage"}}
	g.Expect(update(admin, skl, func(s *skillsv1.Skill) {
		s.Spec.Files[0].Content = ptr.To("#!/bin/sh\nkubectl delete pods --all\n")
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(skl), skl)).To(Succeed())
		g.Expect(skl.Status.ContentHash).NotTo(Equal(first.SkillHash))
	}, timeout, interval).Should(Succeed())

	var run *skillsv1.CommandRun
	g.Eventually(func(g Gomega) {
		run = getRun(g, ns, "restart")
		g.Expect(run.Status.Decision.SkillHash).To(Equal(skl.Status.ContentHash))
	}, timeout, interval).Should(Succeed(), "the run was never judged again")
	g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval))
	g.Expect(run.Status.Decision.JudgedAgain).To(HavePrefix(`Skill "triage" changed (content sha256:`))
	g.Expect(condMessage(run)).To(ContainSubstring(`Judged again because Skill "triage" changed`))
	refusedApproval(t, alice, ns, "restart", first, "spec.approval names a decision", "the command was judged again")
	noJob(t, ns, "restart")

	approveCurrent(g, alice, ns, "restart", "alice")
	waitPhase(t, ns, "restart", skillsv1.PhaseRunning)
	var unpack []string
	for _, c := range job(t, ns, "restart").Spec.Template.Spec.InitContainers {
		if c.Name == sandbox.ContainerUnpackSkill {
			unpack = c.Command
		}
	}
	g.Expect(unpack).To(ContainElements("--expect-hash", skl.Status.ContentHash), "the Job unpacks only the approved content")
}

// TestPolicyEditedToNeverBeforeJobStartsDenies: judged again, a command the
// new policy refuses is denied, and no approval can run it.
func TestPolicyEditedToNeverBeforeJobStartsDenies(t *testing.T) {
	g := NewWithT(t)
	ns, alice, first := pinSetup(t)

	editPolicy(t, ns, func(pol *skillsv1.CommandPolicy) {
		pol.Spec.Rules = append(pol.Spec.Rules, skillsv1.PolicyRule{Pattern: "kubectl rollout *", Action: skillsv1.ActionNever})
	})
	run := waitPhase(t, ns, "restart", skillsv1.PhaseDenied)
	g.Expect(run.Status.Decision.Action).To(Equal(skillsv1.ActionNever))
	g.Expect(run.Status.Decision.JudgedAgain).To(ContainSubstring("changed (generation 1, now 2)"))
	refusedApproval(t, alice, ns, "restart", first, "spec.approval names a decision")
	noJob(t, ns, "restart")
}

// refusedApproval asserts that user may not approve the run naming the
// decision seen, an earlier one.
func refusedApproval(t *testing.T, c client.Client, ns, name string, seen *skillsv1.PolicyDecision, want ...string) {
	t.Helper()
	err := approve(c, ns, name, "alice", seen)
	g := NewWithT(t)
	g.Expect(err).To(HaveOccurred(), "an approval of an earlier decision was accepted")
	for _, w := range want {
		g.Expect(err.Error()).To(ContainSubstring(w))
	}
}

// eventReasons returns the reasons of the Events about obj.
func eventReasons(g Gomega, obj client.Object) []string {
	var list eventsv1.EventList
	g.Expect(admin.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// TestForeignNetworkPolicyNamedLikeAFenceFailsTheRunWithoutJob: a
// NetworkPolicy named like one of the agent's fences that the agent does
// not own is neither shared nor taken over, since its rules are not the
// sandbox's. The run fails, saying why; no Job is created and the
// NetworkPolicy is left as it was.
func TestForeignNetworkPolicyNamedLikeAFenceFailsTheRunWithoutJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	// The policy of policyAndAgent allows no egress.
	name := sandbox.FenceName("ops", sandbox.FenceOf(sandbox.Params{}).Hash)
	foreign := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	g.Expect(admin.Create(ctx, foreign)).To(Succeed())
	policyAndAgent(t, ns, "ops")

	user := agentUser(ns, "ops")
	g.Expect(asAgent(t, ns, "ops").Create(ctx, newRun(ns, "clash", "ops", "echo hi", user))).To(Succeed())
	run := waitPhase(t, ns, "clash", skillsv1.PhaseFailed)
	g.Expect(condMessage(run)).To(And(
		ContainSubstring(`a NetworkPolicy named "`+name+`" exists that Agent ops does not own`),
		ContainSubstring("no Job was created")))
	noJob(t, ns, "clash")
	after := &networkingv1.NetworkPolicy{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(foreign), after)).To(Succeed())
	g.Expect(after.OwnerReferences).To(BeEmpty())
	g.Expect(after.Spec).To(Equal(foreign.Spec))
}
