package sandbox

import (
	"io"
	"reflect"
	"testing"

	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox/sandboxtest"
)

// maxArgStrlen is the longest argument or environment string Linux
// passes to a program it starts, its terminating NUL included
// (MAX_ARG_STRLEN, 32 pages of 4 KiB): execve fails with E2BIG otherwise.
const maxArgStrlen = 32 * 4096

// largestParams runs testRun's command under the largest policy the CRDs
// admit, for a skill with the most allowed-tools, approved.
func largestParams() Params {
	l := sandboxtest.MustReadLimits()
	skill := testSkill("skill-limit")
	skill.Spec.AllowedTools = sandboxtest.LargestAllowedTools(l)
	pol := sandboxtest.LargestPolicy(l)
	pol.Name, pol.Namespace = "limit", testRun().Namespace
	return Params{Run: testRun(), Policy: pol, Skill: skill, Approved: true,
		RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, FenceCheck: "10.0.0.9:9"}
}

// TestLargestPolicyFitsLinuxArguments: the Job of a run under the largest
// policy the CRDs admit gives the runner that policy in arguments Linux
// accepts, and the runner's own parse of the Job's command line gives back
// the very policy, which it can enforce.
func TestLargestPolicyFitsLinuxArguments(t *testing.T) {
	for _, fromImage := range []bool{false, true} {
		p := largestParams()
		p.RunnerFromImage = fromImage
		want := PolicySnapshot(p)
		if n := len(want.Encode()); n < 2*maxArgStrlen {
			t.Fatalf("the largest policy is %d bytes encoded: too small to show anything", n)
		}
		cmd := Job(p).Spec.Template.Spec.Containers[0].Command
		for i, arg := range cmd {
			if len(arg)+1 > maxArgStrlen {
				t.Errorf("argument %d is %d bytes: Linux refuses to start the runner", i, len(arg))
			}
		}
		f, command, usageErr, err := runner.ParseRunArgs(cmd[2:], io.Discard)
		if err != nil || usageErr != nil {
			t.Fatalf("the runner refuses its command line: %v, %v", err, usageErr)
		}
		if command != p.Run.Spec.Command || f.AwaitFence != p.FenceCheck {
			t.Errorf("command %q, await-fence %q", command, f.AwaitFence)
		}
		got, err := runner.ParsePolicySnapshot(f.Policy)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Error("the runner reads another policy than the one that judged the run")
		}
		if _, err := got.Compile(); err != nil {
			t.Errorf("the runner cannot enforce the largest policy: %v", err)
		}
	}
}
