package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// gitEnv is the git configuration every command container gets, in the
// order the container lists it (by name).
func gitEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "GIT_CONFIG_COUNT", Value: "3"},
		{Name: "GIT_CONFIG_KEY_0", Value: "core.fsmonitor"},
		{Name: "GIT_CONFIG_KEY_1", Value: "core.hooksPath"},
		{Name: "GIT_CONFIG_KEY_2", Value: "safe.bareRepository"},
		{Name: "GIT_CONFIG_VALUE_0", Value: "false"},
		{Name: "GIT_CONFIG_VALUE_1", Value: "/dev/null"},
		{Name: "GIT_CONFIG_VALUE_2", Value: "explicit"},
	}
}

// A skill bundle image can hold a repository whose config names a program
// (core.fsmonitor): with the sandbox's environment, git status in it runs
// nothing, and a bare repository is not even opened.
func TestGitInTheSandboxRunsNoProgramTheRepositoryNames(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed to check the sandbox's git configuration: %v", err)
	}
	env := []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	for _, e := range Job(Params{Run: testRun(), DefaultImage: testDefaultImage}).Spec.Template.Spec.Containers[0].Env {
		if e.Name != "HOME" && e.Name != "TMPDIR" {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(git, args...)
		cmd.Dir, cmd.Env = filepath.Join(dir, "repo"), env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if err := os.MkdirAll(filepath.Join(dir, "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := run("init", "-q"); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	if out, err := run("config", "core.fsmonitor", "touch "+canary+"; false"); err != nil {
		t.Fatalf("git config: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "repo", "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run("status", "--short"); err != nil {
		t.Fatalf("git status: %v: %s", err, out)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("git status ran the repository's core.fsmonitor command")
	}

	// The same repository seen as a bare one (from inside .git): git
	// refuses to open it unless asked to, so its config is never read.
	if out, err := run("add", "a"); err != nil {
		t.Fatalf("git add: %v: %s", err, out)
	}
	if out, err := run("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "a"); err != nil {
		t.Fatalf("git commit: %v: %s", err, out)
	}
	bare := filepath.Join(dir, "repo", ".git")
	cmd := exec.Command(git, "log")
	cmd.Dir, cmd.Env = bare, env
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("git opened a bare repository it found by itself: %s", out)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("git ran the repository's core.fsmonitor command")
	}
}
