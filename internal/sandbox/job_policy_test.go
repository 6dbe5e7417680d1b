package sandbox

import (
	"reflect"
	"testing"
	"time"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// TestPolicySnapshot shows what the runner is told to enforce: the rules
// and default action that judged the run (a rule's children only when it
// trusts them: Judged and unset both leave them judged), the skill's allowed-tools, and
// whether a person approved it.
func TestPolicySnapshot(t *testing.T) {
	pol := &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{
		DefaultAction: skillsv1.ActionAsk,
		Rules: []skillsv1.PolicyRule{
			{Pattern: "kubectl get *", Action: skillsv1.ActionAlways, Description: "reads"},
			{Pattern: "rm *", Action: skillsv1.ActionNever},
		},
		Examples: []skillsv1.PolicyExample{{Command: "rm x", Expect: skillsv1.ActionNever}},
	}}
	rules := []runner.SnapshotRule{{Pattern: "kubectl get *", Action: policy.Always}, {Pattern: "rm *", Action: policy.Never}}
	trusting := &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{
		DefaultAction: skillsv1.ActionNever,
		Rules: []skillsv1.PolicyRule{
			{Pattern: "/skill/scripts/health.sh", Action: skillsv1.ActionAlways, Children: skillsv1.ChildrenTrusted},
			{Pattern: "awk *", Action: skillsv1.ActionAlways, Children: skillsv1.ChildrenJudged},
			{Pattern: "less *", Action: skillsv1.ActionAsk},
		},
	}}
	skill := testSkill("skill-pdf-tools")
	skill.Spec.AllowedTools = []string{"Bash(kubectl get:*)", "Read"}
	cases := []struct {
		name   string
		params Params
		want   runner.PolicySnapshot
	}{
		{name: "no policy: nothing may run", params: Params{Run: testRun()},
			want: runner.PolicySnapshot{DefaultAction: policy.Never}},
		{name: "rules, no approval", params: Params{Run: testRun(), Policy: pol},
			want: runner.PolicySnapshot{DefaultAction: policy.Ask, Rules: rules}},
		{name: "approved", params: Params{Run: testRun(), Policy: pol, Approved: true},
			want: runner.PolicySnapshot{DefaultAction: policy.Ask, Rules: rules, Approved: true}},
		{name: "a rule trusting its command's programs", params: Params{Run: testRun(), Policy: trusting},
			want: runner.PolicySnapshot{DefaultAction: policy.Never, Rules: []runner.SnapshotRule{
				{Pattern: "/skill/scripts/health.sh", Action: policy.Always, Children: runner.ChildrenTrusted},
				{Pattern: "awk *", Action: policy.Always},
				{Pattern: "less *", Action: policy.Ask},
			}}},
		{name: "skill's allowed-tools", params: Params{Run: testRun(), Policy: pol, Skill: skill},
			want: runner.PolicySnapshot{DefaultAction: policy.Ask, Rules: rules, AllowedTools: skill.Spec.AllowedTools}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PolicySnapshot(tc.params)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PolicySnapshot() = %+v, want %+v", got, tc.want)
			}
			tc.params.RunnerImage, tc.params.DefaultImage, tc.params.Timeout = testRunnerImage, testDefaultImage, time.Minute
			cmd := Job(tc.params).Spec.Template.Spec.Containers[0].Command
			if flag := "--policy=" + tc.want.Encode(); cmd[len(cmd)-3] != flag {
				t.Errorf("command = %q, want %q before the command", cmd, flag)
			}
		})
	}
}

// TestPolicySnapshotEnforcesTheDecision runs the snapshot's policy the way
// the runner does: what the policy allows runs, what it refuses does not,
// and a run without a policy runs nothing.
func TestPolicySnapshotEnforcesTheDecision(t *testing.T) {
	pol := &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{
		DefaultAction: skillsv1.ActionAsk,
		Rules:         []skillsv1.PolicyRule{{Pattern: "kubectl get *", Action: skillsv1.ActionAlways}},
	}}
	cases := []struct {
		name    string
		params  Params
		command string
		refused bool
	}{
		{name: "Always runs", params: Params{Run: testRun(), Policy: pol}, command: "kubectl get pods"},
		{name: "Ask without approval is refused", params: Params{Run: testRun(), Policy: pol}, command: "kubectl delete pod x",
			refused: true},
		{name: "no policy refuses everything", params: Params{Run: testRun()}, command: "kubectl get pods", refused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := runner.CompilePolicy(PolicySnapshot(tc.params).Encode())
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Line(tc.command); (err != nil) != tc.refused {
				t.Errorf("Line(%q) = %v, want refused %t", tc.command, err, tc.refused)
			}
		})
	}
}
