package skillsref

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The expectations below are what skills-ref 0.1.5 and Node.js give; the
// side-by-side test in internal/cli runs the package itself over folders.

func TestNumberString(t *testing.T) {
	for in, want := range map[float64]string{
		0: "0", 1: "1", 1.5: "1.5", 1e21: "1e+21", 1e20: "100000000000000000000",
		123456789012345678901: "123456789012345680000", 1e-7: "1e-7", 1e-6: "0.000001",
		0.1: "0.1", 1.0 / 3: "0.3333333333333333", -2.5e-10: "-2.5e-10", 1 << 53: "9007199254740992",
		1.7976931348623157e308: "1.7976931348623157e+308", 5e-324: "5e-324",
	} {
		if got := numberString(in); got != want {
			t.Errorf("numberString(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestDateString(t *testing.T) {
	for in, want := range map[string]string{
		"2024-01-01":                "Mon Jan 01 2024 00:00:00 GMT+0000 (Coordinated Universal Time)",
		"0099-01-01":                "Fri Jan 01 1999 00:00:00 GMT+0000 (Coordinated Universal Time)",
		"2024-01-01T10:20:30+02:00": "Mon Jan 01 2024 08:20:30 GMT+0000 (Coordinated Universal Time)",
		"2024-13-01":                "Wed Jan 01 2025 00:00:00 GMT+0000 (Coordinated Universal Time)",
	} {
		ms, ok := resolveTimestamp(in)
		if got := dateString(ms); !ok || got != want {
			t.Errorf("String(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestDecodeUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"a\xe2\x82b":       "a\uFFFDb",
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD",
		"\xf0\x9f\x98":     "\uFFFD",
		"\xc0\xaf":         "\uFFFD\uFFFD",
		"\xf4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xef\xbb\xbf---":  "\uFEFF---",
	} {
		if got := decodeUTF8([]byte(in)); got != want {
			t.Errorf("decodeUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestJSTrimAndLength(t *testing.T) {
	if got := jsTrim(" \u0085a\uFEFF\u3000\u180e"); got != "\u0085a\uFEFF\u3000\u180e" {
		t.Errorf("jsTrim = %q", got)
	}
	if got := jsTrim("\uFEFF\u3000a\u00a0 "); got != "a" {
		t.Errorf("jsTrim = %q, want a", got)
	}
	if n := utf16Len("aé😀"); n != 4 {
		t.Errorf("utf16Len = %d, want 4", n)
	}
}

func TestCheck(t *testing.T) {
	const d = "description: Checks things.\n"
	fm := func(lines string) string { return "---\n" + lines + "---\n\nBody.\n" }
	tests := []struct {
		name, content, folder string
		want                  []Rule
	}{
		{"valid", fm("name: tool\n" + d), "tool", nil},
		{"all six fields", fm("name: tool\n" + d + "license: MIT\ncompatibility: x\nallowed-tools: Read\nmetadata: {a: b}\n"), "tool", nil},
		{"empty body and CRLF", "---\r\nname: tool\r\n" + strings.ReplaceAll(d, "\n", "\r\n") + "---", "tool", nil},
		{"no front matter", "# Tool\n", "tool", []Rule{RuleFrontMatterMissing}},
		{"byte order mark", "\uFEFF" + fm("name: tool\n"+d), "tool", []Rule{RuleFrontMatterMissing}},
		{"not closed", "---\nname: tool\n" + d, "tool", []Rule{RuleFrontMatterNotClosed}},
		{"closed inside a line", "---\nname: tool\ndescription: a --- b\n", "tool", nil},
		{"cut inside quotes", fm("name: tool\ndescription: \"a --- b\"\n"), "tool", []Rule{RuleFrontMatterYAML}},
		{"duplicate key", fm("name: tool\n" + d + "name: tool\n"), "tool", []Rule{RuleFrontMatterYAML}},
		{"duplicate key once written", fm("name: tool\n" + d + "1: a\n1.0: b\n"), "tool", []Rule{RuleFrontMatterYAML}},
		{"unknown tag", fm("name: tool\n" + d + "license: !spdx MIT\n"), "tool", []Rule{RuleFrontMatterYAML}},
		{"escaped apostrophe", fm("name: tool\ndescription: \"Don\\'t\"\n"), "tool", []Rule{RuleFrontMatterYAML}},
		{"escaped slash", fm("name: tool\ndescription: \"a\\/b\"\n"), "tool", nil},
		{"control character in a comment", fm("name: tool\n" + d + "# \x01\n"), "tool", nil},
		{"control character in text", fm("name: tool\ndescription: a\x01b\n"), "tool", []Rule{RuleFrontMatterYAML}},
		{"nesting past 100", fm("name: tool\n" + d + "x: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n"), "tool", []Rule{RuleFrontMatterYAML}},
		{"a list", fm("- a\n"), "tool", []Rule{RuleFrontMatterNotMapping}},
		{"text", fm("text\n"), "tool", []Rule{RuleFrontMatterNotMapping}},
		{"empty", "---\n---\n", "tool", []Rule{RuleNameMissing, RuleDescriptionMissing}},
		{"a date", fm("2024-01-01\n"), "tool", []Rule{RuleNameMissing, RuleDescriptionMissing}},
		{"unexpected fields", fm("name: tool\n" + d + "user-invocable: true\n"), "tool", []Rule{RuleFieldsUnexpected}},
		{"merged fields", fm("name: tool\n" + d + "<<: {license: MIT, owner: me}\n"), "tool", []Rule{RuleFieldsUnexpected}},
		{"merged name", fm("<<: {name: tool}\n" + d), "tool", nil},
		{"key written by String", fm("? [name]\n: tool\n" + d), "tool", nil},
		{"name empty", fm("name: ''\n" + d), "tool", []Rule{RuleNameEmpty}},
		{"name null", fm("name:\n" + d), "tool", []Rule{RuleNameFolder}},
		{"name null folder", fm("name:\n" + d), "null", nil},
		{"name number", fm("name: 0x1F\n" + d), "31", nil},
		{"name list", fm("name: [tool]\n" + d), "tool", nil},
		{"name date", fm("name: 2024-01-01\n" + d), "2024-01-01", []Rule{RuleNameLowercase, RuleNameCharacters, RuleNameFolder}},
		{"name too long", fm("name: " + strings.Repeat("a", 65) + "\n" + d), strings.Repeat("a", 65), []Rule{RuleNameTooLong}},
		{"name too long in UTF-16", fm("name: " + strings.Repeat("\U00020000", 33) + "\n" + d), strings.Repeat("\U00020000", 33), []Rule{RuleNameTooLong, RuleNameCharacters}},
		{"name uppercase", fm("name: Tool\n" + d), "Tool", []Rule{RuleNameLowercase}},
		{"name hyphen", fm("name: tool-\n" + d), "tool-", []Rule{RuleNameHyphenEdge}},
		{"name hyphens", fm("name: a--b\n" + d), "a--b", []Rule{RuleNameConsecutiveHyphens}},
		{"name underscore", fm("name: a_b\n" + d), "a_b", []Rule{RuleNameCharacters}},
		{"name folder", fm("name: tool\n" + d), "other", []Rule{RuleNameFolder}},
		{"name trimmed", fm("name: \" tool\\u3000\"\n" + d), "tool", nil},
		{"name NFKC", fm("name: ｔｏｏｌ\n" + d), "tool", nil},
		{"name decomposed", fm("name: e\u0301te\u0301\n" + d), "\u00e9t\u00e9", nil},
		{"name Cyrillic", fm("name: имя\n" + d), "имя", nil},
		{"name Greek", fm("name: όνομα\n" + d), "όνομα", []Rule{RuleNameCharacters}},
		{"description missing", fm("name: tool\n"), "tool", []Rule{RuleDescriptionMissing}},
		{"description blank", fm("name: tool\ndescription: \"\\u00a0\"\n"), "tool", []Rule{RuleDescriptionEmpty}},
		{"description null", fm("name: tool\ndescription:\n"), "tool", nil},
		{"description mapping", fm("name: tool\ndescription: {a: b}\n"), "tool", nil},
		{"description empty list", fm("name: tool\ndescription: []\n"), "tool", []Rule{RuleDescriptionEmpty}},
		{"description 1024", fm("name: tool\ndescription: " + strings.Repeat("a", 1024) + "\n"), "tool", nil},
		{"description 1025", fm("name: tool\ndescription: " + strings.Repeat("a", 1025) + "\n"), "tool", []Rule{RuleDescriptionTooLong}},
		{"description in UTF-16", fm("name: tool\ndescription: " + strings.Repeat("😀", 513) + "\n"), "tool", []Rule{RuleDescriptionTooLong}},
		{"description invalid UTF-8", fm("name: tool\ndescription: " + strings.Repeat("a", 1023) + "\xe2\x82\n"), "tool", nil},
		{"compatibility number", fm("name: tool\n" + d + "compatibility: 2\n"), "tool", []Rule{RuleCompatibilityType}},
		{"compatibility null", fm("name: tool\n" + d + "compatibility:\n"), "tool", []Rule{RuleCompatibilityType}},
		{"compatibility 501", fm("name: tool\n" + d + "compatibility: " + strings.Repeat("c", 501) + "\n"), "tool", []Rule{RuleCompatibilityTooLong}},
		{"metadata anything", fm("name: tool\n" + d + "metadata: 5\nlicense: [a]\nallowed-tools: {a: 1}\n"), "tool", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Rule
			for _, v := range Check([]byte(tt.content), tt.folder) {
				got = append(got, v.Rule)
				if v.Message == "" || v.Field == "" || !strings.HasPrefix(v.Problem().Message, "skills-ref "+string(v.Rule)+": ") {
					t.Errorf("violation %+v lacks a field, a message or its rule", v)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Check() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckFolder(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	skillMD := "---\nname: tool\ndescription: Checks things.\n---\n"
	write(filepath.Join(root, "tool", "SKILL.md"), skillMD)
	write(filepath.Join(root, "lower", "tool", "skill.md"), skillMD)
	write(filepath.Join(root, "none", "tool", "README.md"), "x")
	write(filepath.Join(root, "folder", "tool", "SKILL.md", "x"), "x")
	tests := []struct {
		dir  string
		want []Rule
	}{
		{filepath.Join(root, "tool"), nil},
		{filepath.Join(root, "tool") + "/", nil},
		{filepath.Join(root, "lower", "tool"), nil},
		{filepath.Join(root, "none", "tool"), []Rule{RuleSkillMDMissing}},
		{filepath.Join(root, "folder", "tool"), []Rule{RuleSkillMDUnreadable}},
		{filepath.Join(root, "missing"), []Rule{RuleFolderMissing}},
		{filepath.Join(root, "tool", "SKILL.md"), []Rule{RuleFolderMissing}},
	}
	for _, tt := range tests {
		var got []Rule
		for _, v := range CheckFolder(tt.dir) {
			got = append(got, v.Rule)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("CheckFolder(%s) = %q, want %q", tt.dir, got, tt.want)
		}
	}
}

// FuzzCheck checks that any content gets a verdict, the same each time,
// without a panic.
func FuzzCheck(f *testing.F) {
	f.Add([]byte("---\nname: tool\ndescription: Checks things.\n---\n"), "tool")
	f.Add([]byte("---\n<<: [{name: a}, *x]\n? [a, {b: c}]\n: \"\\uD83D\\/\\'\"\n---"), "a")
	f.Add([]byte("---\na: &x [*x]\nb: !!binary aGk=\nc: !!pairs [a: 1]\n---"), "a")
	f.Fuzz(func(t *testing.T, content []byte, folder string) {
		first := Check(content, folder)
		if second := Check(content, folder); !slices.Equal(first, second) {
			t.Errorf("Check() = %v, then %v", first, second)
		}
	})
}
