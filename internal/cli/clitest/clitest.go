// Package clitest helps test the kubectl plugin: it runs the plugin in the
// test process, compares skill folders byte for byte, and builds folders.
package clitest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	sigsyaml "sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/checkout"
	"github.com/kubeskills/kubeskills/internal/cli"
)

// Result is what one run of the plugin printed and returned.
type Result struct {
	// Stdout and Stderr are what the plugin wrote.
	Stdout, Stderr string
	// Code is the process exit code.
	Code int
}

// Run runs the plugin with args, with stdin from in (may be empty).
func Run(in string, args ...string) Result {
	var stdout, stderr bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(in), Out: &stdout, ErrOut: &stderr}
	code := cli.Execute(args, streams)
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// SyncBuffer is a buffer a running command writes while the test reads.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// RepoRoot is the root of the kubeskills checkout.
func RepoRoot() string { return checkout.Root() }

// SamplesDir is config/samples/skills, the repository of sample skills.
func SamplesDir() string {
	return filepath.Join(RepoRoot(), "config", "samples", "skills")
}

// SampleFolders lists the folders of SamplesDir, sorted.
func SampleFolders(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(SamplesDir())
	if err != nil {
		t.Fatalf("failed to list samples: %v", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(SamplesDir(), e.Name()))
		}
	}
	return dirs
}

// fileState is what CompareFolders compares for one file.
type fileState struct {
	content    []byte
	executable bool
}

// readTree reads every regular file below dir, keyed by slash path.
func readTree(t testing.TB, dir string) map[string]fileState {
	t.Helper()
	tree := map[string]fileState{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		tree[filepath.ToSlash(rel)] = fileState{content: content, executable: info.Mode()&0o111 != 0}
		return nil
	})
	if err != nil {
		t.Fatalf("failed to read folder %s: %v", dir, err)
	}
	return tree
}

// CompareFolders fails the test unless got holds exactly the files of want,
// with the same bytes and the same executable bits.
func CompareFolders(t testing.TB, want, got string) {
	t.Helper()
	wantTree, gotTree := readTree(t, want), readTree(t, got)
	var names []string
	for name := range wantTree {
		names = append(names, name)
	}
	for name := range gotTree {
		if _, ok := wantTree[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		w, inWant := wantTree[name]
		g, inGot := gotTree[name]
		switch {
		case !inGot:
			t.Errorf("%s: missing from %s", name, got)
		case !inWant:
			t.Errorf("%s: in %s but not in %s", name, got, want)
		case !bytes.Equal(w.content, g.content):
			t.Errorf("%s: content differs (%d bytes, want %d)", name, len(g.content), len(w.content))
		case w.executable != g.executable:
			t.Errorf("%s: executable is %v, want %v", name, g.executable, w.executable)
		}
	}
}

// WriteFolder writes files (slash path → content) below dir; a path ending
// in "*" is written without the star and made executable.
func WriteFolder(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, "*") {
			name, mode = strings.TrimSuffix(name, "*"), 0o755
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("failed to create folder for %s: %v", path, err)
		}
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatalf("failed to write %s: %v", path, err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatalf("failed to set mode of %s: %v", path, err)
		}
	}
	return dir
}

// SkillMD returns a SKILL.md with the given name, description and body.
func SkillMD(name, description, body string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\n---\n" + body
}

// DecodeSkills decodes a multi-document YAML stream of Skills strictly, the
// way kubectl reads a manifest.
func DecodeSkills(t testing.TB, stream string) []*skillsv1.Skill {
	t.Helper()
	var skills []*skillsv1.Skill
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return skills
		}
		if err != nil {
			t.Fatalf("failed to split YAML stream: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := &skillsv1.Skill{}
		if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("failed to decode Skill: %v\n%s", err, doc)
		}
		skills = append(skills, obj)
	}
}
