package approval

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
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// testRun builds a run created age ago, in phase.
func testRun(ns, name, command string, phase skillsv1.RunPhase, age time.Duration) skillsv1.CommandRun {
	return skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Now().Add(-age))},
		Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: command, RequestedBy: "system:serviceaccount:" + ns + ":ops"},
		Status:     skillsv1.CommandRunStatus{Phase: phase},
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
		err := CheckDecidable(&tc.run, "bob")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := CheckDecidable(&twoNeeded, "alice"); err == nil || !strings.Contains(err.Error(), "it was already approved by alice") {
		t.Errorf("alice approving twice: %v", err)
	}
}

func TestExplain(t *testing.T) {
	gr := schema.GroupResource{Group: "kubeskills.io", Resource: "commandruns"}
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
		if got := Explain(tc.err, "approve", key).Error(); !strings.Contains(got, tc.want) || strings.Contains(got, "\n") {
			t.Errorf("explain(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestWriteSummary prints what a person decides on, whole, for a command
// whose programs can start others, with the trace of the chat that
// asked for it.
func TestWriteSummary(t *testing.T) {
	run := testRun("agents", "diff", "awk '{print $1}' x | make -n", skillsv1.PhaseAwaitingApproval, time.Minute)
	run.Status.Decision = &skillsv1.PolicyDecision{
		Action: skillsv1.ActionAsk, Policy: "ops-policy", PolicyGeneration: 3,
		Reason:         `"awk '{print $1}' x": awk runs a program that can run commands and write files`,
		StartsPrograms: []string{"awk", "make"},
	}
	run.Status.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	var b bytes.Buffer
	WriteSummary(&b, skillsv1.Approved, &run, "alice", "ServiceAccount ops-sandbox")
	want := `Approve commandrun agents/diff, as alice:
  Command:      awk '{print $1}' x | make -n
  Decision:     Ask, by the default action of CommandPolicy ops-policy (generation 3)
  Why:          "awk '{print $1}' x": awk runs a program that can run commands and write files
  Programs:     awk, make can start other programs; the policy judges each of those as it starts, and refuses one it says Never even after approval
  Skill:        none
  Agent:        ops
  Requested by: system:serviceaccount:agents:ops
  Sandbox:      ServiceAccount ops-sandbox
  Approvers:    anyone the kubeskills-approver ClusterRole lets decide in the namespace, but the requester; 1 required
  So far:       0 of 1 approvals
  Trace:        4bf92f3577b34da6a3ce929d0e0e4736
`
	if got := b.String(); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}

// TestProgramsText says which programs can start others, and whether the
// policy judges what they start, in one line; nothing when none can.
func TestProgramsText(t *testing.T) {
	tests := []struct {
		name            string
		starts, trusted []string
		want            string
	}{
		{name: "no spawners", want: ""},
		{name: "judged", starts: []string{"awk", "make"},
			want: "awk, make can start other programs; the policy judges each of those as it starts, and refuses one it says Never even after approval"},
		{name: "trusted", starts: []string{"git"}, trusted: []string{"git"},
			want: "git can start other programs; those are not judged one by one, since the deciding rule trusts its command's programs (children: Trusted)"},
		{name: "some trusted", starts: []string{"awk", "git", "tar"}, trusted: []string{"git"},
			want: "awk, git, tar can start other programs; the policy judges each of those as it starts, and refuses one it says Never even after approval, " +
				"except those git starts, which are not judged one by one (children: Trusted)"},
		{name: "two trusted", starts: []string{"awk", "git", "tar"}, trusted: []string{"git", "tar"},
			want: "awk, git, tar can start other programs; the policy judges each of those as it starts, and refuses one it says Never even after approval, " +
				"except those git, tar start, which are not judged one by one (children: Trusted)"},
		{name: "unprintable", starts: []string{"aw\x1bk\n"},
			want: "aw\ufffdk can start other programs; the policy judges each of those as it starts, and refuses one it says Never even after approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &skillsv1.PolicyDecision{Action: skillsv1.ActionAsk, StartsPrograms: tt.starts, TrustedPrograms: tt.trusted}
			got := ProgramsText(d)
			if got != tt.want {
				t.Errorf("programsText = %q, want %q", got, tt.want)
			}
			var b bytes.Buffer
			run := testRun("agents", "r", "x", skillsv1.PhaseAwaitingApproval, time.Minute)
			run.Status.Decision = d
			WriteSummary(&b, skillsv1.Denied, &run, "alice", "none")
			line := ""
			for _, l := range strings.Split(b.String(), "\n") {
				if strings.HasPrefix(l, "  Programs:") {
					line = l
				}
			}
			if (line == "") != (tt.want == "") || line != "" && line != "  Programs:     "+tt.want {
				t.Errorf("summary line %q, want %q", line, tt.want)
			}
		})
	}
}

// TestDecisionKey: the key of a decision gives back the same decision, and
// a decision taken again has another key.
func TestDecisionKey(t *testing.T) {
	d := &skillsv1.PolicyDecision{Action: skillsv1.ActionAsk, Rule: "kubectl *", Policy: "ops", PolicyGeneration: 3,
		SkillHash: "sha256:abc", RunGeneration: 2, Reason: "not kept"}
	back, err := ParseDecisionKey(DecisionKey(d))
	if err != nil || !sameDecision(d, back) {
		t.Fatalf("ParseDecisionKey(DecisionKey(d)) = %+v, %v", back, err)
	}
	again := d.DeepCopy()
	again.PolicyGeneration = 4
	if DecisionKey(again) == DecisionKey(d) {
		t.Error("a decision taken again has the same key")
	}
	for _, bad := range []string{"", "!!", DecisionKey(nil), "e30"} {
		if _, err := ParseDecisionKey(bad); err == nil {
			t.Errorf("ParseDecisionKey(%q) did not fail", bad)
		}
	}
}
