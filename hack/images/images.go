package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The images, by the name pods use. Names are fully normalized, as
// containerd stores them, so pods with imagePullPolicy Never or IfNotPresent
// find them.
const (
	// KubeskillsImage holds every kubeskills binary, like the Dockerfile's
	// image.
	KubeskillsImage = "docker.io/kubeskills/kubeskills:dev"
	// ToolboxImage is the sandbox image commands run in: busybox, bash,
	// curl, jq and kubectl.
	ToolboxImage = "docker.io/kubeskills/toolbox:dev"
	// PauseImage is containerd's sandbox (pause) image.
	PauseImage = "docker.io/kubeskills/pause:dev"
	// ModelServerImage serves a scripted OpenAI-compatible model.
	ModelServerImage = "docker.io/kubeskills/modelserver:dev"
	// CoreDNSImage is the local cluster's DNS.
	CoreDNSImage = "docker.io/kubeskills/coredns:dev"
	// CollectorImage is the OpenTelemetry Collector the end-to-end tests
	// send traces to (hack/otelcol): an OTLP receiver and a file exporter.
	CollectorImage = "docker.io/kubeskills/otelcol:dev"
	// FluxImage holds Flux's source-controller and kustomize-controller
	// (hack/flux), which sync a skill repository in the end-to-end tests;
	// each Deployment names the one it runs.
	FluxImage = "docker.io/kubeskills/flux:dev"
	// SkillBundleImage serves a skill's files from an image (a Skill's
	// spec.bundle.image): the files of the sample skill cost-report at its
	// root, as `FROM scratch` and `COPY . /` in the skill folder make it.
	SkillBundleImage = "docker.io/kubeskills/skill-cost-report:dev"
)

// Users of the images.
const (
	// nonroot is the user and group of every image but pause, the
	// "nonroot" user of distroless images.
	nonroot = 65532
	// pauseUser is the user of the pause image, as upstream's.
	pauseUser = "65535:65535"
)

// kubeskillsBinaries are the binaries of the kubeskills image, in
// /usr/local/bin.
var kubeskillsBinaries = []string{"manager", "agent", "runner", "kubectl-skills"}

// fluxBinaries are the binaries of the Flux image, in /usr/local/bin.
var fluxBinaries = []string{"source-controller", "kustomize-controller"}

const envPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// caBundle is where Debian's ca-certificates keeps the bundle, and where
// curl (Debian's and most others) and Go's crypto/x509 look for it.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// staticAdvice is what to do about a kubeskills binary that cannot go into
// an image.
const staticAdvice = "build it static, with CGO_ENABLED=0, as hack/images/build.sh does"

// inputs are the host files the images are made from.
type inputs struct {
	// bin holds the static binaries manager, agent, runner,
	// kubectl-skills, modelserver, otelcol, coredns, source-controller,
	// kustomize-controller and pause.
	bin string
	// busybox gives the toolbox its small tools and /bin/sh.
	busybox string
	// The toolbox's other programs. bash and curl are Debian's and come
	// with their shared libraries: curl needs glibc, OpenSSL and a dozen
	// more libraries in any Debian build (there is no static curl
	// package), and a bash-static beside them would save nothing but
	// libtinfo while being a second libc to keep patched. kubectl and jq
	// (gojq) are static Go builds.
	bash, curl, kubectl, jq string
	// skill is the skill folder whose files SkillBundleImage holds.
	skill string
	// caCerts is the host's CA bundle (Debian's ca-certificates).
	caCerts string
	// libDirs are the host folders shared libraries are taken from.
	libDirs []string
}

// spec is one image and the file it is written to.
type spec struct {
	// file is the tarball's name in the output folder.
	file string
	// ref is the image's name.
	ref string
	// layers are the image's layers, bottom first.
	layers []*layer
	// history describes each layer.
	history []string
	// config is the image's runtime config.
	config v1.Config
}

// specs returns the images made from in. Every binary is checked first
// (see runtimeFiles): specs fails, saying what to install, rather than
// describe an image that cannot run.
func specs(in inputs) ([]spec, error) {
	base := baseLayer()
	bins, flux := newLayer(), newLayer()
	for _, set := range []struct {
		l    *layer
		bins []string
	}{{bins, kubeskillsBinaries}, {flux, fluxBinaries}} {
		for _, b := range set.bins {
			if err := set.l.addPrograms(in.libDirs, program{"usr/local/bin/" + b, filepath.Join(in.bin, b), staticAdvice}); err != nil {
				return nil, err
			}
		}
	}
	box, tools, err := toolboxLayers(in)
	if err != nil {
		return nil, err
	}
	pause, model, dns, collector := newLayer(), newLayer(), newLayer(), newLayer()
	for _, c := range []struct {
		l *layer
		p program
	}{
		{pause, program{"pause", filepath.Join(in.bin, "pause"), staticAdvice}},
		{model, program{"usr/local/bin/modelserver", filepath.Join(in.bin, "modelserver"), staticAdvice}},
		{dns, program{"usr/local/bin/coredns", filepath.Join(in.bin, "coredns"), staticAdvice}},
		{collector, program{"usr/local/bin/otelcol", filepath.Join(in.bin, "otelcol"), staticAdvice}},
	} {
		if err := c.l.addPrograms(in.libDirs, c.p); err != nil {
			return nil, err
		}
	}

	bundle, err := skillLayer(in.skill)
	if err != nil {
		return nil, err
	}

	user := fmt.Sprintf("%d:%d", nonroot, nonroot)
	return []spec{
		{
			file: "kubeskills.tar", ref: KubeskillsImage,
			layers: []*layer{base, bins}, history: []string{"base", "kubeskills binaries"},
			config: v1.Config{User: user, Entrypoint: []string{"/usr/local/bin/manager"}, Env: []string{envPath}, WorkingDir: "/home/nonroot"},
		},
		{
			file: "toolbox.tar", ref: ToolboxImage,
			layers: []*layer{base, box, tools}, history: []string{"base", "busybox", "bash curl jq kubectl, CA certificates"},
			config: v1.Config{User: user, Cmd: []string{"/bin/sh"}, Env: []string{envPath}, WorkingDir: "/tmp"},
		},
		{
			file: "pause.tar", ref: PauseImage,
			layers: []*layer{base, pause}, history: []string{"base", "pause"},
			config: v1.Config{User: pauseUser, Entrypoint: []string{"/pause"}, Env: []string{envPath}, WorkingDir: "/"},
		},
		{
			file: "modelserver.tar", ref: ModelServerImage,
			layers: []*layer{base, model}, history: []string{"base", "modelserver"},
			config: v1.Config{
				User: user, Entrypoint: []string{"/usr/local/bin/modelserver"}, Env: []string{envPath}, WorkingDir: "/home/nonroot",
				ExposedPorts: map[string]struct{}{"8080/tcp": {}},
			},
		},
		{
			// The Corefile comes from a ConfigMap; CoreDNS listens on an
			// unprivileged port, so it runs as nonroot without capabilities.
			file: "coredns.tar", ref: CoreDNSImage,
			layers: []*layer{base, dns}, history: []string{"base", "coredns"},
			config: v1.Config{User: user, Entrypoint: []string{"/usr/local/bin/coredns"}, Env: []string{envPath}, WorkingDir: "/"},
		},
		{
			// The configuration comes from a ConfigMap; the collector
			// listens on unprivileged ports.
			file: "otelcol.tar", ref: CollectorImage,
			layers: []*layer{base, collector}, history: []string{"base", "otelcol"},
			config: v1.Config{User: user, Entrypoint: []string{"/usr/local/bin/otelcol"}, Env: []string{envPath}, WorkingDir: "/"},
		},
		{
			// No entrypoint: each Deployment runs one of the controllers.
			file: "flux.tar", ref: FluxImage,
			layers: []*layer{base, flux}, history: []string{"base", "Flux source-controller and kustomize-controller"},
			config: v1.Config{User: user, Env: []string{envPath}, WorkingDir: "/"},
		},
		{
			// Data only: no base, nothing to run; pods mount it as an image
			// volume.
			file: "skill-cost-report.tar", ref: SkillBundleImage,
			layers: []*layer{bundle}, history: []string{"the files of " + filepath.Base(in.skill)},
		},
	}, nil
}

// skillLayer is a layer holding the files of the skill folder dir at its
// root, root-owned and read-only for everyone: 0755 for files with an
// executable bit (scripts), 0644 for the others, 0755 for folders. The
// folder may hold only folders and regular files: a link could name a file
// outside the skill, and git metadata is never part of a skill (see
// docs/skill.md), so either fails the build.
func skillLayer(dir string) (*layer, error) {
	if dir == "" {
		return nil, errors.New("no skill folder for " + SkillBundleImage)
	}
	if _, err := os.Stat(filepath.Join(dir, "SKILL.md")); err != nil {
		return nil, fmt.Errorf("image %s: %s is not a skill folder: %w", SkillBundleImage, dir, err)
	}
	l := newLayer()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.EqualFold(d.Name(), ".git") {
			return fmt.Errorf("image %s: %s is git metadata, which a skill never holds", SkillBundleImage, p)
		}
		switch {
		case d.IsDir():
			l.dir(rel, 0o755, 0, 0)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			mode := int64(0o644)
			if fi.Mode()&0o111 != 0 {
				mode = 0o755
			}
			l.copy(rel, mode, p)
		default:
			return fmt.Errorf("image %s: %s is not a regular file or a folder", SkillBundleImage, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// toolboxLayers returns the toolbox's layers above the base: busybox, then
// bash, curl, jq, kubectl with what they need to run, and the CA bundle.
func toolboxLayers(in inputs) (*layer, *layer, error) {
	progs := []program{
		{"bin/bash", in.bash, "install Debian's bash"},
		{"bin/curl", in.curl, "install Debian's curl"},
		{"bin/jq", in.jq, "build gojq with hack/build-addons.sh gojq"},
		{"bin/kubectl", in.kubectl, "build kubectl with hack/build-k8s.sh kubectl"},
	}
	own := map[string]bool{}
	for _, p := range progs {
		own[path.Base(p.path)] = true
	}
	box, err := busyboxLayer(in.busybox, in.libDirs, own)
	if err != nil {
		return nil, nil, err
	}
	tools := newLayer()
	if err := tools.addPrograms(in.libDirs, progs...); err != nil {
		return nil, nil, err
	}
	tools.copy(strings.TrimPrefix(caBundle, "/"), 0o644, in.caCerts)
	return box, tools, nil
}

// baseLayer is the layer every image starts from: users and groups with
// "nonroot", /tmp and nonroot's home.
func baseLayer() *layer {
	l := newLayer()
	l.data("etc/passwd", 0o644, "root:x:0:0:root:/root:/sbin/nologin\n"+
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
		fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonroot, nonroot))
	l.data("etc/group", 0o644, "root:x:0:\nnobody:x:65534:\n"+fmt.Sprintf("nonroot:x:%d:\n", nonroot))
	l.data("etc/nsswitch.conf", 0o644, "passwd: files\ngroup: files\nhosts: files dns\n")
	l.dir("tmp", 0o1777, 0, 0)
	l.dir("root", 0o700, 0, 0)
	l.dir("home/nonroot", 0o700, nonroot, nonroot)
	return l
}

// busyboxLayer holds busybox at /bin/busybox (with its libraries, if it is
// dynamic) and a symlink in /bin for each applet it lists but those in
// skip; /usr/bin links to /bin, so scripts starting with
// "#!/usr/bin/env bash" run. busybox is checked before it is run to list
// its applets.
func busyboxLayer(busybox string, libDirs []string, skip map[string]bool) (*layer, error) {
	l := newLayer()
	if err := l.addPrograms(libDirs, program{"bin/busybox", busybox,
		"install busybox-static (apt-get install busybox-static), or pass a static busybox"}); err != nil {
		return nil, err
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(exit.Stderr))
		}
		return nil, fmt.Errorf("failed to list the applets of %s: %w", busybox, err)
	}
	applets := 0
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || strings.Contains(a, "/") || skip[a] {
			continue
		}
		l.symlink("bin/"+a, "busybox")
		applets++
	}
	if applets == 0 {
		return nil, fmt.Errorf("%s lists no applets", busybox)
	}
	l.symlink("usr/bin", "../bin")
	return l, nil
}

// configFile is the image's config, with the digests of its layers.
func (s spec) configFile(diffIDs []v1.Hash) *v1.ConfigFile {
	cf := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config:       s.config,
		RootFS:       v1.RootFS{Type: "layers", DiffIDs: diffIDs},
	}
	for _, h := range s.history {
		cf.History = append(cf.History, v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "kubeskills hack/images: " + h})
	}
	return cf
}

// result is what build did.
type result struct {
	// path is the tarball.
	path string
	// ref is the image's name.
	ref string
	// id is the digest of the image's config, the image ID.
	id v1.Hash
	// written is false when the tarball already held this image.
	written bool
}

// build writes the image to its tarball in outDir, unless the tarball
// already holds the same image: the image ID (the digest of its config,
// which lists the digests of the uncompressed layers) is computed first,
// without compressing anything.
func (s spec) build(outDir string) (result, error) {
	res := result{path: filepath.Join(outDir, s.file), ref: s.ref}
	tag, err := name.NewTag(s.ref, name.StrictValidation)
	if err != nil {
		return res, fmt.Errorf("failed to parse %s: %w", s.ref, err)
	}
	diffIDs := make([]v1.Hash, 0, len(s.layers))
	for _, l := range s.layers {
		if err := l.check(); err != nil {
			return res, fmt.Errorf("image %s: %w", s.ref, err)
		}
		d, err := l.diffID()
		if err != nil {
			return res, fmt.Errorf("image %s: %w", s.ref, err)
		}
		diffIDs = append(diffIDs, d)
	}
	cf := s.configFile(diffIDs)
	raw, err := json.Marshal(cf)
	if err != nil {
		return res, err
	}
	res.id, _, err = v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return res, err
	}
	if holds(res.path, res.id, s.ref) {
		return res, nil
	}

	img := empty.Image
	for _, l := range s.layers {
		vl, err := l.v1Layer()
		if err != nil {
			return res, fmt.Errorf("image %s: %w", s.ref, err)
		}
		if img, err = mutate.AppendLayers(img, vl); err != nil {
			return res, fmt.Errorf("image %s: %w", s.ref, err)
		}
	}
	// The config replaces the one AppendLayers made, so the image's config
	// is exactly the one its ID was computed from.
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return res, fmt.Errorf("image %s: %w", s.ref, err)
	}
	if id, err := img.ConfigName(); err != nil || id != res.id {
		return res, fmt.Errorf("image %s: config digest %v, want %v (%v)", s.ref, id, res.id, err)
	}
	if err := writeFile(res.path, tag, img); err != nil {
		return res, fmt.Errorf("image %s: %w", s.ref, err)
	}
	res.written = true
	return res, nil
}

// holds reports whether the tarball at p holds exactly the image id named
// ref.
func holds(p string, id v1.Hash, ref string) bool {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(p) })
	return err == nil && len(m) == 1 && m[0].Config == id.String() && slices.Equal(m[0].RepoTags, []string{ref})
}

// writeFile writes img named tag as a docker-archive tarball at p, through
// a temporary file so p is never half written.
func writeFile(p string, tag name.Tag, img v1.Image) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(tag, img, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("failed to write %s: %w", p, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to write %s: %w", p, err)
	}
	return os.Rename(tmp.Name(), p)
}
