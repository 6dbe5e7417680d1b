package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fieldpath "k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

func TestCheckDecidable(t *testing.T) {
	awaitingRun := testRun("ns", "r", "x", skillsv1.PhaseAwaitingApproval, time.Minute)
	decided := awaitingRun
	decided.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Denied, Approver: "alice", Reason: "not now"}
	decided.Status.Phase = skillsv1.PhaseDenied
	// Judged again after alice approved: her approval names the earlier
	// decision, so a person decides anew.
	judgedAgain := testRun("ns", "r", "x", skillsv1.PhaseAwaitingApproval, time.Minute)
	judgedAgain.Generation = 2
	judgedAgain.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", PolicyGeneration: 1}
	judgedAgain.Status.Decision = &skillsv1.PolicyDecision{Action: skillsv1.ActionAsk, PolicyGeneration: 2, RunGeneration: 2}
	approvedNow := judgedAgain
	approvedNow.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", PolicyGeneration: 2}
	// Two approvals needed: alice's is one, so bob may add his, and alice
	// may not add a second.
	twoNeeded := approvedNow
	twoNeeded.Status.Decision = approvedNow.Status.Decision.DeepCopy()
	twoNeeded.Status.Decision.Approvers = &skillsv1.ApprovalRule{Users: []string{"alice", "bob"}, Required: 2}
	denied := testRun("ns", "r", "x", skillsv1.PhaseDenied, time.Minute)
	denied.Status.Conditions = []metav1.Condition{{Type: skillsv1.SucceededCondition, Status: metav1.ConditionFalse,
		Reason: "Denied", Message: "Denied by the policy: \"rm x\" matched rules[2] \"rm *\" (Never)"}}
	for _, tc := range []struct {
		name string
		run  skillsv1.CommandRun
		want string
	}{
		{"awaiting", awaitingRun, ""},
		{"one of two, another approver", twoNeeded, ""},
		{"decided", decided, `it was already denied by alice ("not now"); its phase is Denied`},
		{"approved for an earlier decision", judgedAgain, ""},
		{"approved for the decision in force", approvedNow, `it was already approved by alice; its phase is AwaitingApproval`},
		{"denied by policy", denied, `it is not awaiting approval: its phase is Denied (Denied by the policy: "rm x" matched rules[2] "rm *" (Never))`},
		{"running", testRun("ns", "r", "x", skillsv1.PhaseRunning, time.Minute), "it is not awaiting approval: its phase is Running"},
		{"new", testRun("ns", "r", "x", "", time.Second), "the operator has not judged it yet (phase <none>)"},
		{"pending", testRun("ns", "r", "x", skillsv1.PhasePending, time.Second), "the operator has not judged it yet (phase Pending)"},
	} {
		err := checkDecidable(&tc.run, "bob")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := checkDecidable(&twoNeeded, "alice"); err == nil || !strings.Contains(err.Error(), "it was already approved by alice") {
		t.Errorf("alice approving twice: %v", err)
	}
}

func TestExplain(t *testing.T) {
	gr := schema.GroupResource{Group: "kubeskills.io", Resource: "commandruns"}
	o := &approvalOptions{decision: skillsv1.Approved}
	key := client.ObjectKey{Namespace: "agents", Name: "r"}
	rbac := apierrors.NewForbidden(gr, "r", errors.New(`User "carol" cannot patch resource "commandruns" in API group "kubeskills.io" in the namespace "agents"`))
	admission := apierrors.NewForbidden(gr, "r", errors.New("ValidatingAdmissionPolicy 'kubeskills-commandrun-identity' with binding "+
		"'kubeskills-commandrun-identity' denied request: the user who requested a command cannot approve or deny it"))
	for _, tc := range []struct {
		err  error
		want string
	}{
		{rbac, `failed to approve commandrun agents/r: forbidden: you need get and patch on commandruns, which the ClusterRole kubeskills-approver grants`},
		{rbac, `User "carol" cannot patch`},
		{admission, "failed to approve commandrun agents/r: refused by admission: the user who requested a command cannot approve or deny it"},
		{apierrors.NewInvalid(schema.GroupKind{Group: "kubeskills.io", Kind: "CommandRun"}, "r", fieldpath.ErrorList{
			fieldpath.Invalid(fieldpath.NewPath("spec", "approvals"), "array", "spec.approvals is append-only:\n entries are never removed")}),
			`failed to approve commandrun agents/r: the API server refused it: spec.approvals: Invalid value: "array": spec.approvals is append-only: entries are never removed`},
		{&judgedAgainError{decision: &skillsv1.PolicyDecision{JudgedAgain: "the policy changed"}},
			"the command was judged again while you decided (the policy changed); nothing was written"},
		{apierrors.NewNotFound(gr, "r"), `failed to approve commandrun agents/r: no CommandRun "r" in namespace "agents"`},
		{&notAwaitingError{phase: skillsv1.PhaseRunning}, "failed to approve commandrun agents/r: it is not awaiting approval: its phase is Running"},
		{errors.New("connection refused"), "failed to approve commandrun agents/r: connection refused"},
	} {
		if got := o.explain(tc.err, key).Error(); !strings.Contains(got, tc.want) || strings.Contains(got, "\n") {
			t.Errorf("explain(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
