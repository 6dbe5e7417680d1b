package catalog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/skill"
)

const testBundleImage = "registry.example/skills/slides@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// writeTree writes files under dir, making folders as needed.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// symlink makes a link at dir/name pointing at target.
func symlink(t testing.TB, target, dir, name string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
		t.Fatal(err)
	}
}

// bundleFixture is a catalog holding one bundled skill, slides, whose image
// is stood in for by a folder at skillsDir/slides/bundle, beside alpha and
// the rest of newFixture.
type bundleFixture struct {
	*fixture
	bundleDir string
	files     map[string]string
}

// newBundleFixture mounts the skills of newFixture and slides, whose bundle
// holds:
//   - regular files at the top and in folders, and a SKILL.md unlike the
//     served one;
//   - a link to a file of the bundle, and links out of it (relative and
//     absolute);
//   - an empty folder and a sparse file larger than MaxBundleFileBytes.
func newBundleFixture(t testing.TB) *bundleFixture {
	t.Helper()
	f := &bundleFixture{fixture: newFixture(t)}
	slides := newSkill("slides", InvocationAuto, "# Slides\n\nRun scripts/build.sh.\n")
	f.skills["slides"] = slides
	e := mountSkill(t, f.skillsDir, slides, 0)
	// As the operator writes it: the content hash covers the image.
	e.BundleImage, e.BundlePullPolicy = testBundleImage, "IfNotPresent"
	e.ContentHash = skill.BundledHash(skill.Hash(slides), e.BundleImage, e.BundlePullPolicy)
	f.catalog.Skills = append(f.catalog.Skills, e)
	mountCatalog(t, f.catalogDir, f.catalog, 0)

	base := filepath.Dir(f.catalogDir)
	writeTree(t, base, map[string]string{"secret": "secret"})
	f.bundleDir = filepath.Join(f.skillsDir, "slides", BundleDir)
	f.files = map[string]string{
		"SKILL.md":            "---\nname: slides\ndescription: The image's copy.\n---\nIgnored.\n",
		"notes.txt":           "Top-level notes.\n",
		"fonts/Inter.ttf":     "\x00\x01\x00\x00binary font",
		"scripts/build.sh":    "#!/bin/sh\necho build\n",
		"references/guide.md": "# Guide\n",
	}
	writeTree(t, f.bundleDir, f.files)
	symlink(t, "references/guide.md", f.bundleDir, "guide-link.md")
	symlink(t, "../../../secret", f.bundleDir, "escape")
	symlink(t, filepath.Join(base, "secret"), f.bundleDir, "absolute")
	symlink(t, "..", f.bundleDir, "up")
	if err := os.MkdirAll(filepath.Join(f.bundleDir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	huge, err := os.Create(filepath.Join(f.bundleDir, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := huge.Truncate(MaxBundleFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	if err := huge.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestUseBundled(t *testing.T) {
	f := newBundleFixture(t)
	s, _ := f.open(t)
	got, err := s.Use("slides", false)
	if err != nil {
		t.Fatalf("Use() error = %v", err)
	}
	want := []string{"fonts/Inter.ttf", "guide-link.md", "huge.bin", "notes.txt", "references/guide.md", "scripts/build.sh"}
	if !slices.Equal(got.Files, want) || got.FilesTruncated {
		t.Errorf("Use().Files = %q, truncated %t; want %q", got.Files, got.FilesTruncated, want)
	}
	if got.Instructions != f.skills["slides"].Body ||
		got.ContentHash != skill.BundledHash(skill.Hash(f.skills["slides"]), testBundleImage, "IfNotPresent") {
		t.Errorf("Use() = %+v, want the body and hash of the Skill object", got)
	}
	// The skills without a bundle are served as before.
	if alpha, err := s.Use("alpha", false); err != nil || !slices.Equal(alpha.Files, []string{"big.txt", "references/guide.md", "scripts/run.sh"}) {
		t.Errorf("Use(alpha) = %+v, %v", alpha, err)
	}
}

func TestReadFileBundled(t *testing.T) {
	f := newBundleFixture(t)
	s, _ := f.open(t)
	tests := []struct {
		name     string
		path     string
		maxBytes int
		want     string
		wantErr  error
		// wantMsg is a part of the error message.
		wantMsg string
	}{
		{name: "top-level file", path: "notes.txt", maxBytes: 1024, want: f.files["notes.txt"]},
		{name: "nested file", path: "scripts/build.sh", want: f.files["scripts/build.sh"]},
		{name: "binary file", path: "fonts/Inter.ttf", want: f.files["fonts/Inter.ttf"]},
		{name: "link inside the bundle", path: "guide-link.md", want: f.files["references/guide.md"]},
		{name: "SKILL.md from the Skill object", path: "SKILL.md", want: string(skill.Render(f.skills["slides"]))},
		{name: "exactly the limit", path: "notes.txt", maxBytes: len(f.files["notes.txt"]), want: f.files["notes.txt"]},
		{name: "over the limit", path: "notes.txt", maxBytes: 4, wantErr: ErrFileTooLarge},
		{name: "over the cap without a limit", path: "huge.bin", wantErr: ErrFileTooLarge, wantMsg: "more than the 67108864 allowed"},
		{name: "over the cap with a larger limit", path: "huge.bin", maxBytes: 2 * MaxBundleFileBytes, wantErr: ErrFileTooLarge},
		{name: "traversal", path: "../0/manifest.json", wantErr: ErrInvalidPath},
		{name: "traversal inside", path: "scripts/../notes.txt", wantErr: ErrInvalidPath},
		{name: "absolute", path: "/etc/passwd", wantErr: ErrInvalidPath},
		{name: "empty", path: "", wantErr: ErrInvalidPath},
		{name: "link escaping the bundle", path: "escape", wantErr: ErrFileNotFound},
		{name: "absolute link", path: "absolute", wantErr: ErrFileNotFound},
		{name: "link to the parent", path: "up/0/manifest.json", wantErr: ErrFileNotFound},
		{name: "folder", path: "scripts", wantErr: ErrFileNotFound, wantMsg: "not a regular file"},
		{name: "empty folder", path: "empty", wantErr: ErrFileNotFound},
		{name: "missing", path: "scripts/missing.sh", wantErr: ErrFileNotFound, wantMsg: "the skill bundles fonts/Inter.ttf, guide-link.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ReadFile("slides", tt.path, tt.maxBytes)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(fmt.Sprint(err), tt.wantMsg) {
					t.Fatalf("ReadFile() error = %v, want %v saying %q", err, tt.wantErr, tt.wantMsg)
				}
				if strings.Contains(err.Error(), filepath.Dir(f.catalogDir)) {
					t.Errorf("ReadFile() error %q names a folder of the node", err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("ReadFile() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestBundleNotMounted(t *testing.T) {
	f := newBundleFixture(t)
	if err := os.RemoveAll(f.bundleDir); err != nil {
		t.Fatal(err)
	}
	s, _ := f.open(t)
	if _, err := s.Use("slides", false); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "a new pod may be rolling out") {
		t.Errorf("Use() error = %v, want ErrUnavailable", err)
	}
	if _, err := s.ReadFile("slides", "notes.txt", 0); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ReadFile() error = %v, want ErrUnavailable", err)
	}
	// The bundle folder itself linked out of the skills folder is refused too.
	outside := filepath.Join(filepath.Dir(f.catalogDir), "outside")
	writeTree(t, outside, map[string]string{"notes.txt": "outside"})
	symlink(t, outside, filepath.Dir(f.bundleDir), BundleDir)
	if data, err := s.ReadFile("slides", "notes.txt", 0); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ReadFile() through a linked bundle folder = %q, %v; want ErrUnavailable", data, err)
	}
}

func TestUseBundledTruncates(t *testing.T) {
	f := newBundleFixture(t)
	many := map[string]string{}
	for i := range MaxBundleFiles {
		many[fmt.Sprintf("assets/%04d.txt", i)] = "x"
	}
	writeTree(t, f.bundleDir, many)
	s, _ := f.open(t)
	got, err := s.Use("slides", false)
	if err != nil {
		t.Fatalf("Use() error = %v", err)
	}
	if len(got.Files) != MaxBundleFiles || !got.FilesTruncated || !slices.IsSorted(got.Files) {
		t.Errorf("Use() listed %d files, truncated %t; want %d, true, sorted", len(got.Files), got.FilesTruncated, MaxBundleFiles)
	}
	// Files left out of the list are still read.
	if data, err := s.ReadFile("slides", "scripts/build.sh", 0); err != nil || string(data) != f.files["scripts/build.sh"] {
		t.Errorf("ReadFile() of a file past the list = %q, %v", data, err)
	}
	if _, err := s.ReadFile("slides", "nope", 0); err == nil || !strings.Contains(err.Error(), "and over ") {
		t.Errorf("ReadFile() of a missing file error = %v, want one saying the list is partial", err)
	}
}

func TestBundleImageChangeListsAgain(t *testing.T) {
	f := newBundleFixture(t)
	s, _ := f.open(t)
	if _, err := s.Use("slides", false); err != nil {
		t.Fatal(err)
	}
	// A new pod mounts the new image where the old one was.
	writeTree(t, f.bundleDir, map[string]string{"added.txt": "new"})
	e := &f.catalog.Skills[len(f.catalog.Skills)-1]
	e.BundleImage = "registry.example/skills/slides:v2"
	e.ContentHash = skill.BundledHash(skill.Hash(f.skills["slides"]), e.BundleImage, e.BundlePullPolicy)
	mountCatalog(t, f.catalogDir, f.catalog, 0)
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload() error = %v", err)
	}
	got, err := s.Use("slides", false)
	if err != nil || !slices.Contains(got.Files, "added.txt") {
		t.Errorf("Use() after a new image = %+v, %v; want the new image's files", got, err)
	}
}

// TestBundledHashCoversTheImage: a bundled skill is served only when the
// catalog's contentHash is that of its shards with its image and pull
// policy, as the operator writes a bundled Skill's status.contentHash; the
// shards' own hash, or one made for another image, is out of step.
func TestBundledHashCoversTheImage(t *testing.T) {
	for _, c := range []struct {
		name string
		hash func(s *skill.Skill) string
		ok   bool
	}{
		{"shards and image", func(s *skill.Skill) string { return skill.BundledHash(skill.Hash(s), testBundleImage, "IfNotPresent") }, true},
		{"shards only", skill.Hash, false},
		{"another image", func(s *skill.Skill) string {
			return skill.BundledHash(skill.Hash(s), "registry.example/skills/slides:v0", "IfNotPresent")
		}, false},
		{"another pull policy", func(s *skill.Skill) string { return skill.BundledHash(skill.Hash(s), testBundleImage, "Always") }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newBundleFixture(t)
			f.catalog.Skills[len(f.catalog.Skills)-1].ContentHash = c.hash(f.skills["slides"])
			mountCatalog(t, f.catalogDir, f.catalog, 0)
			s, _ := f.open(t)
			_, err := s.Use("slides", false)
			if c.ok && err != nil {
				t.Fatalf("Use() error = %v", err)
			}
			if !c.ok && !errors.Is(err, ErrOutOfStep) {
				t.Fatalf("Use() error = %v, want ErrOutOfStep", err)
			}
		})
	}
}

func TestBundleEntryRoundTrip(t *testing.T) {
	f := newBundleFixture(t)
	got, err := Load(f.catalogDir)
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	e := got.Skills[len(got.Skills)-1]
	if e.Name != "slides" || e.BundleImage != testBundleImage || e.BundlePullPolicy != "IfNotPresent" || !e.Bundled() {
		t.Errorf("loaded entry = %+v, want the bundle back", e)
	}
	for _, other := range got.Skills[:len(got.Skills)-1] {
		if other.Bundled() || other.BundlePullPolicy != "" {
			t.Errorf("entry %s has a bundle", other.Name)
		}
	}
	shards, err := Encode(f.catalog, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(shards[0][CatalogKey], `"bundleImage"`); n != 1 {
		t.Errorf("catalog.json holds %d bundleImage fields, want 1 (left out when empty)", n)
	}
}
