package ui

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/approval"
	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/cli/ui/render"
)

// runView is what the pages show of a run.
type runView struct {
	Namespace, Name, Agent, Phase, Action string
	// Short is the command's first line, cut for a table.
	Short   string
	Created time.Time
	// Deadline is when a run awaiting approval expires (RFC 3339, UTC).
	Deadline string
	// Fields is what `kubectl skills approve` prints before a decision;
	// none in a list of runs.
	Fields []approval.Field
	// Decidable tells whether the person may approve or deny now; Blocked
	// says why not, when the run waits for a person.
	Decidable bool
	Blocked   string
	// Shown names the decision the page shows, and CSRF is the console's
	// token, for the decision's form.
	Shown, CSRF string
	// Message is the Succeeded condition's message.
	Message   string
	Approvals []approvalRow
	Result    *resultView
	Timeline  render.Timeline
	// Steps says which steps of the timeline could not be known.
	Steps   string
	TraceID string
}

// approvalRow is one entry of spec.approvals.
type approvalRow struct {
	Approver, Decision, Reason, Time string
	// Current tells whether it answers the decision in force.
	Current bool
}

// resultView is what the command produced.
type resultView struct {
	ExitCode                         string
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
	Duration, Message                string
	TimedOut                         bool
}

// view makes the view of a run; full adds what only its own page shows
// (the approvals, the output and the timeline), which may take more
// reads. The summary of what is decided on is made for a run that waits
// for a person, or for its own page.
func (s *server) view(ctx context.Context, run *skillsv1.CommandRun, full bool) runView {
	v := runView{Namespace: run.Namespace, Name: run.Name, Agent: run.Spec.Agent, Phase: string(run.Status.Phase),
		Short: cmdline.Cell(run.Spec.Command, 80), Created: run.CreationTimestamp.Time, TraceID: run.Status.TraceID,
		CSRF: s.guard.CSRF()}
	if d := run.Status.Decision; d != nil {
		v.Action = string(d.Action)
		v.Shown = approval.DecisionKey(d)
	}
	if t := run.Status.ApprovalDeadline; t != nil {
		v.Deadline = t.UTC().Format(time.RFC3339)
	}
	_, v.Message = condition(run.Status.Conditions, skillsv1.SucceededCondition)
	if run.Status.Phase == skillsv1.PhaseAwaitingApproval {
		if err := approval.CheckDecidable(run, s.user); err != nil {
			v.Blocked = cmdline.OneLine(err.Error())
		} else {
			v.Decidable = true
		}
	}
	if full || run.Status.Phase == skillsv1.PhaseAwaitingApproval {
		v.Fields = approval.Summarize(run, approval.SandboxIdentity(ctx, s.c, run))
	}
	if !full {
		return v
	}
	for _, a := range run.AllApprovals() {
		row := approvalRow{Approver: cmdline.Printable(a.Approver), Decision: string(a.Decision), Reason: cmdline.OneLine(a.Reason),
			Current: a.Answers(run.Status.Decision, run.Generation)}
		if a.Time != nil {
			row.Time = a.Time.UTC().Format(time.RFC3339)
		}
		v.Approvals = append(v.Approvals, row)
	}
	if res := run.Status.Result; res != nil {
		rv := &resultView{Stdout: render.Text(res.Stdout), Stderr: render.Text(res.Stderr), StdoutTruncated: res.StdoutTruncated,
			StderrTruncated: res.StderrTruncated, Message: cmdline.OneLine(res.Message), TimedOut: res.TimedOut, ExitCode: "none"}
		if res.ExitCode != nil {
			rv.ExitCode = fmt.Sprint(*res.ExitCode)
		}
		if res.Duration != nil {
			rv.Duration = render.Duration(res.Duration.Duration)
		}
		v.Result = rv
	}
	v.Timeline, v.Steps = s.timeline(ctx, run)
	return v
}

// timeline draws a run's life: filed → judged → approved → sandbox made →
// pod scheduled → started → ended → recorded. The pod's steps come from
// its pod while it exists and the person may read it; else started and
// ended come from the result's duration. It also says which steps could
// not be known.
func (s *server) timeline(ctx context.Context, run *skillsv1.CommandRun) (render.Timeline, string) {
	var approved, scheduled, started, ended time.Time
	if t := run.Tally(); t.Approved() {
		for _, a := range run.AllApprovals() {
			if a.Decision == skillsv1.Approved && a.Time != nil && a.Answers(run.Status.Decision, run.Generation) && a.Time.After(approved) {
				approved = a.Time.Time
			}
		}
	}
	var missing string
	if pod := s.sandboxPod(ctx, run); pod != nil {
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				scheduled = c.LastTransitionTime.Time
			}
		}
		for _, cs := range pod.Status.ContainerStatuses {
			switch st := cs.State; {
			case st.Terminated != nil:
				started, ended = st.Terminated.StartedAt.Time, st.Terminated.FinishedAt.Time
			case st.Running != nil:
				started = st.Running.StartedAt.Time
			}
		}
	} else if run.Status.JobName != "" {
		missing = "The pod's steps are not shown: its pod is gone, or you may not read pods."
	}
	if res := run.Status.Result; res != nil && res.Duration != nil && started.IsZero() && run.Status.CompletionTime != nil {
		// The runner's own measure, ending when the run was recorded.
		ended = run.Status.CompletionTime.Time
		started = ended.Add(-res.Duration.Duration)
	}
	var judged time.Time
	if d := run.Status.Decision; d != nil && d.DecidedAt != nil {
		judged = d.DecidedAt.Time
	}
	steps := []render.Step{
		{Name: "filed", At: run.CreationTimestamp.Time},
		{Name: "judged", At: judged},
		{Name: "approved", At: approved},
		{Name: "sandbox made", At: timeOf(run.Status.StartTime)},
		{Name: "pod scheduled", At: scheduled},
		{Name: "started", At: started},
		{Name: "ended", At: ended},
		{Name: "recorded", At: timeOf(run.Status.CompletionTime)},
	}
	return render.DrawTimeline(steps), missing
}

// sandboxPod returns the pod of a run's Job, nil when there is none the
// person may read. A warm sandbox's pod was there before the run: its
// steps are not the run's.
func (s *server) sandboxPod(ctx context.Context, run *skillsv1.CommandRun) *corev1.Pod {
	if run.Status.JobName == "" {
		return nil
	}
	var pods corev1.PodList
	if s.c.List(ctx, &pods, client.InNamespace(run.Namespace), client.MatchingLabels{"batch.kubernetes.io/job-name": run.Status.JobName}) != nil ||
		len(pods.Items) == 0 {
		return nil
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	return &pods.Items[0]
}

// timeOf is t's time, zero when t is nil.
func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
