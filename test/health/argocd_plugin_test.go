package health

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// The Argo CD Config Management Plugin for repositories of skill folders,
// and the example repository it is shown with.
const (
	pluginFile = "examples/skill-repo/argocd/plugin.yaml"
	pluginName = "kubeskills"
	skillRepo  = "examples/skill-repo"
)

// cmpCommand is a command of a plugin: Argo CD runs Command[0] with the
// rest of Command, then Args, as arguments, with no shell of its own.
type cmpCommand struct {
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
}

// cmpConfig is the plugin.yaml a sidecar of argocd-repo-server reads.
// Unknown fields are errors, so a misspelt key fails here rather than be
// ignored by Argo CD.
type cmpConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version  string     `json:"version,omitempty"`
		Init     cmpCommand `json:"init,omitempty"`
		Generate cmpCommand `json:"generate"`
		Discover struct {
			FileName string `json:"fileName,omitempty"`
			Find     struct {
				cmpCommand
				Glob string `json:"glob,omitempty"`
			} `json:"find"`
		} `json:"discover"`
		Parameters       map[string]any `json:"parameters,omitempty"`
		PreserveFileMode bool           `json:"preserveFileMode,omitempty"`
		ProvideGitCreds  bool           `json:"provideGitCreds,omitempty"`
	} `json:"spec"`
}

// cmpTimeout is how long Argo CD lets a plugin command run
// (ARGOCD_EXEC_TIMEOUT).
const cmpTimeout = 90 * time.Second

// run runs a plugin command as the sidecar does: in dir, with env, the
// standard output kept apart from the standard error that Argo CD shows.
func (c cmpCommand) run(t *testing.T, dir string, env []string) (stdout, stderr string, err error) {
	t.Helper()
	if len(c.Command) == 0 {
		t.Fatal("the command is empty")
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmpTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Command[0], append(slices.Clone(c.Command[1:]), c.Args...)...)
	cmd.Dir, cmd.Env = dir, env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// readPlugin reads and checks plugin.yaml.
func readPlugin(t *testing.T) *cmpConfig {
	t.Helper()
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), pluginFile))
	g.Expect(err).NotTo(HaveOccurred())
	cfg := &cmpConfig{}
	g.Expect(yaml.UnmarshalStrict(data, cfg)).To(Succeed())
	g.Expect(cfg.APIVersion).To(Equal("argoproj.io/v1alpha1"))
	g.Expect(cfg.Kind).To(Equal("ConfigManagementPlugin"))
	g.Expect(cfg.Metadata.Name).To(Equal(pluginName))
	g.Expect(cfg.Spec.Version).To(BeEmpty(), "a version would rename the plugin %s-VERSION for Applications", pluginName)
	g.Expect(cfg.Spec.Generate.Command).NotTo(BeEmpty())
	// Argo CD evaluates fileName, else find.glob, else find.command: the
	// command is tested below, so it must be the one used.
	g.Expect(cfg.Spec.Discover.FileName).To(BeEmpty())
	g.Expect(cfg.Spec.Discover.Find.Glob).To(BeEmpty())
	g.Expect(cfg.Spec.Discover.Find.Command).NotTo(BeEmpty())
	g.Expect(cfg.Spec.ProvideGitCreds).To(BeFalse(), "the plugin reads no other repository")
	return cfg
}

// buildPlugin builds kubectl-skills into a new folder and returns it.
func buildPlugin(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-skills"), "./cmd/kubectl-skills")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("failed to build kubectl-skills: %v\n%s", err, out)
	}
	return bin
}

// sidecarEnv is the environment of a plugin command: the sidecar's own,
// with bin first on PATH, and the variables Argo CD sets for an
// Application, plus extra (NAME=VALUE). Argo CD passes no variable whose
// value is empty.
func sidecarEnv(bin string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "ARGOCD_") && !strings.HasPrefix(kv, "PARAM_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"ARGOCD_APP_NAME=team-a-skills",
		"ARGOCD_APP_SOURCE_PATH="+skillRepo,
		"ARGOCD_APP_SOURCE_REPO_URL=https://github.com/kubeskills/kubeskills.git",
		"ARGOCD_APP_SOURCE_TARGET_REVISION=main",
		"ARGOCD_APP_REVISION=c00dbbc9dadfbe1e232e93a729dd4752fade0abf",
		"ARGOCD_APP_REVISION_SHORT=c00dbbc",
	)
	for _, kv := range extra {
		if name, value, _ := strings.Cut(kv, "="); value != "" {
			env = append(env, name+"="+value)
		}
	}
	return env
}

// copyRepo copies a folder as Argo CD hands a repository to a plugin: as
// written, when preserveFileMode is set, else every folder 0755 and every
// file 0644.
func copyRepo(t *testing.T, src, dst string, preserveFileMode bool) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			mode := fs.FileMode(0o755)
			if preserveFileMode {
				mode = info.Mode().Perm()
			}
			return os.MkdirAll(target, mode)
		case info.Mode().IsRegular():
			mode := fs.FileMode(0o644)
			if preserveFileMode {
				mode = info.Mode().Perm()
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, mode); err != nil {
				return err
			}
			return os.Chmod(target, mode)
		default:
			return errors.New(path + " is neither a folder nor a regular file: teach copyRepo how Argo CD sends it")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// decodeSkills reads the manifests a generate command prints, and checks
// that each is a Skill with nothing unknown in it.
func decodeSkills(t *testing.T, out string) []*skillsv1.Skill {
	t.Helper()
	var skills []*skillsv1.Skill
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return skills
		}
		if err != nil {
			t.Fatalf("failed to split the output: %v", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		s := &skillsv1.Skill{}
		if err := yaml.UnmarshalStrict(doc, s); err != nil {
			t.Fatalf("a document is not a Skill: %v\n%s", err, doc)
		}
		if s.APIVersion != skillsv1.GroupVersion.String() || s.Kind != "Skill" {
			t.Fatalf("a document is a %s %s, not a Skill", s.APIVersion, s.Kind)
		}
		skills = append(skills, s)
	}
}

// skillFolders lists the skill folders under dir: the folders holding a
// SKILL.md, by name.
func skillFolders(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	folders := map[string]string{}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), skill.SkillFileName)); e.IsDir() && err == nil {
			folders[e.Name()] = filepath.Join(dir, e.Name())
		}
	}
	if len(folders) == 0 {
		t.Fatalf("%s holds no skill folder", dir)
	}
	return folders
}

// folderFile is a file of a skill folder as the Skill must carry it.
type folderFile struct {
	content    string
	executable bool
}

// folderFiles reads every file of a skill folder but its SKILL.md, by
// path relative to the folder, with forward slashes.
func folderFiles(t *testing.T, dir string) map[string]folderFile {
	t.Helper()
	files := map[string]folderFile{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return errors.New(path + " is not a regular file")
		}
		if rel == skill.SkillFileName {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = folderFile{content: string(data), executable: info.Mode().Perm()&0o111 != 0}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestArgoCDPlugin runs the Config Management Plugin of
// examples/skill-repo/argocd as an argocd-repo-server sidecar would, on a
// copy of examples/skill-repo, with the kubectl-skills of this checkout on
// PATH: its generate command prints one Skill per skill folder, in the
// Application's namespace, holding every file of the folder byte for byte
// with its executable bit, and its discover command matches the
// repository.
func TestArgoCDPlugin(t *testing.T) {
	cfg := readPlugin(t)
	bin := buildPlugin(t)
	src := filepath.Join(testenv.RepoRoot(), skillRepo)
	folders := skillFolders(t, filepath.Join(src, "skills"))
	repo := func(t *testing.T) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "skill-repo")
		copyRepo(t, src, dir, cfg.Spec.PreserveFileMode)
		return dir
	}
	generate := func(t *testing.T, dir string, env ...string) (string, string, error) {
		t.Helper()
		if len(cfg.Spec.Init.Command) > 0 {
			if _, stderr, err := cfg.Spec.Init.run(t, dir, sidecarEnv(bin, env...)); err != nil {
				t.Fatalf("init: %v\n%s", err, stderr)
			}
		}
		return cfg.Spec.Generate.run(t, dir, sidecarEnv(bin, env...))
	}

	t.Run("generate", func(t *testing.T) {
		g := NewWithT(t)
		out, stderr, err := generate(t, repo(t), "ARGOCD_APP_NAMESPACE=team-a")
		g.Expect(err).NotTo(HaveOccurred(), "stderr:\n%s", stderr)
		if stderr != "" {
			t.Logf("stderr:\n%s", stderr)
		}
		skills := decodeSkills(t, out)
		names := make([]string, 0, len(skills))
		for _, s := range skills {
			names = append(names, s.Name)
		}
		g.Expect(names).To(ConsistOf(slices.Collect(maps.Keys(folders))), "one Skill per folder of %s/skills", skillRepo)
		ns := namespace(t)
		executables := 0
		for _, obj := range skills {
			t.Run(obj.Name, func(t *testing.T) {
				g := NewWithT(t)
				g.Expect(obj.Namespace).To(Equal("team-a"))
				g.Expect(obj.Labels).To(BeEmpty())
				s, problems := skillapi.FromObject(obj)
				g.Expect(problems).To(BeEmpty())
				dir := folders[obj.Name]
				skillMD, err := os.ReadFile(filepath.Join(dir, skill.SkillFileName))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(string(skill.Render(s))).To(Equal(string(skillMD)), "SKILL.md, rendered back from the Skill")
				got := map[string]folderFile{}
				for _, f := range s.Files {
					got[f.Path] = folderFile{content: string(f.Content), executable: f.Executable}
				}
				want := folderFiles(t, dir)
				g.Expect(got).To(Equal(want), "the files of %s", dir)
				for path, f := range want {
					if f.executable {
						executables++
					} else if strings.HasPrefix(path, "scripts/") {
						t.Errorf("%s/%s is not executable on disk: the test would not see a lost executable bit", dir, path)
					}
				}
				// The API server takes it as Argo CD would apply it.
				applied := obj.DeepCopy()
				applied.Namespace = ns
				g.Expect(k8s.Create(context.Background(), applied, client.DryRunAll)).To(Succeed())
			})
		}
		g.Expect(executables).To(BeNumerically(">", 0), "no file of %s is executable", skillRepo)
	})

	t.Run("labels from the Application", func(t *testing.T) {
		g := NewWithT(t)
		out, stderr, err := generate(t, repo(t), "ARGOCD_APP_NAMESPACE=team-a", "ARGOCD_ENV_SKILL_LABELS=team=team-a, tier=ops")
		g.Expect(err).NotTo(HaveOccurred(), "stderr:\n%s", stderr)
		skills := decodeSkills(t, out)
		g.Expect(skills).To(HaveLen(len(folders)))
		for _, s := range skills {
			g.Expect(s.Labels).To(Equal(map[string]string{"team": "team-a", "tier": "ops"}), "Skill %s", s.Name)
		}
	})

	t.Run("no destination namespace", func(t *testing.T) {
		g := NewWithT(t)
		out, stderr, err := generate(t, repo(t))
		g.Expect(err).NotTo(HaveOccurred(), "stderr:\n%s", stderr)
		skills := decodeSkills(t, out)
		g.Expect(skills).To(HaveLen(len(folders)))
		for _, s := range skills {
			g.Expect(s.Namespace).To(BeEmpty(), "Skill %s: Argo CD puts it in the destination namespace", s.Name)
		}
	})

	t.Run("a broken folder fails the generation", func(t *testing.T) {
		g := NewWithT(t)
		dir := repo(t)
		broken := filepath.Join(dir, "skills", "incident-summary", skill.SkillFileName)
		g.Expect(os.WriteFile(broken, []byte("# Incident summary\n\nNo front matter.\n"), 0o644)).To(Succeed())
		_, stderr, err := generate(t, dir, "ARGOCD_APP_NAMESPACE=team-a")
		var exitErr *exec.ExitError
		g.Expect(errors.As(err, &exitErr)).To(BeTrue(), "the command must fail, so that Argo CD prunes nothing: %v", err)
		g.Expect(stderr).To(ContainSubstring("incident-summary"), "Argo CD shows the standard error")
	})

	t.Run("a bad label fails the generation", func(t *testing.T) {
		g := NewWithT(t)
		_, stderr, err := generate(t, repo(t), "ARGOCD_APP_NAMESPACE=team-a", "ARGOCD_ENV_SKILL_LABELS=team=*")
		g.Expect(err).To(HaveOccurred())
		g.Expect(stderr).To(ContainSubstring("team=*"))
	})

	t.Run("discover", func(t *testing.T) {
		find := cfg.Spec.Discover.Find.cmpCommand
		// Argo CD matches when the command exits 0 and prints something.
		matches := func(t *testing.T, dir string) bool {
			t.Helper()
			out, stderr, err := find.run(t, dir, sidecarEnv(bin, "ARGOCD_APP_NAMESPACE=team-a"))
			if err != nil {
				t.Fatalf("the discover command failed: %v\n%s", err, stderr)
			}
			return strings.TrimSuffix(out, "\n") != ""
		}
		t.Run("the skill repository", func(t *testing.T) {
			if !matches(t, repo(t)) {
				t.Errorf("the plugin does not discover %s", skillRepo)
			}
		})
		t.Run("a single skill folder", func(t *testing.T) {
			dir := t.TempDir()
			copyRepo(t, folders["dns-debug"], dir, cfg.Spec.PreserveFileMode)
			if !matches(t, dir) {
				t.Error("the plugin does not discover a folder that is itself a skill")
			}
		})
		t.Run("a folder of manifests", func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range map[string]string{
				"kustomization.yaml": "resources:\n- configmap.yaml\n",
				"configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n",
				"docs/README.md":     "# Settings\n",
			} {
				NewWithT(t).Expect(os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)).To(Succeed())
				NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)).To(Succeed())
			}
			if matches(t, dir) {
				t.Error("the plugin claims a folder without SKILL.md")
			}
		})
		t.Run("a SKILL.md in .git only", func(t *testing.T) {
			dir := t.TempDir()
			NewWithT(t).Expect(os.MkdirAll(filepath.Join(dir, ".git", "info"), 0o755)).To(Succeed())
			NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, ".git", "info", skill.SkillFileName), []byte("---\n"), 0o644)).To(Succeed())
			if matches(t, dir) {
				t.Error("the plugin claims a folder whose only SKILL.md is git metadata, which import skips")
			}
		})
	})
}
