package controller

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/test/health"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// allPhases are the phases a run can show.
var allPhases = []skillsv1.RunPhase{
	skillsv1.PhasePending, skillsv1.PhaseAwaitingApproval, skillsv1.PhaseRunning, skillsv1.PhaseSucceeded,
	skillsv1.PhaseFailed, skillsv1.PhaseTimedOut, skillsv1.PhaseDenied, skillsv1.PhaseExpired,
}

// newRun is a run of the given generation that no pass has seen.
func newRun(generation int64) *skillsv1.CommandRun {
	run := &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "run-1", Generation: generation}}
	run.APIVersion, run.Kind = skillsv1.GroupVersion.String(), "CommandRun"
	return run
}

// runConds are the four conditions of a run in phase, as one pass left
// them: Succeeded, then the kstatus ones, "" for a condition that is not
// there.
func runConds(phase skillsv1.RunPhase, msg string, generation int64, at time.Time, succeeded, ready, reconciling, stalled metav1.ConditionStatus) []metav1.Condition {
	var out []metav1.Condition
	for typ, status := range map[string]metav1.ConditionStatus{
		skillsv1.SucceededCondition: succeeded, skillsv1.ReadyCondition: ready,
		skillsv1.ReconcilingCondition: reconciling, skillsv1.StalledCondition: stalled,
	} {
		if status != "" {
			out = append(out, cond(typ, status, string(phase), msg, generation, at))
		}
	}
	return out
}

// TestSetRunPhase shows each phase a run goes through before it ends:
// Succeeded and Ready Unknown, Reconciling True, no Stalled, each with the
// phase as reason, the message, and the run's generation; a condition's
// lastTransitionTime moves only with its status.
func TestSetRunPhase(t *testing.T) {
	const u, tr = metav1.ConditionUnknown, metav1.ConditionTrue
	cases := []struct {
		name  string
		start func(run *skillsv1.CommandRun)
		phase skillsv1.RunPhase
		msg   string
		at    time.Time // when the conditions last changed status
	}{
		{name: "pending, first pass", phase: skillsv1.PhasePending, msg: "Waiting for the policy decision: boom", at: t1},
		{name: "awaiting approval, first pass", phase: skillsv1.PhaseAwaitingApproval,
			msg: "Waiting for a person to approve or deny: kubectl skills approve run-1", at: t1},
		{name: "awaiting approval after pending", phase: skillsv1.PhaseAwaitingApproval, msg: "Waiting", at: t0,
			start: func(run *skillsv1.CommandRun) { setRunPhase(run, skillsv1.PhasePending, "judging", t0) }},
		{name: "pending after approval: the Job is being made", phase: skillsv1.PhasePending, msg: "Creating Job run-1", at: t0,
			start: func(run *skillsv1.CommandRun) { setRunPhase(run, skillsv1.PhaseAwaitingApproval, "Waiting", t0) }},
		{name: "running", phase: skillsv1.PhaseRunning, msg: "Running in Job run-1", at: t0,
			start: func(run *skillsv1.CommandRun) { setRunPhase(run, skillsv1.PhasePending, "Creating Job run-1", t0) }},
		{name: "an approval raised the generation", phase: skillsv1.PhaseRunning, msg: "Running in Job run-1", at: t0,
			start: func(run *skillsv1.CommandRun) {
				setRunPhase(run, skillsv1.PhaseAwaitingApproval, "Waiting", t0)
				run.Generation++
			}},
		{name: "a Stalled condition left over goes", phase: skillsv1.PhasePending, msg: "judging", at: t1,
			start: func(run *skillsv1.CommandRun) {
				run.Status.Conditions = []metav1.Condition{cond(skillsv1.StalledCondition, metav1.ConditionTrue, "Old", "old", 1, t0)}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := newRun(1)
			if tc.start != nil {
				tc.start(run)
			}
			setRunPhase(run, tc.phase, tc.msg, t1)
			if run.Status.Phase != tc.phase {
				t.Errorf("phase: got %s, want %s", run.Status.Phase, tc.phase)
			}
			if run.Status.CompletionTime != nil {
				t.Errorf("completionTime: got %v, want none", run.Status.CompletionTime)
			}
			expectConds(t, run.Status.Conditions, runConds(tc.phase, tc.msg, run.Generation, tc.at, u, u, tr, "")...)
		})
	}
}

// TestEndRun shows each way a run ends: Succeeded with Succeeded and Ready
// True; Failed, TimedOut, Denied and Expired with Succeeded and Ready False
// and Stalled True; Reconciling gone. An ended run never changes again.
func TestEndRun(t *testing.T) {
	const f, tr = metav1.ConditionFalse, metav1.ConditionTrue
	running := func(run *skillsv1.CommandRun) { setRunPhase(run, skillsv1.PhaseRunning, "Running in Job run-1", t0) }
	cases := []struct {
		name  string
		start func(run *skillsv1.CommandRun)
		phase skillsv1.RunPhase
		msg   string
		want  []metav1.Condition
	}{
		{name: "succeeded", start: running, phase: skillsv1.PhaseSucceeded, msg: "The command exited 0",
			want: runConds(skillsv1.PhaseSucceeded, "The command exited 0", 1, t1, tr, tr, "", "")},
		{name: "failed", start: running, phase: skillsv1.PhaseFailed, msg: "The command exited 2",
			want: runConds(skillsv1.PhaseFailed, "The command exited 2", 1, t1, f, f, "", tr)},
		{name: "timed out", start: running, phase: skillsv1.PhaseTimedOut, msg: "The command ran past its timeout and was stopped",
			want: runConds(skillsv1.PhaseTimedOut, "The command ran past its timeout and was stopped", 1, t1, f, f, "", tr)},
		{name: "denied while waiting", phase: skillsv1.PhaseDenied, msg: "Denied by alice: no",
			start: func(run *skillsv1.CommandRun) { setRunPhase(run, skillsv1.PhaseAwaitingApproval, "Waiting", t0) },
			want:  runConds(skillsv1.PhaseDenied, "Denied by alice: no", 1, t1, f, f, "", tr)},
		{name: "denied on the first pass", phase: skillsv1.PhaseDenied, msg: "Denied by the policy: no deletes",
			want: runConds(skillsv1.PhaseDenied, "Denied by the policy: no deletes", 1, t1, f, f, "", tr)},
		{name: "expired", phase: skillsv1.PhaseExpired, msg: "Nobody approved the command before its approval deadline",
			start: func(run *skillsv1.CommandRun) { setRunPhase(run, skillsv1.PhaseAwaitingApproval, "Waiting", t0) },
			want:  runConds(skillsv1.PhaseExpired, "Nobody approved the command before its approval deadline", 1, t1, f, f, "", tr)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := newRun(1)
			if tc.start != nil {
				tc.start(run)
			}
			endRun(run, tc.phase, tc.msg, t1)
			if run.Status.Phase != tc.phase {
				t.Errorf("phase: got %s, want %s", run.Status.Phase, tc.phase)
			}
			if got := run.Status.CompletionTime; got == nil || !got.Time.Equal(t1) {
				t.Errorf("completionTime: got %v, want %v", got, t1)
			}
			expectConds(t, run.Status.Conditions, tc.want...)

			ended := run.DeepCopy()
			endRun(run, skillsv1.PhaseFailed, "too late", t2)
			if !reflect.DeepEqual(run.Status, ended.Status) {
				t.Errorf("an ended run changed:\n got %+v\nwant %+v", run.Status, ended.Status)
			}
		})
	}
}

// TestDenyRun shows a run denied before a decision was recorded: it
// records a Never decision with the reason, and ends Denied with "Denied: "
// and the reason; a decision already recorded stays.
func TestDenyRun(t *testing.T) {
	const f, tr = metav1.ConditionFalse, metav1.ConditionTrue
	ask := &skillsv1.PolicyDecision{Action: skillsv1.ActionAsk, Policy: "ops-policy", Reason: "matched no rule"}
	cases := []struct {
		name     string
		decision *skillsv1.PolicyDecision
		reason   string
		want     *skillsv1.PolicyDecision
	}{
		{name: "agent not found", reason: `Agent "ops" not found`,
			want: &skillsv1.PolicyDecision{Action: skillsv1.ActionNever, Reason: `Agent "ops" not found`}},
		{name: "policy not in force", reason: `CommandPolicy "ops-policy" is not in force: bad rule`,
			want: &skillsv1.PolicyDecision{Action: skillsv1.ActionNever, Reason: `CommandPolicy "ops-policy" is not in force: bad rule`}},
		{name: "a decision is kept", decision: ask, reason: `Skill "triage" is not served`, want: ask},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := newRun(1)
			run.Status.Decision = tc.decision.DeepCopy()
			denyRun(run, tc.reason, t1)
			if !reflect.DeepEqual(run.Status.Decision, tc.want) {
				t.Errorf("decision: got %+v, want %+v", run.Status.Decision, tc.want)
			}
			if run.Status.Phase != skillsv1.PhaseDenied {
				t.Errorf("phase: got %s, want Denied", run.Status.Phase)
			}
			expectConds(t, run.Status.Conditions, runConds(skillsv1.PhaseDenied, "Denied: "+tc.reason, 1, t1, f, f, "", tr)...)
		})
	}
}

// runInPhase is a run brought to phase the way the controller brings it:
// judged (Pending), then each phase it passes through, then phase.
func runInPhase(phase skillsv1.RunPhase, msg string) *skillsv1.CommandRun {
	run := newRun(2)
	run.Status.ObservedGeneration = run.Generation
	setRunPhase(run, skillsv1.PhasePending, "Waiting for the policy decision", t0)
	switch phase {
	case skillsv1.PhaseDenied, skillsv1.PhaseExpired:
		setRunPhase(run, skillsv1.PhaseAwaitingApproval, "Waiting", t0)
	case skillsv1.PhaseSucceeded, skillsv1.PhaseFailed, skillsv1.PhaseTimedOut:
		setRunPhase(run, skillsv1.PhaseRunning, "Running in Job run-1", t0)
	}
	if phase.Terminal() {
		endRun(run, phase, msg, t1)
	} else {
		setRunPhase(run, phase, msg, t1)
	}
	return run
}

// docTable reads the table under heading in a Markdown file: its rows
// after the header, each a list of cells.
func docTable(t *testing.T, path, heading string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("failed to open %s: %v", path, err)
	}
	defer f.Close()
	var rows [][]string
	in, lines := false, 0
scan:
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == heading:
			in = true
		case !in:
		case strings.HasPrefix(line, "|"):
			if lines++; lines <= 2 {
				continue // the header and the line under it
			}
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		case lines > 0 || strings.HasPrefix(line, "#"):
			break scan // the end of the table, or of the section
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no table under %q", path, heading)
	}
	return rows
}

// argoHealth is the health Argo CD's check for CommandRuns gives run.
func argoHealth(t *testing.T, run *skillsv1.CommandRun) health.Status {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(health.KindDir(repoRoot, "CommandRun"), health.ScriptFile))
	if err != nil {
		t.Fatal(err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(run)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := health.Check(context.Background(), script, content)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// TestRunConditionsMatchDocs reads the Conditions table of
// docs/commandrun.md and checks each row against the setters: the four
// conditions of each phase it lists, kstatus's reading of them and Argo
// CD's health check's; every condition has the phase as reason and the
// same message; and every phase has a row.
func TestRunConditionsMatchDocs(t *testing.T) {
	rows := docTable(t, filepath.Join(repoRoot, "docs", "commandrun.md"), "### Conditions")
	types := []string{skillsv1.SucceededCondition, skillsv1.ReadyCondition, skillsv1.ReconcilingCondition, skillsv1.StalledCondition}
	documented := map[skillsv1.RunPhase]bool{}
	for _, row := range rows {
		if len(row) != 7 {
			t.Fatalf("row %q: want 7 cells (phase, 4 conditions, kstatus, Argo CD)", row)
		}
		for _, cell := range strings.Split(row[0], ",") {
			phase := skillsv1.RunPhase(strings.Trim(strings.TrimSpace(cell), "`"))
			documented[phase] = true
			t.Run(string(phase), func(t *testing.T) {
				const msg = "what happened"
				run := runInPhase(phase, msg)
				for i, typ := range types {
					c := findCond(run.Status.Conditions, typ)
					switch {
					case row[i+1] == "" && c != nil:
						t.Errorf("%s: got %s, the docs say it is not there", typ, c.Status)
					case row[i+1] == "":
					case c == nil:
						t.Errorf("%s: not there, the docs say %s", typ, row[i+1])
					case string(c.Status) != row[i+1]:
						t.Errorf("%s: got %s, the docs say %s", typ, c.Status, row[i+1])
					case c.Reason != string(phase) || c.Message != msg || c.ObservedGeneration != run.Generation:
						t.Errorf("%s: reason %q, message %q, observedGeneration %d; want the phase, %q and %d",
							typ, c.Reason, c.Message, c.ObservedGeneration, msg, run.Generation)
					}
				}
				if got := kstatusOf(t, run); got != row[5] {
					t.Errorf("kstatus: got %s, the docs say %s", got, row[5])
				}
				if hs := argoHealth(t, run); hs.Status != row[6] {
					t.Errorf("Argo CD: got %s, the docs say %s", hs.Status, row[6])
				}
			})
		}
	}
	for _, p := range allPhases {
		if !documented[p] {
			t.Errorf("phase %s has no row in the docs' Conditions table", p)
		}
	}
	if len(documented) != len(allPhases) {
		t.Errorf("the docs list %d phases, the API has %d", len(documented), len(allPhases))
	}
}

func findCond(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// TestResultStatus shows what a run's status.result says of the runner's
// report.
func TestResultStatus(t *testing.T) {
	cases := []struct {
		name     string
		result   runner.Result
		deadline bool
		want     skillsv1.CommandResult
	}{
		{name: "exited 0", result: runner.Result{ExitCode: 0, Stdout: "ok\n", DurationMillis: 1500},
			want: skillsv1.CommandResult{ExitCode: ptr.To[int32](0), Stdout: "ok\n", Duration: &metav1.Duration{Duration: 1500 * time.Millisecond}}},
		{name: "exited 3, output cut", result: runner.Result{ExitCode: 3, Stdout: "o", Stderr: "e", StdoutTruncated: true, StderrTruncated: true},
			want: skillsv1.CommandResult{ExitCode: ptr.To[int32](3), Stdout: "o", Stderr: "e", StdoutTruncated: true, StderrTruncated: true,
				Duration: &metav1.Duration{}}},
		{name: "refused by the runner", result: runner.Result{ExitCode: 126, Error: "refused: ptrace"},
			want: skillsv1.CommandResult{ExitCode: ptr.To[int32](126), Message: "refused: ptrace", Duration: &metav1.Duration{}}},
		{name: "timed out in the runner", result: runner.Result{ExitCode: 124, TimedOut: true, Error: "timed out"},
			want: skillsv1.CommandResult{ExitCode: ptr.To[int32](124), TimedOut: true, Message: "timed out", Duration: &metav1.Duration{}}},
		{name: "stopped by the Job's deadline", result: runner.Result{ExitCode: 143}, deadline: true,
			want: skillsv1.CommandResult{ExitCode: ptr.To[int32](143), TimedOut: true, Duration: &metav1.Duration{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resultStatus(&tc.result, tc.deadline); !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

// TestFinishedPhase shows how a run whose command has a result ends, and
// the message its conditions carry.
func TestFinishedPhase(t *testing.T) {
	cases := []struct {
		name   string
		result skillsv1.CommandResult
		phase  skillsv1.RunPhase
		msg    string
	}{
		{name: "exited 0", result: skillsv1.CommandResult{ExitCode: ptr.To[int32](0)},
			phase: skillsv1.PhaseSucceeded, msg: "The command exited 0"},
		{name: "exited 2", result: skillsv1.CommandResult{ExitCode: ptr.To[int32](2)},
			phase: skillsv1.PhaseFailed, msg: "The command exited 2"},
		{name: "exited 0 but did not run to its end", result: skillsv1.CommandResult{ExitCode: ptr.To[int32](0), Message: "output unreadable"},
			phase: skillsv1.PhaseFailed, msg: "The command failed (exit code 0): output unreadable"},
		{name: "refused", result: skillsv1.CommandResult{ExitCode: ptr.To[int32](126), Message: "refused: ptrace"},
			phase: skillsv1.PhaseFailed, msg: "The command failed (exit code 126): refused: ptrace"},
		{name: "no exit code", result: skillsv1.CommandResult{Message: "the sandbox failed"},
			phase: skillsv1.PhaseFailed, msg: "The command failed (exit code -1): the sandbox failed"},
		{name: "no exit code, no message", result: skillsv1.CommandResult{},
			phase: skillsv1.PhaseFailed, msg: "The command exited -1"},
		{name: "timed out", result: skillsv1.CommandResult{ExitCode: ptr.To[int32](124), TimedOut: true, Message: "timed out"},
			phase: skillsv1.PhaseTimedOut, msg: "The command ran past its timeout and was stopped"},
		{name: "timed out though it exited 0", result: skillsv1.CommandResult{ExitCode: ptr.To[int32](0), TimedOut: true},
			phase: skillsv1.PhaseTimedOut, msg: "The command ran past its timeout and was stopped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			phase, msg := finishedPhase(&tc.result)
			if phase != tc.phase || msg != tc.msg {
				t.Errorf("got %s %q, want %s %q", phase, msg, tc.phase, tc.msg)
			}
		})
	}
}

// TestShortCommand shows the COMMAND column of `kubectl get commandruns`.
func TestShortCommand(t *testing.T) {
	sixty := strings.Repeat("x", 60)
	cases := []struct{ name, cmd, want string }{
		{name: "short", cmd: "kubectl get pods", want: "kubectl get pods"},
		{name: "white space", cmd: "  kubectl\tget\n\npods  ", want: "kubectl get pods"},
		{name: "60 runes", cmd: sixty, want: sixty},
		{name: "61 runes", cmd: sixty + "y", want: strings.Repeat("x", 59) + "…"},
		{name: "runes, not bytes", cmd: strings.Repeat("é", 61), want: strings.Repeat("é", 59) + "…"},
		{name: "empty", cmd: "", want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := shortCommand(tc.cmd); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBlockedRunReadsInProgress: a run whose sandbox cannot start stays
// Running, Stalled with the pod's reason, and still reads as work in
// progress to kstatus and Argo CD, with the block as its message, as
// docs/commandrun.md says.
func TestBlockedRunReadsInProgress(t *testing.T) {
	run := runInPhase(skillsv1.PhaseRunning, "Running in Job ops-1")
	blockRun(run, "ops-1", &startBlock{Reason: "Unschedulable", Message: "0/1 nodes are available."}, time.Now())
	const msg = "The sandbox of Job ops-1 cannot start the command: Unschedulable: 0/1 nodes are available."
	if c := findCond(run.Status.Conditions, skillsv1.StalledCondition); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Unschedulable" || c.Message != msg {
		t.Errorf("Stalled = %+v, want True, Unschedulable, %q", c, msg)
	}
	if c := findCond(run.Status.Conditions, skillsv1.ReconcilingCondition); c == nil || c.Status != metav1.ConditionTrue || c.Message != msg {
		t.Errorf("Reconciling = %+v, want True with the block's message", c)
	}
	if got := kstatusOf(t, run); got != "InProgress" {
		t.Errorf("kstatus: got %s, want InProgress", got)
	}
	if hs := argoHealth(t, run); hs.Status != "Progressing" || hs.Message != msg {
		t.Errorf("Argo CD: got %s %q, want Progressing with the block's message", hs.Status, hs.Message)
	}
	setRunPhase(run, skillsv1.PhaseRunning, "Running in Job ops-1", time.Now())
	if c := findCond(run.Status.Conditions, skillsv1.StalledCondition); c != nil {
		t.Errorf("Stalled stayed once the block went: %+v", c)
	}
}
