package runner

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policy/policytest"
)

// fuzzPolicy is the fixed policy of FuzzJudgeSeesWhatRuns: common
// read-only tools Always, rm Never, everything else Ask.
var fuzzPolicy = policy.Policy{Default: policy.Ask, Rules: []policy.Rule{
	{Pattern: "echo *", Action: policy.Always},
	{Pattern: "printf *", Action: policy.Always},
	{Pattern: "cat *", Action: policy.Always},
	{Pattern: "test *", Action: policy.Always},
	{Pattern: "[ *", Action: policy.Always},
	{Pattern: "true", Action: policy.Always},
	{Pattern: "false", Action: policy.Always},
	{Pattern: "ls *", Action: policy.Always},
	{Pattern: "grep *", Action: policy.Always},
	{Pattern: "find *", Action: policy.Always},
	{Pattern: "head *", Action: policy.Always},
	{Pattern: "wc *", Action: policy.Always},
	{Pattern: "sort *", Action: policy.Always},
	{Pattern: "jq *", Action: policy.Always},
	{Pattern: "xargs *", Action: policy.Always},
	{Pattern: "kubectl get *", Action: policy.Always},
	{Pattern: "git status *", Action: policy.Always},
	{Pattern: "git log *", Action: policy.Always},
	{Pattern: "rm *", Action: policy.Never},
}}

// discardFile is what the fuzzer's opens return: reads see end of file,
// writes vanish.
type discardFile struct{}

func (discardFile) Read([]byte) (int, error)    { return 0, io.EOF }
func (discardFile) Write(p []byte) (int, error) { return len(p), nil }
func (discardFile) Close() error                { return nil }

// opened is one file the shell opened.
type opened struct {
	path string
	flag int
}

// interpretation records what the shell did with a line: every simple
// command's argv (builtins and functions included), every program it
// would have started and every file it opened.
type interpretation struct {
	mu    sync.Mutex
	calls [][]string
	execs [][]string
	opens []opened
}

// tooCostly matches lines whose expansion alone could take more memory or
// time than a fuzz iteration has: brace ranges and huge numbers.
var tooCostly = regexp.MustCompile(`\.\.|[0-9]{5,}`)

// interpretRecorded interprets line as the runner's shell does (the
// judge's parser, mvdan.cc/sh/v3/interp) with handlers that record
// instead of running or opening anything, and no policy in the way.
func interpretRecorded(ctx context.Context, dir, line string) (*interpretation, error) {
	file, err := syntax.NewParser().Parse(strings.NewReader(line), "")
	if err != nil {
		return nil, err
	}
	rec := &interpretation{}
	r, err := interp.New(
		interp.Dir(dir),
		interp.Env(expand.ListEnviron("PATH=/nonexistent", "HOME="+dir, "TMPDIR="+dir, "LC_ALL=C")),
		interp.StdIO(nil, io.Discard, io.Discard),
		interp.CallHandler(func(_ context.Context, args []string) ([]string, error) {
			rec.mu.Lock()
			rec.calls = append(rec.calls, slices.Clone(args))
			rec.mu.Unlock()
			return args, nil
		}),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
			return func(_ context.Context, args []string) error {
				rec.mu.Lock()
				rec.execs = append(rec.execs, slices.Clone(args))
				rec.mu.Unlock()
				return nil
			}
		}),
		interp.OpenHandler(func(_ context.Context, path string, flag int, _ os.FileMode) (io.ReadWriteCloser, error) {
			rec.mu.Lock()
			rec.opens = append(rec.opens, opened{path: path, flag: flag})
			rec.mu.Unlock()
			return discardFile{}, nil
		}),
	)
	if err != nil {
		return nil, err
	}
	// A panic of the interpreter ends the line: what was recorded until
	// then still counts.
	_ = runRecovered(ctx, r, file)
	return rec, nil
}

// FuzzJudgeSeesWhatRuns: for a line the fixed policy judges Always, the
// shell that runs it starts only argvs that the judge answers Always
// for, every builtin, function and program alike, and opens nothing for
// writing but /dev/null. Programs are recorded, never run.
func FuzzJudgeSeesWhatRuns(f *testing.F) {
	corpus, err := policytest.Default()
	if err != nil {
		f.Fatal(err)
	}
	for _, l := range corpus.Lines {
		f.Add(l.Command)
	}
	for _, seed := range []string{
		`find . ${x:--exec} rm {} \;`, `echo $'\' ; rm x ; #'`, `[[ a > ~/.bashrc ]]`, `echo a | xargs echo`,
		`f() { echo "$@"; }; f x`, `eval echo hi`, `test -n "$(echo x)"`, `echo hi >/dev/null`,
	} {
		f.Add(seed)
	}
	m, err := policy.Compile(fuzzPolicy)
	if err != nil {
		f.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "fuzz-judge-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = os.RemoveAll(dir) })
	f.Fuzz(func(t *testing.T, line string) {
		if len(line) > 512 || tooCostly.MatchString(line) || m.Decide(line).Action != policy.Always {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		rec, err := interpretRecorded(ctx, dir, line)
		if err != nil {
			t.Fatalf("%q is Always but the shell cannot read it: %v", line, err)
		}
		for _, argv := range append(rec.calls, rec.execs...) {
			if d := m.DecideArgs(argv, nil); d.Action != policy.Always {
				t.Errorf("%q is Always, but the shell runs %q, which is %s: %s", line, argv, d.Action, d.Reason)
			}
		}
		for _, o := range rec.opens {
			path := o.path
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			if o.flag&writeFlags != 0 && filepath.Clean(path) != "/dev/null" {
				t.Errorf("%q is Always, but the shell opens %q for writing (flags %#x)", line, o.path, o.flag)
			}
		}
	})
}
