package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// dummies writes a dummy of each binary the images take, and a dummy
// busybox that lists a few applets, and returns the bin folder and the
// busybox.
func dummies(t *testing.T) (string, string) {
	t.Helper()
	bin := t.TempDir()
	for _, b := range append(slices.Clone(kubeskillsBinaries), "modelserver", "pause") {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("binary "+b+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	busybox := filepath.Join(t.TempDir(), "busybox")
	script := "#!/bin/sh\n[ \"$1\" = --list ] || exit 1\nprintf '[\\n[[\\nbusybox\\ncat\\nsh\\nwget\\n'\n"
	if err := os.WriteFile(busybox, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, busybox
}

func buildAll(t *testing.T, bin, busybox, out string) map[string]result {
	t.Helper()
	images, err := specs(bin, busybox)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]result{}
	for _, s := range images {
		res, err := s.build(out)
		if err != nil {
			t.Fatal(err)
		}
		results[s.ref] = res
	}
	return results
}

// file is one file of an image's flattened filesystem.
type file struct {
	hdr  *tar.Header
	data string
}

// load reads the tarball at p as docker would, by the image's name, and
// returns its config and files.
func load(t *testing.T, p, ref string) (v1.Image, *v1.ConfigFile, map[string]file) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(p, &tag)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]file{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(hdr.Name, "/")] = file{hdr: hdr, data: string(data)}
	}
	return img, cf, files
}

func TestImages(t *testing.T) {
	bin, busybox := dummies(t)
	out := t.TempDir()
	results := buildAll(t, bin, busybox, out)

	for _, c := range []struct {
		ref, file, user string
		entrypoint      []string
		binaries        map[string]string
	}{
		{KubeskillsImage, "kubeskills.tar", "65532:65532", []string{"/usr/local/bin/manager"}, map[string]string{
			"/usr/local/bin/manager": "manager", "/usr/local/bin/agent": "agent",
			"/usr/local/bin/runner": "runner", "/usr/local/bin/kubectl-skills": "kubectl-skills",
		}},
		{ToolboxImage, "toolbox.tar", "65532:65532", nil, map[string]string{}},
		{PauseImage, "pause.tar", "65535:65535", []string{"/pause"}, map[string]string{"/pause": "pause"}},
		{ModelServerImage, "modelserver.tar", "65532:65532", []string{"/usr/local/bin/modelserver"}, map[string]string{
			"/usr/local/bin/modelserver": "modelserver",
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			res := results[c.ref]
			if res.path != filepath.Join(out, c.file) || !res.written {
				t.Fatalf("result %+v", res)
			}
			img, cf, files := load(t, res.path, c.ref)
			if id, _ := img.ConfigName(); id != res.id {
				t.Fatalf("image ID %v, build said %v", id, res.id)
			}
			if cf.OS != "linux" || cf.Config.User != c.user || !slices.Equal(cf.Config.Entrypoint, c.entrypoint) || !cf.Created.Equal(epoch) {
				t.Fatalf("config %+v", cf)
			}
			for p, b := range c.binaries {
				f, ok := files[p]
				if !ok || f.data != "binary "+b+"\n" || f.hdr.Mode != 0o755 || f.hdr.Uid != 0 {
					t.Errorf("%s: %+v", p, f)
				}
			}
			if f := files["/etc/passwd"]; !strings.Contains(f.data, "\nnonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd: %q", f.data)
			}
			if f := files["/etc/group"]; !strings.Contains(f.data, "\nnonroot:x:65532:\n") {
				t.Errorf("/etc/group: %q", f.data)
			}
			if f := files["/tmp"]; f.hdr == nil || f.hdr.Typeflag != tar.TypeDir || f.hdr.Mode != 0o1777 {
				t.Errorf("/tmp: %+v", f.hdr)
			}
			if f := files["/home/nonroot"]; f.hdr == nil || f.hdr.Uid != 65532 || f.hdr.Gid != 65532 {
				t.Errorf("/home/nonroot: %+v", f.hdr)
			}
			for p, f := range files {
				if !f.hdr.ModTime.Equal(epoch) {
					t.Errorf("%s: time %v", p, f.hdr.ModTime)
				}
			}
		})
	}

	_, cf, files := load(t, results[ToolboxImage].path, ToolboxImage)
	if f := files["/bin/busybox"]; f.hdr == nil || f.hdr.Typeflag != tar.TypeReg || f.hdr.Mode != 0o755 || !strings.HasPrefix(f.data, "#!/bin/sh") {
		t.Errorf("/bin/busybox: %+v", f.hdr)
	}
	for _, applet := range []string{"sh", "wget", "cat", "[", "[["} {
		if f := files["/bin/"+applet]; f.hdr == nil || f.hdr.Typeflag != tar.TypeSymlink || f.hdr.Linkname != "busybox" {
			t.Errorf("/bin/%s: %+v", applet, f.hdr)
		}
	}
	if f := files["/usr/bin"]; f.hdr == nil || f.hdr.Typeflag != tar.TypeSymlink || f.hdr.Linkname != "../bin" {
		t.Errorf("/usr/bin: %+v", f.hdr)
	}
	if !slices.Equal(cf.Config.Cmd, []string{"/bin/sh"}) || !slices.Contains(cf.Config.Env, envPath) {
		t.Errorf("toolbox config %+v", cf.Config)
	}
}

// TestImagesAreReproducible: the same inputs make the same tarballs, byte
// for byte; a tarball holding its image is left alone, and only the images
// of a changed binary are written again.
func TestImagesAreReproducible(t *testing.T) {
	bin, busybox := dummies(t)
	first, second := t.TempDir(), t.TempDir()
	a := buildAll(t, bin, busybox, first)
	b := buildAll(t, bin, busybox, second)
	for ref, res := range a {
		x, err := os.ReadFile(res.path)
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(b[ref].path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) || res.id != b[ref].id {
			t.Errorf("%s differs between two builds", ref)
		}
	}

	for ref, res := range buildAll(t, bin, busybox, first) {
		if res.written || res.id != a[ref].id {
			t.Errorf("%s: rebuilt with nothing changed: %+v", ref, res)
		}
	}

	if err := os.WriteFile(filepath.Join(bin, "runner"), []byte("binary runner v2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for ref, res := range buildAll(t, bin, busybox, first) {
		if changed := ref == KubeskillsImage; res.written != changed || (res.id != a[ref].id) != changed {
			t.Errorf("%s after the runner changed: %+v", ref, res)
		}
	}
	_, _, files := load(t, filepath.Join(first, "kubeskills.tar"), KubeskillsImage)
	if got := files["/usr/local/bin/runner"].data; got != "binary runner v2\n" {
		t.Fatalf("runner = %q", got)
	}
}

// TestMissingBinary: a missing binary fails the build and names the file.
func TestMissingBinary(t *testing.T) {
	bin, busybox := dummies(t)
	if err := os.Remove(filepath.Join(bin, "agent")); err != nil {
		t.Fatal(err)
	}
	images, err := specs(bin, busybox)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := images[0].build(out); err == nil || !strings.Contains(err.Error(), "/usr/local/bin/agent") {
		t.Fatalf("err = %v", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Fatalf("left %v behind", entries)
	}
}
