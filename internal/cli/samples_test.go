package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
)

// TestSamplesRoundTrip imports each sample folder, decodes the manifest the
// way kubectl does, exports it again and compares byte for byte.
func TestSamplesRoundTrip(t *testing.T) {
	for _, dir := range clitest.SampleFolders(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			res := clitest.Run("", "import", dir, "-n", "samples")
			if res.Code != cli.ExitOK {
				t.Fatalf("import exited %d: %s", res.Code, res.Stderr)
			}
			skills := clitest.DecodeSkills(t, res.Stdout)
			if len(skills) != 1 || skills[0].Name != filepath.Base(dir) {
				t.Fatalf("want one Skill named after the folder")
			}
			manifest := filepath.Join(t.TempDir(), "skill.yaml")
			if err := os.WriteFile(manifest, []byte(res.Stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), filepath.Base(dir))
			export(t, manifest, "-o", out)
			clitest.CompareFolders(t, dir, out)
		})
	}
}

// TestSamplesRepository imports the whole repository at once and exports it
// into a repository of folders again.
func TestSamplesRepository(t *testing.T) {
	res := clitest.Run("", "validate", "--recursive", clitest.SamplesDir())
	if res.Code != cli.ExitOK {
		t.Fatalf("validate exited %d:\n%s", res.Code, res.Stdout)
	}
	manifest := importTo(t, "--recursive", clitest.SamplesDir(), "--label", "kubeskills.io/samples=true")
	out := t.TempDir()
	export(t, manifest, "-o", out)
	clitest.CompareFolders(t, clitest.SamplesDir(), out)
}

// TestSamplesCoverage checks that the samples keep covering what they are
// for: a dozen skills, small and large, scripts that parse, references,
// binary assets, another product's front-matter keys and allowed-tools.
func TestSamplesCoverage(t *testing.T) {
	dirs := clitest.SampleFolders(t)
	if len(dirs) < 12 {
		t.Errorf("%d samples, want at least 12", len(dirs))
	}
	var largest int
	var scripts, references, binaries, tools, foreign int
	for _, dir := range dirs {
		skillMD, err := os.ReadFile(filepath.Join(dir, "SKILL.md"))
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, len(skillMD))
		head, _, _ := strings.Cut(string(skillMD[4:]), "\n---\n")
		if strings.Contains(head, "\nallowed-tools: ") {
			tools++
		}
		if strings.Contains(head, "\nuser-invocable: ") && strings.Contains(head, "\n  openclaw:\n") {
			foreign++
		}
		if _, err := os.Stat(filepath.Join(dir, "references")); err == nil {
			references++
		}
		err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !utf8.Valid(data) {
				binaries++
			}
			if strings.HasSuffix(path, ".sh") {
				scripts++
				checkScript(t, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	switch {
	case largest < 30<<10 || largest > 70<<10:
		t.Errorf("the largest SKILL.md is %d bytes, want 30-70 KB", largest)
	case scripts < 5, references < 5, binaries < 1, tools < 3, foreign < 1:
		t.Errorf("scripts %d, references %d, binaries %d, allowed-tools %d, foreign keys %d", scripts, references, binaries, tools, foreign)
	}
}

// checkScript checks that a sample script is executable and parses.
func checkScript(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil || info.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable", path)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return
	}
	if out, err := exec.Command(bash, "-n", path).CombinedOutput(); err != nil {
		t.Errorf("%s does not parse: %v\n%s", path, err, out)
	}
}
