package cli_test

import (
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
)

// TestDoctorHelp: the doctor documents every check and flag, and refuses
// a command line it cannot run before it touches a cluster.
func TestDoctorHelp(t *testing.T) {
	res := clitest.Run("", "doctor", "--help")
	if res.Code != cli.ExitOK || !strings.Contains(res.Stdout, "Usage:") || !strings.Contains(res.Stdout, "Examples:") {
		t.Fatalf("doctor --help: exit %d, stdout %q", res.Code, res.Stdout)
	}
	for _, want := range []string{"crds", "admission", "operator", "agent-rbac", "netpol", "canary", "canary-identity",
		"--policy", "--image", "--timeout", "--skip-canary", "kubeskills.io/doctor", "Exit status: 0"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("doctor --help does not mention %q", want)
		}
	}
	if res := clitest.Run("", "--help"); !strings.Contains(res.Stdout, "doctor") {
		t.Errorf("kubectl skills --help does not list doctor:\n%s", res.Stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"doctor", "extra"}, "unknown command"},
	} {
		res := clitest.Run("", tc.args...)
		if res.Code != cli.ExitFailed || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, res.Code, res.Stderr, tc.want)
		}
	}
}
