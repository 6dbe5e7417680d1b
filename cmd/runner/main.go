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
// one. Linux refuses any one argument longer than 128 KiB, so a policy
// whose JSON is longer than runner.PolicyPartBytes comes in parts, one
// --policy flag each, which the runner joins in order before it decodes
// them (runner.PolicyArgs):
//
//	--policy='{"defaultAction":"Ask","rules":[…' --policy='…],"approved":false}'
//
// The runner then starts itself again as the command's shell, with the
// policy in parts the same way,
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
// A warm sandbox is a pod started before its command exists. Its main
// container runs
//
//	/kubeskills/bin/runner serve --handoff-sha256=HEX --policy-generation=N \
//	    --skill-hash=H --idle-timeout=10m --max-timeout=5m \
//	    --ready-file=/tmp/.kubeskills-ready --result-file=/dev/termination-log
//
// and waits, listening on --listen (:8070), for exactly one command, which
// the operator POSTs to /v1/handoff with the secret whose SHA-256 is
// --handoff-sha256 as a bearer token (runner.HandOff). A handoff names the
// generation of the policy and the skill the pod was made for, which must
// be --policy-generation and --skill-hash, the command, the policy that
// judged it, a timeout of at most --max-timeout and an output limit. serve
// runs that command as run does (with --kubeconfig and --await-fence done
// once, before it listens), answers the operator with the result on the
// same connection, reports the result as run does and exits. Once ready to
// take a command it creates --ready-file, which the pod's startup probe
// checks with
//
//	runner ready /tmp/.kubeskills-ready
//
// which exits 0 when the file exists and 1 when it does not. When no
// command was handed over within --idle-timeout, or a signal came first,
// serve reports a result with "noCommand":true and exit code 125: nothing
// ran.
//
// The result's exit code is the command's own exit status (128+N when it
// was killed by signal N); 124 when the timeout expired; 128+N when the
// runner itself received signal N (SIGTERM, SIGINT or SIGHUP, forwarded to
// the command); 126 when the runner refused the line, one of its commands
// or a write, or a program cannot be executed; 127 when a program does not
// exist; 2 when the line does not parse; 125 when the runner failed: bad
// usage, no policy or one that does not compile, a missing working
// directory, or a fence not in force.
//
// run and serve exit with that code when they have no --result-file.
// With one, as in a sandbox, the result file alone holds the command's
// status, and they exit 0 once they wrote the result there and 125 when
// they could not. So the command container of a sandbox never exits 128
// of its own: that code is left to the container runtime, which gives it
// to a container it could not start (reason StartError), and a sandbox Job
// makes another pod for such a one, whose command never ran
// (sandbox.PodFailurePolicy). install and unpack-skill exit 0 on success
// and 125 on any failure, with the reason on stderr; ready exits 125 when
// it is not given exactly one file.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubeskills/kubeskills/internal/runner"
)

const usage = `Usage:
  runner run --policy=JSON [flags] -- COMMAND
      Run COMMAND with the runner's shell under the policy that judged it
      and report its result. --policy may be repeated: the parts are
      joined in order.
  runner serve --handoff-sha256=HEX --idle-timeout=D --max-timeout=D [flags]
      Wait for one command handed over by the operator over HTTP, run it
      as run does, answer with its result and report it.
  runner ready FILE
      Exit 0 when FILE exists, 1 when it does not (serve's --ready-file).
  runner install DEST
      Copy this executable to DEST with mode 0555.
  runner unpack-skill --to DIR SHARD_DIR...
      Write the skill whose ConfigMap shards are mounted at SHARD_DIR...
      (shard 0 first) into DIR, read-only.

Run 'runner run -h' and 'runner serve -h' for their flags.
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
	case "serve":
		return serveCommand(args[1:], stdout, stderr)
	case "ready":
		return ready(args[1:], stderr)
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

// runCommand implements "runner run".
func runCommand(args []string, stdout, stderr io.Writer) int {
	f, command, usageErr, err := runner.ParseRunArgs(args, stderr)
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
			Policy:      f.Policy,
			Dir:         f.Dir,
			Kubeconfig:  f.Kubeconfig,
			AwaitFence:  f.AwaitFence,
			Timeout:     f.Timeout,
			Grace:       f.Grace,
			OutputLimit: f.OutputLimit,
			Signals:     signals,
			ExecDirs:    f.ExecDirs,
			Spans:       f.Spans,
		})
	}
	if res.Error != "" && usageErr == nil {
		_, _ = fmt.Fprintf(stderr, "runner: %s\n", res.Error)
	}
	if err := runner.Report(res, stdout, f.ResultFile); err != nil {
		_, _ = fmt.Fprintf(stderr, "runner: %v\n", err)
		return runner.ExitRunnerFailure
	}
	if f.ResultFile != "" {
		return 0
	}
	return res.ExitCode
}

// serveCommand implements "runner serve".
func serveCommand(args []string, stdout, stderr io.Writer) int {
	f, usageErr, err := runner.ParseServeArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return runner.ExitRunnerFailure
	}
	var res *runner.Result
	reported := false
	var reportErr error
	if usageErr != nil {
		_, _ = fmt.Fprintf(stderr, "runner: %v\n", usageErr)
		res = &runner.Result{ExitCode: runner.ExitRunnerFailure, Error: usageErr.Error(), NoCommand: true}
	} else {
		res = serve(f, stdout, func(err error) { reported, reportErr = true, err })
		if res.Error != "" {
			_, _ = fmt.Fprintf(stderr, "runner: %s\n", res.Error)
		}
	}
	if !reported {
		reportErr = runner.Report(res, stdout, f.ResultFile)
	}
	if reportErr != nil {
		_, _ = fmt.Fprintf(stderr, "runner: %v\n", reportErr)
		return runner.ExitRunnerFailure
	}
	if f.ResultFile != "" {
		return 0
	}
	return res.ExitCode
}

// serve listens on f.Listen and waits there for one command
// (runner.Serve), with the signals the runner receives forwarded. reported
// is called when runner.Serve reported the result itself.
func serve(f runner.ServeFlags, stdout io.Writer, reported func(error)) *runner.Result {
	l, err := net.Listen("tcp", f.Listen)
	if err != nil {
		return &runner.Result{ExitCode: runner.ExitRunnerFailure, NoCommand: true,
			Error: fmt.Sprintf("failed to listen for handoffs on %s: %v", f.Listen, err)}
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(signals)
	return runner.Serve(runner.ServeOptions{
		Listener:         l,
		SecretSHA256:     f.HandoffSHA256,
		PolicyGeneration: f.PolicyGeneration,
		SkillHash:        f.SkillHash,
		IdleTimeout:      f.IdleTimeout,
		MaxTimeout:       f.MaxTimeout,
		ReadyFile:        f.ReadyFile,
		Run: runner.Options{
			Dir:        f.Dir,
			Kubeconfig: f.Kubeconfig,
			AwaitFence: f.AwaitFence,
			Grace:      f.Grace,
			Signals:    signals,
			ExecDirs:   f.ExecDirs,
		},
		ResultFile: f.ResultFile,
		Log:        stdout,
		Reported:   reported,
	})
}

// ready implements "runner ready FILE": it exits 0 when FILE exists and 1
// when it does not.
func ready(args []string, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "" {
		_, _ = fmt.Fprintf(stderr, "runner: ready takes exactly one file\n%s", usage)
		return runner.ExitRunnerFailure
	}
	if _, err := os.Stat(args[0]); err != nil {
		_, _ = fmt.Fprintf(stderr, "runner: not ready: %v\n", err)
		return 1
	}
	return 0
}
