package skill

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderGeneratedGolden(t *testing.T) {
	s := &Skill{
		Name:          "db-migrations",
		Description:   "Plan and apply database migrations safely. Use when: a schema changes.",
		License:       "Apache-2.0",
		Compatibility: "Needs psql 15+",
		AllowedTools:  []string{"Bash(psql:*)", "Read"},
		Metadata:      map[string]string{"version": "2.0", "author": "data-team", "reviewed": "yes"},
		Invocation:    InvocationExplicit,
		Body:          "\n# Migrations\n\nAlways take a backup first.\n",
	}
	want, err := os.ReadFile(filepath.Join("testdata", "render", "generated.SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := Render(s)
	if string(got) != string(want) {
		t.Fatalf("Render() =\n%s\nwant\n%s", got, want)
	}
	parsed, err := ParseSkillMD(got)
	if err != nil {
		t.Fatalf("ParseSkillMD(Render()) error = %v", err)
	}
	parsed.FrontMatter = ""
	if !sameSkill(parsed, s) {
		t.Errorf("ParseSkillMD(Render()) = %+v, want %+v", parsed, s)
	}
	if r := Validate(parsed, Options{ExpectedName: "db-migrations"}); !r.OK() {
		t.Errorf("Validate() = %v", r.Errors)
	}
}

// TestRenderGeneratedReadsBack checks that generated front matter gives every
// field back, whatever characters it holds.
func TestRenderGeneratedReadsBack(t *testing.T) {
	values := []string{
		"plain words",
		"Use when: colons appear",
		"# looks like a comment",
		"- looks like a list",
		"'single' and \"double\" quotes",
		"multi\nline\ntext\n",
		"trailing spaces  \nand lines",
		"yes", "No", "on", "null", "~", "123", "1.5", "true", "0x1F", "2024-01-02",
		"tab\there", "emoji 📝 and accents éà", "[not, a, list]", "{not: a map}", "&anchor", "*alias", "!tag",
		"@at", "`backtick`", "%percent", "   leading spaces", "ends with colon:", "---", "...",
	}
	for _, v := range values {
		s := &Skill{Name: "x", Description: v, License: v, Compatibility: v,
			Metadata: map[string]string{v: v, "k": v}, Invocation: InvocationAuto, Body: "body\n"}
		out := Render(s)
		parsed, err := ParseSkillMD(out)
		if err != nil {
			t.Errorf("value %q: ParseSkillMD(Render()) error = %v\n%s", v, err, out)
			continue
		}
		parsed.FrontMatter = ""
		if !sameSkill(parsed, s) {
			t.Errorf("value %q: read back %+v\nfrom\n%s", v, parsed, out)
		}
	}
}

func TestRenderFrontMatterVerbatim(t *testing.T) {
	tests := []struct {
		name string
		s    Skill
		want string
	}{
		{
			name: "front matter wins over fields",
			s:    Skill{Name: "ignored", Description: "ignored", FrontMatter: "name: a # comment\ndescription: b\n", Body: "x\n"},
			want: "---\nname: a # comment\ndescription: b\n---\nx\n",
		},
		{
			name: "missing final line break is added",
			s:    Skill{FrontMatter: "name: a\ndescription: b", Body: "x\n"},
			want: "---\nname: a\ndescription: b\n---\nx\n",
		},
		{
			name: "CRLF front matter gets CRLF delimiters",
			s:    Skill{FrontMatter: "name: a\r\ndescription: b\r\n", Body: "x\r\n"},
			want: "---\r\nname: a\r\ndescription: b\r\n---\r\nx\r\n",
		},
		{
			name: "CRLF front matter without final line break",
			s:    Skill{FrontMatter: "name: a\r\ndescription: b", Body: "x"},
			want: "---\r\nname: a\r\ndescription: b\r\n---\r\nx",
		},
		{
			name: "byte order mark",
			s:    Skill{BOM: true, FrontMatter: "name: a\n", Body: "x\n"},
			want: "\ufeff---\nname: a\n---\nx\n",
		},
		{
			name: "disabled is not written",
			s:    Skill{Name: "a", Description: "b", Invocation: InvocationDisabled, Body: "x\n"},
			want: "---\nname: a\ndescription: b\n---\nx\n",
		},
		{
			name: "invalid UTF-8 in generated fields is replaced",
			s:    Skill{Name: "a", Description: "b\xff", Body: "x\n"},
			want: "---\nname: a\ndescription: b\uFFFD\n---\nx\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Render(&tt.s)); got != tt.want {
				t.Errorf("Render() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHash(t *testing.T) {
	base := func() *Skill {
		return &Skill{Name: "a", Description: "b", Body: "x\n", Files: []File{
			{Path: "a.txt", Content: []byte("A")}, {Path: "b.sh", Content: []byte("B"), Executable: true}}}
	}
	h := Hash(base())
	if !strings.HasPrefix(h, "sha256:") || len(h) != len("sha256:")+64 {
		t.Fatalf("Hash() = %q, want sha256: and 64 hex digits", h)
	}
	same := []func(*Skill){
		func(s *Skill) { s.Invocation = InvocationAuto },
		func(s *Skill) { s.FrontMatter = "name: a\ndescription: b\n" },
		func(s *Skill) { s.Files[0], s.Files[1] = s.Files[1], s.Files[0] },
	}
	for i, mutate := range same {
		s := base()
		mutate(s)
		if got := Hash(s); got != h {
			t.Errorf("same content %d: Hash() = %s, want %s", i, got, h)
		}
	}
	different := []func(*Skill){
		func(s *Skill) { s.Invocation = InvocationDisabled },
		func(s *Skill) { s.Body = "y\n" },
		func(s *Skill) { s.Files[1].Executable = false },
		func(s *Skill) { s.Files[0].Path = "c.txt" },
		func(s *Skill) { s.Files[0].Content = []byte("AB"); s.Files[1].Content = nil },
		func(s *Skill) { s.BOM = true },
		func(s *Skill) { s.Files = s.Files[:1] },
	}
	for i, mutate := range different {
		s := base()
		mutate(s)
		if got := Hash(s); got == h {
			t.Errorf("changed content %d: Hash() did not change", i)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	for text, want := range map[string]int{"": 0, "a": 1, "abcd": 1, "abcde": 2, strings.Repeat("x", 20000): 5000} {
		if got := EstimateTokens(text); got != want {
			t.Errorf("EstimateTokens(%d bytes) = %d, want %d", len(text), got, want)
		}
	}
}
