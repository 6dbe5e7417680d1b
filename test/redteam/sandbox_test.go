package redteam

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The sandbox: everything the harness builds once per test run (the runner,
// the stand-in binary, kubectl and a template of the fixtures), and the
// scratch folder each case runs in.

// unprivileged is the user and group the runner runs as when the tests run
// as root: the sandbox's command never runs as root, and as nobody a line
// cannot change the machine's files.
const unprivileged = 65534

// canaryPrefix starts every payload path the corpus names ({{canary}}).
const canaryPrefix = "/tmp/kubeskills-redteam-canary"

// commonStandins are the payload programs every case replaces with a
// logging stand-in.
var commonStandins = []string{
	"touch", "rm", "curl", "wget", "dd", "shred", "chmod", "chown", "mv", "nc", "ncat", "socat",
	"ssh", "scp", "mkfs", "mkfs.ext4", "kill", "pkill", "reboot", "crontab", "kubectl-pwn", "kubectl-secrets",
}

// systemExecDirs are the folders of the machine's programs, passed to the
// runner as --exec-dir: outside a sandbox, whose programs are on read-only
// filesystems, they say where programs may run from.
var systemExecDirs = []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/lib", "/usr/libexec", "/usr/local/bin", "/etc/alternatives"}

// requiredPrograms are the real programs the corpus goes through, with the
// Debian package of each.
var requiredPrograms = map[string]string{
	"less": "less", "man": "man-db", "gawk": "gawk", "mawk": "mawk", "sed": "sed", "git": "git", "tar": "tar",
	"zstd": "zstd", "make": "make", "sshpass": "sshpass", "env": "coreutils", "xargs": "findutils",
	"find": "findutils", "sh": "dash", "dash": "dash", "bash": "bash", "busybox": "busybox-static", "jq": "jq",
	"head": "coreutils", "sort": "coreutils", "cat": "coreutils", "cp": "coreutils", "ln": "coreutils",
	"nohup": "coreutils", "timeout": "coreutils", "nice": "coreutils", "stdbuf": "coreutils", "setsid": "util-linux",
	"flock": "util-linux", "perl": "perl-base", "python3": "python3", "coreutils": "rust-coreutils", "groff": "groff-base",
}

// harness is what every case shares.
type harness struct {
	root      string // 0755, holds everything below
	runner    string
	standin   string
	toolsDir  string // kubectl
	template  string // the fixtures
	execDirs  bool   // the runner knows --exec-dir
	asNobody  bool
	toolState map[string]string
}

// newHarness builds the runner and the stand-in, copies kubectl and makes
// the fixtures' template.
func newHarness(t *testing.T) *harness {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Fatalf("the red-team harness runs the sandbox's runner, which needs Linux")
	}
	var missing []string
	for prog, pkg := range requiredPrograms {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		missing = slices.Compact(missing)
		t.Fatalf("the red-team corpus runs real programs that are missing: apt-get install %s (or make test-tools)", strings.Join(missing, " "))
	}
	kubectl, err := kubectlPath()
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "redteam-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	h := &harness{root: root, asNobody: os.Geteuid() == 0}
	mkdir(t, root)
	bin := filepath.Join(root, "bin")
	mkdir(t, bin)
	h.runner, h.standin = filepath.Join(bin, "runner"), filepath.Join(bin, "standin")
	modRoot := moduleRoot(t)
	for _, b := range []struct{ out, pkg string }{{h.runner, "./cmd/runner"}, {h.standin, "./test/redteam/standin"}} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = modRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("failed to build %s: %v\n%s", b.pkg, err, out)
		}
	}
	h.toolsDir = filepath.Join(root, "tools")
	mkdir(t, h.toolsDir)
	if err := copyFile(kubectl, filepath.Join(h.toolsDir, "kubectl"), 0o755); err != nil {
		t.Fatal(err)
	}
	help, _ := exec.Command(h.runner, "run", "-h").CombinedOutput()
	h.execDirs = bytes.Contains(help, []byte("-exec-dir"))
	h.template = filepath.Join(root, "template")
	if err := writeFixtures(h.template); err != nil {
		t.Fatal(err)
	}
	h.toolState = treeState(bin, h.toolsDir)
	return h
}

// moduleRoot is the repository's root, two folders up.
func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}

// kubectlPath is the kubectl `make envtest` builds: bin/k8s/VERSION/kubectl,
// VERSION from hack/k8s/go.mod.
func kubectlPath() (string, error) {
	mod, err := os.ReadFile("../../hack/k8s/go.mod")
	if err != nil {
		return "", err
	}
	version := ""
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			version = f[1]
		}
	}
	if version == "" {
		return "", errors.New("hack/k8s/go.mod names no k8s.io/kubernetes version")
	}
	p, err := filepath.Abs(filepath.Join("../../bin/k8s", version, "kubectl"))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the red-team corpus runs the real kubectl %s, which is missing (run make envtest): %w", version, err)
	}
	return p, nil
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func copyFile(from, to string, mode fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(to, mode)
}

// caseDir is one case's folder: its stand-ins, their log, the scratch
// folder and the runner's result file.
type caseDir struct {
	dir, standins, log, scratch, result, canary string
}

// prepare lays out a case's folder: a stand-ins folder holding hard links to
// the stand-in binary (not symlinks: a symlink resolves to the one shared
// binary, which no rule names), and a scratch folder copied from the
// template with {{canary}} and {{api}} filled in.
func (h *harness) prepare(t *testing.T, id int, c *redteamCase, api string) *caseDir {
	t.Helper()
	cd := &caseDir{dir: filepath.Join(h.root, "cases", fmt.Sprint(id))}
	cd.standins = filepath.Join(cd.dir, "standins")
	cd.log = filepath.Join(cd.dir, "standins.log")
	cd.scratch = filepath.Join(cd.dir, "scratch")
	cd.result = filepath.Join(cd.dir, "result")
	cd.canary = fmt.Sprintf("%s-%d-%d", canaryPrefix, os.Getpid(), id)
	mkdir(t, cd.standins)
	for _, n := range slices.Concat(commonStandins, c.standins) {
		if err := os.Link(h.standin, filepath.Join(cd.standins, n)); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
	}
	for _, f := range []string{cd.log, cd.result} {
		if err := os.WriteFile(f, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(f, 0o666)
	}
	fill := strings.NewReplacer("{{canary}}", cd.canary, "{{api}}", api)
	if err := copyTemplate(h.template, cd.scratch, fill); err != nil {
		t.Fatal(err)
	}
	kubeconfig := fmt.Sprintf(kubeconfigTemplate, api)
	if err := os.MkdirAll(filepath.Join(cd.scratch, ".kube"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cd.scratch, ".kube", "config"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if h.asNobody {
		for _, p := range []string{cd.log, cd.result} {
			if err := os.Chown(p, unprivileged, unprivileged); err != nil {
				t.Fatal(err)
			}
		}
		err := filepath.WalkDir(cd.scratch, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, unprivileged, unprivileged)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	_ = os.RemoveAll(cd.canary)
	t.Cleanup(func() { _ = os.RemoveAll(cd.canary); _ = os.RemoveAll(cd.dir) })
	return cd
}

// kubeconfigTemplate points kubectl at the stand-in API server.
const kubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- name: standin
  cluster:
    server: %s
contexts:
- name: standin
  context:
    cluster: standin
    user: agent
    namespace: default
current-context: standin
users:
- name: agent
  user:
    token: redteam-token
`

// run is what one run of the runner left behind.
type run struct {
	exitCode  int    // the command's, from the result; else the runner's own
	stdout    string // the command's, from the runner's result
	stderr    string
	runnerErr string // the runner's own stderr and failures
	calls     []standinCall
	requests  []apiRequest
	elapsed   time.Duration
}

// standinCall is one line of a stand-ins log.
type standinCall struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
}

// runLine runs the line with the real runner, as the sandbox runs it.
func (h *harness) runLine(t *testing.T, cd *caseDir, c *redteamCase, line, snapshot string) *run {
	t.Helper()
	args := []string{"run", "--policy=" + snapshot, "--timeout=20s", "--output-limit=65536",
		"--result-file=" + cd.result, "--dir=" + cd.scratch}
	if h.execDirs {
		for _, d := range slices.Concat(systemExecDirs, []string{cd.standins, h.toolsDir, filepath.Dir(h.runner)}) {
			args = append(args, "--exec-dir="+d)
		}
	}
	args = append(args, "--", line)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.runner, args...)
	cmd.Dir = cd.scratch
	cmd.Env = []string{
		"PATH=" + strings.Join([]string{cd.standins, h.toolsDir, "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"}, ":"),
		"HOME=" + cd.scratch, "TMPDIR=" + cd.scratch, "KUBECONFIG=" + filepath.Join(cd.scratch, ".kube", "config"),
		"LANG=C.UTF-8", "USER=nobody", "LOGNAME=nobody",
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if h.asNobody {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: unprivileged, Gid: unprivileged}
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := &run{elapsed: time.Since(start), exitCode: cmd.ProcessState.ExitCode(), runnerErr: stderr.String()}
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		r.runnerErr += "\n" + err.Error()
	}
	if res, err := readResult(cd.result, stdout.Bytes()); err == nil {
		// With a result file the runner exits 0 once it wrote the result,
		// which holds the command's status.
		r.stdout, r.stderr, r.exitCode = res.Stdout, res.Stderr, res.ExitCode
	} else {
		r.runnerErr += "\nno result: " + err.Error()
	}
	r.calls = readCalls(t, cd.log)
	return r
}

// readCalls reads a stand-ins log.
func readCalls(t *testing.T, path string) []standinCall {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var calls []standinCall
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var c standinCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			calls = append(calls, standinCall{Name: "(unreadable stand-in log line)", Argv: []string{sc.Text()}})
			continue
		}
		calls = append(calls, c)
	}
	return calls
}

// writeFixtures makes the template of every scratch folder: the files the
// corpus's lines read, attack or list.
func writeFixtures(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "kust"), 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"notes.txt":               "hello from notes\nsecond line\n",
		"file.txt":                "two\n",
		"secret.txt":              secretMarker + "\n",
		"secret.json":             `{"password": "` + secretMarker + `"}` + "\n",
		"data.json":               `{"name": "web", "replicas": 2}` + "\n",
		"t.1":                     ".TH T 1\n.SH NAME\nt \\- a page for the red-team corpus\n.SH DESCRIPTION\nplain text\n",
		"Makefile":                makefile,
		"secret.yaml":             manifests["secret.yaml"],
		"list.yaml":               manifests["list.yaml"],
		"pod.yaml":                manifests["pod.yaml"],
		"cm.yaml":                 manifests["cm.yaml"],
		"kust/secret.yaml":        manifests["secret.yaml"],
		"kust/kustomization.yaml": "resources:\n- secret.yaml\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	// a git repository with two commits of file.txt, for git diff HEAD~1.
	git := func(args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=redteam", "GIT_AUTHOR_EMAIL=redteam@example.com",
			"GIT_COMMITTER_NAME=redteam", "GIT_COMMITTER_EMAIL=redteam@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("failed to run git %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	steps := [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "file.txt"}, {"commit", "-q", "-m", "one", "--allow-empty"},
	}
	for _, s := range steps {
		if err := git(s...); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "file.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		return err
	}
	if err := git("commit", "-q", "-am", "two"); err != nil {
		return err
	}
	for _, tarArgs := range [][]string{
		{"--zstd", "-cf", "a.tar", "notes.txt"},
		{"-cf", "plain.tar", "notes.txt"},
	} {
		cmd := exec.Command("tar", tarArgs...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("failed to make %s: %w: %s", tarArgs[len(tarArgs)-2], err, out)
		}
	}
	return nil
}

// makefile has a benign target and one whose recipe runs a payload.
const makefile = `.PHONY: report build
report:
	@echo report-ok
	@date +%Y >/dev/null
build:
	touch {{canary}}
`

// manifests are the objects lines give kubectl as files, on stdin or by URL.
var manifests = map[string]string{
	"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-password\n  namespace: default\n",
	"list.yaml": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: settings\n" +
		"- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: db-password\n",
	"pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-0\n  namespace: default\n",
	// obj.yaml is the Secret again, under a name that does not say so.
	"obj.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-password\n  namespace: default\n",
	"cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  color: blue\n",
}

// copyTemplate copies the template folder, filling in the Makefile.
func copyTemplate(from, to string, fill *strings.Replacer) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "Makefile" {
			b = []byte(fill.Replace(string(b)))
		}
		return os.WriteFile(dst, b, info.Mode().Perm())
	})
}

// treeState returns the type, mode, size and content hash of every file
// under the roots.
func treeState(roots ...string) map[string]string {
	out := map[string]string{}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			out[p] = pathState(p)
			return nil
		})
	}
	return out
}

// pathState describes a path: "absent", or its mode, size, time and, for
// a small file, its content hash.
func pathState(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return "absent"
	}
	if fi.IsDir() {
		return fi.Mode().String()
	}
	s := fmt.Sprintf("%s %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
	if fi.Mode().IsRegular() && fi.Size() < 1<<20 {
		if b, err := os.ReadFile(p); err == nil {
			s += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
	}
	return s
}

// diffStates lists what differs between two states.
func diffStates(before, after map[string]string) []string {
	var out []string
	for p, b := range before {
		a, ok := after[p]
		if !ok {
			a = "absent"
		}
		if a != b {
			out = append(out, fmt.Sprintf("%s changed (%s -> %s)", p, b, a))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			out = append(out, fmt.Sprintf("%s created (%s)", p, a))
		}
	}
	slices.Sort(out)
	return out
}
