package runner

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readTree returns every file and folder under dir, by slash path, with
// its mode and content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		entry := info.Mode().String()
		if info.Mode().IsRegular() {
			content, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			entry += " " + string(content)
		}
		tree[filepath.ToSlash(rel)] = entry
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// makeWritableAtCleanup lets the test's temporary folder be removed when
// WriteFolder made folders under it read-only and the tests do not run as
// root.
func makeWritableAtCleanup(t *testing.T, dir string) {
	t.Cleanup(func() {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
	})
}

func TestWriteFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skill")
	makeWritableAtCleanup(t, filepath.Dir(dir))
	files := []FolderFile{
		{Path: "SKILL.md", Content: []byte("---\nname: x\n---\nbody\n")},
		{Path: "scripts/run.sh", Content: []byte("#!/bin/sh\necho hi\n"), Executable: true},
		{Path: "scripts/lib/util.sh", Content: []byte("util\n")},
		{Path: "references/a.md", Content: nil},
	}
	if err := WriteFolder(dir, files); err != nil {
		t.Fatalf("WriteFolder() error = %v", err)
	}
	want := map[string]string{
		".":                   "dr-xr-xr-x",
		"SKILL.md":            "-r--r--r-- ---\nname: x\n---\nbody\n",
		"references":          "dr-xr-xr-x",
		"references/a.md":     "-r--r--r-- ",
		"scripts":             "dr-xr-xr-x",
		"scripts/lib":         "dr-xr-xr-x",
		"scripts/lib/util.sh": "-r--r--r-- util\n",
		"scripts/run.sh":      "-r-xr-xr-x #!/bin/sh\necho hi\n",
	}
	got := readTree(t, dir)
	if len(got) != len(want) {
		t.Errorf("tree = %q, want %q", got, want)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s = %q, want %q", p, got[p], w)
		}
	}
}

func TestWriteFolderKeepsAnExistingFolderMode(t *testing.T) {
	dir := t.TempDir()
	makeWritableAtCleanup(t, dir)
	if err := os.Chmod(dir, 0o775); err != nil {
		t.Fatal(err)
	}
	if err := WriteFolder(dir, []FolderFile{{Path: "a", Content: []byte("a")}}); err != nil {
		t.Fatalf("WriteFolder() error = %v", err)
	}
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o775 {
		t.Errorf("mode of the existing folder = %v, %v; want 0775 kept", info.Mode(), err)
	}
}

func TestWriteFolderRefuses(t *testing.T) {
	cases := []struct {
		name    string
		files   []FolderFile
		prepare func(t *testing.T, dir string)
		errHas  string
	}{
		{name: "parent segment", files: []FolderFile{{Path: "../escape"}}, errHas: "not a relative path"},
		{name: "inner parent segment", files: []FolderFile{{Path: "a/../../escape"}}, errHas: "not a relative path"},
		{name: "absolute", files: []FolderFile{{Path: "/etc/passwd"}}, errHas: "not a relative path"},
		{name: "dot", files: []FolderFile{{Path: "."}}, errHas: "not a relative path"},
		{name: "empty", files: []FolderFile{{Path: ""}}, errHas: "not a relative path"},
		{name: "trailing slash", files: []FolderFile{{Path: "a/"}}, errHas: "not a relative path"},
		{name: "twice", files: []FolderFile{{Path: "a"}, {Path: "a"}}, errHas: "twice"},
		{name: "file is a folder of another", files: []FolderFile{{Path: "a"}, {Path: "a/b"}}, errHas: `"a" is a file`},
		{name: "folder not empty", files: []FolderFile{{Path: "a"}}, errHas: "not empty",
			prepare: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "planted"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "link planted out of the folder", files: []FolderFile{{Path: "a"}}, errHas: "not empty",
			prepare: func(t *testing.T, dir string) {
				if err := os.Symlink("/etc", filepath.Join(dir, "a")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "dir is a file", files: []FolderFile{{Path: "a"}}, errHas: "failed to read folder",
			prepare: func(t *testing.T, dir string) {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dir, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "skill")
			makeWritableAtCleanup(t, filepath.Dir(dir))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.prepare != nil {
				tc.prepare(t, dir)
			}
			before := readTree(t, filepath.Dir(dir))
			err := WriteFolder(dir, tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("WriteFolder() error = %v, want one containing %q", err, tc.errHas)
			}
			if after := readTree(t, filepath.Dir(dir)); !sameTree(before, after) {
				t.Errorf("WriteFolder() wrote before refusing: %q, was %q", after, before)
			}
		})
	}
}

func sameTree(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal([]byte(v), []byte(w)) {
			return false
		}
	}
	return true
}
