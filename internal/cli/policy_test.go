package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/policyapi"
)

// policyCase is one row of internal/policy/testdata/cases.yaml.
type policyCase struct {
	Command string `yaml:"command"`
	Expect  string `yaml:"expect"`
	Reason  string `yaml:"reason"`
}

// loadCases reads the policy package's table: it writes the CommandPolicy
// to a file of its own and returns its path, the policy and the rows.
func loadCases(t *testing.T) (string, *skillsv1.CommandPolicy, []policyCase) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(clitest.RepoRoot(), "internal", "policy", "testdata", "cases.yaml"))
	if err != nil {
		t.Fatalf("failed to read the cases: %v", err)
	}
	var doc struct {
		Policy yaml.Node    `yaml:"policy"`
		Cases  []policyCase `yaml:"cases"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("failed to parse the cases: %v", err)
	}
	manifest, err := yaml.Marshal(&doc.Policy)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	var obj skillsv1.CommandPolicy
	if err := sigsyaml.UnmarshalStrict(manifest, &obj); err != nil {
		t.Fatalf("failed to decode the policy: %v", err)
	}
	if len(doc.Cases) < 60 || len(obj.Spec.Rules) == 0 || obj.Spec.DefaultAction == "" || obj.Name == "" {
		t.Fatalf("read %d cases and %d rules: the file changed shape", len(doc.Cases), len(obj.Spec.Rules))
	}
	return path, &obj, doc.Cases
}

// decisionOutput is what -o json prints.
type decisionOutput struct {
	Action string `json:"action"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
	Parts  []struct {
		Command string `json:"command"`
		Action  string `json:"action"`
		Rule    string `json:"rule"`
		Reason  string `json:"reason"`
	} `json:"parts"`
	Warnings []struct {
		Kind      string `json:"kind"`
		RuleIndex int    `json:"ruleIndex"`
		Rule      string `json:"rule"`
		Message   string `json:"message"`
	} `json:"warnings"`
}

// checkJSON runs policy check -o json and decodes its output strictly.
func checkJSON(t *testing.T, args ...string) decisionOutput {
	t.Helper()
	res := clitest.Run("", append([]string{"policy", "check", "-o", "json"}, args...)...)
	if res.Code != cli.ExitOK || res.Stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.Code, res.Stderr)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(res.Stdout), &keys); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, res.Stdout)
	}
	for _, k := range []string{"action", "rule", "reason", "warnings"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("output lacks %q: %s", k, res.Stdout)
		}
	}
	var out decisionOutput
	dec := json.NewDecoder(strings.NewReader(res.Stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("failed to decode %s: %v", res.Stdout, err)
	}
	return out
}

// TestPolicyCheckCases: policy check answers every row of the policy
// package's table as the table says, in text and in JSON, and exactly as
// the operator's code (policyapi) decides.
func TestPolicyCheckCases(t *testing.T) {
	path, obj, cases := loadCases(t)
	m, err := policyapi.Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		want := m.Decide(c.Command)
		if string(want.Action) != c.Expect {
			t.Fatalf("cases[%d] %q: the library decides %s, the table %s", i, c.Command, want.Action, c.Expect)
		}

		got := checkJSON(t, "-f", path, "--", c.Command)
		if got.Action != c.Expect || !strings.Contains(got.Reason, c.Reason) {
			t.Errorf("cases[%d] %q: -o json gives %s (%q), want %s with a reason containing %q",
				i, c.Command, got.Action, got.Reason, c.Expect, c.Reason)
		}
		if got.Rule != want.Rule || got.Reason != want.Reason || len(got.Parts) != len(want.Parts) {
			t.Errorf("cases[%d] %q: -o json gives rule %q reason %q and %d parts; the operator's code %q, %q, %d",
				i, c.Command, got.Rule, got.Reason, len(got.Parts), want.Rule, want.Reason, len(want.Parts))
		}

		res := clitest.Run("", "policy", "check", "-f", path, "--", c.Command)
		if res.Code != cli.ExitOK || res.Stderr != "" {
			t.Errorf("cases[%d] %q: text exit %d, stderr %q", i, c.Command, res.Code, res.Stderr)
			continue
		}
		lines := strings.Split(res.Stdout, "\n")
		if len(lines) < 3 || lines[0] != "Action:  "+c.Expect || lines[2] != "Reason:  "+want.Reason || !strings.Contains(lines[2], c.Reason) {
			t.Errorf("cases[%d] %q: text output\n%s\nwant Action %s and a reason containing %q", i, c.Command, res.Stdout, c.Expect, c.Reason)
		}
		if want.Rule == "" && lines[1] != "Rule:    (none)" || want.Rule != "" && !strings.Contains(lines[1], want.Rule) {
			t.Errorf("cases[%d] %q: rule line %q, want rule %q", i, c.Command, lines[1], want.Rule)
		}
	}
}

// TestPolicyCheckText shows the whole text output of a command of three
// parts, with the description of the deciding rule.
func TestPolicyCheckText(t *testing.T) {
	path, _, _ := loadCases(t)
	res := clitest.Run("", "policy", "check", "-f", path, "--", "kubectl get pods | xargs kubectl delete pod")
	want := `Action:  Never
Rule:    rules[6] "kubectl ** delete **" (people delete cluster objects, agents do not)
Reason:  "kubectl delete pod" matched rules[6] "kubectl ** delete **" (Never)
Parts:
  Always  "kubectl get pods" matched rules[0] "kubectl get *" (Always)
  Ask     "xargs kubectl delete pod": xargs runs another command with arguments read from its input
  Never   "kubectl delete pod" matched rules[6] "kubectl ** delete **" (Never)
`
	if res.Code != cli.ExitOK || res.Stdout != want {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s", res.Code, res.Stdout, want)
	}
}

// TestPolicyCheckSkillTools: a skill's allowed-tools narrow Always to Ask
// and never widen Ask or Never.
func TestPolicyCheckSkillTools(t *testing.T) {
	path, _, _ := loadCases(t)
	for _, tc := range []struct {
		tools, command, want, reason string
	}{
		{"Bash(git status:*)", "git status -s", "Always", ""},
		{"Bash(git status:*)", "ls -la", "Ask", "not by the skill's allowed-tools"},
		{"Bash(git status:*) Read", "git status; ls", "Ask", `"ls"`},
		{"Bash(git status:*)", "rm -rf /", "Never", `rules[36] "rm *"`},
		{"Bash", "kubectl get secret db", "Ask", "rules[5]"},
		{"Read, Grep", "ls", "Ask", "allowed-tools"},
		{"", "ls", "Always", ""},
	} {
		got := checkJSON(t, "-f", path, "--skill-tools", tc.tools, "--", tc.command)
		if got.Action != tc.want || !strings.Contains(got.Reason, tc.reason) {
			t.Errorf("--skill-tools %q -- %q: %s (%q), want %s with %q", tc.tools, tc.command, got.Action, got.Reason, tc.want, tc.reason)
		}
	}
}

// TestPolicyCheckInputs: the policy is read from standard input, from a
// List, as JSON, and a policy without defaultAction defaults to Ask.
func TestPolicyCheckInputs(t *testing.T) {
	path, _, _ := loadCases(t)
	manifest, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res := clitest.Run(string(manifest), "policy", "check", "-f", "-", "--", "kubectl drain node-1")
	if res.Code != cli.ExitOK || !strings.HasPrefix(res.Stdout, "Action:  Never\n") {
		t.Errorf("-f -: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}

	dir := t.TempDir()
	list := "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSpace(string(manifest)), "\n", "\n  ") + "\n"
	listPath := writeFile(t, dir, "list.yaml", list)
	if got := checkJSON(t, "-f", listPath, "--", "kubectl get pods"); got.Action != "Always" {
		t.Errorf("List: %+v", got)
	}

	jsonPath := writeFile(t, dir, "policy.json",
		`{"apiVersion":"kubeskills.io/v1alpha1","kind":"CommandPolicy","metadata":{"name":"p"},"spec":{"rules":[{"pattern":"ls *","action":"Always"}]}}`)
	if got := checkJSON(t, "-f", jsonPath, "--", "ls -la"); got.Action != "Always" || got.Rule != "ls *" {
		t.Errorf("JSON policy, ls: %+v", got)
	}
	if got := checkJSON(t, "-f", jsonPath, "--", "make"); got.Action != "Ask" || got.Rule != "" {
		t.Errorf("JSON policy without defaultAction, make: %+v", got)
	}

	other := writeFile(t, dir, "with-others.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\n"+string(manifest))
	if got := checkJSON(t, "-f", other, "--", "kubectl get pods"); got.Action != "Always" {
		t.Errorf("policy after a ConfigMap: %+v", got)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// goodPolicy is a valid policy; the bad ones below change one thing.
const goodPolicy = `apiVersion: kubeskills.io/v1alpha1
kind: CommandPolicy
metadata:
  name: ops
spec:
  defaultAction: Ask
  rules:
  - pattern: "kubectl get *"
    action: Always
  - pattern: "rm *"
    action: Never
    description: no deletes
  examples:
  - command: kubectl get pods
    expect: Always
  - command: rm -rf /
    expect: Never
`

// TestPolicyCheckBadPolicies: a policy file that cannot be read, is not a
// CommandPolicy, or is not a valid one, fails with exit 1 and a message
// that says why; nothing is printed to standard output.
func TestPolicyCheckBadPolicies(t *testing.T) {
	dir := t.TempDir()
	skillManifest := "apiVersion: kubeskills.io/v1alpha1\nkind: Skill\nmetadata:\n  name: s\nspec:\n  description: d\n  instructions: i\n"
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"not-yaml", "spec: [unclosed\n  rules: {", []string{"document 1 is not valid YAML"}},
		{"not-object", "just some words\n", []string{"not a Kubernetes object"}},
		{"empty", "", []string{"holds no CommandPolicy", "want apiVersion: kubeskills.io/v1alpha1 and kind: CommandPolicy"}},
		{"wrong-kind", skillManifest, []string{"holds no CommandPolicy (it holds Skill)"}},
		{"wrong-version", strings.Replace(goodPolicy, "v1alpha1", "v1", 1), []string{`apiVersion "kubeskills.io/v1", want kubeskills.io/v1alpha1`}},
		{"unknown-field", strings.Replace(goodPolicy, "defaultAction", "defaultActoin", 1), []string{"does not match the API", `unknown field "spec.defaultActoin"`}},
		{"duplicate-field", goodPolicy + "  defaultAction: Never\n", []string{"not valid YAML", "defaultAction"}},
		{"wrong-type", strings.Replace(goodPolicy, "  rules:\n", "  rules: 3\n  x:\n", 1), []string{"does not match the API"}},
		{"bad-action", strings.Replace(goodPolicy, "action: Never", "action: Sometimes", 1), []string{
			"CommandPolicy ops in", "is not valid", `rules[1] "rm *": action "Sometimes" must be Always, Ask or Never`}},
		{"bad-default", strings.Replace(goodPolicy, "defaultAction: Ask", "defaultAction: Maybe", 1), []string{`default action "Maybe"`}},
		{"bad-pattern", strings.Replace(goodPolicy, `"rm *"`, `"rm *; reboot"`, 1), []string{`rules[1] "rm *; reboot"`, "pattern must be one command"}},
		{"expansion-pattern", strings.Replace(goodPolicy, `"rm *"`, `"rm $HOME"`, 1), []string{`rules[1]`, "must not contain $ expansions"}},
		{"empty-pattern", strings.Replace(goodPolicy, `"rm *"`, `""`, 1), []string{"pattern is empty"}},
		{"failing-example", strings.Replace(goodPolicy, "expect: Never", "expect: Always", 1), []string{
			"is not valid", `examples[1] "rm -rf /": expected Always, got Never`}},
		{"bad-expect", strings.Replace(goodPolicy, "expect: Never", "expect: Perhaps", 1), []string{`expect "Perhaps"`}},
		{"two-policies", goodPolicy + "---\n" + strings.Replace(goodPolicy, "name: ops", "name: other", 1), []string{"holds 2 CommandPolicies"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, dir, tc.name+".yaml", tc.content)
			res := clitest.Run("", "policy", "check", "-f", path, "--", "kubectl get pods")
			if res.Code != cli.ExitFailed || res.Stdout != "" || !strings.HasPrefix(res.Stderr, "error: ") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and an error", res.Code, res.Stdout, res.Stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Stderr, w) {
					t.Errorf("stderr %q lacks %q", res.Stderr, w)
				}
			}
			if !strings.Contains(res.Stderr, path) {
				t.Errorf("stderr %q does not name the file", res.Stderr)
			}
		})
	}

	// The good policy passes, so each failure above is the change made.
	path := writeFile(t, dir, "good.yaml", goodPolicy)
	if got := checkJSON(t, "-f", path, "--", "rm -rf /"); got.Action != "Never" || got.Rule != "rm *" {
		t.Errorf("good policy: %+v", got)
	}
	res := clitest.Run("", "policy", "check", "-f", filepath.Join(dir, "missing.yaml"), "--", "ls")
	if res.Code != cli.ExitFailed || !strings.Contains(res.Stderr, "no such file") {
		t.Errorf("missing file: exit %d, stderr %q", res.Code, res.Stderr)
	}
}

// TestPolicyCheckUsage: a wrong command line exits 1 and says what to do.
func TestPolicyCheckUsage(t *testing.T) {
	path := writeFile(t, t.TempDir(), "good.yaml", goodPolicy)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", path}, "no command to judge: give it after --"},
		{[]string{"-f", path, "--", "ls", "-la"}, "2 arguments given, want one: quote the whole command line, e.g. -- 'ls -la'"},
		{[]string{"--", "ls"}, `required flag(s) "filename" not set`},
		{[]string{"-f", path, "-o", "yaml", "--", "ls"}, `unsupported output format "yaml"`},
	} {
		res := clitest.Run("", append([]string{"policy", "check"}, tc.args...)...)
		if res.Code != cli.ExitFailed || res.Stdout != "" || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tc.args, res.Code, res.Stdout, res.Stderr, tc.want)
		}
	}
	// A command that starts with a dash is data after --.
	res := clitest.Run("", "policy", "check", "-f", path, "--", "-rf")
	if res.Code != cli.ExitOK || !bytes.HasPrefix([]byte(res.Stdout), []byte("Action:  Ask")) {
		t.Errorf("-- -rf: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
}

// TestHelpTexts: every new command documents itself.
func TestHelpTexts(t *testing.T) {
	for _, args := range [][]string{
		{"policy", "--help"}, {"policy", "check", "--help"}, {"approve", "--help"}, {"deny", "--help"}, {"list", "--help"},
		{"doctor", "--help"}, {"mcp", "--help"},
	} {
		res := clitest.Run("", args...)
		if res.Code != cli.ExitOK || !strings.Contains(res.Stdout, "Usage:") || !strings.Contains(res.Stdout, "Examples:") {
			t.Errorf("%v: exit %d, stdout %q", args, res.Code, res.Stdout)
		}
	}
	// The doctor and the bridge come from packages of their own: the root
	// lists them, and refuses their bad command lines as it does its own.
	res := clitest.Run("", "--help")
	for _, want := range []string{"\n  doctor ", "\n  mcp "} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("kubectl skills --help does not list %q:\n%s", strings.TrimSpace(want), res.Stdout)
		}
	}
	if res := clitest.Run("", "doctor", "extra"); res.Code != cli.ExitFailed || !strings.Contains(res.Stderr, "error: unknown command") {
		t.Errorf("doctor extra: exit %d, stderr %q", res.Code, res.Stderr)
	}
}

// TestPolicyCheckTrustedChildren: the text output says when the deciding
// rule trusts the programs its command starts, and only then.
func TestPolicyCheckTrustedChildren(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	doc := `apiVersion: kubeskills.io/v1alpha1
kind: CommandPolicy
metadata:
  name: scripts
spec:
  defaultAction: Never
  rules:
  - pattern: /skill/scripts/health-snapshot.sh
    action: Always
    children: Trusted
    description: its programs only read
  - pattern: health-snapshot.sh
    action: Always
    children: Trusted
    description: its programs only read
  - pattern: cat *
    action: Always
`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ command, want string }{
		{"/skill/scripts/health-snapshot.sh", `Rule:    rules[0] "/skill/scripts/health-snapshot.sh" (its programs only read); children: Trusted, the programs it starts are not judged`},
		{"cat x", `Rule:    rules[2] "cat *"` + "\n"},
	} {
		res := clitest.Run("", "policy", "check", "-f", path, "--", tc.command)
		if res.Code != cli.ExitOK || !strings.Contains(res.Stdout, tc.want) {
			t.Errorf("%q: exit %d, stdout:\n%s\nwant it to hold %q", tc.command, res.Code, res.Stdout, tc.want)
		}
	}
}
