package mcpskills

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

func TestParseURI(t *testing.T) {
	for uri, want := range map[string][2]string{
		"skill://git-workflow/SKILL.md":        {"git-workflow", "SKILL.md"},
		"skill://pdf/references/FORMS.md":      {"pdf", "references/FORMS.md"},
		"skill://pdf/templates/regional/eu.md": {"pdf", "templates/regional/eu.md"},
	} {
		name, path, err := ParseURI(uri)
		if err != nil || name != want[0] || path != want[1] {
			t.Errorf("ParseURI(%q) = %q, %q, %v; want %q, %q", uri, name, path, err, want[0], want[1])
		}
		if got := URI(name, path); got != uri {
			t.Errorf("URI(%q, %q) = %q", name, path, got)
		}
	}
	for _, uri := range []string{
		"file:///etc/passwd", "skill://", "skill://pdf", "skill://pdf/", "skill:///SKILL.md",
		"skill://pdf/../other/SKILL.md", "skill://pdf/./SKILL.md", "skill://pdf//SKILL.md", "skill://pdf/a/../SKILL.md",
		"skill://pdf/SKILL.md?x=1", "skill://pdf/SKILL.md#top", "skill://pdf/%2e%2e/SKILL.md", `skill://pdf/a\b`,
	} {
		if name, path, err := ParseURI(uri); err == nil {
			t.Errorf("ParseURI(%q) = %q, %q; want an error", uri, name, path)
		}
	}
}

func TestResourcesJSON(t *testing.T) {
	files := Resources{Files: []SkillResource{{URI: "skill://a/SKILL.md", Digest: Digest([]byte("x")), Size: 1}}}
	for _, r := range []Resources{files, {Dynamic: true}} {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Resources
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if back.Dynamic != r.Dynamic || len(back.Files) != len(r.Files) {
			t.Errorf("%s came back as %+v", data, back)
		}
	}
	if data, _ := json.Marshal(Resources{Dynamic: true}); string(data) != `"dynamic"` {
		t.Errorf("dynamic is %s", data)
	}
	if data, _ := json.Marshal(Resources{}); string(data) != `[]` {
		t.Errorf("no files is %s, not an empty array", data)
	}
	for _, bad := range []string{`"static"`, `null`, `{}`, `3`} {
		var r Resources
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("resources %s was accepted", bad)
		}
	}
	if got := Digest([]byte("abc")); got != "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("Digest = %s", got)
	}
}

func TestFrontmatterIsVerbatim(t *testing.T) {
	md := "---\nname: pdf\ndescription: Fill PDF forms.\nlicense: Apache-2.0\nmetadata:\n  version: \"2.1\"\n  owners: [a, b]\ndisable-model-invocation: true\nx-custom: 3\n---\n# PDF\n"
	fm, err := Frontmatter([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(fm)
	want := `{"description":"Fill PDF forms.","disable-model-invocation":true,"license":"Apache-2.0","metadata":{"owners":["a","b"],"version":"2.1"},"name":"pdf","x-custom":3}`
	if string(got) != want {
		t.Errorf("front matter is\n%s\nwant\n%s", got, want)
	}
	for _, bad := range []string{"# no front matter\n", "---\ndescription: d\n---\nbody\n", "---\nname: n\n---\nbody\n"} {
		if _, err := Frontmatter([]byte(bad)); err == nil {
			t.Errorf("Frontmatter(%q) gave no error", bad)
		}
	}
}

func TestFolderResources(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "SKILL.md"), "---\nname: pdf\ndescription: d\n---\nbody\n")
	writeFile(t, filepath.Join(dir, "scripts", "run.sh"), "#!/bin/sh\n")
	got, err := FolderResources(dir, "pdf")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]SkillResource{
		"skill://pdf/SKILL.md":       FileResource("pdf", "SKILL.md", []byte("---\nname: pdf\ndescription: d\n---\nbody\n")),
		"skill://pdf/scripts/run.sh": {URI: "skill://pdf/scripts/run.sh", Digest: Digest([]byte("#!/bin/sh\n")), Size: 10},
	}
	if !maps.Equal(got, want) {
		t.Errorf("FolderResources = %v, want %v", got, want)
	}
	if _, err := FolderResources(filepath.Join(dir, "nope"), "nope"); err == nil {
		t.Error("a missing folder gave no error")
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
