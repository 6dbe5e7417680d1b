package main

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
)

// TestApproveSaysWhatProgramsStart: before an approval, the approver reads
// in one line which programs of the command can start others, and whether
// the policy judges what they start; nothing when none can.
func TestApproveSaysWhatProgramsStart(t *testing.T) {
	const ns = "programs"
	people := approvalSetup(t, ns)
	alice, bob := people["alice"], people["bob"]
	policy := &skillsv1.CommandPolicy{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ops-policy"}, policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Rules = append(policy.Spec.Rules,
		skillsv1.PolicyRule{Pattern: "git diff *", Action: skillsv1.ActionAsk, Children: skillsv1.ChildrenTrusted})
	if err := env.Client.Update(context.Background(), policy); err != nil {
		t.Fatal(err)
	}
	waitAdmission(t, bob, ns)
	cases := []struct{ name, command, line string }{
		{"awk", "awk '{print $1}' pods.txt | make -n", "  Programs:     awk, make can start other programs; " +
			"the policy judges each of those as it starts, and refuses one it says Never even after approval\n"},
		{"diff", "git diff HEAD~1", "  Programs:     git can start other programs; " +
			"those are not judged one by one, since the deciding rule trusts its command's programs (children: Trusted)\n"},
		{"drain", "kubectl drain node-1", ""},
	}
	for _, tc := range cases {
		request(t, bob, ns, tc.name, tc.command)
	}
	for _, tc := range cases {
		waitPhase(t, ns, tc.name, skillsv1.PhaseAwaitingApproval)
		res := alice.run("approve", tc.name, "--yes")
		if res.Code != cli.ExitOK {
			t.Fatalf("approve %s: exit %d, stderr %q", tc.name, res.Code, res.Stderr)
		}
		got := ""
		for _, l := range strings.SplitAfter(res.Stderr, "\n") {
			if strings.HasPrefix(l, "  Programs:") {
				got += l
			}
		}
		if got != tc.line {
			t.Errorf("approve %s: programs line %q, want %q; stderr:\n%s", tc.name, got, tc.line, res.Stderr)
		}
	}
}
