package skill

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// goldenSkills are the folders under testdata/skills with what ParseDir must
// find in them.
var goldenSkills = []struct {
	dir        string
	name       string
	invocation string
	tools      []string
	metadata   map[string]string
	files      []string
	executable []string
	warnings   int
}{
	{dir: "pdf-forms", name: "pdf-forms", invocation: InvocationAuto,
		tools: []string{"Bash(python3:*)", "Read"},
		files: []string{"references/fields.md", "scripts/fill_form.py"}, executable: []string{"scripts/fill_form.py"}},
	{dir: "release-notes", name: "release-notes", invocation: InvocationExplicit,
		tools:    []string{"Bash(git log:*)", "Bash(git tag:*)", "Read"},
		metadata: map[string]string{"author": "platform-team", "version": "1.2"},
		files:    []string{"templates/NOTES.md"}, warnings: 1},
	{dir: "brand-assets", name: "brand-assets", invocation: InvocationAuto,
		metadata:   map[string]string{"owner": "design"},
		files:      []string{".hidden/notes.txt", "assets/glyphs.bin", "assets/logo.png", "assets/palette.json", "scripts/preview.sh"},
		executable: []string{"scripts/preview.sh"}},
	{dir: "windows-notes", name: "windows-notes", invocation: InvocationAuto,
		files: []string{"reference.txt"}, warnings: 1},
}

func TestParseDirGolden(t *testing.T) {
	for _, g := range goldenSkills {
		t.Run(g.dir, func(t *testing.T) {
			dir := filepath.Join("testdata", "skills", g.dir)
			s, err := ParseDir(dir)
			if err != nil {
				t.Fatalf("ParseDir() error = %v", err)
			}
			if s.Name != g.name || s.Invocation != g.invocation || !reflect.DeepEqual(s.AllowedTools, g.tools) ||
				!reflect.DeepEqual(s.Metadata, g.metadata) {
				t.Errorf("ParseDir() = name %q, invocation %q, tools %q, metadata %v", s.Name, s.Invocation, s.AllowedTools, s.Metadata)
			}
			var paths, executable []string
			for _, f := range s.Files {
				paths = append(paths, f.Path)
				if f.Executable {
					executable = append(executable, f.Path)
				}
			}
			if !reflect.DeepEqual(paths, g.files) || !reflect.DeepEqual(executable, g.executable) {
				t.Errorf("files = %q (executable %q), want %q (executable %q)", paths, executable, g.files, g.executable)
			}
			r := Validate(s, Options{ExpectedName: filepath.Base(dir)})
			if !r.OK() || len(r.Warnings) != g.warnings {
				t.Errorf("Validate() errors %v, warnings %v", r.Errors, r.Warnings)
			}

			original, err := os.ReadFile(filepath.Join(dir, SkillFileName))
			if err != nil {
				t.Fatal(err)
			}
			if got := Render(s); !bytes.Equal(got, original) {
				t.Errorf("Render() =\n%q\nwant\n%q", got, original)
			}
			out := filepath.Join(t.TempDir(), g.dir)
			if err := WriteDir(s, out); err != nil {
				t.Fatalf("WriteDir() error = %v", err)
			}
			compareTrees(t, dir, out)
		})
	}
}

// compareTrees checks that two folders hold the same files, bytes and
// executable bits.
func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	wantFiles, gotFiles := readTree(t, want), readTree(t, got)
	if !reflect.DeepEqual(sortedNames(wantFiles), sortedNames(gotFiles)) {
		t.Fatalf("files %q, want %q", sortedNames(gotFiles), sortedNames(wantFiles))
	}
	for name, w := range wantFiles {
		g := gotFiles[name]
		if !bytes.Equal(w.content, g.content) || w.executable != g.executable {
			t.Errorf("%s differs: executable %v, want %v; content equal %v", name, g.executable, w.executable, bytes.Equal(w.content, g.content))
		}
	}
}

type treeFile struct {
	content    []byte
	executable bool
}

func readTree(t *testing.T, dir string) map[string]treeFile {
	t.Helper()
	files := map[string]treeFile{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = treeFile{content: content, executable: info.Mode()&0o111 != 0}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sortedNames(m map[string]treeFile) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// writeTree creates files (path to content) under a new folder named name.
func writeTree(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const minimalSkillMD = "---\nname: s\ndescription: d\n---\nbody\n"

func TestParseDirSymlinks(t *testing.T) {
	outside := writeTree(t, "outside", map[string]string{"secret.txt": "secret"})
	tests := []struct {
		name    string
		target  string
		link    string
		wantErr string
		want    string
	}{
		{name: "link inside the folder is read", target: "real.txt", link: "alias.txt", want: "real"},
		{name: "relative link to a subfolder file", target: "../real.txt", link: "docs/alias.txt", want: "real"},
		{name: "link leaving the folder", target: filepath.Join(outside, "secret.txt"), link: "leak.txt",
			wantErr: "outside the skill folder; copy the file into the folder"},
		{name: "relative link leaving the folder", target: "REL", link: "docs/leak.txt",
			wantErr: "outside the skill folder"},
		{name: "broken link", target: "missing.txt", link: "broken.txt", wantErr: "broken symbolic link"},
		{name: "link to a folder", target: "docs", link: "docs-link", wantErr: "links to folders are not followed"},
		{name: "link to the folder itself", target: ".", link: "self", wantErr: "links to folders are not followed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeTree(t, "s", map[string]string{SkillFileName: minimalSkillMD, "real.txt": "real", "docs/readme.md": "r"})
			link := filepath.Join(dir, filepath.FromSlash(tt.link))
			target := tt.target
			if target == "REL" {
				rel, err := filepath.Rel(filepath.Dir(link), filepath.Join(outside, "secret.txt"))
				if err != nil {
					t.Fatal(err)
				}
				target = rel
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			s, err := ParseDir(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.link) {
					t.Fatalf("ParseDir() error = %v, want one naming %s and saying %q", err, tt.link, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDir() error = %v", err)
			}
			for _, f := range s.Files {
				if f.Path == tt.link {
					if string(f.Content) != tt.want {
						t.Errorf("%s = %q, want %q", f.Path, f.Content, tt.want)
					}
					return
				}
			}
			t.Errorf("no file %s in %+v", tt.link, s.Files)
		})
	}
}

func TestParseDirSkillMDLinkLeaving(t *testing.T) {
	outside := writeTree(t, "outside", map[string]string{SkillFileName: minimalSkillMD})
	dir := writeTree(t, "s", map[string]string{"a.txt": "a"})
	if err := os.Symlink(filepath.Join(outside, SkillFileName), filepath.Join(dir, SkillFileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseDir(dir); err == nil || !strings.Contains(err.Error(), "outside the skill folder") {
		t.Fatalf("ParseDir() error = %v, want outside the skill folder", err)
	}
}

func TestParseDirErrors(t *testing.T) {
	t.Run("no SKILL.md", func(t *testing.T) {
		dir := writeTree(t, "s", map[string]string{"skill.md": minimalSkillMD})
		if _, err := ParseDir(dir); err == nil || !strings.Contains(err.Error(), "named exactly SKILL.md") {
			t.Fatalf("ParseDir() error = %v", err)
		}
	})
	t.Run("no folder", func(t *testing.T) {
		if _, err := ParseDir(filepath.Join(t.TempDir(), "missing")); err == nil {
			t.Fatal("ParseDir() succeeded on a missing folder")
		}
	})
	t.Run("bad SKILL.md names the file", func(t *testing.T) {
		dir := writeTree(t, "s", map[string]string{SkillFileName: "no front matter\n"})
		_, err := ParseDir(dir)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, SkillFileName)) {
			t.Fatalf("ParseDir() error = %v", err)
		}
	})
	t.Run("named pipe", func(t *testing.T) {
		dir := writeTree(t, "s", map[string]string{SkillFileName: minimalSkillMD})
		if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
			t.Fatalf("cannot make a named pipe: %v", err)
		}
		if _, err := ParseDir(dir); err == nil || !strings.Contains(err.Error(), "named pipe, not a regular file") {
			t.Fatalf("ParseDir() error = %v", err)
		}
	})
}

func TestParseDirSkipsGitAndKeepsOddNames(t *testing.T) {
	dir := writeTree(t, "s", map[string]string{
		SkillFileName: minimalSkillMD, ".git/config": "x", "sub/.git/HEAD": "y", "docs/SKILL.md": "nested",
		"back\\slash.txt": "b", "empty.txt": "", "wt/.git": "gitdir: ../evil\n",
	})
	s, skipped, err := ParseFolder(dir)
	if err != nil {
		t.Fatalf("ParseFolder() error = %v", err)
	}
	if want := []string{".git", "sub/.git", "wt/.git"}; !reflect.DeepEqual(skipped, want) {
		t.Errorf("skipped = %q, want %q", skipped, want)
	}
	var paths []string
	for _, f := range s.Files {
		paths = append(paths, f.Path)
		if f.Content == nil {
			t.Errorf("%s has nil content", f.Path)
		}
	}
	if want := []string{"back\\slash.txt", "docs/SKILL.md", "empty.txt"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("files = %q, want %q", paths, want)
	}
	if !hasProblem(Validate(s, Options{}).Errors, "spec.files[0].path", "backslash") {
		t.Error("Validate() does not refuse the backslash")
	}
}

func TestWriteDirConfined(t *testing.T) {
	for _, p := range []string{"../escape.txt", "/abs.txt", "a/../../b", SkillFileName, "./x"} {
		dir := t.TempDir()
		s := &Skill{Name: "s", Description: "d", Body: "x\n", Files: []File{{Path: p, Content: []byte("x")}}}
		if err := WriteDir(s, filepath.Join(dir, "out")); err == nil || !strings.Contains(err.Error(), "spec.files[0].path") {
			t.Errorf("WriteDir(%q) error = %v, want a path error", p, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "escape.txt")); err == nil {
			t.Errorf("WriteDir(%q) wrote outside the folder", p)
		}
	}
	t.Run("existing link leading out", func(t *testing.T) {
		outside := t.TempDir()
		dir := filepath.Join(t.TempDir(), "out")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(dir, "scripts")); err != nil {
			t.Fatal(err)
		}
		s := &Skill{Name: "s", Description: "d", Body: "x\n", Files: []File{{Path: "scripts/run.sh", Content: []byte("x")}}}
		if err := WriteDir(s, dir); err == nil {
			t.Error("WriteDir() followed a link out of the folder")
		}
		if _, err := os.Stat(filepath.Join(outside, "run.sh")); err == nil {
			t.Error("WriteDir() wrote outside the folder")
		}
	})
}

func TestWriteDirResetsModes(t *testing.T) {
	dir := t.TempDir()
	s := &Skill{Name: "s", Description: "d", Body: "x\n", Files: []File{{Path: "run.sh", Content: []byte("a"), Executable: true}}}
	if err := WriteDir(s, dir); err != nil {
		t.Fatal(err)
	}
	s.Files[0].Executable = false
	if err := WriteDir(s, dir); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", info.Mode().Perm())
	}
}
