package runner

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// The canary: a command line runs in a fresh folder whose PATH holds only
// logging stand-ins ("shims") for programs. A shim appends its name and
// arguments to a log and exits 0, so nothing real runs, and the log says
// which programs the shell started. Afterwards the folder is compared with
// what it was before, and a few fixed paths outside it (canaryPaths) must
// be as they were.

// canaryLogEnv names the variable that tells a shim where its log is.
const canaryLogEnv = "KUBESKILLS_CANARY_LOG"

// Separators of the shim log: one record per program started, its name
// and arguments separated by unitSep.
const (
	recordSep = "\x1e"
	unitSep   = "\x1f"
)

// shimScript is every shim: a link to it named after a program logs that
// name. It needs nothing from PATH (printf is a builtin of /bin/sh) and
// starts no process of its own. The record is written with one printf, so
// that programs of a pipeline, which run at once, do not mix their
// records.
const shimScript = `#!/bin/sh
us='` + unitSep + `'
r=${0##*/}
for a in "$@"; do r="$r$us$a"; done
printf '%s\036' "$r" >>"$` + canaryLogEnv + `"
exit 0
`

// commonPrograms get a shim whatever the lines name: the payloads a
// misread line could run.
var commonPrograms = []string{
	"awk", "bash", "busybox", "cat", "chmod", "cp", "curl", "dash", "dd", "env", "find", "git", "grep", "head",
	"id", "jq", "kubectl", "ln", "ls", "mkdir", "mv", "nc", "perl", "python3", "rm", "sed", "sh", "sleep",
	"sort", "tail", "tar", "tee", "touch", "uniq", "wc", "wget", "xargs", "xxd",
}

// programName matches a word that could name a program.
var programName = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_.+-]*`)

// canaryPathRE matches the absolute paths under /tmp that lines use as
// payload targets.
var canaryPathRE = regexp.MustCompile(`/tmp/[A-Za-z0-9_.-]+`)

// writeShims creates a folder with one shim per name found in lines, plus
// commonPrograms, and returns it.
func writeShims(t testing.TB, lines []string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shims-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// Readable by the unprivileged user the real shells run as.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, ".shim")
	if err := os.WriteFile(script, []byte(shimScript), 0o755); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range commonPrograms {
		names[n] = true
	}
	for _, l := range lines {
		for _, n := range programName.FindAllString(l, -1) {
			names[n] = true
		}
	}
	for n := range names {
		// A hard link, not a symlink: the runner judges a program under
		// the name of the file that really runs too.
		if err := os.Link(script, filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
	}
	// Every link changed the shim's inode: runs start after that.
	settled(t, script)
	return dir
}

// canaryPaths returns /tmp/p and every /tmp path the lines name.
func canaryPaths(lines []string) []string {
	set := map[string]bool{"/tmp/p": true}
	for _, l := range lines {
		for _, p := range canaryPathRE.FindAllString(l, -1) {
			set[p] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// pathState describes a path for before/after comparison: "absent", or
// its type, mode, size and content hash.
func pathState(path string) string {
	fi, err := os.Lstat(path)
	if err != nil {
		return "absent"
	}
	state := fmt.Sprintf("%s %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
	if fi.Mode().IsRegular() {
		if b, err := os.ReadFile(path); err == nil {
			state += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
	}
	return state
}

// statePaths returns the state of each path.
func statePaths(paths []string) map[string]string {
	out := make(map[string]string, len(paths))
	for _, p := range paths {
		out[p] = pathState(p)
	}
	return out
}

// treeState returns the state of everything under root but the skipped
// path, by path relative to root.
func treeState(root, skip string) map[string]string {
	out := map[string]string{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == skip {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		out[rel] = pathState(path)
		return nil
	})
	// A folder's time changes when an entry in it does; entries say it.
	for rel, state := range out {
		if strings.HasPrefix(state, "d") {
			out[rel] = "dir"
		}
	}
	return out
}

// diffStates lists what differs between two states.
func diffStates(before, after map[string]string) []string {
	var out []string
	for p, b := range before {
		if a := after[p]; a != b {
			if a == "" {
				a = "absent"
			}
			out = append(out, fmt.Sprintf("%s changed (%s -> %s)", p, b, a))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			out = append(out, fmt.Sprintf("%s created (%s)", p, a))
		}
	}
	sort.Strings(out)
	return out
}

// sandbox is a fresh folder for one run: HOME, TMPDIR and the working
// directory are inside it, with a few files a misread line could change.
type sandbox struct {
	root, home, tmp, work, log string
	env                        []string
	// shims is the folder of the shims, the only programs it runs.
	shims string
}

// newSandbox prepares a sandbox whose PATH is shimDir.
func newSandbox(t testing.TB, shimDir string) *sandbox {
	t.Helper()
	root, err := os.MkdirTemp("", "canary-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	// Writable by the unprivileged user the real shells run as, so that
	// what a line writes is written, and seen.
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	s := &sandbox{root: root, home: filepath.Join(root, "home"), tmp: filepath.Join(root, "tmp"),
		work: filepath.Join(root, "work"), log: filepath.Join(root, "shims.log")}
	for _, d := range []string{s.home, s.tmp, s.work} {
		if err := os.Mkdir(d, 0o777); err != nil || os.Chmod(d, 0o777) != nil {
			t.Fatal(err)
		}
	}
	for path, content := range map[string]string{
		filepath.Join(s.home, ".bashrc"):  "# canary\n",
		filepath.Join(s.home, ".profile"): "# canary\n",
		filepath.Join(s.home, "notes"):    "notes\n",
		filepath.Join(s.work, "a.txt"):    "a\n",
		filepath.Join(s.work, "-exec"):    "a file named like find's flag\n",
	} {
		if err := os.WriteFile(path, []byte(content), 0o666); err != nil || os.Chmod(path, 0o666) != nil {
			t.Fatal(err)
		}
	}
	s.shims = shimDir
	s.env = []string{"PATH=" + shimDir, "HOME=" + s.home, "TMPDIR=" + s.tmp, "LC_ALL=C", canaryLogEnv + "=" + s.log}
	return s
}

// ran returns the argv of every program the shims logged.
func (s *sandbox) ran() [][]string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return nil
	}
	var out [][]string
	for rec := range strings.SplitSeq(string(b), recordSep) {
		if rec != "" {
			out = append(out, strings.Split(rec, unitSep))
		}
	}
	return out
}

// shellRunner runs a line in a sandbox and returns its exit code, stderr
// and whether it timed out.
type shellRunner struct {
	name string
	run  func(s *sandbox, line string) (code int, stderr string, timedOut bool)
}

// canaryTimeout bounds one run of one line; lines that loop forever are
// stopped, and the canary still checks what they did.
const canaryTimeout = 5 * time.Second

// theRunner runs a line the way the sandbox does: Run, under the policy.
func theRunner(snap PolicySnapshot) shellRunner {
	encoded := snap.Encode()
	return shellRunner{name: "runner", run: func(s *sandbox, line string) (int, string, bool) {
		res := hostRun(Options{Command: line, Policy: encoded, Dir: s.work, Env: s.env, Timeout: canaryTimeout,
			Grace: 200 * time.Millisecond, OutputLimit: 4096, ExecDirs: []string{s.shims}})
		return res.ExitCode, res.Stderr, res.TimedOut
	}}
}

// unprivileged is the user and group real shells run as when the tests
// run as root, so that a line the judge misread cannot harm the machine.
const unprivileged = 65534

// realShell runs a line with argv... -c LINE in its own process group, as
// an unprivileged user when the tests run as root. busybox sh runs its
// applets (touch, rm, ...) in preference to PATH, as in a busybox image:
// those run for real, and the file checks see what they write.
func realShell(name string, argv ...string) shellRunner {
	return shellRunner{name: name, run: func(s *sandbox, line string) (int, string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), canaryTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], "-c", line)...)
		cmd.Dir, cmd.Env = s.work, s.env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if os.Geteuid() == 0 {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: unprivileged, Gid: unprivileged}
		}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			return -1, err.Error(), false
		}
		_ = cmd.Wait()
		// Whatever the line left running in its group is stopped.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return cmd.ProcessState.ExitCode(), stderr.String(), ctx.Err() != nil
	}}
}

// requireShells returns dash and busybox sh, or fails the test naming the
// packages that provide them.
func requireShells(t testing.TB) (dash, busybox shellRunner) {
	t.Helper()
	dashPath, err1 := exec.LookPath("dash")
	busyboxPath, err2 := exec.LookPath("busybox")
	if err1 != nil || err2 != nil {
		t.Fatalf("the differential test runs lines under real dash and busybox sh: install the Debian packages "+
			"dash and busybox-static (apt-get install -y dash busybox-static): %v", errors.Join(err1, err2))
	}
	return realShell("dash", dashPath), realShell("busybox sh", busyboxPath, "sh")
}

// partNames returns the names of the simple commands a decision lists:
// the first word of each command in each part, and its base name when it
// is a path.
func partNames(parts []policy.Part) map[string]bool {
	names := map[string]bool{}
	parser := syntax.NewParser()
	for _, p := range parts {
		f, perr := parser.Parse(strings.NewReader(p.Command), "")
		if perr != nil {
			if fields := strings.Fields(p.Command); len(fields) > 0 {
				names[fields[0]] = true
			}
			continue
		}
		syntax.Walk(f, func(n syntax.Node) bool {
			if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
				if name, ok := staticWord(call.Args[0]); ok {
					names[name] = true
					names[filepath.Base(name)] = true
				}
			}
			return true
		})
	}
	return names
}

// staticWord returns a word's value when it has no expansion.
func staticWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, inner := range p.Parts {
				lit, ok := inner.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// canaryRun is what one run of a line did, for the canary to judge.
type canaryRun struct {
	code     int
	stderr   string
	timedOut bool
	ran      [][]string
	written  []string
}

// runCanary runs line under sh in a fresh sandbox.
func runCanary(t testing.TB, sh shellRunner, shimDir, line string) canaryRun {
	s := newSandbox(t, shimDir)
	before := treeState(s.root, s.log)
	var r canaryRun
	r.code, r.stderr, r.timedOut = sh.run(s, line)
	r.ran = s.ran()
	r.written = diffStates(before, treeState(s.root, s.log))
	return r
}

// problems returns what the canary found wrong with a run: a program the
// judge did not list, a file written, or a refusal by the runner of a
// line the judge allowed.
func (r canaryRun) problems(sh shellRunner, allowed map[string]bool) []string {
	var out []string
	for _, argv := range r.ran {
		if !allowed[argv[0]] {
			out = append(out, fmt.Sprintf("ran %q, which the judge did not list", argv))
		}
	}
	for _, d := range r.written {
		out = append(out, "wrote: "+d)
	}
	if sh.name == "runner" && r.code == ExitCannotExecute && RefusalIn(r.stderr) != "" {
		out = append(out, "the runner refused a line judged Always: "+RefusalIn(r.stderr))
	}
	if len(out) > 0 {
		out = append(out, fmt.Sprintf("(exit %d, timed out %t, stderr %q)", r.code, r.timedOut, clip(r.stderr, 300)))
	}
	return out
}

// canaryCheck runs line under sh in a fresh sandbox and returns what the
// canary found wrong.
func canaryCheck(t testing.TB, sh shellRunner, shimDir, line string, allowed map[string]bool) []string {
	return runCanary(t, sh, shimDir, line).problems(sh, allowed)
}

// sortedKeys returns a set's members in order.
func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
