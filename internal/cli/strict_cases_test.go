package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/skillsref"
)

// TestStrictAgreesWithSkillsRefOnEdgeCases runs the pinned reference
// validator and skillsref side by side over about a thousand generated
// SKILL.md files, each in a folder of its own: every YAML type a value or a
// key can take (js-yaml's nulls, booleans, numbers, dates, binary data,
// merge keys, explicit tags), the escapes and characters on which YAML
// readers differ, names and descriptions at their limits, and the ways front
// matter can be cut. Folder by folder, both must find the same rules broken.
func TestStrictAgreesWithSkillsRefOnEdgeCases(t *testing.T) {
	ref := skillsRefCommand(t)
	many := filepath.Join(filepath.Dir(ref), "..", "..", "validate-many.mjs")
	root := t.TempDir()
	cases := edgeCases()
	dirs := make([]string, len(cases))
	for i, c := range cases {
		dirs[i] = filepath.Join(root, fmt.Sprintf("case-%d", i))
		if err := os.Mkdir(dirs[i], 0o755); err != nil {
			t.Fatal(err)
		}
		content := strings.ReplaceAll(c, "DIRNAME", filepath.Base(dirs[i]))
		if err := os.WriteFile(filepath.Join(dirs[i], "SKILL.md"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("node", append([]string{many}, dirs...)...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", many, err, stderr.String())
	}
	var verdicts map[string][]string
	if err := json.Unmarshal(out, &verdicts); err != nil {
		t.Fatalf("the reference validator printed no verdicts: %v", err)
	}
	for i, dir := range dirs {
		messages, ok := verdicts[dir]
		if !ok {
			t.Fatalf("no verdict for %s", dir)
		}
		want := make([]skillsref.Rule, 0, len(messages))
		for _, message := range messages {
			want = append(want, referenceRule(t, message))
		}
		var got []skillsref.Rule
		for _, v := range skillsref.CheckFolder(dir) {
			got = append(got, v.Rule)
		}
		if !sameRules(got, want) {
			t.Errorf("case %d %q: skillsref finds %q, skills-ref %q %q", i, cases[i], got, want, messages)
		}
	}
	t.Logf("%d folders judged alike", len(cases))
}

// referenceRule is the rule a message of the reference validator reports.
func referenceRule(t *testing.T, message string) skillsref.Rule {
	t.Helper()
	for _, m := range referenceMessages {
		if m.pattern.MatchString(message) {
			return m.rule
		}
	}
	t.Fatalf("skills-ref reports %q, which no rule matches", message)
	return ""
}

// edgeCases writes the SKILL.md files of TestStrictAgreesWithSkillsRefOnEdgeCases;
// DIRNAME stands for the name of the folder.
func edgeCases() []string {
	const (
		d = "description: A skill.\n"
		n = "name: DIRNAME\n"
	)
	fm := func(s string) string { return "---\n" + s + "---\n\nBody.\n" }
	var cases []string
	add := func(c ...string) { cases = append(cases, c...) }

	// Every kind of value, in every field.
	values := []string{
		"", "~", "null", "Null", "NULL", "true", "True", "TRUE", "false", "yes", "no", "on",
		"0", "-0", "+0", "007", "0x1F", "0X1F", "0o17", "0b101", "-0b101", "0b", "0x", "1_000",
		"1.5", "1.", ".5", "-.5", "+.5", "1e3", "1E3", "1e400", strings.Repeat("1", 400),
		".inf", "-.Inf", "+.INF", ".nan", ".NaN", ".NAN", "NaN", "inf", "1.0",
		"12345678901234567890123", "0.000001", "0.0000001", "1e21", "1e20", "-1e-7", "0x" + strings.Repeat("f", 300),
		"2024-01-01", "2024-1-1", "2024-01-01T10:20:30Z", "2024-01-01 10:20:30.123456 +05:30",
		"2024-13-45", "0000-01-01", "0099-01-01", "2024-01-01t10:20:30",
		"'quoted'", `"dq"`, "[a, b]", "[]", "[[a], b]", "[null, a]", "{a: b}", "{}",
		"!!str 123", "!!int 12", "!!int abc", "!!float 1", "!!bool true", "!!bool yes", "!!null", "!!null x", "!!str",
		"!!binary aGVsbG8=", "!!binary '%%'", "!!timestamp 2024-01-01", "!!timestamp nope", "!custom x",
		"!!map {a: 1}", "!!set {a, b}", "!!set {a: 1}", "!!omap [a: 1, b: 2]", "!!omap [a: 1, a: 2]",
		"!!pairs [a: 1, b: 2]", "!!seq [a]", "!!map", "!!seq",
		"|\n  block\n  text", ">\n  folded\n  text", "'  spaced  '", `"\u3000trimmed\u3000"`, `"\ufefftrimmed"`,
		`"\x85nel"`, "a b", "<<", "'<<'",
		"Ñame", "ñame", "имя", "名前", "ǅ", "ß", "ﬁ", "Ⅻ", "x\u0301", "İ", "é-é", "a--b", "-a", "a-", "a_b", "a.b",
		"٣", "a\u200bb",
		`"Don\'t"`, `'Don\'t'`, `'it\'`, `Don\'t`, `"a\\/b"`, `"a\\\/b"`, `a\/b`, `'a\/b'`, "|\n  a\\/b\n  \\'x",
		`"\uD83D\uDE00"`, `"\uD83D"`, `"\uDE00\uD83D"`, `"\U0000D83D\U0000DE00"`, `"\U00110000"`, `"\UFFFFFFFF"`,
		`\uD83D`, `'\uD83D'`, `"\\uD83D"`, `"\\\uD83D\uDE00x"`, `"x\/"`, `"\\\\/"`, `"\"\/\""`, `"a\'b"`, `"\\\'"`,
		`'\\'`, `'a''\/'`, `"\x2F"`, `"\u002F"`, `"\/\/\/"`, "\"a\\\n  \\/ b\"", `"ok \\"`,
		`["\/", 'x\'', b]`, `{a: "\/", 'b\': c}`,
	}
	for _, v := range values {
		add(fm("name: "+v+"\n"+d), fm(n+"description: "+v+"\n"))
		for _, key := range []string{"compatibility", "license", "metadata", "allowed-tools", "x"} {
			add(fm(n + d + key + ": " + v + "\n"))
		}
	}

	// Keys, as js-yaml writes them.
	for _, k := range []string{"true", "1", "~", "null", "[a, b]", "{a: 1}", "2024-01-01", "__proto__",
		"constructor", "toString", "'name'", `"description"`, "<<"} {
		add(fm(n + d + k + ": x\n"))
	}
	add(fm(d+"? [DIRNAME]\n: x\n"), fm(d+"? [[a]]\n: x\n"), fm(d+"? [{a: 1}]\n: x\n"), fm(n+d+"? |\n  name\n: x\n"),
		fm(n+"? !!binary aGk=\n: y\n"+d), fm(n+"x: &a {b: 1}\n? *a\n: y\n"+d))

	// Merge keys.
	for _, m := range []string{"{license: MIT}", "[{license: MIT}, {owner: x}]", "5", "[5]", "[[a, b]]",
		"[2024-01-01]", "{}", "null", "!!binary aGk="} {
		add(fm(n + d + "<<: " + m + "\n"))
	}
	add(fm(n+"<<: {description: merged}\ndescription: explicit\n"), fm(n+"description: explicit\n<<: {description: merged}\n"),
		fm(n+"x: &a {description: from-anchor}\n<<: *a\n"), fm("base: &b\n  name: DIRNAME\n  description: d\n<<: *b\n"))

	// Repeated keys.
	add(fm(n+d+"1: a\n'1': b\n"), fm(n+d+"1: a\n1.0: b\n"), fm(n+d+"true: a\nTrue: b\n"),
		fm(n+d+"metadata:\n  a: 1\n  a: 2\n"), fm(n+d+"metadata: {a: 1, 'a': 2}\n"),
		"---\n{name: DIRNAME, description: x, name: y}\n---\n")

	// Where the front matter starts and ends, and what it is.
	add("---\n---\nbody\n", "---\n# only a comment\n---\nbody\n", "----\n"+n+d+"---\n", "---"+n+d+"---\n",
		"--- \n"+n+d+"---\n", "---\n"+n+d+"---", "---\n"+n+d, "---", "", "\ufeff---\n"+n+d+"---\n",
		"---\n\ufeff"+n+d+"---\n", "---\r\n"+n[:len(n)-1]+"\r\n"+d[:len(d)-1]+"\r\n---\r\n",
		"---\r"+n[:len(n)-1]+"\r"+d[:len(d)-1]+"\r---\r",
		"---\n"+n+"description: a --- b\n---\n", "---\n"+n+"description: a---b\n---\n",
		"---\n"+n+"description: |\n  a\n  ---\n  b\n---\n", "---\n"+n+"description: x\n---more\n",
		"---\n"+n+"description: x ---\n", "---\n  name: DIRNAME\n  description: x\n---\n",
		"---\n"+n+" description: x\n---\n", "---\n{name: DIRNAME, description: x}\n---\n", "---\n[name: DIRNAME]\n---\n",
		"---\n? name\n: DIRNAME\n? description\n: x\n---\n",
		fm("[a, b]\n"), fm("text\n"), fm("5\n"), fm("2024-01-01\n"), fm("!!binary aGk=\n"), fm("!!set {name, description}\n"),
		fm("!!omap [name: DIRNAME, description: x]\n"), fm("!!pairs [name: DIRNAME]\n"), fm("!!map\n"+n+d),
		fm("!!map {name: DIRNAME, description: x}\n"), fm("&r\n"+n+d), fm(n+d+"...\n"), fm(n+d+"...\nmore: x\n"),
		fm("%YAML 1.2\n"+n+d), "---\n%TAG !e! tag:example.com,2000:\n---\n"+n+d+"---\n")

	// YAML syntax.
	for _, s := range []string{"x: *unknown", "\tdescription: tab", "x: a\tb", "x: 'it''s'", `x: "bad \q escape"`,
		"x: a: b", "x: - a", "x: @at", "x: `tick", "x: %pct", "x: y # comment", "x: y #comment", "x: a#b",
		"x: y\n  continued", "x:\n  - a\n  - b", "x:\n- a\n- b", "x:\n  - a\n   - b", "x: &a [a]\ny: *a",
		"x: &a b\ny: &a c\nz: *a", "x: {a:1}", `x: {"a":1}`, "x: [a:1]", `x: ["a":1]`, "x: {a: 1, b}", "x: [a, b, ]",
		"x: {a: 1,}", "x: [a: 1, b: 2]", "{a:1}", "x: -a", "x: 'a'b", `x: "a"b`, "x: |+\n  a\n", "x: |1\n  a",
		"x: >\n a\n  b\n c", "x: ? a", "x: ?a", "x: :a", "x: a:", "x: !!str &a b", "x: &a !!str b", "x: &a",
		"x: !!map\n  a: 1", "!!str y: x", "&a y: x\nz: *a", "x: !<tag:yaml.org,2002:str> y",
		"x: !<tag:example.com,2000:x> y", "x: ! 123", "x: ! y", "x: " + strings.Repeat("[", 99) + strings.Repeat("]", 99),
		"x: " + strings.Repeat("[", 100) + strings.Repeat("]", 100), "# don\\'t \\/ \\uD83D"} {
		add(fm(n + d + s + "\n"))
	}

	// Raw characters YAML readers refuse or read apart.
	for _, c := range []string{"\x01", "\x08", "\x0b", "\x0c", "\x1f", "\x7f", "\u0080", "\u0084", "\u0085", "\u009f",
		"\ufffe", "\uffff", "\u00a0", "\u2028"} {
		add(fm(n+d+"x: a"+c+"b\n"), fm(n+d+"x: \"a"+c+"b\"\n"), fm(n+d+"x: 'a"+c+"b'\n"), fm(n+d+"x: |\n  a"+c+"b\n"),
			fm(n+d+"# c"+c+"\n"), fm(n+d+"x: y # c"+c+"\n"), fm(n+d+"\"k"+c+"\": y\n"),
			fm(n+"description: \""+strings.Repeat("a", 1023)+c+"\"\n"), fm("name: \"DIRNAME"+c+"\"\n"+d),
			fm(n+d+"x: [a, \""+c+"\"]\n"), fm(n+d+c+"\n"), fm(n+d+"x:"+c+"\n"))
	}

	// Lengths, counted as JavaScript counts them.
	add(fm(n+"description: "+strings.Repeat("a", 1024)+"\n"), fm(n+"description: "+strings.Repeat("é", 1025)+"\n"),
		fm(n+"description: "+strings.Repeat("😀", 512)+"\n"), fm(n+"description: "+strings.Repeat("😀", 513)+"\n"),
		fm(n+"description: ["+strings.TrimSuffix(strings.Repeat("abcdefghij, ", 94), ", ")+"]\n"),
		fm(n+"description: ["+strings.TrimSuffix(strings.Repeat("abcdefghij, ", 93), ", ")+"]\n"),
		fm(n+d+"compatibility: "+strings.Repeat("😀", 250)+"\n"), fm(n+d+"compatibility: "+strings.Repeat("😀", 251)+"\n"),
		fm("name: "+strings.Repeat("a", 64)+"\n"+d), fm("name: "+strings.Repeat("a", 65)+"\n"+d),
		fm("name: "+strings.Repeat("é", 64)+"\n"+d), fm("name: "+strings.Repeat("\U00020000", 33)+"\n"+d),
		fm("name: "+strings.Repeat("ｆ", 65)+"\n"+d), fm(n+"description: \"\\u2028\"\n"), fm(n+"description: \"\\u180e\"\n"),
		fm("name: \"\\u0085DIRNAME\"\n"+d), fm("name: \"\\ufeffDIRNAME\"\n"+d), fm("name: \"\\u3000DIRNAME\\u00a0\"\n"+d),
		fm(n+"description: \" \\t \"\n"), fm(n+"description: |-\n\n"), fm(n+"description: |\n"))
	return cases
}
