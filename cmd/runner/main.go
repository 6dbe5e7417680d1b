// Command runner is the wrapper that runs one shell command inside a
// kubeskills sandbox Job and reports its result.
//
// An init container running the operator image copies the runner into a
// shared volume:
//
//	runner install /kubeskills/bin/runner
//
// and the main container, built from any image (it needs no shell of its
// own), runs:
//
//	/kubeskills/bin/runner run --timeout=30s --output-limit=65536 \
//	    --result-file=/dev/termination-log \
//	    --policy='{"defaultAction":"Ask","rules":[...],"approved":false}' -- 'COMMAND'
//
// In a sandbox whose policy names a ServiceAccount, run also gets
// --kubeconfig=/tmp/.kube/config (the command's $KUBECONFIG): before the
// command starts, the runner writes there a kubeconfig for the
// ServiceAccount's token mounted in /var/run/secrets/kubernetes.io/serviceaccount
// (see runner.WriteKubeconfig). Without a mounted token it writes nothing.
//
// --policy is the policy that judged the run (see runner.PolicySnapshot):
// its rules and default action, the allowed-tools of the skill the run
// serves and whether a person approved it. run refuses to start without
// one. The runner then starts itself again as the command's shell,
//
//	runner sh --policy=JSON -c 'COMMAND'
//
// in a new process group. That shell interprets the line with
// mvdan.cc/sh/v3/interp, parsed as the judge parses it, judges the whole
// line first and then every simple command's expanded argv and every
// redirection as it runs, and refuses, with exit code 126 and one stderr
// line starting with "kubeskills: refused ", what the policy answers Never,
// what it answers Ask in a run no person approved, and writes to anything
// but /dev/null in such a run. Programs it starts run in the same process
// group, so the timeout and forwarded signals reach them.
//
// The runner writes the full result as one line starting with
// "KUBESKILLS-RESULT " to its stdout (the container log), and the result or,
// when it is larger than 4096 bytes, a summary pointing to that line, to the
// result file (the termination message). Package
// github.com/kubeskills/kubeskills/internal/runner decodes both.
//
// When the command serves a skill, a second init container lays the skill
// out from the folders where its ConfigMap shards are mounted, shard 0
// first:
//
//	runner unpack-skill --to /skill /kubeskills/shards/0 /kubeskills/shards/1
//
// It writes SKILL.md and every bundled file, decoded, into the folder: files
// 0444, executable files 0555, folders 0555. The folder must be absent or
// empty; shards of two versions of the skill are refused.
//
// Exit codes: the command's own exit status (128+N when it was killed by
// signal N); 124 when the timeout expired; 128+N when the runner itself
// received signal N (SIGTERM, SIGINT or SIGHUP, forwarded to the command);
// 126 when the runner refused the line, one of its commands or a write, or
// a program cannot be executed; 127 when a program does not exist; 2 when
// the line does not parse; 125 when the runner failed: bad usage, no
// policy or one that does not compile, a missing working directory, or a
// result it could not write. install and unpack-skill exit 0 on success
// and 125 on any failure, with the reason on stderr.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kubeskills/kubeskills/internal/runner"
)

const usage = `Usage:
  runner run --policy=JSON [flags] -- COMMAND
      Run COMMAND with the runner's shell under the policy that judged it
      and report its result.
  runner install DEST
      Copy this executable to DEST with mode 0555.
  runner unpack-skill --to DIR SHARD_DIR...
      Write the skill whose ConfigMap shards are mounted at SHARD_DIR...
      (shard 0 first) into DIR, read-only.

Run 'runner run -h' for the flags of run.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return runner.ExitRunnerFailure
	}
	switch args[0] {
	case "run":
		return runCommand(args[1:], stdout, stderr)
	case runner.ShellSubcommand:
		return runner.ShellMain(args[1:], os.Stdin, stdout, stderr)
	case "install":
		return install(args[1:], stderr)
	case "unpack-skill":
		return unpackSkill(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		_, _ = fmt.Fprint(stdout, usage)
		return 0
	default:
		_, _ = fmt.Fprintf(stderr, "runner: unknown subcommand %q\n%s", args[0], usage)
		return runner.ExitRunnerFailure
	}
}

// install implements "runner install DEST".
func install(args []string, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "" {
		_, _ = fmt.Fprintf(stderr, "runner: install takes exactly one destination path\n%s", usage)
		return runner.ExitRunnerFailure
	}
	if err := runner.Install(args[0]); err != nil {
		_, _ = fmt.Fprintf(stderr, "runner: %v\n", err)
		return runner.ExitRunnerFailure
	}
	return 0
}

// runFlags holds the flags of "runner run".
type runFlags struct {
	timeout     time.Duration
	grace       time.Duration
	outputLimit int64
	resultFile  string
	dir         string
	policy      string
	kubeconfig  string
	awaitFence  string
	execDirs    []string
}

// parseRunFlags parses the flags of "runner run" and returns them with the
// command string. A usage error after the result file is known is returned
// as usageErr so that it can still be reported as a result.
func parseRunFlags(args []string, stderr io.Writer) (f runFlags, command string, usageErr, parseErr error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, "Usage: runner run [flags] -- COMMAND\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.DurationVar(&f.timeout, "timeout", 0, "stop the command after this long (0: no timeout)")
	fs.DurationVar(&f.grace, "grace", runner.DefaultGrace, "time between SIGTERM and SIGKILL when stopping the command")
	fs.Int64Var(&f.outputLimit, "output-limit", runner.DefaultOutputLimit, "bytes kept of each of stdout and stderr")
	fs.StringVar(&f.resultFile, "result-file", "", "file that receives the result or its summary, e.g. /dev/termination-log")
	fs.StringVar(&f.dir, "dir", "", "working directory of the command (default: the current one)")
	fs.StringVar(&f.policy, "policy", "", "the policy that judged the run, as JSON (required)")
	fs.StringVar(&f.awaitFence, "await-fence", "", "start the command only once a TCP connection to this HOST:PORT, which the sandbox's network fence denies, fails")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "write a kubeconfig for the pod's ServiceAccount here before the command runs, when its token is mounted in "+runner.ServiceAccountDir)
	fs.Func("exec-dir", "also run programs from this folder although its file system is writable (repeatable; outside a sandbox only: in one, programs run only from read-only file systems)", func(dir string) error {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("%q is not an absolute path", dir)
		}
		f.execDirs = append(f.execDirs, filepath.Clean(dir))
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return f, "", nil, err
	}
	switch {
	case fs.NArg() != 1:
		usageErr = fmt.Errorf("run takes exactly one command string after --, got %d arguments", fs.NArg())
	case f.timeout < 0:
		usageErr = fmt.Errorf("--timeout must not be negative, got %s", f.timeout)
	case f.grace <= 0:
		usageErr = fmt.Errorf("--grace must be positive, got %s", f.grace)
	case f.outputLimit <= 0:
		usageErr = fmt.Errorf("--output-limit must be positive, got %d", f.outputLimit)
	case f.policy == "":
		usageErr = errors.New("--policy is required: a command is never run unjudged")
	}
	return f, fs.Arg(0), usageErr, nil
}

// runCommand implements "runner run".
func runCommand(args []string, stdout, stderr io.Writer) int {
	f, command, usageErr, err := parseRunFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return runner.ExitRunnerFailure
	}
	var res *runner.Result
	if usageErr != nil {
		_, _ = fmt.Fprintf(stderr, "runner: %v\n", usageErr)
		res = &runner.Result{ExitCode: runner.ExitRunnerFailure, Error: usageErr.Error()}
	} else {
		signals := make(chan os.Signal, 4)
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		defer signal.Stop(signals)
		res = runner.Run(runner.Options{
			Command:     command,
			Policy:      f.policy,
			Dir:         f.dir,
			Kubeconfig:  f.kubeconfig,
			AwaitFence:  f.awaitFence,
			Timeout:     f.timeout,
			Grace:       f.grace,
			OutputLimit: f.outputLimit,
			Signals:     signals,
			ExecDirs:    f.execDirs,
		})
	}
	if res.Error != "" && usageErr == nil {
		_, _ = fmt.Fprintf(stderr, "runner: %s\n", res.Error)
	}
	if err := runner.Report(res, stdout, f.resultFile); err != nil {
		_, _ = fmt.Fprintf(stderr, "runner: %v\n", err)
		return runner.ExitRunnerFailure
	}
	return res.ExitCode
}
