package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestApprovalAnswersOneDecision: an approval that names a decision answers
// that content only; one that names none answers the decision in force when
// it was written (a later run generation), never a decision taken after it.
func TestApprovalAnswersOneDecision(t *testing.T) {
	first := &skillsv1.PolicyDecision{Policy: "p", PolicyGeneration: 1, SkillHash: "sha256:a", RunGeneration: 1}
	again := &skillsv1.PolicyDecision{Policy: "p", PolicyGeneration: 2, SkillHash: "sha256:a", RunGeneration: 2, JudgedAgain: "policy changed"}
	otherPolicy := &skillsv1.PolicyDecision{Policy: "q", PolicyGeneration: 1, SkillHash: "sha256:a", RunGeneration: 2, JudgedAgain: "another policy"}
	named := &skillsv1.Approval{Decision: skillsv1.Approved, Policy: "p", PolicyGeneration: 1, SkillHash: "sha256:a"}
	unnamed := &skillsv1.Approval{Decision: skillsv1.Approved}
	cases := []struct {
		name     string
		approval *skillsv1.Approval
		decision *skillsv1.PolicyDecision
		runGen   int64
		want     bool
	}{
		{"named, its decision", named, first, 2, true},
		{"named, a decision on new content", named, again, 2, false},
		{"named, the skill changed", named, &skillsv1.PolicyDecision{Policy: "p", PolicyGeneration: 1, SkillHash: "sha256:b", RunGeneration: 2}, 2, false},
		{"named, another policy at the same generation", named, otherPolicy, 2, false},
		{"unnamed, written after the decision", unnamed, first, 2, true},
		{"unnamed, the decision taken after it", unnamed, again, 2, false},
		{"unnamed, written with the run", unnamed, first, 1, false},
		{"no approval", nil, first, 2, false},
		{"no decision", named, nil, 2, false},
	}
	for _, tc := range cases {
		if got := tc.approval.Answers(tc.decision, tc.runGen); got != tc.want {
			t.Errorf("%s: Answers = %t, want %t", tc.name, got, tc.want)
		}
	}
	run := &skillsv1.CommandRun{Status: skillsv1.CommandRunStatus{Decision: again}}
	a := run.ApproveDecision(skillsv1.Approved, "alice", "ok")
	if !a.Answers(again, 3) || a.Policy != "p" || a.PolicyGeneration != 2 || a.SkillHash != "sha256:a" || a.Approver != "alice" {
		t.Errorf("ApproveDecision = %+v, want an approval of the run's decision", a)
	}
}

// TestApprovalReplacedOnlyByAnotherDecision: the API server lets an
// approval be replaced only by one that names another decision, so a
// person can approve a run judged again, and nothing else changes an
// approval.
func TestApprovalReplacedOnlyByAnotherDecision(t *testing.T) {
	ctx := context.Background()
	r := run("approval-of-decision", func(r *skillsv1.CommandRun) {
		r.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Policy: "p", PolicyGeneration: 1, SkillHash: "sha256:a"}
	})
	if err := env.Client.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*skillsv1.Approval){
		"same decision, another approver": func(a *skillsv1.Approval) { a.Approver = "bob" },
		"same decision, denied":           func(a *skillsv1.Approval) { a.Decision = skillsv1.Denied },
		"no decision named":               func(a *skillsv1.Approval) { a.Policy, a.PolicyGeneration, a.SkillHash = "", 0, "" },
	} {
		changed := r.DeepCopy()
		change(changed.Spec.Approval)
		err := env.Client.Update(ctx, changed)
		if err == nil || !strings.Contains(err.Error(), "spec.approval cannot be changed once set, except by an approval that names another decision") {
			t.Errorf("%s: want the change refused, got: %v", name, err)
		}
	}
	for _, a := range []skillsv1.Approval{
		{Decision: skillsv1.Approved, Approver: "bob", Policy: "q", PolicyGeneration: 1, SkillHash: "sha256:a"},
		{Decision: skillsv1.Approved, Approver: "bob", Policy: "q", PolicyGeneration: 2, SkillHash: "sha256:a"},
		{Decision: skillsv1.Approved, Approver: "bob", PolicyGeneration: 2, SkillHash: "sha256:b"},
		{Decision: skillsv1.Denied, Approver: "bob", PolicyGeneration: 2},
	} {
		r.Spec.Approval = &a
		if err := env.Client.Update(ctx, r); err != nil {
			t.Fatalf("want an approval of another decision (%+v) accepted, got: %v", a, err)
		}
	}
}
