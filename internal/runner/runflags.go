package runner

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"
)

// RunFlags are the flags of "runner run".
type RunFlags struct {
	Timeout     time.Duration
	Grace       time.Duration
	OutputLimit int64
	ResultFile  string
	Dir         string
	// Policy is the encoded PolicySnapshot: every --policy joined, in
	// order (PolicyArgs).
	Policy     string
	Kubeconfig string
	AwaitFence string
	ExecDirs   []string
	// Spans asks for the command's spans on its result.
	Spans bool
}

// ParseRunArgs parses the arguments of "runner run" and returns its flags
// with the command string. A usage error found once the flags parsed
// (the result file is then known) is returned as usageErr, so that it can
// still be reported as a result; parseErr is flag.ErrHelp for -h, or says
// why the flags do not parse, as written to stderr.
func ParseRunArgs(args []string, stderr io.Writer) (f RunFlags, command string, usageErr, parseErr error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, "Usage: runner run [flags] -- COMMAND\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var policy PolicyParts
	fs.DurationVar(&f.Timeout, "timeout", 0, "stop the command after this long (0: no timeout)")
	fs.DurationVar(&f.Grace, "grace", DefaultGrace, "time between SIGTERM and SIGKILL when stopping the command")
	fs.Int64Var(&f.OutputLimit, "output-limit", DefaultOutputLimit, "bytes kept of each of stdout and stderr")
	fs.StringVar(&f.ResultFile, "result-file", "", "file that receives the result or its summary, e.g. /dev/termination-log")
	fs.StringVar(&f.Dir, "dir", "", "working directory of the command (default: the current one)")
	fs.Var(&policy, PolicyFlag, "the policy that judged the run, as JSON (required); repeated, the values are joined in order")
	fs.StringVar(&f.AwaitFence, "await-fence", "", "start the command only once a TCP connection to this HOST:PORT, which the sandbox's network fence denies, fails")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "write a kubeconfig for the pod's ServiceAccount here before the command runs, when its token is mounted in "+ServiceAccountDir)
	addExecDirFlag(fs, &f.ExecDirs)
	fs.BoolVar(&f.Spans, SpansFlag, false, "report the command's span and a span per program judged with the result, for the run's trace")
	if err := fs.Parse(args); err != nil {
		return f, "", nil, err
	}
	f.Policy = policy.String()
	switch {
	case fs.NArg() != 1:
		usageErr = fmt.Errorf("run takes exactly one command string after --, got %d arguments", fs.NArg())
	case f.Timeout < 0:
		usageErr = fmt.Errorf("--timeout must not be negative, got %s", f.Timeout)
	case f.Grace <= 0:
		usageErr = fmt.Errorf("--grace must be positive, got %s", f.Grace)
	case f.OutputLimit <= 0:
		usageErr = fmt.Errorf("--output-limit must be positive, got %d", f.OutputLimit)
	case f.Policy == "":
		usageErr = errors.New("--policy is required: a command is never run unjudged")
	}
	return f, fs.Arg(0), usageErr, nil
}

// addExecDirFlag adds --exec-dir, which appends to dirs, to fs.
func addExecDirFlag(fs *flag.FlagSet, dirs *[]string) {
	fs.Func("exec-dir", "also run programs from this folder although its file system is writable (repeatable; outside a sandbox only: in one, programs run only from read-only file systems)", func(dir string) error {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("%q is not an absolute path", dir)
		}
		*dirs = append(*dirs, filepath.Clean(dir))
		return nil
	})
}

// ServeFlags are the flags of "runner serve".
type ServeFlags struct {
	// HandoffSHA256 is the hex SHA-256 of the secret a handoff must bear.
	HandoffSHA256    string
	PolicyGeneration int64
	SkillHash        string
	IdleTimeout      time.Duration
	MaxTimeout       time.Duration
	ReadyFile        string
	// Listen is the address to serve handoffs on, ":8070" by default.
	Listen     string
	Grace      time.Duration
	ResultFile string
	Dir        string
	Kubeconfig string
	AwaitFence string
	ExecDirs   []string
}

// ParseServeArgs parses the arguments of "runner serve" and returns its
// flags. As with ParseRunArgs, a usage error found once the flags parsed
// is returned as usageErr, so that it can still be reported as a result;
// parseErr is flag.ErrHelp for -h, or says why the flags do not parse, as
// written to stderr.
func ParseServeArgs(args []string, stderr io.Writer) (f ServeFlags, usageErr, parseErr error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, "Usage: runner serve --handoff-sha256=HEX --idle-timeout=D --max-timeout=D [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&f.HandoffSHA256, "handoff-sha256", "", "hex SHA-256 of the secret the operator's handoff bears (required)")
	fs.Int64Var(&f.PolicyGeneration, "policy-generation", 0, "generation of the policy this sandbox was made for; a handoff must name the same")
	fs.StringVar(&f.SkillHash, "skill-hash", "", "hash of the skill this sandbox was made with; a handoff must name the same (default: no skill)")
	fs.DurationVar(&f.IdleTimeout, "idle-timeout", 0, "stop waiting when no command was handed over after this long (required)")
	fs.DurationVar(&f.MaxTimeout, "max-timeout", 0, "the largest timeout a handoff may ask for (required)")
	fs.StringVar(&f.ReadyFile, "ready-file", "", "create this empty file once the runner is ready to take a command (see runner ready)")
	fs.StringVar(&f.Listen, "listen", ":"+strconv.Itoa(HandoffPort), "address to serve handoffs on")
	fs.DurationVar(&f.Grace, "grace", DefaultGrace, "time between SIGTERM and SIGKILL when stopping the command")
	fs.StringVar(&f.ResultFile, "result-file", "", "file that receives the result or its summary, e.g. /dev/termination-log")
	fs.StringVar(&f.Dir, "dir", "", "working directory of the command (default: the current one)")
	fs.StringVar(&f.AwaitFence, "await-fence", "", "serve only once a TCP connection to this HOST:PORT, which the sandbox's network fence denies, fails")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "write a kubeconfig for the pod's ServiceAccount here before serving, when its token is mounted in "+ServiceAccountDir)
	addExecDirFlag(fs, &f.ExecDirs)
	if err := fs.Parse(args); err != nil {
		return f, nil, err
	}
	switch {
	case fs.NArg() != 0:
		usageErr = fmt.Errorf("serve takes no arguments, got %d", fs.NArg())
	case f.HandoffSHA256 == "":
		usageErr = errors.New("--handoff-sha256 is required: a command is handed over only by who knows the secret")
	case !isSHA256(f.HandoffSHA256):
		usageErr = errors.New("--handoff-sha256 must be a hex SHA-256: 64 hex digits")
	case f.PolicyGeneration < 0:
		usageErr = fmt.Errorf("--policy-generation must not be negative, got %d", f.PolicyGeneration)
	case f.IdleTimeout <= 0:
		usageErr = fmt.Errorf("--idle-timeout must be positive, got %s", f.IdleTimeout)
	case f.MaxTimeout <= 0:
		usageErr = fmt.Errorf("--max-timeout must be positive, got %s", f.MaxTimeout)
	case f.Grace <= 0:
		usageErr = fmt.Errorf("--grace must be positive, got %s", f.Grace)
	case f.Listen == "":
		usageErr = errors.New("--listen must not be empty")
	}
	return f, usageErr, nil
}
