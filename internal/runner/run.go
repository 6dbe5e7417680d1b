// Package runner runs one shell command inside a sandbox Job and reports
// what happened: exit code, stdout and stderr captured separately and capped,
// duration, truncation and timeout. It also decodes that report on the
// controller's side, and writes the read-only folder that "runner
// unpack-skill" lays a skill out in (WriteFolder).
//
// The command line is not handed to the image's /bin/sh. Run starts the
// runner itself again ("runner sh", see Shell) in a new process group, and
// that process interprets the line with mvdan.cc/sh/v3/interp, parsed by
// the same parser as the judge in internal/policy. Before anything runs it
// judges the whole line against the policy that judged the run
// (PolicySnapshot); then it judges every simple command's expanded argv
// and every redirection just before the shell runs or opens it, and
// refuses what the policy does not allow in this run (Enforcer).
//
// The package imports the standard library, mvdan.cc/sh/v3 and
// internal/policy and, on Linux, for the supervision of the programs the
// command starts, golang.org/x/sys/unix and, for its seccomp filter,
// github.com/elastic/go-seccomp-bpf and golang.org/x/net/bpf: all pure Go
// with no Kubernetes code, so cmd/runner stays a small static binary that
// an init container can copy into any image.
package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"
)

// Exit codes of the runner besides the command's own exit status. They
// follow coreutils timeout(1) and POSIX shells.
const (
	// ExitTimeout is used when the runner stopped the command at its timeout.
	ExitTimeout = 124
	// ExitRunnerFailure is used when the runner itself failed: bad usage, a
	// missing working directory, an unexpected error while running.
	ExitRunnerFailure = 125
	// ExitCannotExecute is used when the runner refused the command line, one
	// of its simple commands or a write (the policy does not allow it in
	// this run; the refusal is one line on stderr starting with
	// RefusalPrefix), and, as in POSIX shells, when a program exists but
	// cannot be executed.
	ExitCannotExecute = 126
	// ExitNotFound is used when the runner's own executable, or a program
	// the command names, does not exist.
	ExitNotFound = 127
	// ExitSignalBase plus a signal number is used when the command, or the
	// runner itself, was killed by that signal.
	ExitSignalBase = 128
)

// Defaults applied by Run to zero fields of Options.
const (
	// DefaultOutputLimit is the per-stream capture limit in bytes.
	DefaultOutputLimit = 64 << 10
	// DefaultGrace is the time between SIGTERM and SIGKILL.
	DefaultGrace = 3 * time.Second
)

// drainTimeout bounds how long Run keeps reading output after every process
// it knows of was killed, in case a process left the process group and still
// holds a pipe open.
const drainTimeout = 500 * time.Millisecond

// Options says what Run runs and how.
type Options struct {
	// Command is the shell command line.
	Command string
	// Policy is the PolicySnapshot that judged the run, encoded
	// (PolicySnapshot.Encode). Run refuses to start a command without one,
	// so nothing runs unjudged.
	Policy string
	// Executable is the runner executable that interprets Command, started
	// as Executable sh --policy=Policy -c Command, with Policy in as many
	// --policy flags as PolicyArgs makes of it. Empty means the running
	// executable.
	Executable string
	// Dir is the working directory. Empty means the runner's own.
	Dir string
	// Env is the command's environment. Nil means the runner's own.
	Env []string
	// Timeout stops the command after this long. Zero means no timeout.
	Timeout time.Duration
	// Grace is how long the process group has between SIGTERM and SIGKILL.
	// Zero means DefaultGrace.
	Grace time.Duration
	// OutputLimit is the number of bytes kept of each of stdout and stderr.
	// Zero or less means DefaultOutputLimit.
	OutputLimit int64
	// Kubeconfig, when set, is where Run first writes a kubeconfig for the
	// pod's ServiceAccount (WriteKubeconfig), when its token is mounted in
	// ServiceAccountDir; the command finds it through $KUBECONFIG.
	Kubeconfig string
	// ServiceAccountDir is where the ServiceAccount's credentials are
	// mounted. Empty means ServiceAccountDir.
	ServiceAccountDir string
	// AwaitFence, when set, is an address ("host:port") the sandbox's
	// network fence denies: the command starts only once a connection to
	// it fails (see AwaitFence), and not at all when one still gets
	// through after FenceWait.
	AwaitFence string
	// FenceWait is how long Run waits for the fence. Zero means
	// DefaultFenceWait.
	FenceWait time.Duration
	// Signals, when not nil, delivers signals the runner received. Each is
	// forwarded to the command's process group; the first one also stops
	// the command as a timeout would, and the result reports it.
	Signals <-chan os.Signal
	// ExecDirs are folders whose programs may run although their file
	// system is writable, for running the runner outside a sandbox (tests,
	// a workstation). In a sandbox it is empty: programs run only from
	// read-only file systems. A file created or changed during the run
	// never runs, wherever it is.
	ExecDirs []string
	// Spans asks for the command's spans on its result (Result.Spans).
	Spans bool
}

// withDefaults returns o with its zero fields filled in.
func (o Options) withDefaults() Options {
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = DefaultOutputLimit
	}
	if o.ServiceAccountDir == "" {
		o.ServiceAccountDir = ServiceAccountDir
	}
	if o.FenceWait <= 0 {
		o.FenceWait = DefaultFenceWait
	}
	return o
}

// getenvFrom looks variables up in env, or in the runner's own environment
// when env is nil, as the command will see them.
func getenvFrom(env []string) func(string) string {
	if env == nil {
		return os.Getenv
	}
	return func(key string) string {
		v := ""
		for _, kv := range env {
			if k, val, ok := strings.Cut(kv, "="); ok && k == key {
				v = val
			}
		}
		return v
	}
}

// stopReason records why the runner stopped the command, if it did.
type stopReason struct {
	timedOut bool
	signal   os.Signal
}

// stopping reports whether the runner has started to stop the command.
func (s stopReason) stopping() bool { return s.timedOut || s.signal != nil }

// Run runs opts.Command with the runner's shell under opts.Policy in a new
// process group, stdin from /dev/null, and waits for it. It never returns
// nil. A policy that is missing or does not compile is ExitRunnerFailure
// and nothing is started; a refusal by the shell is ExitCannotExecute with
// the refusal line in Stderr and Error.
//
// On timeout, or on the first signal from opts.Signals, the whole process
// group gets SIGTERM (or that signal), then SIGKILL after opts.Grace. When the
// shell exits on its own, processes it left running in its group are killed
// at once, since the command is over.
//
// Each stream keeps its first opts.OutputLimit bytes; the rest is read and
// counted, so the command never blocks on a full pipe. Invalid UTF-8 is
// replaced by U+FFFD so the output survives JSON, then the text is cut again
// at a character boundary if the replacement made it longer than the limit.
func Run(opts Options) *Result {
	o := opts.withDefaults()
	res := &Result{}
	e, err := CompilePolicy(o.Policy)
	if err != nil {
		return failed(res, ExitRunnerFailure, err)
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return failed(res, ExitRunnerFailure, fmt.Errorf("failed to find own executable: %w", err))
		}
		o.Executable = exe
	}
	if o.Dir != "" {
		if err := checkDir(o.Dir); err != nil {
			return failed(res, ExitRunnerFailure, err)
		}
	}
	if err := prepareSandbox(o); err != nil {
		return failed(res, ExitRunnerFailure, err)
	}
	p, err := startProcess(o, e)
	if err != nil {
		return failed(res, startExitCode(err), err)
	}
	status, stop, waitErr := p.wait(o)
	res.DurationMillis = p.ended.Sub(p.started).Milliseconds()
	res.ExitCode = status.code()
	switch {
	case p.refusal != nil:
		res.ExitCode = ExitCannotExecute
	case stop.timedOut:
		res.TimedOut = true
		res.ExitCode = ExitTimeout
	case stop.signal != nil:
		res.ExitCode = ExitSignalBase + signalNumber(stop.signal)
		res.Error = fmt.Sprintf("runner received signal %s; command stopped", stop.signal)
	case waitErr != nil:
		res.ExitCode = ExitRunnerFailure
		res.Error = fmt.Sprintf("failed to wait for %s: %v", o.Executable, waitErr)
	}
	p.spans.report(res, p.started, p.ended)
	res.Stdout, res.StdoutTruncated, res.StdoutBytes = p.stdout.result()
	res.Stderr, res.StderrTruncated, res.StderrBytes = p.stderr.result()
	if p.refusal != nil {
		// The supervisor's refusal is the last line, as the shell's are.
		line := p.refusal.Error()
		if res.Stderr != "" && !strings.HasSuffix(res.Stderr, "\n") {
			res.Stderr += "\n"
		}
		res.Stderr += line + "\n"
		res.Error = line
	}
	if res.ExitCode == ExitCannotExecute && res.Error == "" {
		res.Error = RefusalIn(res.Stderr)
	}
	for _, err := range []error{p.stdout.err, p.stderr.err} {
		if err != nil && res.Error == "" {
			res.Error = err.Error()
		}
	}
	return res
}

// failed fills res for a command that could not be started.
func failed(res *Result, code int, err error) *Result {
	res.ExitCode = code
	res.Error = err.Error()
	return res
}

// checkDir verifies that dir is a directory.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("failed to use working directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("failed to use working directory %s: not a directory", dir)
	}
	return nil
}

// startExitCode maps an error from starting the runner's shell to an exit
// code the way a shell does for a command it cannot run.
func startExitCode(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ExitNotFound
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return ExitCannotExecute
	default:
		return ExitRunnerFailure
	}
}

// exitStatus is how the runner's shell ended: its wait status, or the
// error that kept the runner from learning it.
type exitStatus struct {
	status syscall.WaitStatus
	err    error
}

// code returns the shell's exit status, or 128+N when it was killed by
// signal N, or ExitRunnerFailure when there is no status.
func (e exitStatus) code() int {
	switch {
	case e.err != nil:
		return ExitRunnerFailure
	case e.status.Signaled():
		return ExitSignalBase + int(e.status.Signal())
	case e.status.Exited():
		return e.status.ExitStatus()
	default:
		return ExitRunnerFailure
	}
}

// signalNumber returns the number of a syscall signal, or SIGTERM's for any
// other kind.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return int(syscall.SIGTERM)
}

// process is the started runner's shell and the readers of its output.
type process struct {
	pid     int
	started time.Time
	ended   time.Time
	stdout  *capture
	stderr  *capture
	// outputDone is closed when both readers have finished.
	outputDone chan struct{}
	// exited receives how the shell ended.
	exited chan exitStatus
	// killTree kills every process of the command, in its process group
	// or not.
	killTree func()
	// treeGone is closed once no process of the command is left.
	treeGone chan struct{}
	// refusal is the program the supervisor refused, if any; it is set
	// before treeGone is closed.
	refusal *Refusal
	// spans records the programs the supervisor judged, when asked.
	spans *spanLog
}

// nowFunc is the clock of the process's start and end.
var nowFunc = time.Now

// startProcess starts the runner's shell in its own process group, under
// the supervisor that judges every program it and its descendants start,
// with one pipe per output stream and a reader on each. The programs the
// shell starts stay in that group, so stopping the group stops them all.
func startProcess(o Options, e *Enforcer) (*process, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("failed to create stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return nil, fmt.Errorf("failed to create stderr pipe: %w", err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		closeAll(outR, outW, errR, errW)
		return nil, fmt.Errorf("failed to open %s: %w", os.DevNull, err)
	}
	p := &process{
		stdout:     newCapture("stdout", outR, o.OutputLimit),
		stderr:     newCapture("stderr", errR, o.OutputLimit),
		outputDone: make(chan struct{}),
		exited:     make(chan exitStatus, 1),
		treeGone:   make(chan struct{}),
		spans:      newSpanLog(o.Spans),
	}
	argv := append(append([]string{o.Executable, ShellSubcommand}, PolicyArgs(o.Policy)...), "-c", o.Command)
	err = startSupervised(o, e, argv, []*os.File{devNull, outW, errW}, p)
	closeAll(devNull, outW, errW)
	if err != nil {
		closeAll(outR, errR)
		return nil, err
	}
	go func() {
		done := make(chan struct{})
		go func() { p.stderr.readAll(); close(done) }()
		p.stdout.readAll()
		<-done
		closeAll(outR, errR)
		close(p.outputDone)
	}()
	return p, nil
}

// waiter holds the state of process.wait: which events it still expects
// and why the runner is stopping the command, if it is.
type waiter struct {
	p    *process
	o    Options
	stop stopReason
	// Channels set to nil once handled or no longer relevant.
	exited     <-chan exitStatus
	outputDone <-chan struct{}
	signals    <-chan os.Signal
	timeout    <-chan time.Time
	kill       <-chan time.Time
	drain      <-chan time.Time
	status     exitStatus
}

// wait waits for the shell to exit and for its output to be read, enforcing
// the timeout, forwarding signals and killing the process group as Run
// describes. It returns the shell's status, why the runner stopped it if it
// did, and an error if waiting failed.
func (p *process) wait(o Options) (exitStatus, stopReason, error) {
	w := &waiter{p: p, o: o, exited: p.exited, outputDone: p.outputDone, signals: o.Signals}
	if o.Timeout > 0 {
		t := time.NewTimer(o.Timeout)
		defer t.Stop()
		w.timeout = t.C
	}
	for w.exited != nil || w.outputDone != nil {
		w.next()
	}
	// Whatever is left of the command has no output open and the shell
	// is gone: the command is over.
	p.signalGroup(syscall.SIGKILL)
	p.killTree()
	<-p.treeGone
	return w.status, w.stop, w.status.err
}

// next handles one event.
func (w *waiter) next() {
	select {
	case w.status = <-w.exited:
		w.exited, w.timeout, w.signals = nil, nil, nil
		if !w.stop.stopping() {
			w.killNow()
		}
	case <-w.outputDone:
		w.outputDone = nil
	case <-w.timeout:
		w.timeout = nil
		if !w.stop.stopping() {
			w.stop.timedOut = true
			w.startStopping(syscall.SIGTERM)
		}
	case sig, ok := <-w.signals:
		switch {
		case !ok:
			w.signals = nil
		case w.stop.stopping():
			w.p.signalGroup(sig)
		default:
			w.stop.signal = sig
			w.startStopping(sig)
		}
	case <-w.kill:
		w.killNow()
	case <-w.drain:
		w.drain = nil
		w.p.stdout.abandon()
		w.p.stderr.abandon()
	}
}

// startStopping sends sig to the group and arms SIGKILL after the grace.
func (w *waiter) startStopping(sig os.Signal) {
	w.p.signalGroup(sig)
	w.kill = time.After(w.o.Grace)
}

// killNow sends SIGKILL to the group and arms the drain timeout.
func (w *waiter) killNow() {
	w.p.signalGroup(syscall.SIGKILL)
	w.kill, w.drain = nil, time.After(drainTimeout)
}

// signalGroup sends sig to every process in the shell's process group.
// Errors are ignored: the group may already be gone.
func (p *process) signalGroup(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	_ = syscall.Kill(-p.pid, s)
}

// closeAll closes files, ignoring errors.
func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
