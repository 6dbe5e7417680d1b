package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
)

// widePolicy has a warning of each kind: defaultAction Always, a glob
// glued to the last word and an Always rule for git.
const widePolicy = `apiVersion: kubeskills.io/v1alpha1
kind: CommandPolicy
metadata:
  name: wide
spec:
  defaultAction: Always
  rules:
  - pattern: git log*
    action: Always
  - pattern: git *
    action: Always
  - pattern: rm *
    action: Never
`

// TestPolicyCheckWarnings: policy check prints the policy's warnings
// after the decision, in text and in JSON, as the operator words them;
// a policy without warnings prints none.
func TestPolicyCheckWarnings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "wide.yaml")
	if err := os.WriteFile(path, []byte(widePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	res := clitest.Run("", "policy", "check", "-f", path, "--", "git log")
	if res.Code != cli.ExitOK || res.Stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.Code, res.Stderr)
	}
	lines := strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
	want := []string{
		"Action:  Always",
		`Rule:    rules[0] "git log*"`,
		`Reason:  "git log" matched rules[0] "git log*" (Always)`,
		"Warnings:",
		"  defaultAction: Always runs every command that no rule matches without a person",
		`  rules[0] "git log*": the * glued to the last word matches within that word only: the pattern matches "git log" and "git logx", not "git log --help". Write "git log *" for any arguments after it, or "git log* *" to keep the glob and allow any arguments.`,
		`  rules[1] "git *": it also allows, without a person: "git push --force origin main" rewrites a remote branch;`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), res.Stdout)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d is\n%q\nwant it to start with\n%q", i, lines[i], want[i])
		}
	}

	got := checkJSON(t, "-f", path, "--", "git log")
	if len(got.Warnings) != 3 {
		t.Fatalf("-o json gives %d warnings, want 3: %+v", len(got.Warnings), got.Warnings)
	}
	for i, w := range []struct {
		kind  string
		index int
		rule  string
		msg   string
	}{
		{"DefaultAlways", -1, "", "Always runs every command that no rule matches"},
		{"GluedGlob", 0, "git log*", `Write "git log *"`},
		{"ToolAllowsMore", 1, "git *", `"git reset --hard" overwrites files`},
	} {
		g := got.Warnings[i]
		if g.Kind != w.kind || g.RuleIndex != w.index || g.Rule != w.rule || !strings.Contains(g.Message, w.msg) {
			t.Errorf("warnings[%d] = %+v, want %s rules[%d] %q with %q", i, g, w.kind, w.index, w.rule, w.msg)
		}
	}

	// the fixed policy has none: no Warnings section, an empty list
	fixed := strings.NewReplacer("defaultAction: Always", "defaultAction: Ask", "git log*", "git log *", "git *", "git status *").Replace(widePolicy)
	if err := os.WriteFile(path, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	res = clitest.Run("", "policy", "check", "-f", path, "--", "git log")
	if res.Code != cli.ExitOK || strings.Contains(res.Stdout, "Warnings") {
		t.Errorf("exit %d, stdout:\n%s\nwant no warnings", res.Code, res.Stdout)
	}
	if got := checkJSON(t, "-f", path, "--", "git log"); got.Warnings == nil || len(got.Warnings) != 0 {
		t.Errorf("-o json warnings = %#v, want []", got.Warnings)
	}
}
