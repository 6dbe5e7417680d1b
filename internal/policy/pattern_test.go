package policy

import (
	"fmt"
	"strings"
	"testing"
)

// TestCompileErrors checks that bad policies are refused with an error
// naming the field.
func TestCompileErrors(t *testing.T) {
	many := make([]Rule, MaxRules+1)
	for i := range many {
		many[i] = Rule{Pattern: "ls", Action: Always}
	}
	tests := []struct {
		name string
		p    Policy
		want string
	}{
		{"bad default", Policy{Default: "Maybe"}, `default action "Maybe"`},
		{"bad action", Policy{Rules: []Rule{{Pattern: "ls", Action: Always}, {Pattern: "ls", Action: "always"}}}, `rules[1] "ls": action "always"`},
		{"empty action", Policy{Rules: []Rule{{Pattern: "ls"}}}, `rules[0] "ls": action ""`},
		{"empty pattern", Policy{Rules: []Rule{{Pattern: " ", Action: Ask}}}, "rules[0]"},
		{"list", Policy{Rules: []Rule{{Pattern: "ls; rm *", Action: Ask}}}, "pattern must be one command"},
		{"pipe", Policy{Rules: []Rule{{Pattern: "ls | grep x", Action: Ask}}}, "pattern must be one command"},
		{"redirection", Policy{Rules: []Rule{{Pattern: "ls > x", Action: Ask}}}, "pattern must be one command"},
		{"assignment", Policy{Rules: []Rule{{Pattern: "FOO=1 ls", Action: Ask}}}, "pattern must be one command"},
		{"keyword", Policy{Rules: []Rule{{Pattern: "if true; then ls; fi", Action: Ask}}}, "pattern must be one command"},
		{"expansion", Policy{Rules: []Rule{{Pattern: "echo $HOME", Action: Ask}}}, "must not contain $ expansions"},
		{"quoted expansion", Policy{Rules: []Rule{{Pattern: `echo "$HOME"`, Action: Ask}}}, "must not contain $ expansions"},
		{"substitution", Policy{Rules: []Rule{{Pattern: "echo $(id)", Action: Ask}}}, "must not contain $ expansions"},
		{"extglob", Policy{Rules: []Rule{{Pattern: "ls @(a|b)", Action: Ask}}}, "extended globs"},
		{"comment", Policy{Rules: []Rule{{Pattern: "git log #x", Action: Ask}}}, "comment"},
		{"bad range", Policy{Rules: []Rule{{Pattern: "ls [z-a]", Action: Ask}}}, "bad range"},
		{"unparsable", Policy{Rules: []Rule{{Pattern: `echo "`, Action: Ask}}}, "failed to parse pattern"},
		{"too long", Policy{Rules: []Rule{{Pattern: strings.Repeat("a", MaxPatternBytes+1), Action: Ask}}}, "longer than"},
		{"too many words", Policy{Rules: []Rule{{Pattern: strings.Repeat("a ", MaxPatternWords+1), Action: Ask}}}, "words"},
		{"too many rules", Policy{Rules: many}, "at most 256"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.p)
			if err == nil {
				t.Fatalf("Compile succeeded, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "failed to compile") {
				t.Fatalf("Compile error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestPatternSemantics checks which commands a single Always rule allows.
func TestPatternSemantics(t *testing.T) {
	tests := []struct {
		pattern, command string
		match            bool
	}{
		{"git status", "git status", true},
		{"git status", "git status -s", false},
		{"git status", "git", false},
		{"git status *", "git status", true},
		{"git status *", "git status -s --branch", true},
		{"kubectl get *", "kubectl get", true},
		{"kubectl get *", "kubectl getx pods", false},
		{"kubectl * pods", "kubectl get pods", true},
		{"kubectl * pods", "kubectl pods", false},
		{"kubectl * pods", "kubectl get all pods", false},
		{"oc ** pods", "oc pods", true},
		{"kubectl ** pods", "kubectl get -n x pods", true},
		{"kubectl ** pods", "kubectl get pods -A", false},
		{"kubectl ** pods **", "kubectl get pods -A", true},
		{"cat /etc/*", "cat /etc/ssl/certs/ca.pem", true},
		{"ls -[la]", "ls -l", true},
		{"ls -[la]", "ls -x", false},
		{"ls -[!l]", "ls -a", true},
		{"ls -[!l]", "ls -l", false},
		{"ls -[a-c]", "ls -b", true},
		{"ls file?", "ls file1", true},
		{"ls file?", "ls file12", false},
		{"echo '*'", "echo '*'", true},
		{"echo '*'", "echo x", false},
		{`echo \*`, `echo "*"`, true},
		{`echo "a b"`, "echo 'a b'", true},
		{`echo "a b"`, "echo a b", false},
		{"test?", "test1 x", false},
		{"test? *", "test1 x", true},
		{"[ *", "[ -d /tmp ]", true},
		{"curl https://*", `curl "https://x/?q=a;b"`, true},
		{"curl https://*", "curl http://x", false},
		{"curl https://*", "curl https://x -o out", false},
		{"mkfs* *", "mkfs.ext4 /dev/sda1", true},
		{"'' *", "'' x", true},
		{"printf '%s\\n' *", `printf '%s\n' x`, true},
		{"echo $'\\t'", "echo '\t'", true},
		// expansions: an Always rule applies only when it matches any value
		{"cat *", `cat "$X" $Y`, true},
		{"echo x", `echo "$X"`, false},
		{"oc * pods", `oc "$X" pods`, true},
		{"oc * pods", "oc $X pods", false},
		{"ls *", "ls *.yaml", true},
		{"ls x", "ls x*", false},
	}
	for _, tc := range tests {
		t.Run(tc.pattern+" ~ "+tc.command, func(t *testing.T) {
			m, err := Compile(Policy{Rules: []Rule{{Pattern: tc.pattern, Action: Always}}})
			if err != nil {
				t.Fatal(err)
			}
			d := m.Decide(tc.command)
			if got := d.Action == Always; got != tc.match {
				t.Fatalf("match = %v, want %v: %s", got, tc.match, d.Reason)
			}
		})
	}
}

// TestPossibleMatch checks that Never and Ask rules apply when a command
// could match them, depending on its expansions.
func TestPossibleMatch(t *testing.T) {
	tests := []struct {
		pattern, command string
		want             Action
	}{
		{"kubectl get secrets", `kubectl get "$X"`, Never},
		{"kubectl get secrets", `kubectl get "secr$X"`, Never},
		{"kubectl get secrets", `kubectl get "pods-$X"`, Always},
		{"kubectl get secrets", "kubectl $X", Never},
		{"kubectl get secrets", "kubectl $X pods", Ask},
		{"kubectl delete *", "kubectl ${VERB:-get} pods", Never},
		{"rm -rf /", "rm -rf $DIR", Never},
		{"rm -rf /", "rm -rf /tmp/x", Always},
		{"kubectl ** delete **", "kubectl get pods -o jsonpath={.items[*]}", Always},
		{"kubectl ** delete **", "kubectl de* pod x", Never},
		{"kubectl ** delete **", "kubectl {get,delete} pod x", Never},
		{"kubectl ** delete **", "kubectl get pod-[ab]", Always},
		{"kubectl ** delete **", "kubectl * pod x", Never},
		{"kubectl ** delete **", "kubectl --v=$V pod x", Never},
	}
	for _, tc := range tests {
		t.Run(tc.pattern+" ~ "+tc.command, func(t *testing.T) {
			m, err := Compile(Policy{Default: Always, Rules: []Rule{{Pattern: tc.pattern, Action: Never}}})
			if err != nil {
				t.Fatal(err)
			}
			if d := m.Decide(tc.command); d.Action != tc.want {
				t.Fatalf("Decide = %s, want %s: %s", d.Action, tc.want, d.Reason)
			}
		})
	}
}

// TestStrictestRuleWins checks precedence and which rule is reported.
func TestStrictestRuleWins(t *testing.T) {
	m, err := Compile(Policy{Default: Always, Rules: []Rule{
		{Pattern: "kubectl *", Action: Always},
		{Pattern: "kubectl get secrets *", Action: Ask},
		{Pattern: "kubectl get *", Action: Always},
		{Pattern: "kubectl * secrets *", Action: Ask},
		{Pattern: "kubectl ** --kubeconfig* **", Action: Never},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		command string
		action  Action
		index   int
	}{
		{"kubectl get pods", Always, 0},
		{"kubectl get secrets -A", Ask, 1},
		{"kubectl get secrets --kubeconfig=/x", Never, 4},
		{"ls", Always, -1},
	}
	for _, tc := range tests {
		d := m.Decide(tc.command)
		if d.Action != tc.action || d.RuleIndex != tc.index {
			t.Errorf("Decide(%q) = %s rules[%d], want %s rules[%d]", tc.command, d.Action, d.RuleIndex, tc.action, tc.index)
		}
		if tc.index >= 0 && d.Rule != m.rules[tc.index].Pattern {
			t.Errorf("Decide(%q).Rule = %q", tc.command, d.Rule)
		}
	}
}

// TestGlobMatch checks the character-level matcher, including the prefix
// mode used for words that start with known text.
func TestGlobMatch(t *testing.T) {
	tests := []struct {
		glob, s      string
		full, prefix bool
	}{
		{"abc", "abc", true, true},
		{"abc", "ab", false, true},
		{"abc", "abd", false, false},
		{"a*c", "abbbc", true, true},
		{"a*c", "abbb", false, true},
		{"a*b*c", "axbxbxc", true, true},
		{"*", "", true, true},
		{"?", "", false, true},
		{"?", "é", true, true},
		{"[a-c]x", "bx", true, true},
		{"[!a-c]x", "bx", false, false},
		{"x[", "x[", true, true},
		{"*/*", "a/b/c", true, true},
		{"**a", "bba", true, true},
		{strings.Repeat("*a", 30) + "b", strings.Repeat("a", 200), false, true},
	}
	for _, tc := range tests {
		var b globBuilder
		if err := b.addGlob(tc.glob); err != nil {
			t.Fatal(err)
		}
		b.flush()
		if got := globMatch(b.toks, tc.s, false); got != tc.full {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.glob, tc.s, got, tc.full)
		}
		if got := globMatch(b.toks, tc.s, true); got != tc.prefix {
			t.Errorf("globMatch(%q, %q, prefix) = %v, want %v", tc.glob, tc.s, got, tc.prefix)
		}
	}
}

// TestParts checks that every simple command is listed with its own
// decision, in source order, and that Parts is bounded.
func TestParts(t *testing.T) {
	m, err := Compile(realisticPolicy())
	if err != nil {
		t.Fatal(err)
	}
	d := m.Decide("ls | grep x && sudo rm -rf / || echo $(whoami)")
	want := []struct {
		command string
		action  Action
	}{
		{"ls", Always}, {"grep x", Always}, {"sudo rm -rf /", Ask}, {"rm -rf /", Never},
		{"echo $(whoami)", Ask}, {"whoami", Always},
	}
	if len(d.Parts) != len(want) {
		t.Fatalf("got %d parts, want %d: %+v", len(d.Parts), len(want), d.Parts)
	}
	for i, w := range want {
		if p := d.Parts[i]; p.Command != w.command || p.Action != w.action || p.Reason == "" {
			t.Errorf("parts[%d] = %q %s, want %q %s", i, p.Command, p.Action, w.command, w.action)
		}
	}
	if d.Action != Never || d.Rule != "rm *" || d.RuleIndex != 36 {
		t.Errorf("decision = %s %q rules[%d]", d.Action, d.Rule, d.RuleIndex)
	}
	d = m.Decide(strings.Repeat("ls;", 3*MaxParts))
	if len(d.Parts) != MaxParts || d.Action != Ask || d.RuleIndex != -1 {
		t.Errorf("long command: %d parts, %s rules[%d]", len(d.Parts), d.Action, d.RuleIndex)
	}
}

// TestCheckExamples checks that failing examples are all named.
func TestCheckExamples(t *testing.T) {
	m, err := Compile(realisticPolicy())
	if err != nil {
		t.Fatal(err)
	}
	ok := []Example{{Command: "ls", Expect: Always}, {Command: "rm x", Expect: Never}}
	if err := m.CheckExamples(ok); err != nil {
		t.Fatalf("CheckExamples: %v", err)
	}
	bad := append(ok, Example{Command: "git push", Expect: Always}, Example{Command: "ls", Expect: "Yes"})
	err = m.CheckExamples(bad)
	if err == nil {
		t.Fatal("CheckExamples succeeded with failing examples")
	}
	for _, want := range []string{`examples[2] "git push": expected Always, got Ask`, `examples[3] "ls": expect "Yes"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// TestDefaultAction checks that an empty default is Ask and that the
// default decides unmatched commands.
func TestDefaultAction(t *testing.T) {
	for _, def := range []Action{"", Always, Ask, Never} {
		m, err := Compile(Policy{Default: def})
		if err != nil {
			t.Fatal(err)
		}
		want := def
		if def == "" {
			want = Ask
		}
		if m.Default() != want {
			t.Errorf("Default() = %s, want %s", m.Default(), want)
		}
		if d := m.Decide("ls"); d.Action != want || !strings.Contains(d.Reason, fmt.Sprintf("default action %s", want)) {
			t.Errorf("Decide(ls) with default %q = %s: %s", def, d.Action, d.Reason)
		}
		// constructs stay at most Ask even when everything is allowed
		if def == Always {
			if d := m.Decide("sh -c ls"); d.Action != Ask {
				t.Errorf("Decide(sh -c ls) with default Always = %s", d.Action)
			}
		}
	}
}

// TestExplicitRuleCannotAllowConstructs checks that a rule cannot make a
// construct Always, while a Never rule still refuses it.
func TestExplicitRuleCannotAllowConstructs(t *testing.T) {
	m, err := Compile(Policy{Rules: []Rule{
		{Pattern: "sh -c *", Action: Always},
		{Pattern: "eval *", Action: Always},
		{Pattern: "ls *", Action: Always},
		{Pattern: "**", Action: Always},
		{Pattern: "sudo *", Action: Never},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"sh -c ls", "eval ls", "ls > out", "ls $(pwd)", "env ls", "python3 -c 1"} {
		if d := m.Decide(c); d.Action != Ask {
			t.Errorf("Decide(%q) = %s, want Ask: %s", c, d.Action, d.Reason)
		}
	}
	if d := m.Decide("sudo ls"); d.Action != Never {
		t.Errorf("Decide(sudo ls) = %s, want Never", d.Action)
	}
}

// TestDocumentedExample checks the example at the top of docs/policy.md.
func TestDocumentedExample(t *testing.T) {
	m, err := Compile(Policy{Default: Ask, Rules: []Rule{
		{Pattern: "kubectl get *", Action: Always},
		{Pattern: "kubectl get ** *secret* **", Action: Ask},
		{Pattern: "kubectl ** delete **", Action: Never},
		{Pattern: "git status *", Action: Always},
		{Pattern: "rm *", Action: Never},
	}})
	if err != nil {
		t.Fatal(err)
	}
	examples := []Example{
		{Command: "kubectl get pods -A", Expect: Always},
		{Command: "kubectl get secrets", Expect: Ask},
		{Command: "git status -s", Expect: Always},
		{Command: "kubectl -n shop delete pod web-0", Expect: Never},
		{Command: "kubectl get pods; rm -rf /tmp/x", Expect: Never},
	}
	if err := m.CheckExamples(examples); err != nil {
		t.Fatal(err)
	}
	d := m.Decide("kubectl get pods; rm -rf /tmp/x")
	if want := `"rm -rf /tmp/x" matched rules[4] "rm *" (Never)`; d.Reason != want {
		t.Fatalf("reason %q, want %q", d.Reason, want)
	}
}
