package runner

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestCopyExecutable(t *testing.T) {
	dir := t.TempDir()
	src := writeFile(t, dir, "tool", "#!/bin/sh\necho installed \"$@\"\n", 0o700)
	cases := []struct {
		name string
		dst  string
	}{
		{name: "into a new directory", dst: filepath.Join(dir, "shared", "bin", "runner")},
		{name: "over an existing read-only file", dst: writeFile(t, dir, "old", "old", 0o444)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := CopyExecutable(src, tc.dst); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(tc.dst)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != InstalledMode {
				t.Errorf("mode = %v, want %v", fi.Mode().Perm(), InstalledMode)
			}
			out, err := exec.Command(tc.dst, "ok").Output()
			if err != nil || string(out) != "installed ok\n" {
				t.Errorf("running the copy: %q, %v", out, err)
			}
			leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(tc.dst), ".*"))
			if len(leftovers) != 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
		})
	}
}

func TestCopyExecutableErrors(t *testing.T) {
	dir := t.TempDir()
	src := writeFile(t, dir, "tool", "x", 0o700)
	notDir := writeFile(t, dir, "file", "x", 0o600)
	if err := CopyExecutable(filepath.Join(dir, "missing"), filepath.Join(dir, "dst")); err == nil {
		t.Error("copied a missing source")
	}
	if err := CopyExecutable(src, filepath.Join(notDir, "dst")); err == nil {
		t.Error("copied under a regular file")
	}
}

func TestInstallCopiesOwnExecutable(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "bin", "runner")
	if err := Install(dst); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("installed copy differs from %s", self)
	}
}
