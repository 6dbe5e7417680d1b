package cli

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// testRun builds a run created age ago, in phase.
func testRun(ns, name, command string, phase skillsv1.RunPhase, age time.Duration) skillsv1.CommandRun {
	return skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))},
		Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: command, RequestedBy: "system:serviceaccount:" + ns + ":ops"},
		Status:     skillsv1.CommandRunStatus{Phase: phase},
	}
}

func TestRunTable(t *testing.T) {
	done := testRun("agents", "done", "kubectl get pods -n web", skillsv1.PhaseSucceeded, 2*time.Hour)
	done.Status.Decision = &skillsv1.PolicyDecision{Action: skillsv1.ActionAlways}
	done.Status.Result = &skillsv1.CommandResult{ExitCode: ptr.To[int32](0)}
	waiting := testRun("agents", "waiting", "kubectl rollout restart deploy/web", skillsv1.PhaseAwaitingApproval, 5*time.Minute)
	waiting.Status.Decision = &skillsv1.PolicyDecision{Action: skillsv1.ActionAsk}
	waiting.Status.ApprovalDeadline = &metav1.Time{Time: now.Add(55 * time.Minute)}
	urgent := testRun("agents", "urgent", "kubectl drain node-1", skillsv1.PhaseAwaitingApproval, 50*time.Minute)
	urgent.Status.Decision = &skillsv1.PolicyDecision{Action: skillsv1.ActionAsk}
	urgent.Status.ApprovalDeadline = &metav1.Time{Time: now.Add(10 * time.Minute)}
	fresh := testRun("agents", "fresh", "echo \x1b[31mred\x1b[0m\n\tand a very long tail that goes on and on and on", "", 3*time.Second)
	other := testRun("batch", "nightly", "ls", skillsv1.PhaseFailed, 26*time.Hour)
	other.Status.Result = &skillsv1.CommandResult{ExitCode: ptr.To[int32](2)}

	var b bytes.Buffer
	runs := []skillsv1.CommandRun{other, fresh, waiting, done, urgent}
	if err := writeRunTable(&b, runs, runTable{namespaces: true}, now); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE   NAME      AGENT   COMMAND                                            PHASE              ACTION   EXIT     AGE
agents      done      ops     kubectl get pods -n web                            Succeeded          Always   0        120m
agents      urgent    ops     kubectl drain node-1                               AwaitingApproval   Ask      <none>   50m
agents      waiting   ops     kubectl rollout restart deploy/web                 AwaitingApproval   Ask      <none>   5m
agents      fresh     ops     echo ` + "\ufffd[31mred\ufffd[0m and a very long tail that goe…" + `   <none>             <none>   <none>   3s
batch       nightly   ops     ls                                                 Failed             <none>   2        26h
`
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	b.Reset()
	if err := writeRunTable(&b, awaiting(runs), runTable{pending: true}, now); err != nil {
		t.Fatal(err)
	}
	want = `NAME      AGENT   COMMAND                              REQUESTED BY                       DEADLINE                        AGE
urgent    ops     kubectl drain node-1                 system:serviceaccount:agents:ops   2025-06-01T12:10:00Z (in 10m)   50m
waiting   ops     kubectl rollout restart deploy/web   system:serviceaccount:agents:ops   2025-06-01T12:55:00Z (in 55m)   5m
`
	if got := b.String(); got != want {
		t.Errorf("pending table:\n%s\nwant:\n%s", got, want)
	}
}
