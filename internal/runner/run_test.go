package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/onsi/gomega"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// TestMain makes the test binary the runner's shell when Run starts it as
// "runner sh", so Run is tested with the real shell process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ShellSubcommand {
		os.Exit(ShellMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// approvedAll is a policy under which every command may run: everything
// is Always by default and a person approved the run, so what the judge
// answers Ask (shells, writes) runs too.
var approvedAll = PolicySnapshot{DefaultAction: policy.Always, Approved: true}.Encode()

// hostExecDirs are this machine's program folders. Outside a sandbox the
// root file system is writable, and the runner runs programs from a
// writable file system only from the folders it is given.
var hostExecDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/alternatives"}

// hostRun runs o as Run does, with this machine's program folders and
// o.ExecDirs as the folders programs may run from.
func hostRun(o Options) *Result {
	o.ExecDirs = append(slices.Clone(o.ExecDirs), hostExecDirs...)
	return Run(o)
}

// waitForFile polls until path exists or the deadline passes.
func waitForFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error { _, err := os.Stat(path); return err }, within, 5*time.Millisecond).
		Should(gomega.Succeed(), "%s did not appear within %s", path, within)
}

func TestRunCommands(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name       string
		opts       Options
		exitCode   int
		stdout     string
		stderr     string
		wantErrMsg bool
	}{
		{name: "success", opts: Options{Command: "true"}, exitCode: 0},
		{name: "program run", opts: Options{Command: "env true"}, exitCode: 0},
		{name: "failure", opts: Options{Command: "false"}, exitCode: 1},
		{name: "exit 42", opts: Options{Command: "exit 42"}, exitCode: 42},
		{name: "streams apart", opts: Options{Command: "echo out; echo err >&2; echo more"},
			stdout: "out\nmore\n", stderr: "err\n"},
		{name: "killed by signal", opts: Options{Command: "/bin/kill -9 $$"}, exitCode: ExitSignalBase + 9},
		{name: "stdin is empty", opts: Options{Command: "cat; read x || echo eof"}, stdout: "eof\n"},
		{name: "working directory", opts: Options{Command: "pwd", Dir: dir}, stdout: dir + "\n"},
		{name: "environment", opts: Options{Command: `echo "$KS_A-$HOME"`, Env: []string{"KS_A=1"}}, stdout: "1-\n"},
		{name: "quoting kept", opts: Options{Command: `printf '%s|' "a b" 'c;d'`}, stdout: "a b|c;d|"},
		{name: "background leftover killed", opts: Options{Command: "sleep 30 & echo done"}, stdout: "done\n"},
		{name: "runner not found", opts: Options{Command: "true", Executable: filepath.Join(dir, "nope")},
			exitCode: ExitNotFound, wantErrMsg: true},
		{name: "runner not executable", opts: Options{Command: "true", Executable: writeFile(t, dir, "sh", "", 0o644)},
			exitCode: ExitCannotExecute, wantErrMsg: true},
		{name: "program not found", opts: Options{Command: "no-such-program-ks"}, exitCode: ExitNotFound,
			stderr: "\"no-such-program-ks\": executable file not found in $PATH\n"},
		{name: "missing working directory", opts: Options{Command: "true", Dir: filepath.Join(dir, "missing")},
			exitCode: ExitRunnerFailure, wantErrMsg: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			tc.opts.Policy = approvedAll
			res := hostRun(tc.opts)
			// A leftover background process (sleep 30) must not hold Run.
			if elapsed := time.Since(start); elapsed > 20*time.Second {
				t.Errorf("Run took %s: it waited for a leftover process", elapsed)
			}
			if res.ExitCode != tc.exitCode {
				t.Errorf("ExitCode = %d, want %d (error %q)", res.ExitCode, tc.exitCode, res.Error)
			}
			if res.Stdout != tc.stdout || res.Stderr != tc.stderr {
				t.Errorf("Stdout, Stderr = %q, %q, want %q, %q", res.Stdout, res.Stderr, tc.stdout, tc.stderr)
			}
			if res.StdoutBytes != int64(len(tc.stdout)) || res.StderrBytes != int64(len(tc.stderr)) {
				t.Errorf("byte counts = %d, %d", res.StdoutBytes, res.StderrBytes)
			}
			if res.StdoutTruncated || res.StderrTruncated || res.TimedOut {
				t.Errorf("unexpected flags: %+v", res)
			}
			if (res.Error != "") != tc.wantErrMsg {
				t.Errorf("Error = %q, want an error: %t", res.Error, tc.wantErrMsg)
			}
		})
	}
}

// writeFile creates a file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunOutputLimit(t *testing.T) {
	cases := []struct {
		name                 string
		command              string
		limit                int64
		stdoutLen, stderrLen int
		stdoutBytes          int64
		stderrBytes          int64
		stdoutTrunc          bool
		stderrTrunc          bool
	}{
		{name: "fast producer on stdout", command: "yes | head -c 10000000", limit: 1000,
			stdoutLen: 1000, stdoutBytes: 10000000, stdoutTrunc: true},
		{name: "fast producer on stderr", command: "head -c 3000000 /dev/zero >&2; echo ok", limit: 4096,
			stdoutLen: 3, stdoutBytes: 3, stderrLen: 4096, stderrBytes: 3000000, stderrTrunc: true},
		{name: "both streams over", command: "yes a | head -c 200000; yes b | head -c 300000 >&2", limit: 100,
			stdoutLen: 100, stdoutBytes: 200000, stdoutTrunc: true, stderrLen: 100, stderrBytes: 300000, stderrTrunc: true},
		{name: "exactly the limit", command: "head -c 5000 /dev/zero", limit: 5000,
			stdoutLen: 5000, stdoutBytes: 5000},
		{name: "default limit", command: "yes | head -c 100000", limit: 0,
			stdoutLen: DefaultOutputLimit, stdoutBytes: 100000, stdoutTrunc: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := hostRun(Options{Command: tc.command, Policy: approvedAll, OutputLimit: tc.limit})
			if res.ExitCode != 0 || res.Error != "" {
				t.Fatalf("ExitCode = %d, Error = %q", res.ExitCode, res.Error)
			}
			if len(res.Stdout) != tc.stdoutLen || res.StdoutBytes != tc.stdoutBytes || res.StdoutTruncated != tc.stdoutTrunc {
				t.Errorf("stdout: len %d, bytes %d, truncated %t", len(res.Stdout), res.StdoutBytes, res.StdoutTruncated)
			}
			if len(res.Stderr) != tc.stderrLen || res.StderrBytes != tc.stderrBytes || res.StderrTruncated != tc.stderrTrunc {
				t.Errorf("stderr: len %d, bytes %d, truncated %t", len(res.Stderr), res.StderrBytes, res.StderrTruncated)
			}
		})
	}
}

func TestRunInvalidUTF8(t *testing.T) {
	cases := []struct {
		name      string
		command   string
		limit     int64
		stdout    string
		truncated bool
	}{
		{name: "invalid bytes replaced", command: `printf '\377\376ok\n'`, stdout: "\uFFFDok\n"},
		{name: "valid multibyte kept", command: `printf 'h\303\251'`, stdout: "hé"},
		{name: "cut inside a character", command: `printf 'a\303\251'`, limit: 2, stdout: "a", truncated: true},
		{name: "replacement longer than limit", command: `printf 'a\377b\377'`, limit: 4,
			stdout: "a\uFFFD", truncated: true},
		{name: "invalid tail not cut", command: `printf 'a\303'`, stdout: "a\uFFFD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := hostRun(Options{Command: tc.command, Policy: approvedAll, OutputLimit: tc.limit})
			if res.Stdout != tc.stdout || res.StdoutTruncated != tc.truncated {
				t.Errorf("Stdout = %q (truncated %t), want %q (%t)", res.Stdout, res.StdoutTruncated, tc.stdout, tc.truncated)
			}
			if !utf8.ValidString(res.Stdout) {
				t.Errorf("Stdout %q is not valid UTF-8", res.Stdout)
			}
			line, _, sha, err := Encode(res)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseLog(line, sha)
			if err != nil || back.Stdout != res.Stdout {
				t.Errorf("round trip: %+v, %v", back, err)
			}
		})
	}
}

func TestRunTimeout(t *testing.T) {
	cases := []struct {
		name    string
		command string
		timeout time.Duration
		grace   time.Duration
		// minDuration is a lower bound on the run, to prove the grace was
		// waited for.
		minDuration time.Duration
		stdout      string
	}{
		{name: "sleep stopped by SIGTERM", command: "echo started; sleep 10", timeout: 200 * time.Millisecond,
			grace: time.Second, minDuration: 200 * time.Millisecond, stdout: "started\n"},
		{name: "SIGTERM ignored then SIGKILL after grace", command: "sh -c \"trap '' TERM; echo ready; sleep 10; echo late\"",
			timeout: 500 * time.Millisecond, grace: 300 * time.Millisecond, minDuration: 800 * time.Millisecond,
			stdout: "ready\n"},
		{name: "busy loop in a pipeline", command: "while :; do :; done | cat", timeout: 200 * time.Millisecond,
			grace: time.Second, minDuration: 200 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res := hostRun(Options{Command: tc.command, Policy: approvedAll, Timeout: tc.timeout, Grace: tc.grace})
			elapsed := time.Since(start)
			if !res.TimedOut || res.ExitCode != ExitTimeout {
				t.Errorf("TimedOut = %t, ExitCode = %d, want true, %d", res.TimedOut, res.ExitCode, ExitTimeout)
			}
			if res.Stdout != tc.stdout {
				t.Errorf("Stdout = %q, want %q", res.Stdout, tc.stdout)
			}
			// The commands would run 10 s or forever: ending well before
			// shows they were stopped, not finished.
			if elapsed < tc.minDuration || elapsed > 8*time.Second {
				t.Errorf("run took %s, want at least %s and well under the command's 10 s", elapsed, tc.minDuration)
			}
			// The runner's shell dies at the first SIGTERM; a program that
			// ignores it holds the run until the SIGKILL.
			if res.DurationMillis < tc.timeout.Milliseconds() {
				t.Errorf("DurationMillis = %d, want at least the timeout %s", res.DurationMillis, tc.timeout)
			}
		})
	}
}

func TestRunForwardsSignal(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	signals := make(chan os.Signal, 1)
	done := make(chan *Result, 1)
	go func() {
		done <- hostRun(Options{
			Command: "sh -c \"trap 'echo got TERM; exit 7' TERM; touch started; sleep 10 & wait\"",
			Policy:  approvedAll,
			Dir:     dir,
			Grace:   time.Second,
			Signals: signals,
		})
	}()
	waitForFile(t, started, 2*time.Second)
	signals <- syscall.SIGTERM
	var res *Result
	select {
	case res = <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return after SIGTERM")
	}
	if res.ExitCode != ExitSignalBase+int(syscall.SIGTERM) || res.TimedOut {
		t.Errorf("ExitCode = %d, TimedOut = %t", res.ExitCode, res.TimedOut)
	}
	if !strings.Contains(res.Error, "terminated") {
		t.Errorf("Error = %q, want it to name the signal", res.Error)
	}
	if res.Stdout != "got TERM\n" {
		t.Errorf("Stdout = %q, want the command's trap output", res.Stdout)
	}
}

func TestRunClosedSignalChannel(t *testing.T) {
	signals := make(chan os.Signal)
	close(signals)
	res := hostRun(Options{Command: "sleep 0.2; echo ok", Policy: approvedAll, Signals: signals})
	if res.ExitCode != 0 || res.Stdout != "ok\n" || res.Error != "" {
		t.Errorf("result = %+v", res)
	}
}

// TestRunProcessOutsideGroup shows that a process which left the command's
// process group and still holds stdout open does not keep Run waiting for
// it: Run returns while that process is still alive.
func TestRunProcessOutsideGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// The shell waits until the escaped process is up, so it holds stdout
	// when the group is killed. The runner's shell interrupts the programs
	// it started as it exits; the escaped process ignores that too.
	res := hostRun(Options{
		Command: `setsid sh -c 'trap "" INT; echo $$ > pid.tmp; mv pid.tmp pid; exec sleep 60' & ` +
			`while [ ! -e pid ]; do sleep 0.01; done; echo done`,
		Policy: approvedAll,
		Dir:    dir,
	})
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	alive := syscall.Kill(pid, 0) == nil
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if res.ExitCode != 0 || res.Stdout != "done\n" {
		t.Errorf("result = %+v", res)
	}
	if !alive {
		t.Errorf("Run waited for the escaped process to exit; it must stop reading after the drain timeout")
	}
}
