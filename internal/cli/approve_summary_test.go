package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

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
	writeSummary(&b, skillsv1.Approved, &run, "alice", "ServiceAccount ops-sandbox")
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
			got := programsText(d)
			if got != tt.want {
				t.Errorf("programsText = %q, want %q", got, tt.want)
			}
			var b bytes.Buffer
			run := testRun("agents", "r", "x", skillsv1.PhaseAwaitingApproval, time.Minute)
			run.Status.Decision = d
			writeSummary(&b, skillsv1.Denied, &run, "alice", "none")
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
