package policyimport

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// samples are the commands every rule is judged on, before and after import:
// each near a rule's edge (a longer word, a missing or extra argument).
var samples = []string{
	"npm run test", "npm run test --watch", "npm run testx", "npm run test:unit", "npm run build",
	"git diff", "git diff HEAD", "git diffx", "git status", "git status -s", "git statusx", "git stash",
	"git log -n 3", "git logx",
	"git push", "git push origin main", "git push --force origin", "git push --force-with-lease", "git push -f", "git pushx",
	"git commit -m wip",
	"ls", "ls -la", "lsof -i", "l",
	"kubectl get pods -o yaml", "kubectl get pods -n x -o yaml", "kubectl get -o yaml", "kubectl get pods",
	"kubectl describe pod web-0", "kubectl delete pod web-0", "kubectl getx", "k get pods", "k describe pod x",
	"cat README.md", "cat a b.md", "cat .md", "cat x.txt", "cat",
	"docker ps", "docker", "dockerd",
	"rm -rf /tmp/x", "rm -rf", "rm x", "rmdir x",
	"curl https://example.com", "curl", "echo hi", "echo ab", "echo a-b", "echo '*'", "echo '*' x",
	"python3 -c x", "python3 x.py",
}

// claudeMatches is Claude Code's documented matching of one Bash rule
// against one simple command's text: `prefix:*` is the prefix alone or
// followed by a space; a rule whose only * is a final " *" matches the text
// before it alone too; otherwise * stands for any text; a rule without *
// matches exactly. Bash alone, or Bash(*), matches every command.
func claudeMatches(entry, command string) bool {
	if entry == "Bash" {
		return true
	}
	spec := strings.TrimSuffix(strings.TrimPrefix(entry, "Bash("), ")")
	if spec == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(spec, ":*"); ok {
		return command == prefix || strings.HasPrefix(command, prefix+" ")
	}
	if base, ok := strings.CutSuffix(spec, " *"); ok && !strings.Contains(base, "*") {
		return command == base || strings.HasPrefix(command, base+" ")
	}
	parts := strings.Split(spec, "*")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(command)
}

// claudeDecide is Claude Code's evaluation: deny, then ask, then allow; the
// first list with a matching rule decides, else the default.
func claudeDecide(perms map[string][]string, command string, def policy.Action) policy.Action {
	for _, l := range claudeLists {
		for _, entry := range perms[l.key] {
			if strings.HasPrefix(entry, "Bash") && claudeMatches(entry, command) {
				return l.action
			}
		}
	}
	return def
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// skippedSources returns the sources of the notes that skip a rule.
func skippedSources(r *Result) map[string]bool {
	out := map[string]bool{}
	for _, n := range r.Notes {
		if n.Skipped {
			out[n.Source] = true
		}
	}
	return out
}

// rulesFrom returns the translated rules whose description starts with
// prefix.
func rulesFrom(r *Result, prefix string) []policy.Rule {
	var out []policy.Rule
	for _, rule := range r.Policy.Rules {
		if strings.HasPrefix(rule.Description, prefix) {
			out = append(out, rule)
		}
	}
	return out
}

func TestClaudeRoundTrip(t *testing.T) {
	data := readFile(t, "claude-settings.json")
	r, err := Claude("claude-settings.json", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var settings struct {
		Permissions map[string]json.RawMessage `json:"permissions"`
	}
	if err := json.Unmarshal(data, &settings); err != nil {
		t.Fatal(err)
	}
	perms := map[string][]string{}
	for _, l := range claudeLists {
		var entries []string
		_ = json.Unmarshal(settings.Permissions[l.key], &entries)
		perms[l.key] = entries
	}
	if r.Policy.Default != policy.Ask {
		t.Fatalf("default action %s, want Ask for acceptEdits", r.Policy.Default)
	}
	skipped := skippedSources(r)
	wantSkipped := []string{
		`permissions.allow[6] "Bash(git commit -m \"wip\")"`, `permissions.allow[7] "Read(./src/**)"`,
		`permissions.allow[8] "WebFetch(domain:example.com)"`, `permissions.deny[3] "Bash(echo a*b)"`,
		`permissions.deny[4] "Read(./.env)"`, "permissions.additionalDirectories",
	}
	for _, s := range wantSkipped {
		if !skipped[s] {
			t.Errorf("no note skips %s; notes: %v", s, r.Notes)
		}
	}
	if len(skipped) != len(wantSkipped) {
		t.Errorf("%d skipped, want %d: %v", len(skipped), len(wantSkipped), r.Notes)
	}

	// Each rule alone: the source's decision and the translation's agree
	// on every sample, or the rule is reported.
	kept := map[string][]string{}
	for _, l := range claudeLists {
		for i, entry := range perms[l.key] {
			source := "permissions." + l.key + "[" + strconv.Itoa(i) + "] " + strconv.Quote(entry)
			if skipped[source] {
				continue
			}
			kept[l.key] = append(kept[l.key], entry)
			rules := rulesFrom(r, "claude-settings.json: permissions."+l.key+" "+entry)
			if len(rules) == 0 {
				t.Fatalf("%s: translated to no rule", source)
			}
			m := compile(t, policy.Policy{Rules: rules, Default: policy.Ask})
			for _, cmd := range samples {
				before := claudeDecide(map[string][]string{l.key: {entry}}, cmd, policy.Ask)
				if after := m.Decide(cmd); after.Action != before {
					t.Errorf("%s on %q: Claude Code %s, imported %s (%s)", source, cmd, before, after.Action, after.Reason)
				}
			}
		}
	}

	// The whole file: the translated rules together decide as Claude Code
	// decides with the rules that were translated.
	m := compile(t, r.Policy)
	for _, cmd := range samples {
		before := claudeDecide(kept, cmd, policy.Ask)
		if after := m.Decide(cmd); after.Action != before {
			t.Errorf("%q: Claude Code %s, imported %s (%s)", cmd, before, after.Action, after.Reason)
		}
	}
}

// codexReference is the rules of testdata/git.rules and cluster.rules as
// Codex reads them: an argv matches when it starts with one alternative of
// each position; the strictest decision of the matching rules wins.
var codexReference = []struct {
	source   string
	prefix   [][]string
	decision policy.Action
}{
	{"git.rules:3", [][]string{{"git"}, {"status", "diff", "log"}}, policy.Always},
	{"git.rules:11", [][]string{{"git"}, {"push"}, {"--force", "-f"}}, policy.Never},
	{"git.rules:19", [][]string{{"git"}, {"push"}}, policy.Ask},
	{"cluster.rules:2", [][]string{{"kubectl", "k"}, {"get", "describe"}}, policy.Always},
	{"cluster.rules:7", [][]string{{"kubectl"}, {"delete"}}, policy.Never},
	{"cluster.rules:8", [][]string{{"rm"}}, policy.Never},
	{"cluster.rules:14", [][]string{{"echo"}, {"*"}}, policy.Always},
	{"cluster.rules:15", [][]string{{"python3"}, {"-c"}}, policy.Always},
}

// codexReferenceDecide judges an argv with some of the reference rules;
// def stands for Codex's heuristics when none matches.
func codexReferenceDecide(argv []string, only string, def policy.Action) policy.Action {
	best, matched := policy.Always, false
	for _, r := range codexReference {
		if only != "" && r.source != only || len(argv) < len(r.prefix) {
			continue
		}
		ok := true
		for i, alts := range r.prefix {
			found := false
			for _, a := range alts {
				found = found || argv[i] == a
			}
			ok = ok && found
		}
		if ok {
			if !matched || r.decision.Stricter(best) {
				best = r.decision
			}
			matched = true
		}
	}
	if !matched {
		return def
	}
	return best
}

func codexFiles(t *testing.T) []File {
	return []File{
		{Name: "git.rules", Data: readFile(t, "git.rules")},
		{Name: "cluster.rules", Data: readFile(t, "cluster.rules")},
	}
}

func TestCodexRoundTrip(t *testing.T) {
	r, err := Codex(codexFiles(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Policy.Default != policy.Ask || r.Translated != len(codexReference) {
		t.Fatalf("default %s and %d rules translated, want Ask and %d", r.Policy.Default, r.Translated, len(codexReference))
	}
	skipped := skippedSources(r)
	if !skipped["git.rules:25"] || !skipped["cluster.rules:20"] || len(skipped) != 2 {
		t.Errorf("want host_executable and network_rule skipped, got %v", r.Notes)
	}
	noted := func(source string) bool {
		for _, n := range r.Notes {
			if strings.HasPrefix(n.Source, source+" ") {
				return true
			}
		}
		return false
	}
	for _, ref := range codexReference {
		m := compile(t, policy.Policy{Rules: rulesFrom(r, ref.source+": "), Default: policy.Ask})
		for _, cmd := range samples {
			argv, err := shlexSplit(cmd)
			if err != nil {
				t.Fatal(err)
			}
			before := codexReferenceDecide(argv, ref.source, policy.Ask)
			after := m.Decide(cmd)
			switch {
			case after.Action == before:
			case after.Action.Stricter(before) && noted(ref.source):
				// Stricter here, and the import says so (python3 -c is
				// an interpreter: never Always).
			default:
				t.Errorf("%s on %q: Codex %s, imported %s (%s)", ref.source, cmd, before, after.Action, after.Reason)
			}
		}
	}
	m := compile(t, r.Policy)
	for _, cmd := range samples {
		argv, _ := shlexSplit(cmd)
		before := codexReferenceDecide(argv, "", policy.Ask)
		if after := m.Decide(cmd); after.Action != before && !(after.Action.Stricter(before) && strings.HasPrefix(cmd, "python3 -c")) {
			t.Errorf("%q: Codex %s, imported %s (%s)", cmd, before, after.Action, after.Reason)
		}
	}
	// The examples: every match and not_match but the interpreter's, each
	// decided as Codex decides it, and passing.
	if len(r.Examples) != 16 {
		t.Errorf("%d examples, want 16: %v", len(r.Examples), r.Examples)
	}
	for _, ex := range r.Examples {
		argv, _ := shlexSplit(ex.Command)
		if want := codexReferenceDecide(argv, "", policy.Ask); ex.Expect != want {
			t.Errorf("example %q expects %s, Codex decides %s", ex.Command, ex.Expect, want)
		}
	}
	if err := m.CheckExamples(r.Examples); err != nil {
		t.Error(err)
	}
	if !noted("cluster.rules:15") {
		t.Errorf("the python3 -c example is not reported: %v", r.Notes)
	}
}

func TestClaudePatterns(t *testing.T) {
	for entry, want := range map[string]string{
		"Bash":                      "**",
		"Bash(*)":                   "**",
		"Bash(git diff:*)":          "git diff *",
		"Bash(git diff)":            "git diff",
		"Bash(ls *)":                "ls *",
		"Bash(ls*)":                 "ls* *",
		"Bash(git * main)":          "git * ** main",
		"Bash(* --version)":         "* ** --version",
		"Bash(cat *.md)":            "cat ** *.md",
		"Bash(npm run *:*)":         "",
		"Bash(git log --oneline *)": "git log --oneline *",
		"Bash(git * *)":             "git * ** * *",
		"Bash(echo $HOME)":          "",
		"Bash(echo a*b)":            "",
		"Read":                      "",
		"mcp__github__create_issue": "",
	} {
		got, err := ClaudePatterns(entry)
		switch {
		case want == "" && err == nil:
			t.Errorf("%s: translated to %q, want not translatable", entry, got)
		case want != "" && (err != nil || len(got) != 1 || got[0] != want):
			t.Errorf("%s: got %q, %v; want %q", entry, got, err, want)
		}
	}
	// A prefix rule keeps its word boundary.
	m := compile(t, policy.Policy{Rules: []policy.Rule{{Pattern: "git diff *", Action: policy.Always}}, Default: policy.Never})
	if d := m.Decide("git diffx"); d.Action != policy.Never {
		t.Errorf("git diff:* allows git diffx: %s", d.Reason)
	}
}

func TestDefaults(t *testing.T) {
	for mode, want := range map[string]policy.Action{
		"default": policy.Ask, "dontAsk": policy.Never, "bypassPermissions": policy.Ask, "auto": policy.Ask, "plan": policy.Ask,
	} {
		r, err := Claude("s.json", []byte(`{"permissions":{"defaultMode":"`+mode+`","allow":["Bash(ls:*)"]}}`), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Policy.Default != want {
			t.Errorf("%s: default %s, want %s", mode, r.Policy.Default, want)
		}
	}
	r, err := Claude("s.json", []byte(`{"permissions":{"defaultMode":"bypassPermissions"}}`), Options{Default: policy.Always})
	if err != nil || r.Policy.Default != policy.Always {
		t.Fatalf("--default Always: %v, %v", r, err)
	}
	r, err = Codex(codexFiles(t), Options{Default: policy.Never})
	if err != nil || r.Policy.Default != policy.Never {
		t.Fatalf("--default Never: %v", err)
	}
	for _, ex := range r.Examples {
		if ex.Command == "git statusx" && ex.Expect != policy.Never {
			t.Errorf("an unmatched example expects %s under default Never", ex.Expect)
		}
	}
}

func TestBadInput(t *testing.T) {
	for src, want := range map[string]string{
		"x = 1\n": "x.rules:1: only calls",
		"prefix_rule(pattern = [\"a\"], decision = \"deny\")": "decision must be",
		"\n\nprefix_rule(pattern = [])":                       "x.rules:3: prefix_rule: pattern must be",
		"prefix_rule(pattern = [\"a\"], reviewer = \"user\")": "unknown argument reviewer",
		"prefix_rule(pattern = [\"a\" + \"b\"])":              "unexpected '+'",
		"prefix_rule(pattern = [f\"a\"])":                     "f-strings are not read",
		"prefix_rule(pattern = [\"a\"]":                       "x.rules:1:28: got end of file, want ')'",
		"load(\"x\", \"y\")":                                  "x.rules:1: only calls such as prefix_rule(...) are read, found a load statement",
		"prefix_rule([\"a\"])":                                "x.rules:1:13: prefix_rule: expected a keyword argument",
		"deny_rule(pattern = [\"a\"])":                        "unknown function deny_rule",
		"prefix_rule(pattern = [\"a\"], match = [\"'b\"])":    "unterminated single quote",
	} {
		_, err := Codex([]File{{Name: "x.rules", Data: []byte(src)}}, Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
	for src, want := range map[string]string{
		`{"allow": []}`:                            "no permissions object",
		`{"permissions": {"allow": "Bash"}}`:       "must be a list of strings",
		`{"permissions": {"defaultMode": "yolo"}}`: "unknown permissions.defaultMode",
		`not json`: "not a Claude Code settings file",
	} {
		_, err := Claude("s.json", []byte(src), Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
}

func TestStrings(t *testing.T) {
	calls, err := parseCalls("s.rules", "f(a = 'x\\'y', b = \"\"\"m\nl\"\"\", c = r'\\d', d = \"\\x41\\u00e9\", e = [\"p\", None,],)")
	if err != nil {
		t.Fatal(err)
	}
	a := calls[0].args
	if a["a"].str != "x'y" || a["b"].str != "m\nl" || a["c"].str != `\d` || a["d"].str != "Aé" || len(a["e"].list) != 2 {
		t.Errorf("read %+v", a)
	}
	words, err := shlexSplit(`a 'b c' "d \"e\" \q" f\ g # h`)
	if err != nil || strings.Join(words, "|") != `a|b c|d "e" \q|f g` {
		t.Errorf("split %q, %v", words, err)
	}
}

func compile(t *testing.T, p policy.Policy) *policy.Matcher {
	t.Helper()
	m, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
