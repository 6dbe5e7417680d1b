package runner

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
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
	fs.Func("exec-dir", "also run programs from this folder although its file system is writable (repeatable; outside a sandbox only: in one, programs run only from read-only file systems)", func(dir string) error {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("%q is not an absolute path", dir)
		}
		f.ExecDirs = append(f.ExecDirs, filepath.Clean(dir))
		return nil
	})
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
