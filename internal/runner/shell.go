package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// ShellSubcommand is the runner's subcommand that interprets one command
// line under a policy:
//
//	runner sh --policy=JSON -c COMMAND
//
// with the policy in several --policy flags when it is long (PolicyArgs).
// Run starts it in the command's process group; it is not meant to be
// called by hand.
const ShellSubcommand = "sh"

// ExitSyntaxError is the exit status of a command line that does not
// parse, as bash uses.
const ExitSyntaxError = 2

// Shell is one command line for the runner's shell, the policy it runs
// under and where it runs. The shell is mvdan.cc/sh/v3/interp reading the
// line with the parser the judge uses (syntax.NewParser(): bash), so the
// line means the same thing to the judge and to the shell.
type Shell struct {
	// Command is the command line.
	Command string
	// Enforcer judges the line, then every simple command and every
	// redirection as it runs. Required.
	Enforcer *Enforcer
	// Dir is the working directory; empty means the process's own.
	Dir string
	// Env is the environment; nil means the process's own.
	Env []string
	// Stdin, Stdout and Stderr are the shell's standard streams; nil
	// means none (reads see end of file, writes are discarded).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Exec runs a program the Enforcer allowed. Nil means
	// interp.DefaultExecHandler, which starts it in the runner's process
	// group. Tests and fuzzers record instead.
	Exec interp.ExecHandlerFunc
	// Open opens a file the Enforcer allowed. Nil means
	// interp.DefaultOpenHandler.
	Open interp.OpenHandlerFunc
}

// killTimeout is how long a program the shell started has between the
// interrupt and the kill when the shell stops it after a refusal.
const killTimeout = DefaultGrace

// Run interprets the command line and returns its exit status: the status
// of the last command (exit's argument, 128+N for a program killed by
// signal N), ExitSyntaxError when the line does not parse, and
// ExitCannotExecute when the Enforcer refused the line, a simple command or
// a write. A refusal writes one line, starting with RefusalPrefix, to
// Stderr, and nothing after it starts: the shell stops and interrupts the
// programs it still runs.
func (s Shell) Run(ctx context.Context) int {
	stderr := s.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	if s.Enforcer == nil {
		_, _ = fmt.Fprintln(stderr, "runner: no policy: a command is never run unjudged")
		return ExitRunnerFailure
	}
	g := &guard{e: s.Enforcer, stderr: stderr}
	if err := s.Enforcer.Line(s.Command); err != nil {
		_ = g.refuse(err) // printed and recorded; the exit status says the rest
		return ExitCannotExecute
	}
	return s.interpret(ctx, g)
}

// interpret parses and runs the line with g between the line and
// everything it runs or opens. It does not judge the whole line first, so
// tests can show that the runtime checks hold on their own.
func (s Shell) interpret(ctx context.Context, g *guard) int {
	file, err := syntax.NewParser().Parse(strings.NewReader(s.Command), "")
	if err != nil {
		_, _ = fmt.Fprintf(g.stderr, "runner: %v\n", err)
		return ExitSyntaxError
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g.mu.Lock()
	g.cancel = cancel
	g.mu.Unlock()
	if s.Stdin == nil {
		devNull, err := os.Open(os.DevNull)
		if err != nil {
			_, _ = fmt.Fprintf(g.stderr, "runner: failed to open %s: %v\n", os.DevNull, err)
			return ExitRunnerFailure
		}
		defer func() { _ = devNull.Close() }()
		s.Stdin = devNull
	}
	r, err := interp.New(s.options(g)...)
	if err != nil {
		_, _ = fmt.Fprintf(g.stderr, "runner: failed to start the shell: %v\n", err)
		return ExitRunnerFailure
	}
	err = runRecovered(ctx, r, file)
	switch {
	case g.refused() != nil:
		return ExitCannotExecute
	case errors.Is(err, errShellPanicked):
		_, _ = fmt.Fprintf(g.stderr, "runner: %v\n", err)
		return ExitRunnerFailure
	}
	return shellStatus(err, g.stderr)
}

// errShellPanicked marks a line the interpreter itself failed on.
var errShellPanicked = errors.New("the shell failed")

// runRecovered runs the interpreter, turning a panic of the interpreter
// (a bug: test -R with an empty name, for one) into an error, so the
// runner still reports a result. Nothing after the panic runs.
func runRecovered(ctx context.Context, r *interp.Runner, file *syntax.File) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errShellPanicked, p)
		}
	}()
	return r.Run(ctx, file)
}

// options are the interpreter's options: the standard streams, the
// environment and the handlers that put the Enforcer between the line and
// everything it runs or opens.
func (s Shell) options(g *guard) []interp.RunnerOption {
	env := s.Env
	if env == nil {
		env = os.Environ()
	}
	open := s.Open
	if open == nil {
		open = interp.DefaultOpenHandler()
	}
	execs := []func(interp.ExecHandlerFunc) interp.ExecHandlerFunc{g.exec}
	if s.Exec != nil {
		execs = append(execs, func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return s.Exec })
	} else {
		execs = append(execs, func(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
			return interp.DefaultExecHandler(killTimeout)
		})
	}
	return []interp.RunnerOption{
		interp.Dir(s.Dir),
		interp.Env(expand.ListEnviron(env...)),
		interp.StdIO(s.Stdin, s.Stdout, gate{g}),
		interp.CallHandler(g.call),
		interp.ExecHandlers(execs...),
		interp.OpenHandler(g.open(open)),
	}
}

// shellStatus turns what the interpreter returned into an exit status.
func shellStatus(err error, stderr io.Writer) int {
	var status interp.ExitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		return int(status)
	default:
		_, _ = fmt.Fprintf(stderr, "runner: %v\n", err)
		return ExitRunnerFailure
	}
}

// guard is the Enforcer inside the interpreter's handlers. After the first
// refusal it refuses everything, so nothing after it runs, even in a
// pipeline or a background job whose refusal does not stop the main
// shell by itself.
type guard struct {
	e      *Enforcer
	stderr io.Writer
	cancel context.CancelFunc

	mu      sync.Mutex
	refusal error
	// sources maps each file a redirection opened for reading to its path
	// as written, so that the command it feeds is judged as if it named
	// the file (see reads).
	sources map[*os.File]string
}

// gate is the shell's stderr: it drops what the shell and its programs
// write after a refusal, so the refusal is the last line, and the only
// one (the interpreter prints an error that ends a command substitution
// again, for instance).
type gate struct{ g *guard }

func (w gate) Write(p []byte) (int, error) {
	if w.g.refused() != nil {
		return len(p), nil
	}
	return w.g.stderr.Write(p)
}

// refuse records the first refusal, writes its line and stops the shell.
// It returns the first refusal.
func (g *guard) refuse(err error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refusal == nil {
		g.refusal = err
		_, _ = fmt.Fprintln(g.stderr, err.Error())
		if g.cancel != nil {
			g.cancel()
		}
	}
	return g.refusal
}

// refused returns the first refusal, or nil.
func (g *guard) refused() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refusal
}

// check returns nil when the action judged may go ahead: nothing was
// refused so far and judged returns nil.
func (g *guard) check(judged func() error) error {
	if err := g.refused(); err != nil {
		return err
	}
	if err := judged(); err != nil {
		return g.refuse(err)
	}
	return nil
}

// call judges every simple command, builtins and functions included, with
// its real, expanded argv, and with the file its standard input reads
// when a redirection opened one. Returning an error halts the
// interpreter.
func (g *guard) call(ctx context.Context, args []string) ([]string, error) {
	if err := g.check(func() error { return g.judge(ctx, args) }); err != nil {
		return nil, err
	}
	return args, nil
}

// exec judges a program's argv once more just before it starts: builtins
// such as command, exec and builtin start programs without a call of their
// own.
func (g *guard) exec(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return func(ctx context.Context, args []string) error {
		if err := g.check(func() error { return g.judge(ctx, args) }); err != nil {
			return err
		}
		return next(ctx, args)
	}
}

// judge judges an argv, then, when the command's standard input is a file
// a redirection opened (cmd < FILE, or a compound command's < FILE), the
// argv with that file as one more word, as the judge did: the strictest
// verdict wins. The interpreter gives a redirection's file to a command
// only as its standard input: it refuses descriptors other than 0, 1 and
// 2 and the operator <>, and reads N< FILE (N = 1 or 2) into the standard
// input too.
func (g *guard) judge(ctx context.Context, args []string) error {
	if err := g.e.Args(args); err != nil {
		return err
	}
	if path, ok := g.source(interp.HandlerCtx(ctx).Stdin); ok {
		return g.e.Reads(args, path)
	}
	return nil
}

// open judges every file the shell opens for a redirection or source, and
// remembers the path of each file opened for reading.
func (g *guard) open(next interp.OpenHandlerFunc) interp.OpenHandlerFunc {
	return func(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
		dir := interp.HandlerCtx(ctx).Dir
		if err := g.check(func() error { return g.e.Open(dir, path, flag) }); err != nil {
			return nil, err
		}
		f, err := next(ctx, path, flag, perm)
		if err != nil || flag&writeFlags != 0 {
			return f, err
		}
		return g.remember(f, path)
	}
}

// ShellMain implements "runner sh --policy=JSON -c COMMAND" with the
// process's working directory, environment and standard streams, and
// returns its exit code: Shell.Run's, or ExitRunnerFailure for bad usage or
// a policy that does not decode or compile. --policy may be repeated: the
// parts are joined in order (PolicyArgs).
func ShellMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(ShellSubcommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var policyJSON PolicyParts
	fs.Var(&policyJSON, PolicyFlag, "the policy that judged the run, as JSON (required); repeated, the values are joined in order")
	command := fs.String("c", "", "the command line to interpret (required)")
	if err := fs.Parse(args); err != nil {
		return ExitRunnerFailure
	}
	hasCommand := false
	fs.Visit(func(f *flag.Flag) { hasCommand = hasCommand || f.Name == "c" })
	if !hasCommand || fs.NArg() != 0 {
		_, _ = fmt.Fprintf(stderr, "runner: %s takes --policy=JSON -c COMMAND and nothing else\n", ShellSubcommand)
		return ExitRunnerFailure
	}
	e, err := CompilePolicy(policyJSON.String())
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "runner: %v\n", err)
		return ExitRunnerFailure
	}
	sh := Shell{Command: *command, Enforcer: e, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	return sh.Run(context.Background())
}
