package controller

import (
	"strings"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policy"
)

// startedPrograms returns the programs of a command that can start other
// programs (policy.Spawners), and those of them that a rule with children:
// Trusted allowed, for the decision d taken on it under rules. A program is
// trusted when a part of the command that names it, itself or in what it
// carries, was allowed by such a rule: the sandbox does not judge what that
// part starts, so the approver is told so rather than told it is judged.
// Both lists keep the command's order and are cut to what status holds.
func startedPrograms(command string, d policy.Decision, rules []skillsv1.PolicyRule) (starts, trusted []string) {
	starts = policy.Spawners(command)
	if len(starts) == 0 {
		return nil, nil
	}
	byTrusted := map[string]bool{}
	for _, p := range d.Parts {
		if p.Action == policy.Never || p.RuleIndex < 0 || p.RuleIndex >= len(rules) ||
			rules[p.RuleIndex].Children != skillsv1.ChildrenTrusted {
			continue
		}
		for _, name := range policy.Spawners(p.Command) {
			byTrusted[name] = true
		}
	}
	for _, name := range starts {
		if byTrusted[name] {
			trusted = append(trusted, name)
		}
	}
	return programNames(starts), programNames(trusted)
}

// programNames cuts a list of program names to what status.decision
// holds: MaxStartsPrograms names of at most MaxProgramName bytes.
func programNames(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	names = names[:min(len(names), skillsv1.MaxStartsPrograms)]
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = clip(n, skillsv1.MaxProgramName)
	}
	return out
}

// maxProgramsClause bounds programsClause, so that the approve command
// and the start of the command always fit in the Event's note.
const maxProgramsClause = 320

// programsClause is the AwaitingApproval Event's clause on the programs
// of the command that can start others, "" when none can: whether what
// they start is judged as it starts, or, for those a rule trusts, not.
func programsClause(d *skillsv1.PolicyDecision) string {
	if len(d.StartsPrograms) == 0 {
		return ""
	}
	judged := d.JudgedPrograms()
	s := strings.Join(d.StartsPrograms, ", ") + " can start other programs, "
	switch {
	case len(judged) == 0:
		s += "not judged one by one (children: Trusted)"
	case len(judged) < len(d.StartsPrograms):
		verb := " start"
		if len(d.TrustedPrograms) == 1 {
			verb = " starts"
		}
		s += "each judged by the policy as it starts, except what " + strings.Join(d.TrustedPrograms, ", ") +
			verb + " (children: Trusted)"
	default:
		s += "each judged by the policy as it starts"
	}
	return clip(s, maxProgramsClause)
}
