package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeStaticELF writes an ELF executable for this machine without an
// interpreter (what a static binary is to the image build), followed by
// payload.
func writeStaticELF(t *testing.T, p, payload string) {
	t.Helper()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Ehsize: 64, Phentsize: 56, Shentsize: 64,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var b bytes.Buffer
	if err := binary.Write(&b, binary.LittleEndian, hdr); err != nil {
		t.Fatal(err)
	}
	b.WriteString(payload)
	if err := os.WriteFile(p, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
}

// dummies returns inputs with a static dummy of each binary the images
// take, the host's busybox (Debian's busybox-static: the build runs it to
// list its applets) and a dummy CA bundle.
func dummies(t *testing.T) inputs {
	t.Helper()
	bin, tools := t.TempDir(), t.TempDir()
	for _, b := range append(slices.Clone(kubeskillsBinaries), "modelserver", "pause") {
		writeStaticELF(t, filepath.Join(bin, b), "binary "+b+"\n")
	}
	in := inputs{
		bin: bin, busybox: "/bin/busybox", libDirs: systemLibDirs(), caCerts: filepath.Join(tools, "ca.crt"),
		bash: filepath.Join(tools, "bash"), curl: filepath.Join(tools, "curl"), kubectl: filepath.Join(tools, "kubectl"),
		jq: filepath.Join(tools, "gojq"), coredns: filepath.Join(tools, "coredns"),
	}
	for _, p := range []string{in.bash, in.curl, in.kubectl, in.jq, in.coredns} {
		writeStaticELF(t, p, "binary "+filepath.Base(p)+"\n")
	}
	if err := os.WriteFile(in.caCerts, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return in
}

func buildAll(t *testing.T, in inputs, out string) map[string]result {
	t.Helper()
	images, err := specs(in)
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
	in := dummies(t)
	out := t.TempDir()
	results := buildAll(t, in, out)

	for _, c := range []struct {
		ref, file, user string
		entrypoint      []string
		binaries        map[string]string
	}{
		{KubeskillsImage, "kubeskills.tar", "65532:65532", []string{"/usr/local/bin/manager"}, map[string]string{
			"/usr/local/bin/manager": "manager", "/usr/local/bin/agent": "agent",
			"/usr/local/bin/runner": "runner", "/usr/local/bin/kubectl-skills": "kubectl-skills",
		}},
		{ToolboxImage, "toolbox.tar", "65532:65532", nil, map[string]string{
			"/bin/bash": "bash", "/bin/curl": "curl", "/bin/jq": "gojq", "/bin/kubectl": "kubectl",
		}},
		{PauseImage, "pause.tar", "65535:65535", []string{"/pause"}, map[string]string{"/pause": "pause"}},
		{ModelServerImage, "modelserver.tar", "65532:65532", []string{"/usr/local/bin/modelserver"}, map[string]string{
			"/usr/local/bin/modelserver": "modelserver",
		}},
		{CoreDNSImage, "coredns.tar", "65532:65532", []string{"/usr/local/bin/coredns"}, map[string]string{
			"/usr/local/bin/coredns": "coredns",
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
				if !ok || !strings.HasSuffix(f.data, "\x00binary "+b+"\n") || f.hdr.Mode != 0o755 || f.hdr.Uid != 0 {
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
	busybox, err := os.ReadFile(in.busybox)
	if err != nil {
		t.Fatal(err)
	}
	if f := files["/bin/busybox"]; f.hdr == nil || f.hdr.Typeflag != tar.TypeReg || f.hdr.Mode != 0o755 || f.data != string(busybox) {
		t.Errorf("/bin/busybox: %+v", f.hdr)
	}
	// The busybox applets, but not those the toolbox has programs for.
	for _, applet := range []string{"sh", "wget", "cat", "[", "[["} {
		if f := files["/bin/"+applet]; f.hdr == nil || f.hdr.Typeflag != tar.TypeSymlink || f.hdr.Linkname != "busybox" {
			t.Errorf("/bin/%s: %+v", applet, f.hdr)
		}
	}
	for _, p := range []string{"/bin/bash", "/bin/curl", "/bin/jq", "/bin/kubectl"} {
		if f := files[p]; f.hdr == nil || f.hdr.Typeflag != tar.TypeReg {
			t.Errorf("%s: %+v", p, f.hdr)
		}
	}
	if f := files[caBundle]; f.hdr == nil || f.hdr.Mode != 0o644 || f.data != "-----BEGIN CERTIFICATE-----\n" {
		t.Errorf("%s: %+v", caBundle, f)
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
	in := dummies(t)
	first, second := t.TempDir(), t.TempDir()
	a := buildAll(t, in, first)
	b := buildAll(t, in, second)
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

	for ref, res := range buildAll(t, in, first) {
		if res.written || res.id != a[ref].id {
			t.Errorf("%s: rebuilt with nothing changed: %+v", ref, res)
		}
	}

	writeStaticELF(t, filepath.Join(in.bin, "runner"), "binary runner v2\n")
	for ref, res := range buildAll(t, in, first) {
		if changed := ref == KubeskillsImage; res.written != changed || (res.id != a[ref].id) != changed {
			t.Errorf("%s after the runner changed: %+v", ref, res)
		}
	}
	_, _, files := load(t, filepath.Join(first, "kubeskills.tar"), KubeskillsImage)
	if got := files["/usr/local/bin/runner"].data; !strings.HasSuffix(got, "\x00binary runner v2\n") {
		t.Fatalf("runner = %q", got)
	}
}

// TestMissingBinary: a missing binary fails the build and names the file.
func TestMissingBinary(t *testing.T) {
	in := dummies(t)
	if err := os.Remove(filepath.Join(in.bin, "agent")); err != nil {
		t.Fatal(err)
	}
	if _, err := specs(in); err == nil || !strings.Contains(err.Error(), "/usr/local/bin/agent") {
		t.Fatalf("err = %v", err)
	}
}
