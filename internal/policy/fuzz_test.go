package policy

import (
	"reflect"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// FuzzDecide checks that Decide never panics, is deterministic, and that
// the whole is at least as strict as every part: a part that is Never when
// judged alone makes the whole Never. It also checks that appending
// commands to a command line that parses cannot hide a Never, and that
// allowed-tools never widen a decision.
func FuzzDecide(f *testing.F) {
	for _, tc := range decideTable() {
		if len(tc.command) < 512 {
			f.Add(tc.command, "ls")
		}
	}
	f.Add("rm x", ")")
	f.Add("echo $(", "rm x")
	f.Add("sh -c 'sh -c \"rm x\"'", "")
	m, err := Compile(realisticPolicy())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		d := m.Decide(a)
		if !d.Action.Valid() {
			t.Fatalf("Decide(%q) = invalid action %q", a, d.Action)
		}
		if again := m.Decide(a); !reflect.DeepEqual(d, again) {
			t.Fatalf("Decide(%q) is not deterministic", a)
		}
		if d.Action == Always && d.RuleIndex < 0 {
			t.Fatalf("Decide(%q) = Always without a rule: %s", a, d.Reason)
		}
		if len(d.Parts) > MaxParts {
			t.Fatalf("Decide(%q) lists %d parts", a, len(d.Parts))
		}
		checkParts(t, m, a, d)
		if narrowed := m.DecideFor(a, []string{"Bash(ls *)", "git"}); d.Action.Stricter(narrowed.Action) {
			t.Fatalf("DecideFor(%q) = %s widens %s", a, narrowed.Action, d.Action)
		}
		if d.Action != Never || strings.HasSuffix(a, "\\") || hasParseError(d) {
			return
		}
		if joined := m.Decide(a + "\n" + b); joined.Action != Never {
			t.Fatalf("Decide(%q) = Never but Decide(%q) = %s: %s", a, a+"\n"+b, joined.Action, joined.Reason)
		}
	})
}

// checkParts checks the parts of a decision against the whole.
func checkParts(t *testing.T, m *Matcher, command string, d Decision) {
	for _, p := range d.Parts {
		if p.Action.Stricter(d.Action) {
			t.Fatalf("Decide(%q) = %s, but part %q is %s", command, d.Action, p.Command, p.Action)
		}
		if p.Action == Never && d.Action != Never {
			t.Fatalf("Decide(%q) = %s with a Never part", command, d.Action)
		}
		if p.Command == "" || p.Command == command || len(d.Parts) > 64 {
			continue
		}
		if alone := m.Decide(p.Command); alone.Action == Never && d.Action != Never {
			t.Fatalf("part %q is Never alone but Decide(%q) = %s: %s", p.Command, command, d.Action, d.Reason)
		}
	}
}

// hasParseError reports whether a decision lists a syntax error.
func hasParseError(d Decision) bool {
	for _, p := range d.Parts {
		if strings.Contains(p.Reason, "failed to parse") {
			return true
		}
	}
	return false
}

// parses reports whether src is a whole shell program on its own: no
// quote, substitution or compound command left open that would take in
// what follows it.
func parses(src string) bool {
	_, err := syntax.NewParser().Parse(strings.NewReader(src), "")
	return err == nil
}

// FuzzCompile checks that pattern compilation never panics, that its
// errors name the rule, and that a pattern that allows a command as an
// Always rule refuses it as a Never rule (a sure match is a possible match).
func FuzzCompile(f *testing.F) {
	for _, r := range realisticPolicy().Rules {
		f.Add(r.Pattern, "kubectl get pods -A")
	}
	f.Add("ls [a-", "ls [a-")
	f.Add(`echo "a b" '*' \*`, `echo "$X" '*' x`)
	f.Add("** x **", "x $Y x")
	f.Fuzz(func(t *testing.T, pattern, command string) {
		always, err := Compile(Policy{Rules: []Rule{{Pattern: pattern, Action: Always}}})
		if err != nil {
			if !strings.HasPrefix(err.Error(), `failed to compile rules[0] `) {
				t.Fatalf("Compile(%q) error %q does not name the rule", pattern, err)
			}
			return
		}
		never, err := Compile(Policy{Default: Always, Rules: []Rule{{Pattern: pattern, Action: Never}}})
		if err != nil {
			t.Fatalf("Compile(%q) failed only as a Never rule: %v", pattern, err)
		}
		if d := always.Decide(command); d.Action == Always {
			if n := never.Decide(command); n.Action != Never {
				t.Fatalf("pattern %q allows %q but does not refuse it: %s", pattern, command, n.Reason)
			}
		}
	})
}

// neverContexts put a command line where a shell still runs it: after or
// before others, in a pipeline, a subshell, a block, a condition, a loop,
// a command substitution and a shell's command string.
var neverContexts = []func(a, b string) string{
	func(a, b string) string {
		if strings.HasSuffix(b, "\\") || strings.Contains(b, "<<") || !parses(b) {
			return "" // b would join a to its last line, read a as a here-document, or quote it
		}
		return b + "\n" + a
	},
	func(a, b string) string { return a + "\n" + b },
	func(a, b string) string { return "true && {\n" + a + "\n}" },
	func(a, b string) string { return "false || (\n" + a + "\n)" },
	func(a, b string) string { return "echo x | {\n" + a + "\n} | cat" },
	func(a, b string) string { return "if true; then\n" + a + "\nfi" },
	func(a, b string) string { return "for f in x; do\n" + a + "\ndone" },
	func(a, b string) string { return "echo \"$(\n" + a + "\n)\"" },
	func(a, b string) string {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			return ""
		}
		return "sh -c " + q
	},
}

// FuzzNeverDominance checks that a command line that is Never alone is
// Never wherever a shell would still run it: joined with other commands,
// in a pipeline, a subshell, a block, a condition, a loop, a command
// substitution or a shell's command string.
func FuzzNeverDominance(f *testing.F) {
	for _, tc := range decideTable() {
		if tc.expect == Never && len(tc.command) < 512 {
			f.Add(tc.command, "ls")
		}
	}
	f.Add("kubectl $'delete\\0' pod web-0", "echo hi")
	f.Add("echo a #x\\\nrm -rf /", "ls")
	f.Add("find . ${x:--exec} rm {} \\;", "cat f")
	f.Add("setarch x86_64 rm x", "git status")
	m, err := Compile(realisticPolicy())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 4096 || len(b) > 4096 || countOpeners(a+b) > MaxOpeners/2 {
			return
		}
		if d := m.Decide(a); d.Action != Never || hasParseError(d) || strings.HasSuffix(a, "\\") {
			return
		}
		for i, wrap := range neverContexts {
			line := wrap(a, b)
			if line == "" || i == len(neverContexts)-1 && strings.Contains(a, "sh -c") {
				continue // command strings nest at most MaxScriptDepth deep
			}
			if i == len(neverContexts)-1 && (strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+")) {
				continue // sh reads a string that starts like an option as options, and runs nothing
			}
			d := m.Decide(line)
			if hasParseError(d) {
				continue // the context did not parse with a in it
			}
			if d.Action != Never {
				t.Fatalf("Decide(%q) = Never but Decide(%q) = %s: %s", a, line, d.Action, d.Reason)
			}
		}
	})
}
