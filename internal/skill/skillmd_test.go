package skill

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseSkillMD(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  Skill
	}{
		{
			name:  "minimal",
			input: "---\nname: a\ndescription: b\n---\nbody\n",
			want: Skill{Name: "a", Description: "b", Invocation: InvocationAuto,
				FrontMatter: "name: a\ndescription: b\n", Body: "body\n"},
		},
		{
			name: "every known key",
			input: "---\nname: pdf\ndescription: Reads PDFs.\nlicense: MIT\ncompatibility: needs python3\n" +
				"allowed-tools: Bash(git add:*), Read  Grep\nmetadata:\n  author: me\n  version: 1.0\n  nested: {a: 1}\n  empty:\n" +
				"disable-model-invocation: true\n---\n# Title\n",
			want: Skill{Name: "pdf", Description: "Reads PDFs.", License: "MIT", Compatibility: "needs python3",
				AllowedTools: []string{"Bash(git add:*)", "Read", "Grep"},
				Metadata:     map[string]string{"author": "me", "version": "1.0"},
				Invocation:   InvocationExplicit,
				FrontMatter: "name: pdf\ndescription: Reads PDFs.\nlicense: MIT\ncompatibility: needs python3\n" +
					"allowed-tools: Bash(git add:*), Read  Grep\nmetadata:\n  author: me\n  version: 1.0\n  nested: {a: 1}\n  empty:\n" +
					"disable-model-invocation: true\n",
				Body: "# Title\n"},
		},
		{
			name:  "allowed-tools as a list, quoted true is not explicit",
			input: "---\nname: a\ndescription: b\nallowed-tools:\n  - Read\n  - Bash(ls:*)\ndisable-model-invocation: \"true\"\n---\nx\n",
			want: Skill{Name: "a", Description: "b", AllowedTools: []string{"Read", "Bash(ls:*)"}, Invocation: InvocationAuto,
				FrontMatter: "name: a\ndescription: b\nallowed-tools:\n  - Read\n  - Bash(ls:*)\ndisable-model-invocation: \"true\"\n", Body: "x\n"},
		},
		{
			name:  "CRLF is kept in front matter and body",
			input: "---\r\nname: a\r\ndescription: b\r\n---\r\nline\r\n",
			want: Skill{Name: "a", Description: "b", Invocation: InvocationAuto,
				FrontMatter: "name: a\r\ndescription: b\r\n", Body: "line\r\n"},
		},
		{
			name:  "byte order mark is recorded",
			input: "\ufeff---\nname: a\ndescription: b\n---\nx",
			want: Skill{Name: "a", Description: "b", Invocation: InvocationAuto, BOM: true,
				FrontMatter: "name: a\ndescription: b\n", Body: "x"},
		},
		{
			name:  "empty body parses, Validate refuses it",
			input: "---\nname: a\ndescription: b\n---\n",
			want:  Skill{Name: "a", Description: "b", Invocation: InvocationAuto, FrontMatter: "name: a\ndescription: b\n"},
		},
		{
			name:  "a later --- line is body",
			input: "---\nname: a\ndescription: b\n---\nintro\n---\nmore\n",
			want: Skill{Name: "a", Description: "b", Invocation: InvocationAuto,
				FrontMatter: "name: a\ndescription: b\n", Body: "intro\n---\nmore\n"},
		},
		{
			name:  "tabs inside values and the body are fine",
			input: "---\nname: a\ndescription: \"tab\\there\"\n---\n\tindented\n",
			want: Skill{Name: "a", Description: "tab\there", Invocation: InvocationAuto,
				FrontMatter: "name: a\ndescription: \"tab\\there\"\n", Body: "\tindented\n"},
		},
		{
			name:  "non-UTF-8 body parses, Validate refuses it",
			input: "---\nname: a\ndescription: b\n---\n\xff\xfe\n",
			want: Skill{Name: "a", Description: "b", Invocation: InvocationAuto,
				FrontMatter: "name: a\ndescription: b\n", Body: "\xff\xfe\n"},
		},
		{
			name:  "null and alias values",
			input: "---\nname: &n a\ndescription: *n\nlicense: ~\n---\nx\n",
			want: Skill{Name: "a", Description: "a", Invocation: InvocationAuto,
				FrontMatter: "name: &n a\ndescription: *n\nlicense: ~\n", Body: "x\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSkillMD([]byte(tt.input))
			if err != nil {
				t.Fatalf("ParseSkillMD() error = %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("ParseSkillMD() =\n%#v\nwant\n%#v", *got, tt.want)
			}
			if out := string(Render(got)); out != tt.input {
				t.Errorf("Render() = %q, want the input back", out)
			}
		})
	}
}

func TestParseSkillMDErrors(t *testing.T) {
	tests := []struct {
		name  string
		input string
		line  int
		want  string
	}{
		{"empty file", "", 1, "does not start with YAML front matter"},
		{"no front matter", "# Title\n\nbody\n", 1, "does not start with YAML front matter"},
		{"spaces around the opening line", " ---\nname: a\n---\nx\n", 1, "exactly '---'"},
		{"TOML front matter", "+++\nname = 'a'\n+++\nx\n", 1, "TOML"},
		{"only an opening line", "---", 1, "only a '---' line"},
		{"unterminated", "---\nname: a\ndescription: b\n\nbody\n", 1, "never closed"},
		{"closing line at end of file", "---\nname: a\ndescription: b\n---", 4, "without a line break"},
		{"empty front matter", "---\n---\nbody\n", 2, "front matter is empty"},
		{"blank front matter", "---\n  \n\n---\nbody\n", 2, "front matter is empty"},
		{"comment-only front matter", "---\n# nothing\n---\nbody\n", 2, "front matter is empty"},
		{"bad YAML", "---\nname: a\ndescription: [unclosed\n---\nx\n", 0, "not valid YAML"},
		{"mapping value in plain scalar", "---\nname: a\ndescription: Use when: x: y\n---\nx\n", 3, "not valid YAML"},
		{"tab indentation", "---\nname: a\nmetadata:\n\tauthor: me\n---\nx\n", 4, "indent YAML with spaces"},
		{"front matter is a list", "---\n- name: a\n- description: b\n---\nx\n", 2, "is a list, not a mapping"},
		{"front matter is a scalar", "---\njust some words\n---\nx\n", 2, "is a single value, not a mapping"},
		{"duplicate key", "---\nname: a\ndescription: b\nname: c\n---\nx\n", 4, `repeats the key "name" (first on line 2)`},
		{"duplicate nested key", "---\nname: a\nmetadata:\n  k: 1\n  k: 2\n---\nx\n", 5, `repeats the key "k"`},
		{"document end marker", "---\nname: a\n...\ndescription: b\n---\nx\n", 0, "not valid YAML"},
		{"two YAML documents", "---\nname: a\n--- \ndescription: b\n---\nx\n", 3, "more than one YAML document"},
		{"non-UTF-8 front matter", "---\nname: a\ndescription: \xff\n---\nx\n", 0, "not valid YAML"},
		{"opening LF, front matter CRLF", "---\nname: a\r\ndescription: b\r\n---\r\nx\r\n", 1, "opening '---' line ends with LF but the front matter after it with CRLF"},
		{"closing CRLF, front matter LF", "---\nname: a\ndescription: b\n---\r\nx\n", 4, "closing '---' line ends with CRLF but the front matter before it with LF"},
		{"unknown anchor", "---\nname: *nope\n---\nx\n", 0, "not valid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSkillMD([]byte(tt.input))
			if err == nil {
				t.Fatalf("ParseSkillMD() = %+v, want an error", got)
			}
			var syntaxErr *SyntaxError
			if !errors.As(err, &syntaxErr) {
				t.Fatalf("error %v is %T, want *SyntaxError", err, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			if tt.line != 0 && syntaxErr.Line != tt.line {
				t.Errorf("error line = %d, want %d (%v)", syntaxErr.Line, tt.line, err)
			}
			if syntaxErr.Problem.Field != "spec.frontMatter" || syntaxErr.Problem.Hint == "" {
				t.Errorf("problem = %+v, want field spec.frontMatter and a hint", syntaxErr.Problem)
			}
		})
	}
}

func TestParseSkillMDHugeBody(t *testing.T) {
	body := strings.Repeat("All work and no play makes a long skill.\n", 10<<20/41)
	input := "---\nname: huge\ndescription: A very long skill.\n---\n" + body
	s, err := ParseSkillMD([]byte(input))
	if err != nil {
		t.Fatalf("ParseSkillMD() error = %v", err)
	}
	if len(s.Body) != len(body) {
		t.Fatalf("body is %d bytes, want %d", len(s.Body), len(body))
	}
	r := Validate(s, Options{})
	if !hasProblem(r.Errors, "spec.instructions", "more than the limit of 262144") {
		t.Errorf("Validate() errors = %v, want the body limit", r.Errors)
	}
	if string(Render(s)) != input {
		t.Error("Render() does not give the input back")
	}
}

func TestParseSkillMDUnterminatedHuge(t *testing.T) {
	input := "---\nname: a\n" + strings.Repeat("description: b\n", 1<<18)
	if _, err := ParseSkillMD([]byte(input)); err == nil || !strings.Contains(err.Error(), "never closed") {
		t.Fatalf("ParseSkillMD() error = %v, want never closed", err)
	}
}

func TestFrontMatterTypeProblems(t *testing.T) {
	input := "---\nname: [a, b]\ndescription: {x: 1}\nallowed-tools: {a: b}\nmetadata: text\n---\nbody\n"
	s, err := ParseSkillMD([]byte(input))
	if err != nil {
		t.Fatalf("ParseSkillMD() error = %v", err)
	}
	if s.Name != "" || s.Description != "" || s.AllowedTools != nil || s.Metadata != nil {
		t.Errorf("ParseSkillMD() = %+v, want the mistyped keys left empty", s)
	}
	r := Validate(s, Options{})
	for _, want := range []string{
		"name on line 2 must be text, not a list",
		"description on line 3 must be text, not a mapping",
		"allowed-tools on line 4 must be a space-separated string, not a mapping",
		"metadata on line 5 must be a mapping, not a single value",
	} {
		if !hasProblem(r.Errors, "spec.frontMatter", want) {
			t.Errorf("Validate() errors lack %q:\n%v", want, r.Errors)
		}
	}
}

func TestSplitTools(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Read", []string{"Read"}},
		{"Read Grep  Glob", []string{"Read", "Grep", "Glob"}},
		{"Read, Grep,Glob", []string{"Read", "Grep", "Glob"}},
		{"Bash(git add:*) Bash(git commit:*)", []string{"Bash(git add:*)", "Bash(git commit:*)"}},
		{"Bash(a, b) Read", []string{"Bash(a, b)", "Read"}},
		{"Bash(unclosed x", []string{"Bash(unclosed x"}},
		{"a) b", []string{"a)", "b"}},
		{" \t\n", nil},
	}
	for _, tt := range tests {
		if got := splitTools(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitTools(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// hasProblem tells whether problems hold one for field whose text contains
// want.
func hasProblem(problems []Problem, field, want string) bool {
	for _, p := range problems {
		if p.Field == field && strings.Contains(p.Message, want) {
			return true
		}
	}
	return false
}

func TestParseSkillMDHostileYAML(t *testing.T) {
	bomb := "a: &a [x, x, x, x, x, x, x, x, x]\n"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		prev := string(rune(name[0] - 1))
		bomb += name + ": &" + name + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
			", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
	}
	inputs := map[string]string{
		"alias bomb":   "---\nname: a\ndescription: b\nmetadata:\n  " + strings.ReplaceAll(strings.TrimSpace(bomb), "\n", "\n  ") + "\n---\nx\n",
		"deep nesting": "---\nname: a\ndescription: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n---\nx\n",
		"deep maps":    "---\nname: a\nx: " + strings.Repeat("{a: ", 5000) + "1" + strings.Repeat("}", 5000) + "\n---\nx\n",
	}
	for name, input := range inputs {
		t.Run(name, func(t *testing.T) {
			s, err := ParseSkillMD([]byte(input))
			if err == nil {
				_ = Validate(s, Options{})
				if string(Render(s)) != input {
					t.Error("Render() does not give the input back")
				}
			}
		})
	}
}
