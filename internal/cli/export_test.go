package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
)

// importTo imports args and writes the manifest to a file.
func importTo(t *testing.T, args ...string) string {
	t.Helper()
	res := clitest.Run("", append([]string{"import"}, args...)...)
	if res.Code != cli.ExitOK {
		t.Fatalf("import %v exited %d: %s", args, res.Code, res.Stderr)
	}
	path := filepath.Join(t.TempDir(), "skills.yaml")
	if err := os.WriteFile(path, []byte(res.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// export runs export and fails the test unless it succeeds.
func export(t *testing.T, args ...string) clitest.Result {
	t.Helper()
	res := clitest.Run("", append([]string{"export"}, args...)...)
	if res.Code != cli.ExitOK {
		t.Fatalf("export %v exited %d: %s", args, res.Code, res.Stderr)
	}
	return res
}

func TestExportOneSkill(t *testing.T) {
	src := goodSkill(t, t.TempDir(), "round-trip")
	// Modes other than 0644 and 0755 keep their executable bit.
	clitest.WriteFolder(t, src, map[string]string{
		"SKILL.md":          "---\r\nname: round-trip\r\ndescription: CRLF front matter\r\nx-vendor: {a: [1, 2]}\r\n---\r\nBody\r\nwith CRLF\r\n",
		"bin/tool*":         "\x7fELF\x02\x01\x01\x00",
		"empty.txt":         "",
		"tabs.mk":           "all:\n\techo ok\n",
		".hidden/config":    "hidden = true\n",
		"trailing-space.md": "line with trailing space \n",
	})
	if err := os.Chmod(filepath.Join(src, "bin", "tool"), 0o750); err != nil {
		t.Fatal(err)
	}
	manifest := importTo(t, src, "-n", "ns", "--label", "a=b")
	out := filepath.Join(t.TempDir(), "round-trip")
	res := export(t, manifest, "-o", out)
	clitest.CompareFolders(t, src, out)
	if want := "skill round-trip exported to " + out + " (SKILL.md and 9 files)\n"; res.Stdout != want {
		t.Errorf("stdout %q, want %q", res.Stdout, want)
	}

	// The folder written is valid and imports to the same manifest.
	again := importTo(t, out, "-n", "ns", "--label", "a=b")
	first, _ := os.ReadFile(manifest)
	second, _ := os.ReadFile(again)
	if string(first) != string(second) {
		t.Errorf("importing the exported folder gives another manifest")
	}
}

func TestExportSeveralSkills(t *testing.T) {
	repo := t.TempDir()
	goodSkill(t, filepath.Join(repo, "x"), "first")
	goodSkill(t, filepath.Join(repo, "y"), "second")
	manifest := importTo(t, "-R", repo)
	out := t.TempDir()
	res := export(t, manifest, "-o", out)
	clitest.CompareFolders(t, filepath.Join(repo, "x", "first"), filepath.Join(out, "first"))
	clitest.CompareFolders(t, filepath.Join(repo, "y", "second"), filepath.Join(out, "second"))
	if strings.Count(res.Stdout, "exported to") != 2 {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestExportRefusals(t *testing.T) {
	src := goodSkill(t, t.TempDir(), "refused")
	manifest := importTo(t, src)
	full := clitest.WriteFolder(t, t.TempDir(), map[string]string{"keep.txt": "mine\n"})
	noSkill := clitest.WriteFolder(t, t.TempDir(), map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"})
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no output folder", []string{manifest}, `required flag(s) "output-dir" not set`},
		{"two sources", []string{manifest, manifest, "-o", t.TempDir()}, "accepts 1 arg(s), received 2"},
		{"missing file", []string{"./nope.yaml", "-o", t.TempDir()}, "failed to read manifest ./nope.yaml: no such file"},
		{"a folder", []string{src, "-o", t.TempDir()}, "it is a folder; export reads a Skill NAME or a manifest FILE"},
		{"not a name", []string{"Bad_Name", "-o", t.TempDir()}, `failed to export "Bad_Name": it is neither an existing file nor a Skill name`},
		{"no skill in file", []string{filepath.Join(noSkill, "cm.yaml"), "-o", t.TempDir()}, "the file holds no Skill"},
		{"folder not empty", []string{manifest, "-o", full}, "the folder " + full + " is not empty (export into a new or empty folder, or add --force)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := clitest.Run("", append([]string{"export"}, tc.args...)...)
			if res.Code != cli.ExitFailed || !strings.Contains(res.Stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %q", res.Code, res.Stderr, tc.want)
			}
		})
	}
	if data, _ := os.ReadFile(filepath.Join(full, "keep.txt")); string(data) != "mine\n" {
		t.Errorf("a refused export touched the folder")
	}

	res := export(t, manifest, "-o", full, "--force")
	if !strings.Contains(res.Stderr, full+": warning: 1 file the skill does not hold, left in place: keep.txt") {
		t.Errorf("--force: stderr %q", res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(full, "SKILL.md")); err != nil {
		t.Errorf("--force did not write SKILL.md: %v", err)
	}
}

// handWritten holds two Skills written by hand: no front matter, an
// invocation mode, a bundle.
const handWritten = `apiVersion: kubeskills.io/v1alpha1
kind: Skill
metadata:
  name: by-hand
spec:
  description: Written by hand.
  instructions: "# By hand\n"
  invocation: Disabled
  allowedTools: [Read, "Bash(kubectl get:*)"]
  metadata: {owner: me}
  files:
    - path: scripts/run.sh
      content: "#!/bin/sh\necho hi\n"
      executable: true
---
apiVersion: kubeskills.io/v1alpha1
kind: Skill
metadata:
  name: bundled
spec:
  description: Files in an image.
  instructions: "# Bundled\n"
  bundle:
    image: registry.example.com/skills/bundled:v1
`

// TestExportHandWritten exports manifests written by hand: no front matter
// (it is generated), invocation modes, bundles, bad content.
func TestExportHandWritten(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "skills.yaml")
	if err := os.WriteFile(manifest, []byte(handWritten), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res := export(t, manifest, "-o", out)
	for _, want := range []string{
		manifest + "#1: warning: spec.invocation: Disabled is not written to SKILL.md",
		manifest + "#2: warning: spec.bundle.image: the bundled files are in the image registry.example.com/skills/bundled:v1; only SKILL.md is written",
	} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr %q lacks %q", res.Stderr, want)
		}
	}
	skillMD, err := os.ReadFile(filepath.Join(out, "by-hand", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "---\nname: by-hand\ndescription: Written by hand.\nallowed-tools: Read Bash(kubectl get:*)\nmetadata:\n  owner: me\n---\n# By hand\n"
	if string(skillMD) != want {
		t.Errorf("generated SKILL.md:\n%s\nwant:\n%s", skillMD, want)
	}
	if info, err := os.Stat(filepath.Join(out, "by-hand", "scripts", "run.sh")); err != nil || info.Mode()&0o111 == 0 {
		t.Errorf("scripts/run.sh is not executable: %v", err)
	}
	if res := clitest.Run("", "validate", filepath.Join(out, "by-hand"), filepath.Join(out, "bundled")); res.Code != cli.ExitOK {
		t.Errorf("exported folders do not validate: %s", res.Stdout)
	}
}

// TestExportRefusesBadContent refuses, before anything is written, a file
// with both contents and a path that leaves the folder.
func TestExportRefusesBadContent(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "skills.yaml")
	bad := strings.NewReplacer(
		"      executable: true\n", "      executable: true\n      binaryContent: AAEC\n",
		"bundle:\n    image: registry.example.com/skills/bundled:v1", "files:\n    - path: ../escape.txt\n      content: x",
	).Replace(handWritten)
	if err := os.WriteFile(manifest, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "new")
	res := clitest.Run("", "export", manifest, "-o", out)
	for _, want := range []string{
		manifest + "#1: spec.files[0]: both content and binaryContent are set",
		manifest + `#2: spec.files[0].path: "../escape.txt" has a '..' segment that leaves the skill folder`,
	} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr %q lacks %q", res.Stderr, want)
		}
	}
	if _, err := os.Stat(out); res.Code != cli.ExitFailed || !os.IsNotExist(err) {
		t.Errorf("exit %d; the folder was written: %v", res.Code, err)
	}
}

func TestExportList(t *testing.T) {
	src := goodSkill(t, t.TempDir(), "listed")
	manifest := importTo(t, src)
	data, _ := os.ReadFile(manifest)
	indented := "  " + strings.ReplaceAll(strings.TrimSuffix(string(data), "\n"), "\n", "\n  ")
	list := "apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n- " + strings.TrimPrefix(indented, "  ") + "\n"
	path := filepath.Join(t.TempDir(), "list.yaml")
	if err := os.WriteFile(path, []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "listed")
	export(t, path, "-o", out)
	clitest.CompareFolders(t, src, out)
}

// TestExportFolderNames refuses Skills of one file that would be written to
// the same folder, or outside DIR.
func TestExportFolderNames(t *testing.T) {
	const doc = "apiVersion: kubeskills.io/v1alpha1\nkind: Skill\nmetadata:\n  name: NAME\nspec:\n  description: d\n  instructions: b\n"
	stream := strings.Join([]string{
		strings.Replace(doc, "NAME", "twice", 1),
		strings.Replace(doc, "NAME", "twice", 1),
		strings.Replace(doc, "NAME", "../escape", 1),
	}, "---\n")
	manifest := filepath.Join(t.TempDir(), "skills.yaml")
	if err := os.WriteFile(manifest, []byte(stream), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	res := clitest.Run("", "export", manifest, "-o", out)
	for _, want := range []string{
		manifest + `#2: metadata.name: the skill "twice" is also in ` + manifest + `#1; both would be written to ` + filepath.Join(out, "twice"),
		manifest + `#3: metadata.name: "../escape" is not a valid skill name`,
		"the name is also the folder's name",
	} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr %q lacks %q", res.Stderr, want)
		}
	}
	if entries, _ := os.ReadDir(parent); res.Code != cli.ExitFailed || len(entries) != 0 {
		t.Errorf("exit %d; wrote %d entries", res.Code, len(entries))
	}
}
