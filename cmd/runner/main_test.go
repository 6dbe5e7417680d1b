package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// asMainEnv makes the test binary behave as the runner, so tests can run it
// as a real process and send it signals.
const asMainEnv = "KUBESKILLS_RUNNER_TEST_AS_MAIN"

// TestMain runs main when the test binary is started as the runner, and
// when run starts it as the runner's shell ("runner sh").
func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" || len(os.Args) > 1 && os.Args[1] == runner.ShellSubcommand {
		main()
	}
	os.Exit(m.Run())
}

// Policies for the tests, as the sandbox passes them with --policy.
var (
	// approvedAll lets everything run: Always by default, and approved.
	approvedAll = "--policy=" + runner.PolicySnapshot{DefaultAction: policy.Always, Approved: true}.Encode()
	// echoOnly allows echo and nothing else, in a run nobody approved.
	echoOnly = "--policy=" + runner.PolicySnapshot{
		DefaultAction: policy.Ask,
		Rules:         []runner.SnapshotRule{{Pattern: "echo *", Action: policy.Always}, {Pattern: "rm *", Action: policy.Never}},
	}.Encode()
)

// hostExecDirs let the runner run this machine's programs: outside a
// sandbox the root file system is writable, and programs on a writable
// file system run only from the folders --exec-dir names.
var hostExecDirs = []string{"--exec-dir=/usr", "--exec-dir=/bin", "--exec-dir=/sbin", "--exec-dir=/lib", "--exec-dir=/etc/alternatives"}

// runnerProcess returns a command that runs path as the runner with args.
func runnerProcess(path string, args ...string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	return cmd
}

// readResult decodes the result file and the log the way the controller
// does.
func readResult(t *testing.T, resultFile string, log []byte) *runner.Result {
	t.Helper()
	msg, err := os.ReadFile(resultFile)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.ReadResult(string(msg), func() ([]byte, error) { return log, nil })
	if err != nil {
		t.Fatalf("failed to read result from %q: %v", msg, err)
	}
	return res
}

func TestRunSubcommand(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		exitCode int
		stdout   string
		timedOut bool
		errorHas string
	}{
		{name: "exit code passed through", args: []string{approvedAll, "--", "echo hi; exit 3"}, exitCode: 3, stdout: "hi\n"},
		{name: "allowed by the policy", args: []string{echoOnly, "--", "echo hi"}, stdout: "hi\n"},
		{name: "refused by the policy", args: []string{echoOnly, "--", "echo hi; rm -rf /"},
			exitCode: runner.ExitCannotExecute, errorHas: `kubeskills: refused "echo hi; rm -rf /": the policy says Never`},
		{name: "Ask refused in a run nobody approved", args: []string{echoOnly, "--", "echo hi > out"},
			exitCode: runner.ExitCannotExecute, errorHas: "the policy says Ask and no person approved this run"},
		{name: "no policy", args: []string{"--", "echo hi"}, exitCode: runner.ExitRunnerFailure,
			errorHas: "--policy is required"},
		{name: "policy that does not decode", args: []string{"--policy={", "--", "echo hi"},
			exitCode: runner.ExitRunnerFailure, errorHas: "failed to decode policy"},
		{name: "policy with an unknown field", args: []string{`--policy={"approve":true}`, "--", "echo hi"},
			exitCode: runner.ExitRunnerFailure, errorHas: `unknown field "approve"`},
		{name: "policy that does not compile", args: []string{`--policy={"rules":[{"pattern":"echo *","action":"Sometimes"}]}`,
			"--", "echo hi"}, exitCode: runner.ExitRunnerFailure, errorHas: `rules[0] "echo *": action "Sometimes"`},
		{name: "flags with equals", args: []string{approvedAll, "--timeout=2s", "--output-limit=2", "--", "echo hello"},
			stdout: "he"},
		{name: "working directory", args: []string{approvedAll, "--dir=/", "--", "pwd"}, stdout: "/\n"},
		{name: "timeout", args: []string{approvedAll, "--timeout=200ms", "--grace=500ms", "--", "sleep 5"},
			exitCode: runner.ExitTimeout, timedOut: true},
		{name: "large output", args: []string{approvedAll, "--", "yes | head -c 50000"}, stdout: strings.Repeat("y\n", 25000)},
		{name: "no command", args: []string{approvedAll, "--timeout=1s"}, exitCode: runner.ExitRunnerFailure,
			errorHas: "exactly one command"},
		{name: "command split in words", args: []string{approvedAll, "--", "echo", "hi"}, exitCode: runner.ExitRunnerFailure,
			errorHas: "exactly one command"},
		{name: "negative timeout", args: []string{approvedAll, "--timeout=-1s", "--", "true"}, exitCode: runner.ExitRunnerFailure,
			errorHas: "--timeout"},
		{name: "zero output limit", args: []string{approvedAll, "--output-limit=0", "--", "true"}, exitCode: runner.ExitRunnerFailure,
			errorHas: "--output-limit"},
		{name: "missing directory", args: []string{approvedAll, "--dir=/nonexistent/dir", "--", "true"},
			exitCode: runner.ExitRunnerFailure, errorHas: "/nonexistent/dir"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resultFile := filepath.Join(t.TempDir(), "termination-log")
			var stdout, stderr bytes.Buffer
			args := append(append([]string{"run", "--result-file=" + resultFile}, hostExecDirs...), tc.args...)
			// The result holds the command's status; the runner's own says
			// that it wrote the result.
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Errorf("exit code = %d, want 0 with the result written (stderr %q)", code, stderr.String())
			}
			res := readResult(t, resultFile, stdout.Bytes())
			if res.ExitCode != tc.exitCode || res.Stdout != tc.stdout || res.TimedOut != tc.timedOut {
				t.Errorf("result = exit %d, stdout %q, timed out %t", res.ExitCode, res.Stdout, res.TimedOut)
			}
			if !strings.Contains(res.Error, tc.errorHas) || (tc.errorHas == "") != (res.Error == "") {
				t.Errorf("result error = %q, want it to contain %q", res.Error, tc.errorHas)
			}
		})
	}
}

// TestExitCodeWithAndWithoutResultFile: without --result-file the runner
// exits with the command's status. With one, as in a sandbox, it exits 0
// once the result, which holds that status, is written, and 125 when it
// cannot be: a sandbox's command container never exits 128, the code the
// container runtime gives a container it could not start, for which the
// sandbox Job starts another pod.
func TestExitCodeWithAndWithoutResultFile(t *testing.T) {
	for _, status := range []int{0, 3, 128} {
		line := fmt.Sprintf("exit %d", status)
		var stdout, stderr bytes.Buffer
		if code := run(append(append([]string{"run", approvedAll}, hostExecDirs...), "--", line), &stdout, &stderr); code != status {
			t.Errorf("%q without a result file: exit code %d, want %d (stderr %q)", line, code, status, stderr.String())
		}
		resultFile := filepath.Join(t.TempDir(), "termination-log")
		stdout.Reset()
		if code := run(append(append([]string{"run", "--result-file=" + resultFile, approvedAll}, hostExecDirs...), "--", line), &stdout, &stderr); code != 0 {
			t.Errorf("%q with a result file: exit code %d, want 0 (stderr %q)", line, code, stderr.String())
		}
		if res := readResult(t, resultFile, stdout.Bytes()); res.ExitCode != status {
			t.Errorf("%q: result's exit code %d, want %d", line, res.ExitCode, status)
		}
	}
	var stdout, stderr bytes.Buffer
	unwritable := filepath.Join(t.TempDir(), "missing", "termination-log")
	if code := run(append(append([]string{"run", "--result-file=" + unwritable, approvedAll}, hostExecDirs...), "--", "true"), &stdout, &stderr); code != runner.ExitRunnerFailure {
		t.Errorf("result file that cannot be written: exit code %d, want %d", code, runner.ExitRunnerFailure)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		exitCode int
	}{
		{name: "no subcommand", args: nil, exitCode: runner.ExitRunnerFailure},
		{name: "unknown subcommand", args: []string{"exec"}, exitCode: runner.ExitRunnerFailure},
		{name: "unknown flag", args: []string{"run", "--nope", "--", "true"}, exitCode: runner.ExitRunnerFailure},
		{name: "bad duration", args: []string{"run", "--timeout=soon", "--", "true"}, exitCode: runner.ExitRunnerFailure},
		{name: "install without destination", args: []string{"install"}, exitCode: runner.ExitRunnerFailure},
		{name: "install into a file", args: []string{"install", "/dev/null/runner"}, exitCode: runner.ExitRunnerFailure},
		{name: "help", args: []string{"help"}, exitCode: 0},
		{name: "run help", args: []string{"run", "-h"}, exitCode: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.exitCode {
				t.Errorf("exit code = %d, want %d", code, tc.exitCode)
			}
			if tc.exitCode != 0 && stderr.Len() == 0 {
				t.Error("nothing written to stderr")
			}
		})
	}
}

func TestInstallThenRunTheCopy(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "kubeskills", "bin", "runner")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"install", dst}, &stdout, &stderr); code != 0 {
		t.Fatalf("install exit code = %d: %s", code, stderr.String())
	}
	fi, err := os.Stat(dst)
	if err != nil || fi.Mode().Perm() != runner.InstalledMode {
		t.Fatalf("installed file: %v, %v", fi, err)
	}
	resultFile := filepath.Join(t.TempDir(), "termination-log")
	cmd := runnerProcess(dst, "run", "--result-file="+resultFile, approvedAll, "--", "echo from the copy")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running the installed copy: %v", err)
	}
	if res := readResult(t, resultFile, out); res.Stdout != "from the copy\n" || res.ExitCode != 0 {
		t.Errorf("result = %+v", res)
	}
}

func TestRunnerForwardsSIGTERM(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	resultFile := filepath.Join(dir, "termination-log")
	args := append([]string{"run", "--grace=500ms", "--dir=" + dir, "--result-file=" + resultFile, approvedAll}, hostExecDirs...)
	cmd := runnerProcess(self, append(args, "--",
		"sh -c \"trap 'echo stopping; exit 1' TERM; sleep 10 & : > started; wait\"")...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	gomega.NewWithT(t).Eventually(func() error { _, err := os.Stat(filepath.Join(dir, "started")); return err },
		5*time.Second, 5*time.Millisecond).Should(gomega.Succeed(), "the command did not start")
	// The shell writes started itself once sleep is forked, so the signal
	// lands while it waits: one that lands while dash forks can be lost.
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("runner exit = %v, want 0 with the result written", err)
	}
	want := runner.ExitSignalBase + int(syscall.SIGTERM)
	// The command sleeps 10 s: ending well before shows it was stopped.
	if elapsed := time.Since(start); elapsed > 8*time.Second {
		t.Errorf("runner took %s to stop", elapsed)
	}
	res := readResult(t, resultFile, stdout.Bytes())
	if res.ExitCode != want || res.Stdout != "stopping\n" || !strings.Contains(res.Error, "signal") {
		t.Errorf("result = %+v", res)
	}
}

func TestReadySubcommand(t *testing.T) {
	dir := t.TempDir()
	readyFile := filepath.Join(dir, ".kubeskills-ready")
	if err := os.WriteFile(readyFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		exitCode int
	}{
		{name: "file exists", args: []string{readyFile}, exitCode: 0},
		{name: "file missing", args: []string{filepath.Join(dir, "missing")}, exitCode: 1},
		{name: "no file", args: nil, exitCode: runner.ExitRunnerFailure},
		{name: "two files", args: []string{readyFile, readyFile}, exitCode: runner.ExitRunnerFailure},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"ready"}, tc.args...), &stdout, &stderr); code != tc.exitCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tc.exitCode, stderr.String())
			}
			if stdout.Len() != 0 || (tc.exitCode == 0) != (stderr.Len() == 0) {
				t.Errorf("stdout %q, stderr %q: want no output exactly on success", stdout.String(), stderr.String())
			}
		})
	}
}

// Flags of "runner serve" for the tests.
var (
	handoffSecret = "s3cret-handoff"
	handoffSHA    = func() string {
		sum := sha256.Sum256([]byte(handoffSecret))
		return hex.EncodeToString(sum[:])
	}()
	serveFlags = []string{"--handoff-sha256=" + handoffSHA, "--policy-generation=2", "--skill-hash=h1",
		"--idle-timeout=1m", "--max-timeout=1m"}
)

func TestServeUsageErrors(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		errorHas string
	}{
		{name: "no secret", args: []string{"--idle-timeout=1m", "--max-timeout=1m"}, errorHas: "--handoff-sha256 is required"},
		{name: "secret not hashed", args: []string{"--handoff-sha256=" + handoffSecret, "--idle-timeout=1m", "--max-timeout=1m"},
			errorHas: "64 hex digits"},
		{name: "no idle timeout", args: []string{"--handoff-sha256=" + handoffSHA, "--max-timeout=1m"}, errorHas: "--idle-timeout"},
		{name: "no maximum timeout", args: []string{"--handoff-sha256=" + handoffSHA, "--idle-timeout=1m"}, errorHas: "--max-timeout"},
		{name: "negative policy generation", args: append(slices.Clone(serveFlags), "--policy-generation=-1"),
			errorHas: "--policy-generation"},
		{name: "zero grace", args: append(slices.Clone(serveFlags), "--grace=0s"), errorHas: "--grace"},
		{name: "an argument", args: append(slices.Clone(serveFlags), "echo hi"), errorHas: "no arguments"},
		{name: "address that cannot be listened on", args: append(slices.Clone(serveFlags), "--listen=256.0.0.1:1"), errorHas: "failed to listen"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resultFile := filepath.Join(t.TempDir(), "termination-log")
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"serve", "--result-file=" + resultFile}, tc.args...), &stdout, &stderr); code != 0 {
				t.Errorf("exit code = %d, want 0 with the result written (stderr %q)", code, stderr.String())
			}
			res := readResult(t, resultFile, stdout.Bytes())
			if !res.NoCommand || res.ExitCode != runner.ExitRunnerFailure || !strings.Contains(res.Error, tc.errorHas) {
				t.Errorf("result = %+v, want no command and an error saying %q", res, tc.errorHas)
			}
			if !strings.Contains(stderr.String(), tc.errorHas) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tc.errorHas)
			}
		})
	}
	for _, args := range [][]string{{"--nope"}, {"--idle-timeout=soon"}} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"serve"}, args...), &stdout, &stderr); code != runner.ExitRunnerFailure || stderr.Len() == 0 {
			t.Errorf("serve %q: exit code %d, stderr %q, want %d and the reason", args, code, stderr.String(), runner.ExitRunnerFailure)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"serve", "-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("serve -h: exit code %d", code)
	}
}

// startServe starts the test binary as "runner serve" on a free port of
// 127.0.0.1 and waits until it is ready. It returns the process, its
// address, its result file and its stdout.
func startServe(t *testing.T) (cmd *exec.Cmd, addr, resultFile string, stdout *bytes.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	resultFile, readyFile := filepath.Join(dir, "termination-log"), filepath.Join(dir, ".kubeskills-ready")
	args := append([]string{"serve", "--listen=" + addr, "--ready-file=" + readyFile, "--result-file=" + resultFile,
		"--dir=" + dir, "--grace=500ms"}, serveFlags...)
	cmd = runnerProcess(self, append(args, hostExecDirs...)...)
	stdout = &bytes.Buffer{}
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	gomega.NewWithT(t).Eventually(func() int { return run([]string{"ready", readyFile}, io.Discard, io.Discard) },
		10*time.Second, 5*time.Millisecond).Should(gomega.BeZero(), "runner serve did not get ready")
	return cmd, addr, resultFile, stdout
}

func TestServeSubcommand(t *testing.T) {
	cmd, addr, resultFile, stdout := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := runner.Handoff{RunUID: "run-1", Command: "echo hi; exit 3",
		Policy:        runner.PolicySnapshot{DefaultAction: policy.Always, Approved: true}.Encode(),
		TimeoutMillis: 10_000, OutputLimit: 100, PolicyGeneration: 2, SkillHash: "h1"}
	wrong := h
	wrong.SkillHash = "h2"
	if _, err := runner.HandOff(ctx, &http.Client{}, addr, handoffSecret, wrong, nil); !errors.Is(err, runner.ErrNotHandedOver) {
		t.Errorf("handoff for another skill: %v, want ErrNotHandedOver", err)
	}
	res, err := runner.HandOff(ctx, &http.Client{}, addr, handoffSecret, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Stdout != "hi\n" || res.NoCommand {
		t.Errorf("result = %+v", res)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("runner exit = %v, want 0 with the result written", err)
	}
	if written := readResult(t, resultFile, stdout.Bytes()); !reflect.DeepEqual(written, res) {
		t.Errorf("result file holds %+v, the operator got %+v", written, res)
	}
}

func TestServeStopsOnSIGTERMBeforeHandoff(t *testing.T) {
	cmd, _, resultFile, stdout := startServe(t)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("runner exit = %v, want 0 with the result written", err)
	}
	res := readResult(t, resultFile, stdout.Bytes())
	if !res.NoCommand || res.ExitCode != runner.ExitRunnerFailure || !strings.Contains(res.Error, "stopped by signal terminated") {
		t.Errorf("result = %+v", res)
	}
}
