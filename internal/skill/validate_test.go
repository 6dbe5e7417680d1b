package skill

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// validSkill is a skill that Validate accepts without a problem.
func validSkill() *Skill {
	return &Skill{
		Name:         "pdf-forms",
		Description:  "Fill in PDF forms. Use when a user asks to fill a form.",
		License:      "MIT",
		AllowedTools: []string{"Read", "Bash(python3:*)"},
		Metadata:     map[string]string{"author": "me"},
		Invocation:   InvocationAuto,
		FrontMatter: "name: pdf-forms\ndescription: Fill in PDF forms. Use when a user asks to fill a form.\n" +
			"license: MIT\nallowed-tools: Read Bash(python3:*)\nmetadata:\n  author: me\n  openclaw: {emoji: x}\n",
		Body:  "# Forms\n\nDo it.\n",
		Files: []File{{Path: "scripts/fill.py", Content: []byte("print(1)\n"), Executable: true}},
	}
}

type want struct {
	field, message string
}

func TestValidate(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name     string
		mutate   func(*Skill)
		options  Options
		errors   []want
		warnings []want
	}{
		{name: "valid", mutate: func(*Skill) {}},
		{name: "valid without front matter", mutate: func(s *Skill) { s.FrontMatter = "" }},
		{name: "valid explicit", mutate: func(s *Skill) {
			s.Invocation = InvocationExplicit
			s.FrontMatter += "disable-model-invocation: true\n"
		}, warnings: []want{{"spec.frontMatter", `a key outside the six of the Agent Skills specification: "disable-model-invocation" (line 9)`}}},
		{name: "valid explicit without front matter", mutate: func(s *Skill) {
			s.Invocation, s.FrontMatter = InvocationExplicit, ""
		}, warnings: []want{{"spec.frontMatter", `a key outside the six of the Agent Skills specification: "disable-model-invocation"`}}},
		{name: "keys outside the specification", mutate: func(s *Skill) {
			s.FrontMatter += "user-invocable: true\nargument-hint: \"[x]\"\nuser-invocable2: 1\n? [a, b]\n: c\n"
		}, warnings: []want{{"spec.frontMatter", `4 keys outside the six of the Agent Skills specification: ` +
			`"user-invocable" (line 9), "argument-hint" (line 10), "user-invocable2" (line 11), a list (line 12)`}}},
		{name: "keys outside the specification merged in", mutate: func(s *Skill) {
			s.FrontMatter = "x-defaults: &d {license: MIT, owner: me}\n<<: [*d, {name: pdf-forms}]\n" + s.FrontMatter
		}, warnings: []want{{"spec.frontMatter", `2 keys outside the six of the Agent Skills specification: "x-defaults" (line 2), "owner" (line 2)`}}},
		{name: "many keys outside the specification", mutate: func(s *Skill) {
			for i := range 100 {
				s.FrontMatter += fmt.Sprintf("%s-%d: x\n", strings.Repeat("\u00e9", 50), i)
			}
		}, warnings: []want{{"spec.frontMatter", "100 keys outside the six of the Agent Skills specification"}}},
		{name: "disabled agrees with any front matter", mutate: func(s *Skill) { s.Invocation = InvocationDisabled }},
		{name: "name missing", mutate: func(s *Skill) { s.Name, s.FrontMatter = "", "" },
			errors: []want{{"metadata.name", "no name"}}},
		{name: "name pattern", mutate: func(s *Skill) { s.Name, s.FrontMatter = "PDF_Forms", "" },
			errors: []want{{"metadata.name", `"PDF_Forms" is not a valid skill name`}}},
		{name: "name with double hyphen", mutate: func(s *Skill) { s.Name, s.FrontMatter = "a--b", "" },
			errors: []want{{"metadata.name", "not a valid skill name"}}},
		{name: "name too long", mutate: func(s *Skill) { s.Name, s.FrontMatter = long(65), "" },
			errors: []want{{"metadata.name", "65 characters long, more than 64"}}},
		{name: "name differs from the folder", options: Options{ExpectedName: "forms"}, mutate: func(*Skill) {},
			errors: []want{{"metadata.name", `named "pdf-forms" in its front matter but "forms" where it is stored`}}},
		{name: "description missing", mutate: func(s *Skill) { s.Description, s.FrontMatter = "  ", "" },
			errors: []want{{"spec.description", "no description"}}},
		{name: "description with angle brackets", mutate: func(s *Skill) { s.Description, s.FrontMatter = "Use <b>now</b>", "" },
			errors: []want{{"spec.description", "'<' or '>'"}}},
		{name: "description too long", mutate: func(s *Skill) { s.Description, s.FrontMatter = long(4097), "" },
			errors: []want{{"spec.description", "4097 characters long, more than 4096"}}},
		{name: "description over the spec limit", mutate: func(s *Skill) { s.Description, s.FrontMatter = long(1025), "" },
			warnings: []want{{"spec.description", "more than the 1024 of the Agent Skills specification"}}},
		{name: "description over 300", mutate: func(s *Skill) { s.Description, s.FrontMatter = long(301), "" },
			warnings: []want{{"spec.description", "301 characters long, more than 300"}}},
		{name: "description counts characters, not bytes", mutate: func(s *Skill) { s.Description, s.FrontMatter = strings.Repeat("é", 300), "" }},
		{name: "description not UTF-8", mutate: func(s *Skill) { s.Description, s.FrontMatter = "bad \xff", "" },
			errors: []want{{"spec.description", "not valid UTF-8"}}},
		{name: "compatibility too long", mutate: func(s *Skill) { s.Compatibility, s.FrontMatter = long(501), "" },
			errors: []want{{"spec.compatibility", "501 characters long, more than 500"}}},
		{name: "license too long", mutate: func(s *Skill) { s.License, s.FrontMatter = long(1025), "" },
			errors: []want{{"spec.license", "more than 1024"}}},
		{name: "body empty", mutate: func(s *Skill) { s.Body = " \n\t\r\n" },
			errors: []want{{"spec.instructions", "empty"}}},
		{name: "body over the limit", options: Options{MaxBodyBytes: 10}, mutate: func(s *Skill) { s.Body = long(11) },
			errors: []want{{"spec.instructions", "11 bytes, more than the limit of 10"}}},
		{name: "body over 5000 tokens", mutate: func(s *Skill) { s.Body = long(20004) },
			warnings: []want{{"spec.instructions", "about 5001 tokens"}}},
		{name: "body not UTF-8", mutate: func(s *Skill) { s.Body = "text \xc3\x28\n" },
			errors: []want{{"spec.instructions", "not valid UTF-8"}}},
		{name: "tool with a separator", mutate: func(s *Skill) { s.AllowedTools, s.FrontMatter = []string{"Read", "git status"}, "" },
			errors: []want{{"spec.allowedTools[1]", "read back from `allowed-tools` as 2 tools"}}},
		{name: "tool with a space is fine when front matter is kept", mutate: func(s *Skill) {
			s.AllowedTools = []string{"git status"}
			s.FrontMatter = "name: pdf-forms\ndescription: Fill in PDF forms. Use when a user asks to fill a form.\n" +
				"license: MIT\nallowed-tools: [git status]\nmetadata:\n  author: me\n"
		}},
		{name: "tool empty", mutate: func(s *Skill) { s.AllowedTools, s.FrontMatter = []string{""}, "" },
			errors: []want{{"spec.allowedTools[0]", "empty"}}},
		{name: "too many metadata entries", mutate: func(s *Skill) {
			s.FrontMatter = ""
			for i := 0; i < 65; i++ {
				s.Metadata[long(i+1)] = "v"
			}
		}, errors: []want{{"spec.metadata", "entries, more than 64"}}},
		{name: "unknown invocation", mutate: func(s *Skill) { s.Invocation = "Sometimes" },
			errors: []want{{"spec.invocation", `"Sometimes" is not an invocation mode`}}},
		{name: "byte order mark", mutate: func(s *Skill) { s.BOM = true },
			warnings: []want{{"spec.frontMatter", "byte order mark"}}},
		{name: "bad file paths", mutate: func(s *Skill) {
			s.Files = []File{
				{Path: "../etc/passwd"}, {Path: "/abs"}, {Path: `win\path`}, {Path: "./a"}, {Path: "a//b"},
				{Path: "dir/"}, {Path: ""}, {Path: "SKILL.md"}, {Path: "a/../b"}, {Path: "line\nbreak"}, {Path: "."},
				{Path: "bad\xff"}, {Path: long(1025)}, {Path: ".."},
			}
		}, errors: []want{
			{"spec.files[0].path", "'..' segment"}, {"spec.files[1].path", "absolute"},
			{"spec.files[2].path", "backslash"}, {"spec.files[3].path", `not clean (it should read "a")`},
			{"spec.files[4].path", "not clean"}, {"spec.files[5].path", "not clean"},
			{"spec.files[6].path", "empty"}, {"spec.files[7].path", "is SKILL.md"},
			{"spec.files[8].path", "'..' segment"}, {"spec.files[9].path", "control character"},
			{"spec.files[10].path", "names the skill folder itself"}, {"spec.files[11].path", "not valid UTF-8"},
			{"spec.files[12].path", "more than 1024"}, {"spec.files[13].path", "'..' segment"},
		}},
		{name: "duplicate and clashing paths", mutate: func(s *Skill) {
			s.Files = []File{{Path: "a.md"}, {Path: "docs"}, {Path: "a.md"}, {Path: "docs/x/y.md"}}
		}, errors: []want{
			{"spec.files[2].path", `"a.md" is also the path of spec.files[0]`},
			{"spec.files[1].path", `"docs" is a file, but spec.files[3] ("docs/x/y.md") needs it to be a folder`},
		}},
		{name: "git metadata is never bundled", mutate: func(s *Skill) {
			s.Files = []File{
				{Path: ".git/config"}, {Path: "a/.git/hooks/x"}, {Path: ".git"}, {Path: "sub/.GIT/config"},
				{Path: ".gitignore"}, {Path: ".gitattributes"}, {Path: "docs/.github/x.md"}, {Path: "x.git/config"},
			}
		}, errors: []want{
			{"spec.files[0].path", "'.git' segment"}, {"spec.files[1].path", "'.git' segment"},
			{"spec.files[2].path", "'.git' segment"}, {"spec.files[3].path", "'.git' segment"},
		}},
		{name: "a bare git repository is never bundled", mutate: func(s *Skill) {
			s.Files = []File{
				{Path: "repo/HEAD"}, {Path: "repo/config"}, {Path: "repo/objects/info/x"}, {Path: "repo/refs/heads/main"},
				{Path: "HEAD"}, {Path: "objects/a"}, {Path: "refs/b"},
				{Path: "notes/HEAD"}, {Path: "notes/refs/x"},
			}
		}, errors: []want{
			{"spec.files[0].path", "makes repo a bare git repository"},
			{"spec.files[4].path", "makes the skill folder a bare git repository"},
		}},
		{name: "too many files", mutate: func(s *Skill) {
			s.Files = nil
			for i := 0; i < 513; i++ {
				s.Files = append(s.Files, File{Path: "f" + strings.Repeat("x", i)})
			}
		}, errors: []want{{"spec.files", "513 files are bundled, more than 512"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSkill()
			tt.mutate(s)
			r := Validate(s, tt.options)
			checkProblems(t, "errors", r.Errors, tt.errors)
			checkProblems(t, "warnings", r.Warnings, tt.warnings)
			if r.OK() != (len(tt.errors) == 0) || (r.Err() == nil) != r.OK() {
				t.Errorf("OK() = %v, Err() = %v", r.OK(), r.Err())
			}
		})
	}
}

// TestPortabilityWarnings checks that the warnings about rules other hosts
// enforce are marked, and that the one listing keys outside the
// specification fits in a status entry (1024 characters) however many keys
// there are.
func TestPortabilityWarnings(t *testing.T) {
	s := validSkill()
	s.Description = strings.Repeat("a", SpecDescriptionLength+1)
	s.FrontMatter = ""
	s.Invocation = InvocationExplicit
	r := Validate(s, Options{})
	if len(r.Warnings) != 2 || !r.Warnings[0].Portability || !r.Warnings[1].Portability {
		t.Errorf("warnings %+v, want two marked Portability", r.Warnings)
	}

	s = validSkill()
	for i := range 200 {
		s.FrontMatter += fmt.Sprintf("%s-%d: x\n", strings.Repeat("\U0001F600", 60), i)
	}
	r = Validate(s, Options{})
	if len(r.Warnings) != 1 || r.Warnings[0].Portability != true {
		t.Fatalf("warnings %+v, want one", r.Warnings)
	}
	if n := utf8.RuneCountInString(r.Warnings[0].String()); n > 1024 {
		t.Errorf("the warning is %d characters long: %s", n, r.Warnings[0])
	}
	if !strings.Contains(r.Warnings[0].Message, "200 keys") || !strings.Contains(r.Warnings[0].Message, ", ...") {
		t.Errorf("warning %q, want the count of keys and a cut list", r.Warnings[0].Message)
	}
}

func TestValidateFrontMatterAgreement(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Skill)
		errors []want
	}{
		{"name", func(s *Skill) { s.Name = "other" }, []want{{"spec.frontMatter", `name is "pdf-forms" in the front matter but metadata.name is "other"`}}},
		{"description", func(s *Skill) { s.Description = "Another." }, []want{{"spec.frontMatter", `but spec.description is "Another."`}}},
		{"license", func(s *Skill) { s.License = "" }, []want{{"spec.frontMatter", `license is "MIT" in the front matter but spec.license is empty`}}},
		{"compatibility", func(s *Skill) { s.Compatibility = "linux" }, []want{{"spec.frontMatter", `compatibility is empty in the front matter but spec.compatibility is "linux"`}}},
		{"allowed tools", func(s *Skill) { s.AllowedTools = []string{"Read"} }, []want{{"spec.frontMatter", `allowed-tools lists ["Read" "Bash(python3:*)"] in the front matter but spec.allowedTools lists ["Read"]`}}},
		{"metadata value", func(s *Skill) { s.Metadata["author"] = "you" }, []want{{"spec.frontMatter", `metadata.author is "me" in the front matter but spec.metadata[author] is "you"`}}},
		{"metadata extra", func(s *Skill) { s.Metadata["team"] = "x" }, []want{{"spec.frontMatter", `spec.metadata[team] is "x" but missing from the front matter's metadata`}}},
		{"metadata missing", func(s *Skill) { s.Metadata = nil }, []want{{"spec.frontMatter", `metadata.author is "me" in the front matter but missing from spec.metadata`}}},
		{"explicit without the key", func(s *Skill) { s.Invocation = InvocationExplicit }, []want{{"spec.frontMatter", "spec.invocation is Explicit but the front matter does not set"}}},
		{"auto with the key", func(s *Skill) { s.FrontMatter += "disable-model-invocation: true\n" }, []want{{"spec.frontMatter", "disable-model-invocation is true in the front matter but spec.invocation is Auto"}}},
		{"not YAML", func(s *Skill) { s.FrontMatter = "name: [\n" }, []want{{"spec.frontMatter", "line 2 of SKILL.md: the front matter is not valid YAML"}}},
		{"a list", func(s *Skill) { s.FrontMatter = "- a\n" }, []want{{"spec.frontMatter", "is a list, not a mapping"}}},
		{"a delimiter line", func(s *Skill) { s.FrontMatter = "name: pdf-forms\n---\nx: y\n" }, []want{{"spec.frontMatter", "line 3 of SKILL.md would be a '---' line"}}},
		{"too large", func(s *Skill) { s.FrontMatter = strings.Repeat("# x\n", 20000) }, []want{{"spec.frontMatter", "80000 bytes, more than 65536"}}},
		{"duplicate keys", func(s *Skill) { s.FrontMatter += "name: pdf-forms\n" }, []want{{"spec.frontMatter", `repeats the key "name"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSkill()
			tt.mutate(s)
			checkProblems(t, "errors", Validate(s, Options{}).Errors, tt.errors)
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	s := &Skill{
		Name:        "Bad Name",
		Description: "<b>",
		Body:        "\n",
		Files:       []File{{Path: "../x"}, {Path: "ok.txt"}, {Path: "ok.txt"}},
		FrontMatter: "name: other\n",
	}
	r := Validate(s, Options{ExpectedName: "folder"})
	fields := map[string]bool{}
	for _, p := range r.Errors {
		fields[p.Field] = true
		if p.Hint == "" {
			t.Errorf("problem %q has no hint", p)
		}
	}
	for _, f := range []string{"metadata.name", "spec.description", "spec.instructions", "spec.files[0].path", "spec.files[2].path", "spec.frontMatter"} {
		if !fields[f] {
			t.Errorf("no error for %s in:\n%v", f, r.Err())
		}
	}
	if n := strings.Count(r.Err().Error(), "\n") + 1; n != len(r.Errors) {
		t.Errorf("Err() has %d lines for %d errors", n, len(r.Errors))
	}
}

func TestProblemString(t *testing.T) {
	p := Problem{Field: "spec.description", Message: "is empty", Hint: "write one"}
	if got := p.String(); got != "spec.description: is empty (write one)" {
		t.Errorf("String() = %q", got)
	}
	p.Hint = ""
	if got := p.String(); got != "spec.description: is empty" {
		t.Errorf("String() = %q", got)
	}
}

func TestSuggestName(t *testing.T) {
	for in, want := range map[string]string{"PDF Tools": "pdf-tools", "a__b--c-": "a-b-c", "-x-": "x", "日本": ""} {
		if got := suggestName(in); got != want {
			t.Errorf("suggestName(%q) = %q, want %q", in, got, want)
		}
	}
}

// checkProblems checks that problems are exactly those wanted, in any order.
func checkProblems(t *testing.T, kind string, problems []Problem, wanted []want) {
	t.Helper()
	for _, w := range wanted {
		if !hasProblem(problems, w.field, w.message) {
			t.Errorf("%s lack %s: %q; got:\n%s", kind, w.field, w.message, listProblems(problems))
		}
	}
	if len(problems) != len(wanted) {
		t.Errorf("%d %s, want %d:\n%s", len(problems), kind, len(wanted), listProblems(problems))
	}
}

func listProblems(problems []Problem) string {
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = "  " + p.String()
	}
	return strings.Join(lines, "\n")
}
