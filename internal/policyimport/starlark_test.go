package policyimport

import (
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// A .rules file may use all of Starlark's syntax around its literals, and
// reads as Starlark reads it.
func TestStarlarkSyntax(t *testing.T) {
	src := `# Rules for reading the repository.
prefix_rule(  # a comment inside a call
    pattern = [
        "git",  # the program
        ["status", 'diff',],  # trailing commas
    ],
    decision = \
        "allow",
    justification = """reading
changes nothing""",
    match = ["git status", ('git diff'), "git \
status -s"],
    not_match = ['''git push''',],
)

prefix_rule(pattern = ["echo", "\x41\u00e9\t\101\U0001F600"], decision = "forbidden"); prefix_rule(pattern = [r"a\d"], decision = "prompt",)
`
	r, err := Codex([]File{{Name: "s.rules", Data: []byte(src)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []policy.Rule{
		{Pattern: "git status *", Action: policy.Always, Description: "s.rules:2: prefix_rule allow: reading\nchanges nothing"},
		{Pattern: "git diff *", Action: policy.Always, Description: "s.rules:2: prefix_rule allow: reading\nchanges nothing"},
		{Pattern: "echo 'Aé\tA😀' *", Action: policy.Never, Description: "s.rules:16: prefix_rule forbidden"},
		{Pattern: `'a\d' *`, Action: policy.Ask, Description: "s.rules:16: prefix_rule prompt"},
	}
	if len(r.Policy.Rules) != len(want) {
		t.Fatalf("rules %+v, want %+v", r.Policy.Rules, want)
	}
	for i, rule := range r.Policy.Rules {
		if rule != want[i] {
			t.Errorf("rule %d: %+v, want %+v", i, rule, want[i])
		}
	}
	var examples []string
	for _, ex := range r.Examples {
		examples = append(examples, ex.Command+" "+string(ex.Expect))
	}
	if got := strings.Join(examples, ", "); got != "git status Always, git diff Always, git status -s Always, git push Ask" {
		t.Errorf("examples %s", got)
	}
}

// Literal values of every kind are read; a reader of .rules decides which
// it takes for an argument.
func TestStarlarkLiterals(t *testing.T) {
	calls, err := parseCalls("l.rules", `f(
    s = "a" ,
    i = -5, h = 0x1F, o = 0o17, big = 123456789012345678901234567890,
    t = True, f = False, n = None,
    tuple = ("a", 1,), one = ("a",), empty = (), paren = ("a"),
    list = [[], ("x", None)],
    dict = {"k": [1], 2: {}, (1, "x"): True},
)
g()`)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].name != "f" || calls[1].name != "g" || calls[0].line != 1 || calls[1].line != 9 || len(calls[1].args) != 0 {
		t.Fatalf("calls %+v", calls)
	}
	for key, want := range map[string]string{
		"s": `"a"`, "i": "-5", "h": "31", "o": "15", "big": "123456789012345678901234567890",
		"t": "True", "f": "False", "n": "None",
		"tuple": `("a", 1)`, "one": `("a",)`, "empty": "()", "paren": `"a"`,
		"list": `[[], ("x", None)]`, "dict": `{"k": [1], 2: {}, (1, "x"): True}`,
	} {
		if got := calls[0].args[key].repr(); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	if calls[0].args["list"].pos.String() != "l.rules:6:12" {
		t.Errorf("list at %s", calls[0].args["list"].pos)
	}
}

// Syntax errors, values that are not literals and statements that are not
// calls are errors that name the place: a statement by file:line, as a
// rule's description does, a place inside it by file:line:col.
func TestStarlarkErrors(t *testing.T) {
	for src, want := range map[string]string{
		// Syntax errors, reported by the parser.
		"prefix_rule(pattern = [\"a\"] \"b\")":      "e.rules:1:32: got string literal, want ','",
		"prefix_rule(\n  pattern = ['a)":            "e.rules:2:14: unexpected EOF in string",
		"prefix_rule(pattern = ['a\\q'])":           `e.rules:1:24: invalid escape sequence \q`,
		"  prefix_rule(pattern = [\"a\"])":          "e.rules:1:3: got indent",
		"prefix_rule(pattern = [\"a\"]))":           "e.rules:1:29: unexpected ')'",
		"prefix_rule(pattern = [\"a\"], p = 1 = 2)": "e.rules:1:37: got '=', want ','",
		"prefix_rule(pattern = [f'a'])":             "e.rules:1:28: got string literal, want ']' (f-strings are not read",
		// Values that are not literals.
		"prefix_rule(pattern = PATTERN)":                         "e.rules:1:23: only literal strings, integers, True, False, None, and lists, tuples and dicts of them are read as values, found the name PATTERN",
		"prefix_rule(pattern = [\"a\",\n  \"b\" \\\n  * 2])":     "e.rules:3:3: unexpected '*'",
		"prefix_rule(pattern = -x)":                              "e.rules:1:23: unexpected '-'",
		"prefix_rule(pattern = [x for x in y])":                  "e.rules:1:23: only literal strings, integers, True, False, None, and lists, tuples and dicts of them are read as values, found a comprehension",
		"prefix_rule(pattern = glob([\"a\"]))":                   "e.rules:1:23: only literal strings, integers, True, False, None, and lists, tuples and dicts of them are read as values, found a call",
		"prefix_rule(pattern = lambda: 1)":                       "found a lambda",
		"prefix_rule(pattern = \"a\" if x else \"b\")":           "found a conditional expression",
		"prefix_rule(pattern = 1.5)":                             "found the float 1.5",
		"prefix_rule(pattern = [b\"a\"])":                        "e.rules:1:24: only literal strings, integers, True, False, None, and lists, tuples and dicts of them are read as values, found the bytes literal b\"a\"",
		"prefix_rule(pattern = {[1]: 2})":                        "e.rules:1:24: a dict key cannot be a list or a dict",
		"prefix_rule(pattern = {1: 2,\n 1: 3})":                  "e.rules:2:2: dict key 1 given twice",
		"prefix_rule(*args)":                                     "e.rules:1:13: prefix_rule: expected a keyword argument (name = value), found '*' unpacking",
		"prefix_rule(pattern = [\"a\"],\n    pattern = [\"b\"])": "e.rules:2:5: prefix_rule: argument pattern given twice",
		// Statements that are not calls.
		"\nPATTERN = [\"a\"]":               "e.rules:2: only calls such as prefix_rule(...) are read, found an assignment",
		"x += 1":                            "e.rules:1: only calls such as prefix_rule(...) are read, found an assignment +=",
		"def f():\n  pass":                  "e.rules:1: only calls such as prefix_rule(...) are read, found a function definition",
		"for x in y:\n  prefix_rule()":      "e.rules:1: only calls such as prefix_rule(...) are read, found a for loop",
		"if x:\n  prefix_rule()":            "e.rules:1: only calls such as prefix_rule(...) are read, found an if statement",
		"\"\"\"A docstring.\"\"\"":          "e.rules:1: only calls such as prefix_rule(...) are read, found the string \"\"\"A docstring.\"\"\"",
		"'" + strings.Repeat("a", 50) + "'": "e.rules:1: only calls such as prefix_rule(...) are read, found the string '" + strings.Repeat("a", 36) + "...",
		"native.prefix_rule(pattern = [])":  "e.rules:1: only calls of a function by its name, such as prefix_rule(...), are read, found a call of the attribute .prefix_rule",
		// Literals that prefix_rule does not take, as before.
		"prefix_rule(pattern = (\"git\", \"status\"))":     "e.rules:1: prefix_rule: pattern must be a list of strings",
		"prefix_rule(pattern = [\"a\"], decision = True)":  "e.rules:1: prefix_rule: decision must be",
		"prefix_rule(pattern = [\"a\"], match = (\"a\",))": "e.rules:1: prefix_rule: examples must be a list",
		"prefix_rule(pattern = [\"a\", {}])":               "e.rules:1: prefix_rule: a pattern element must be a string or a list",
	} {
		_, err := Codex([]File{{Name: "e.rules", Data: []byte(src)}}, Options{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
}

// A file is read, never run: a call that would do something if executed
// is only a name and literals to the reader.
func TestStarlarkNotExecuted(t *testing.T) {
	_, err := Codex([]File{{Name: "x.rules", Data: []byte("fail(msg = \"stop\")\n")}}, Options{})
	if err == nil || err.Error() != "x.rules:1: unknown function fail: a .rules file calls prefix_rule, host_executable and network_rule" {
		t.Errorf("error %v", err)
	}
	r, err := Codex([]File{{Name: "x.rules", Data: []byte("")}, {Name: "y.rules", Data: []byte("# only a comment\n")}}, Options{})
	if err != nil || len(r.Policy.Rules) != 0 {
		t.Errorf("empty files: %v, %v", r, err)
	}
}
