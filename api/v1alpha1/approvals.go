package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

// Tally is where a run's approvals stand against its current decision.
type Tally struct {
	// Required is how many distinct approvals the decision needs.
	Required int
	// Approvers are the distinct approvers whose approval of the current
	// decision counts, in the order they approved.
	Approvers []string
	// Denial is the first denial that counts, nil when there is none.
	Denial *Approval
	// Ignored says, for each approval that does not count, why: its
	// approver is the requester, is not named, or is not one the decision
	// allows. Admission refuses such approvals; the operator does not
	// rely on it.
	Ignored []string
	// SetAside are the approvers whose approval or denial answers an
	// earlier decision and whom the current decision no longer asks: the
	// run was judged again with other approvers. Such an answer neither
	// counts nor denies.
	SetAside []string
}

// Approved tells whether enough approvals count and none denies.
func (t Tally) Approved() bool { return t.Denial == nil && len(t.Approvers) >= t.Required }

// AllApprovals are the run's approvals: spec.approval, the single approval
// of earlier versions, then spec.approvals.
func (r *CommandRun) AllApprovals() []Approval {
	out := make([]Approval, 0, len(r.Spec.Approvals)+1)
	if r.Spec.Approval != nil {
		out = append(out, *r.Spec.Approval)
	}
	return append(out, r.Spec.Approvals...)
}

// Tally counts the run's approvals against its current decision. An
// approval counts when its approver is named, is not the requester and,
// when the decision names approvers by user only, is one of them (group
// membership is known to admission, not here). A denial that counts denies
// the run whatever decision it answered; an approval counts only for the
// decision it answers, once per approver. An answer to an earlier decision
// by someone the current decision does not ask is set aside.
func (r *CommandRun) Tally() Tally {
	d := r.Status.Decision
	t := Tally{Required: 1}
	var rule *ApprovalRule
	if d != nil && d.Approvers != nil {
		rule = d.Approvers
		t.Required = max(int(rule.Required), 1)
	}
	for _, a := range r.AllApprovals() {
		if why := r.ignored(a, rule); why != "" {
			if a.Approver != r.Spec.RequestedBy && a.Approver != "" && !a.Answers(d, r.Generation) {
				// Asked under an earlier decision, not under this one.
				t.SetAside = append(t.SetAside, a.Approver)
				continue
			}
			t.Ignored = append(t.Ignored, why)
			continue
		}
		switch {
		case a.Decision == Denied:
			if t.Denial == nil {
				t.Denial = &a
			}
		case a.Decision == Approved && a.Answers(d, r.Generation) && !slices.Contains(t.Approvers, a.Approver):
			t.Approvers = append(t.Approvers, a.Approver)
		}
	}
	return t
}

// ignored says why an approval does not count, "" when it may.
func (r *CommandRun) ignored(a Approval, rule *ApprovalRule) string {
	switch {
	case a.Approver == "":
		return "The approval does not count: it names no approver, so it cannot be told apart from the requester's own"
	case a.Approver == r.Spec.RequestedBy:
		return fmt.Sprintf("The approval by %q does not count: %q requested the command, and nobody may approve their own command",
			a.Approver, r.Spec.RequestedBy)
	case rule != nil && len(rule.Groups) == 0 && !slices.Contains(rule.Users, a.Approver):
		return fmt.Sprintf("The approval by %q does not count: the approvers of the command's decision are %s",
			a.Approver, strings.Join(rule.Users, ", "))
	}
	return ""
}
