package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/policyapi"
)

// importData is where the import's example sources live.
func importData(name string) string {
	return filepath.Join(clitest.RepoRoot(), "internal", "policyimport", "testdata", name)
}

// decodeImported reads the manifest policy import printed, strictly, and
// checks that it compiles and its examples pass.
func decodeImported(t *testing.T, manifest string) *skillsv1.CommandPolicy {
	t.Helper()
	var obj skillsv1.CommandPolicy
	if err := sigsyaml.UnmarshalStrict([]byte(manifest), &obj); err != nil {
		t.Fatalf("the manifest does not decode: %v\n%s", err, manifest)
	}
	if obj.APIVersion != skillsv1.GroupVersion.String() || obj.Kind != "CommandPolicy" {
		t.Fatalf("apiVersion %q kind %q", obj.APIVersion, obj.Kind)
	}
	if _, err := policyapi.Compile(&obj); err != nil {
		t.Fatalf("the manifest is not a valid policy: %v", err)
	}
	return &obj
}

func TestPolicyImportClaude(t *testing.T) {
	res := clitest.Run("", "policy", "import", importData("claude-settings.json"))
	if res.Code != cli.ExitOK {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	obj := decodeImported(t, res.Stdout)
	if obj.Name != "claude-settings" || obj.Spec.DefaultAction != skillsv1.ActionAsk || len(obj.Spec.Rules) != 11 {
		t.Errorf("name %q, default %q, %d rules", obj.Name, obj.Spec.DefaultAction, len(obj.Spec.Rules))
	}
	for _, want := range []string{
		"11 source rules translated into 11 rules",
		`permissions.deny[4] "Read(./.env)": not translated`,
		`permissions.allow[6] "Bash(git commit -m \"wip\")": not translated`,
	} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("the report lacks %q:\n%s", want, res.Stderr)
		}
	}
}

func TestPolicyImportCodexThenCheck(t *testing.T) {
	out := filepath.Join(t.TempDir(), "policy.yaml")
	res := clitest.Run("", "policy", "import", "--name", "codex", "-o", out, importData("git.rules"), importData("cluster.rules"))
	if res.Code != cli.ExitOK || res.Stdout != "" {
		t.Fatalf("exit %d, stdout %q: %s", res.Code, res.Stdout, res.Stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	obj := decodeImported(t, string(data))
	if obj.Name != "codex" || len(obj.Spec.Examples) != 16 {
		t.Errorf("name %q, %d examples", obj.Name, len(obj.Spec.Examples))
	}
	if !strings.Contains(res.Stderr, "defaultAction Ask") || !strings.Contains(res.Stderr, "cluster.rules:20: not translated: network_rule") {
		t.Errorf("report:\n%s", res.Stderr)
	}
	for cmd, want := range map[string]string{
		"git push --force origin main": "Never",
		"git push origin main":         "Ask",
		"git log --oneline":            "Always",
		"kubectl delete pod x":         "Never",
		"terraform apply":              "Ask",
	} {
		if got := checkJSON(t, "-f", out, "--", cmd); got.Action != want {
			t.Errorf("%q: %s, want %s (%s)", cmd, got.Action, want, got.Reason)
		}
	}
}

func TestPolicyImportErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"x.txt"}, "give --format claude or --format codex"},
		{[]string{"--format", "yaml", "x"}, `--format "yaml"`},
		{[]string{"--default", "Maybe", importData("git.rules")}, `--default "Maybe"`},
		{[]string{"--name", "Bad_Name", importData("git.rules")}, "not a valid object name"},
		{[]string{importData("git.rules"), importData("claude-settings.json")}, "two formats"},
		{[]string{"--format", "codex", "-"}, "stdin:1: only calls"},
	} {
		res := clitest.Run("x = 1\n", append([]string{"policy", "import"}, tc.args...)...)
		if res.Code == cli.ExitOK || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, res.Code, res.Stderr, tc.want)
		}
	}
}
