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
	for _, b := range append(slices.Concat(kubeskillsBinaries, fluxBinaries), "modelserver", "otelcol", "coredns", "pause") {
		writeStaticELF(t, filepath.Join(bin, b), "binary "+b+"\n")
	}
	in := inputs{
		bin: bin, busybox: "/bin/busybox", libDirs: systemLibDirs(), caCerts: filepath.Join(tools, "ca.crt"),
		bash: filepath.Join(tools, "bash"), curl: filepath.Join(tools, "curl"), kubectl: filepath.Join(tools, "kubectl"),
		jq: filepath.Join(tools, "gojq"),
	}
	for _, p := range []string{in.bash, in.curl, in.kubectl, in.jq} {
		writeStaticELF(t, p, "binary "+filepath.Base(p)+"\n")
	}
	if err := os.WriteFile(in.caCerts, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.skill = writeSkill(t, filepath.Join(t.TempDir(), "cost-report"))
	return in
}

// writeSkill writes a skill folder at dir: SKILL.md, a reference, a binary
// asset and a script, and returns dir.
func writeSkill(t *testing.T, dir string) string {
	t.Helper()
	for p, f := range map[string]struct {
		data string
		mode os.FileMode
	}{
		"SKILL.md":                     {"---\nname: cost-report\ndescription: Costs.\n---\nRead the prices.\n", 0o600},
		"references/pricing.md":        {"# Example prices\n", 0o664},
		"assets/legend.png":            {"\x89PNG\r\n\x1a\n\x00\x01", 0o644},
		"scripts/cost-by-namespace.sh": {"#!/usr/bin/env bash\necho costs\n", 0o744},
	} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(f.data), f.mode); err != nil {
			t.Fatal(err)
		}
		// WriteFile's mode goes through the umask.
		if err := os.Chmod(full, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
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
		{CollectorImage, "otelcol.tar", "65532:65532", []string{"/usr/local/bin/otelcol"}, map[string]string{
			"/usr/local/bin/otelcol": "otelcol",
		}},
		{FluxImage, "flux.tar", "65532:65532", nil, map[string]string{
			"/usr/local/bin/source-controller": "source-controller", "/usr/local/bin/kustomize-controller": "kustomize-controller",
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

// TestSkillBundleImage: the skill image holds the skill folder's files at
// its root and nothing else, root-owned and readable by everyone, scripts
// executable, whatever the modes and owner on the host.
func TestSkillBundleImage(t *testing.T) {
	in := dummies(t)
	res := buildAll(t, in, t.TempDir())[SkillBundleImage]
	if filepath.Base(res.path) != "skill-cost-report.tar" || !res.written {
		t.Fatalf("result %+v", res)
	}
	_, cf, files := load(t, res.path, SkillBundleImage)
	want := map[string]struct {
		typ  byte
		mode int64
		data string
	}{
		"/SKILL.md":                     {tar.TypeReg, 0o644, "---\nname: cost-report\ndescription: Costs.\n---\nRead the prices.\n"},
		"/references":                   {tar.TypeDir, 0o755, ""},
		"/references/pricing.md":        {tar.TypeReg, 0o644, "# Example prices\n"},
		"/assets":                       {tar.TypeDir, 0o755, ""},
		"/assets/legend.png":            {tar.TypeReg, 0o644, "\x89PNG\r\n\x1a\n\x00\x01"},
		"/scripts":                      {tar.TypeDir, 0o755, ""},
		"/scripts/cost-by-namespace.sh": {tar.TypeReg, 0o755, "#!/usr/bin/env bash\necho costs\n"},
	}
	for p, f := range files {
		w, ok := want[p]
		if !ok {
			t.Errorf("%s is in the image but not in the skill", p)
			continue
		}
		if f.hdr.Typeflag != w.typ || f.hdr.Mode != w.mode || f.data != w.data || f.hdr.Uid != 0 || f.hdr.Gid != 0 || !f.hdr.ModTime.Equal(epoch) {
			t.Errorf("%s: %+v %q", p, f.hdr, f.data)
		}
	}
	for p := range want {
		if _, ok := files[p]; !ok {
			t.Errorf("%s is missing", p)
		}
	}
	if len(cf.Config.Entrypoint) != 0 || len(cf.Config.Cmd) != 0 || cf.OS != "linux" {
		t.Errorf("config %+v", cf)
	}
}

// TestSkillBundleRefusesWhatASkillNeverHolds: a link, git metadata or a
// folder without SKILL.md fails the build, naming the path.
func TestSkillBundleRefusesWhatASkillNeverHolds(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
		want  string
	}{
		{"a link", func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "references", "passwd")); err != nil {
				t.Fatal(err)
			}
		}, "references/passwd is not a regular file or a folder"},
		{"git metadata", func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, ".GIT"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, ".GIT is git metadata"},
		{"no SKILL.md", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "SKILL.md")); err != nil {
				t.Fatal(err)
			}
		}, "is not a skill folder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := dummies(t)
			c.spoil(t, in.skill)
			_, err := specs(in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}
