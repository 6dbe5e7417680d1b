package main

import (
	"archive/tar"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hostBash is Debian's bash: a dynamic binary whose libraries the host has.
const hostBash = "/bin/bash"

// TestStaticBinaryGoesAlone: a static binary is copied alone, with no
// interpreter and no library.
func TestStaticBinaryGoesAlone(t *testing.T) {
	in := dummies(t)
	files, err := runtimeFiles(filepath.Join(in.bin, "pause"), in.libDirs)
	if err != nil || len(files) != 0 {
		t.Fatalf("runtimeFiles = %v, %v", files, err)
	}
	res := buildAll(t, in, t.TempDir())[PauseImage]
	_, _, got := load(t, res.path, PauseImage)
	for p, f := range got {
		if f.hdr.Typeflag == tar.TypeReg && !slices.Contains([]string{"/pause", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf"}, p) {
			t.Errorf("pause image holds %s", p)
		}
	}
}

// TestDynamicBinaryBringsItsLibraries: a dynamic binary goes into the
// image with its interpreter and every library it needs, directly or
// through another library, at the paths the loader looks them up.
func TestDynamicBinaryBringsItsLibraries(t *testing.T) {
	in := dummies(t)
	in.bash = hostBash
	f, err := elf.Open(hostBash)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	interp, err := interpreter(f)
	if err != nil || interp == "" {
		t.Fatalf("%s has no interpreter (%v): the test needs Debian's dynamic bash", hostBash, err)
	}
	direct, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}

	res := buildAll(t, in, t.TempDir())[ToolboxImage]
	_, _, files := load(t, res.path, ToolboxImage)
	want, err := os.ReadFile(hostBash)
	if err != nil {
		t.Fatal(err)
	}
	if files["/bin/bash"].data != string(want) {
		t.Fatal("/bin/bash is not the host's bash")
	}
	if f := files[interp]; f.hdr == nil || f.hdr.Typeflag != tar.TypeReg || !strings.HasPrefix(f.data, elf.ELFMAG) {
		t.Errorf("the interpreter %s is missing: %+v", interp, f.hdr)
	}
	// libc needs no library bash does not name, but it is found again
	// through libtinfo: each library is in the image once, from a folder
	// the loader searches.
	for _, lib := range append(direct, "libc.so.6") {
		found := 0
		for _, dir := range in.libDirs {
			if f, ok := files[filepath.Join(dir, lib)]; ok && strings.HasPrefix(f.data, elf.ELFMAG) {
				found++
			}
		}
		if found != 1 {
			t.Errorf("%s is in %d of the loader's folders %v", lib, found, in.libDirs)
		}
	}
}

// TestDynamicBinaryWithoutLibrariesFails: a dynamic binary whose libraries
// cannot be found fails the build with what to install, and nothing is
// written. A dynamic busybox (Debian's busybox, not busybox-static) on a
// host without its libraries is the case this guards.
func TestDynamicBinaryWithoutLibrariesFails(t *testing.T) {
	for _, c := range []struct {
		name   string
		set    func(*inputs)
		advice string
	}{
		{"bash", func(in *inputs) { in.bash = hostBash }, "install Debian's bash"},
		{"busybox", func(in *inputs) { in.busybox = hostBash }, "install busybox-static"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := dummies(t)
			c.set(&in)
			in.libDirs = []string{t.TempDir()}
			images, err := specs(in)
			if err == nil {
				t.Fatalf("specs made %d images of a binary that cannot run", len(images))
			}
			for _, want := range []string{"is dynamically linked and needs lib", in.libDirs[0], c.advice} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestNotABinaryFails: a file that is not an ELF binary (a script, a
// truncated download) fails the build.
func TestNotABinaryFails(t *testing.T) {
	in := dummies(t)
	in.jq = filepath.Join(t.TempDir(), "jq")
	if err := os.WriteFile(in.jq, []byte("#!/bin/sh\necho jq\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := specs(in)
	if err == nil || !strings.Contains(err.Error(), "failed to add /bin/jq") || !strings.Contains(err.Error(), "hack/build-addons.sh gojq") {
		t.Fatalf("err = %v", err)
	}
}
