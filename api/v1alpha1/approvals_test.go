package v1alpha1

import (
	"reflect"
	"testing"
)

func TestTally(t *testing.T) {
	decision := &PolicyDecision{Action: ActionAsk, Policy: "p", PolicyGeneration: 2, RunGeneration: 1}
	approve := func(who string, gen int64) Approval {
		return Approval{Decision: Approved, Approver: who, Policy: "p", PolicyGeneration: gen}
	}
	deny := func(who string) Approval {
		return Approval{Decision: Denied, Approver: who, Policy: "p", PolicyGeneration: 2}
	}
	twoOf := &ApprovalRule{Users: []string{"alice", "bob", "carol"}, Required: 2}
	byGroup := &ApprovalRule{Groups: []string{"sre"}, Required: 2}
	cases := []struct {
		name      string
		rule      *ApprovalRule
		single    *Approval
		approvals []Approval
		approvers []string
		approved  bool
		denial    string
		ignored   int
		setAside  []string
	}{
		{name: "none", approvers: nil},
		{name: "one of one, the single approval of earlier versions", single: &Approval{Decision: Approved, Approver: "alice"},
			approvers: []string{"alice"}, approved: true},
		{name: "one of two", rule: twoOf, approvals: []Approval{approve("alice", 2)}, approvers: []string{"alice"}},
		{name: "two of two", rule: twoOf, approvals: []Approval{approve("alice", 2), approve("bob", 2)},
			approvers: []string{"alice", "bob"}, approved: true},
		{name: "the same approver twice counts once", rule: twoOf,
			single: &Approval{Decision: Approved, Approver: "alice"}, approvals: []Approval{approve("alice", 2)},
			approvers: []string{"alice"}},
		{name: "an approval of an earlier decision does not count", rule: twoOf,
			approvals: []Approval{approve("alice", 1), approve("bob", 2)}, approvers: []string{"bob"}},
		{name: "one denial denies", rule: twoOf, approvals: []Approval{approve("alice", 2), deny("bob"), approve("carol", 2)},
			approvers: []string{"alice", "carol"}, denial: "bob"},
		{name: "someone the policy does not name", rule: twoOf, approvals: []Approval{approve("mallory", 2)}, ignored: 1},
		{name: "the requester", rule: twoOf, approvals: []Approval{approve("agent", 2)}, ignored: 1},
		{name: "no approver", single: &Approval{Decision: Approved}, ignored: 1},
		{name: "an approver no longer asked, of an earlier decision, is set aside", rule: twoOf,
			approvals: []Approval{approve("dave", 1), {Decision: Denied, Approver: "erin", Policy: "p", PolicyGeneration: 1}, approve("alice", 2)},
			approvers: []string{"alice"}, setAside: []string{"dave", "erin"}},
		{name: "the requester's approval of an earlier decision still does not count", rule: twoOf,
			approvals: []Approval{approve("agent", 1)}, ignored: 1},
		{name: "groups are admission's to check", rule: byGroup, approvals: []Approval{approve("dave", 2), approve("erin", 2)},
			approvers: []string{"dave", "erin"}, approved: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := *decision
			d.Approvers = tc.rule
			run := &CommandRun{
				Spec:   CommandRunSpec{RequestedBy: "agent", Approval: tc.single, Approvals: tc.approvals},
				Status: CommandRunStatus{Decision: &d},
			}
			run.Generation = 3
			got := run.Tally()
			if !reflect.DeepEqual(got.Approvers, tc.approvers) || got.Approved() != tc.approved || len(got.Ignored) != tc.ignored ||
				!reflect.DeepEqual(got.SetAside, tc.setAside) {
				t.Errorf("Tally() = %+v (approved %v), want approvers %v, approved %v, %d ignored, set aside %v",
					got, got.Approved(), tc.approvers, tc.approved, tc.ignored, tc.setAside)
			}
			if denial := ""; got.Denial != nil {
				denial = got.Denial.Approver
				if denial != tc.denial {
					t.Errorf("denial by %q, want %q", denial, tc.denial)
				}
			} else if tc.denial != "" {
				t.Errorf("no denial, want one by %s", tc.denial)
			}
		})
	}
}
