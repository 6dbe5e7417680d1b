package doctor_test

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/cli/doctor"
)

// run runs the command doctor alone, as the root command would, and
// returns what it printed and its error.
func run(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := doctor.NewCommand(cmdline.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}))
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return out.String(), err
}

// TestDoctorHelp: the doctor documents every check and flag, and refuses
// a command line it cannot run before it touches a cluster.
func TestDoctorHelp(t *testing.T) {
	out, err := run("--help")
	if err != nil || !strings.Contains(out, "Usage:") || !strings.Contains(out, "Examples:") {
		t.Fatalf("doctor --help: %v, output %q", err, out)
	}
	for _, want := range []string{"crds", "admission", "operator", "agent-rbac", "netpol", "canary", "canary-identity",
		"--policy", "--image", "--timeout", "--skip-canary", "kubeskills.io/doctor", "Exit status: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor --help does not mention %q", want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"extra"}, "unknown command"},
	} {
		if _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("doctor %q: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
