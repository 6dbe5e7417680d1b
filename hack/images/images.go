package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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
	// ToolboxImage is the sandbox image commands run in: busybox.
	ToolboxImage = "docker.io/kubeskills/toolbox:dev"
	// PauseImage is containerd's sandbox (pause) image.
	PauseImage = "docker.io/kubeskills/pause:dev"
	// ModelServerImage serves a scripted OpenAI-compatible model.
	ModelServerImage = "docker.io/kubeskills/modelserver:dev"
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

const envPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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

// specs returns the images made from the binaries in binDir (manager,
// agent, runner, kubectl-skills, modelserver, pause) and the busybox binary.
func specs(binDir, busybox string) ([]spec, error) {
	base := baseLayer()
	bins := newLayer()
	for _, b := range kubeskillsBinaries {
		bins.copy("usr/local/bin/"+b, 0o755, filepath.Join(binDir, b))
	}
	box, err := busyboxLayer(busybox)
	if err != nil {
		return nil, err
	}
	pause := newLayer()
	pause.copy("pause", 0o755, filepath.Join(binDir, "pause"))
	model := newLayer()
	model.copy("usr/local/bin/modelserver", 0o755, filepath.Join(binDir, "modelserver"))

	user := fmt.Sprintf("%d:%d", nonroot, nonroot)
	return []spec{
		{
			file: "kubeskills.tar", ref: KubeskillsImage,
			layers: []*layer{base, bins}, history: []string{"base", "kubeskills binaries"},
			config: v1.Config{User: user, Entrypoint: []string{"/usr/local/bin/manager"}, Env: []string{envPath}, WorkingDir: "/home/nonroot"},
		},
		{
			file: "toolbox.tar", ref: ToolboxImage,
			layers: []*layer{base, box}, history: []string{"base", "busybox"},
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
	}, nil
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

// busyboxLayer holds busybox at /bin/busybox and a symlink in /bin for each
// applet it lists; /usr/bin links to /bin, so scripts starting with
// "#!/usr/bin/env sh" run.
func busyboxLayer(busybox string) (*layer, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(exit.Stderr))
		}
		return nil, fmt.Errorf("failed to list the applets of %s: %w", busybox, err)
	}
	l := newLayer()
	l.copy("bin/busybox", 0o755, busybox)
	applets := 0
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || strings.Contains(a, "/") {
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
