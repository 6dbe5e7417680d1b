package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/policy"
)

// programRules are the rules of the tests below: git diff asks, and trusts
// what it starts; awk is allowed, but awk can run commands, so the judge
// asks about it anyway; tar -tf is allowed.
var programRules = []skillsv1.PolicyRule{
	{Pattern: "git diff *", Action: skillsv1.ActionAsk, Children: skillsv1.ChildrenTrusted},
	{Pattern: "awk *", Action: skillsv1.ActionAlways},
	{Pattern: "tar -tf *", Action: skillsv1.ActionAlways, Children: skillsv1.ChildrenTrusted},
	{Pattern: "sh -c *", Action: skillsv1.ActionAsk, Children: skillsv1.ChildrenTrusted},
}

// TestStartedPrograms: a decision records the programs of its command that
// can start others, and those a rule with children: Trusted allowed.
func TestStartedPrograms(t *testing.T) {
	rules := make([]policy.Rule, len(programRules))
	for i, r := range programRules {
		rules[i] = policy.Rule{Pattern: r.Pattern, Action: policy.Action(r.Action)}
	}
	m, err := policy.Compile(policy.Policy{Default: policy.Ask, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	long := "python3." + strings.Repeat("1", 100)
	var many []string
	for i := range 20 {
		many = append(many, fmt.Sprintf("python3.%d x.py", i))
	}
	tests := []struct {
		command         string
		starts, trusted []string
	}{
		{command: "kubectl cordon node-1"},
		{command: "awk '{print $1}' x | make -n", starts: []string{"awk", "make"}},
		{command: "git diff HEAD", starts: []string{"git"}, trusted: []string{"git"}},
		{command: "git diff HEAD | awk 1; tar -tf a.tar", starts: []string{"git", "awk", "tar"}, trusted: []string{"git", "tar"}},
		// A shell is judged by what it carries, never by a rule of its own.
		{command: "sh -c 'awk 1 x; make'", starts: []string{"sh", "awk", "make"}},
		{command: "xargs -n1 awk 1", starts: []string{"xargs", "awk"}},
		{command: strings.Join(many, "; "), starts: func() []string {
			var s []string
			for i := range skillsv1.MaxStartsPrograms {
				s = append(s, fmt.Sprintf("python3.%d", i))
			}
			return s
		}()},
		{command: "env " + long + " 1", starts: []string{"env", long[:skillsv1.MaxProgramName-len("…")] + "…"}},
	}
	for _, tt := range tests {
		d := m.DecideFor(tt.command, nil)
		starts, trusted := controller.StartedPrograms(tt.command, d, programRules)
		if !slices.Equal(starts, tt.starts) || !slices.Equal(trusted, tt.trusted) {
			t.Errorf("StartedPrograms(%q) = %q, %q; want %q, %q", tt.command, starts, trusted, tt.starts, tt.trusted)
		}
	}
}

// TestProgramsClause: the AwaitingApproval Event's clause, bounded.
func TestProgramsClause(t *testing.T) {
	tests := []struct {
		starts, trusted []string
		want            string
	}{
		{want: ""},
		{starts: []string{"awk", "make"}, want: "awk, make can start other programs, each judged by the policy as it starts"},
		{starts: []string{"git"}, trusted: []string{"git"}, want: "git can start other programs, not judged one by one (children: Trusted)"},
		{starts: []string{"git", "awk"}, trusted: []string{"git"},
			want: "git, awk can start other programs, each judged by the policy as it starts, except what git starts (children: Trusted)"},
		{starts: []string{"git", "awk", "tar"}, trusted: []string{"git", "tar"},
			want: "git, awk, tar can start other programs, each judged by the policy as it starts, except what git, tar start (children: Trusted)"},
	}
	for _, tt := range tests {
		got := controller.ProgramsClause(&skillsv1.PolicyDecision{StartsPrograms: tt.starts, TrustedPrograms: tt.trusted})
		if got != tt.want {
			t.Errorf("ProgramsClause(%q, %q) = %q, want %q", tt.starts, tt.trusted, got, tt.want)
		}
	}
	var names []string
	for range skillsv1.MaxStartsPrograms {
		names = append(names, strings.Repeat("x", skillsv1.MaxProgramName))
	}
	if got := controller.ProgramsClause(&skillsv1.PolicyDecision{StartsPrograms: names}); len(got) > 320 || !strings.HasSuffix(got, "…") {
		t.Errorf("ProgramsClause of %d long names: %d bytes %q, want at most 320, cut", len(names), len(got), got)
	}
}

// TestAwaitingApprovalSaysWhatProgramsStart: a run that waits for people
// records which of its programs can start others, and its AwaitingApproval
// Event says whether the policy judges what they start.
func TestAwaitingApprovalSaysWhatProgramsStart(t *testing.T) {
	ns := commandSetup(t, func(p *skillsv1.CommandPolicy) {
		p.Spec.Rules = append(p.Spec.Rules, programRules...)
	})
	head := "Agent ops asks; CommandPolicy ops-policy (%s) says Ask%s; it needs 1 approval(s): kubectl skills approve %s -n " + ns + "; command: %s"
	cases := []struct {
		name, command, rule string
		starts, trusted     []string
		clause              string
	}{
		{name: "judged", command: "awk '{print $1}' x | make -n", rule: "the default action",
			starts: []string{"awk", "make"}, clause: "; awk, make can start other programs, each judged by the policy as it starts"},
		{name: "trusted", command: "git diff HEAD", rule: `rule "git diff *"`,
			starts: []string{"git"}, trusted: []string{"git"}, clause: "; git can start other programs, not judged one by one (children: Trusted)"},
		{name: "some-trusted", command: "git diff HEAD | awk 1", rule: `rule "git diff *"`,
			starts: []string{"git", "awk"}, trusted: []string{"git"},
			clause: "; git, awk can start other programs, each judged by the policy as it starts, except what git starts (children: Trusted)"},
		{name: "none", command: "kubectl cordon node-1", rule: "the default action"},
	}
	g := NewWithT(t)
	for _, tc := range cases {
		g.Expect(k8s.Create(context.Background(), newRun(ns, tc.name, tc.command))).To(Succeed())
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			run := waitPhase(t, ns, tc.name, skillsv1.PhaseAwaitingApproval)
			g.Expect(run.Status.Decision.StartsPrograms).To(Equal(tc.starts))
			g.Expect(run.Status.Decision.TrustedPrograms).To(Equal(tc.trusted))
			want := fmt.Sprintf(head, tc.rule, tc.clause, tc.name, tc.command)
			g.Eventually(func(g Gomega) {
				var notes []string
				for _, e := range events(g, run) {
					if e.Reason == string(skillsv1.PhaseAwaitingApproval) {
						notes = append(notes, e.Note)
					}
				}
				g.Expect(notes).To(ConsistOf(want))
			}, timeout, interval).Should(Succeed())
			// The condition a person and the agent read is unchanged.
			g.Expect(condition(run.Status.Conditions, skillsv1.SucceededCondition).Message).To(
				Equal("Waiting for a person to approve or deny: kubectl skills approve " + tc.name))
		})
	}
}
