package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// shellRules is the policy of the shell tests: a few read-only commands
// Always, rm Never, deleting pods Ask, anything else Ask.
var shellRules = []SnapshotRule{
	{Pattern: "echo *", Action: policy.Always},
	{Pattern: "printf *", Action: policy.Always},
	{Pattern: "cat *", Action: policy.Always},
	{Pattern: "find *", Action: policy.Always},
	{Pattern: "kubectl get *", Action: policy.Always},
	{Pattern: "kubectl delete *", Action: policy.Ask},
	{Pattern: "rm *", Action: policy.Never},
	{Pattern: "f *", Action: policy.Always},
	{Pattern: "exit *", Action: policy.Always},
	{Pattern: "wait", Action: policy.Always},
}

// recorder stands in for running programs: it records each argv and
// answers success.
type recorder struct {
	mu    sync.Mutex
	argvs [][]string
}

func (r *recorder) exec(_ context.Context, args []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.argvs = append(r.argvs, slices.Clone(args))
	return nil
}

func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, a := range r.argvs {
		out = append(out, a[0])
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for the interpreter's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// shellRun is what one run of the shell did.
type shellRun struct {
	code           int
	stdout, stderr string
	ran            []string
}

// runShell interprets command in dir under the snapshot, with programs
// recorded instead of run. With runtimeOnly the whole line is not judged
// first, to show what the checks at run time catch on their own.
func runShell(t *testing.T, snap PolicySnapshot, dir, command string, runtimeOnly bool) shellRun {
	t.Helper()
	e, err := snap.Compile()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	rec := &recorder{}
	sh := Shell{Command: command, Enforcer: e, Dir: dir, Env: []string{"PATH=/nonexistent", "HOME=" + dir},
		Stdout: &stdout, Stderr: &stderr, Exec: rec.exec}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var code int
	if runtimeOnly {
		code = sh.interpret(ctx, &guard{e: e, stderr: &stderr})
	} else {
		code = sh.Run(ctx)
	}
	return shellRun{code: code, stdout: stdout.String(), stderr: stderr.String(), ran: rec.names()}
}

// TestShellRefusesAtRunTime shows that every simple command is judged
// with its real argv as it runs, wherever it comes from, and that nothing
// runs after a refusal. The whole line is not judged first here, so these
// are the runtime checks alone.
func TestShellRefusesAtRunTime(t *testing.T) {
	cases := []struct {
		name     string
		command  string
		approved bool
		stdout   string
		refused  string
		ran      []string
	}{
		{name: "function body", command: "f() { rm -rf x; }; echo before; f; echo after",
			stdout: "before\n", refused: `"rm -rf x": the policy says Never`},
		{name: "eval", command: `eval "rm -rf x"; echo after`, refused: `"rm -rf x"`},
		{name: "builtin eval", command: `builtin eval "rm -rf x"; echo after`, refused: `"rm -rf x"`},
		{name: "sourced file", command: `printf 'rm -rf x\n' >script; . ./script; echo after`, approved: true,
			refused: `"rm -rf x"`},
		{name: "exit trap", command: `c="rm -rf x"; trap "$c" EXIT; echo hi`, refused: `rm -rf x`},
		{name: "command substitution", command: `echo "$(rm -rf x)"; echo after`, refused: `"rm -rf x"`},
		{name: "background job", command: `rm -rf x & wait; echo after`, refused: `"rm -rf x"`},
		{name: "pipeline", command: `echo a | rm -rf x; echo after`, refused: `"rm -rf x"`},
		{name: "command builtin", command: `command rm -rf x; echo after`, refused: `rm -rf x`},
		{name: "exec builtin", command: `exec rm -rf x; echo after`, refused: `rm -rf x`},
		{name: "name from a variable", command: `c=rm; $c -rf x; echo after`, refused: `"rm -rf x"`},
		{name: "name from brace expansion", command: `{rm,-rf,x}; echo after`, refused: `"rm -rf x"`},
		{name: "NUL cut from a name", command: `$'rm\0' -rf x; echo after`, refused: `"rm -rf x"`},
		{name: "find -exec from an expansion", command: `find . ${x:--exec} rm {} \;; echo after`, approved: true,
			refused: `"find . -exec rm '{}' ';'": the policy says Never`},
		{name: "find -delete from an expansion", command: `find . "${x:--delete}"; echo after`,
			refused: `"find . -delete": the policy says`},
		{name: "Ask in a run nobody approved", command: `kubectl delete pod web-0; echo after`,
			refused: `"kubectl delete pod web-0": the policy says Ask and no person approved this run`},
		{name: "Ask in an approved run", command: `kubectl delete pod web-0; echo after`, approved: true,
			stdout: "after\n", ran: []string{"kubectl"}},
		{name: "write in a run nobody approved", command: `f=out; echo hi >"$f"; echo after`,
			refused: `"> out": writing a file needs a run a person approved`},
		{name: "append in a run nobody approved", command: `echo hi >>out; echo after`, refused: `"> out"`},
		{name: "write through exec", command: `exec >out; echo after`, refused: `"> out"`},
		{name: "write in a command substitution", command: `echo "$(echo hi >out)"; echo after`, refused: `"> out"`},
		{name: "write in an approved run", command: `echo hi >out; echo after`, approved: true, stdout: "after\n"},
		{name: "write to /dev/null", command: `echo hi >/dev/null; echo hi >/dev/../dev/null; echo ok`, stdout: "ok\n"},
		{name: "read allowed", command: `cat </dev/null; echo ok`, stdout: "ok\n", ran: []string{"cat"}},
		{name: "allowed program", command: `kubectl get pods; echo ok`, stdout: "ok\n", ran: []string{"kubectl"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			got := runShell(t, PolicySnapshot{DefaultAction: policy.Ask, Rules: shellRules, Approved: tc.approved},
				dir, tc.command, true)
			if got.stdout != tc.stdout {
				t.Errorf("stdout = %q, want %q", got.stdout, tc.stdout)
			}
			if !slices.Equal(got.ran, tc.ran) {
				t.Errorf("programs run = %q, want %q", got.ran, tc.ran)
			}
			if tc.refused == "" {
				if got.code != 0 || got.stderr != "" {
					t.Errorf("exit %d, stderr %q, want 0 and nothing", got.code, got.stderr)
				}
				return
			}
			if got.code != ExitCannotExecute {
				t.Errorf("exit = %d, want %d", got.code, ExitCannotExecute)
			}
			lines := strings.Split(strings.TrimSuffix(got.stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], RefusalPrefix) || !strings.Contains(lines[0], tc.refused) {
				t.Errorf("stderr = %q, want one refusal line containing %q", got.stderr, tc.refused)
			}
			if _, err := os.Stat(filepath.Join(dir, "out")); err == nil && !tc.approved {
				t.Error("a refused write created the file")
			}
		})
	}
}

// TestShellJudgesTheLineFirst shows that a line the policy refuses runs
// nothing at all, not even the commands before the refused one.
func TestShellJudgesTheLineFirst(t *testing.T) {
	cases := []struct {
		name     string
		command  string
		approved bool
		code     int
		stdout   string
		refused  string
	}{
		{name: "Never anywhere in the line", command: "echo before; kubectl get pods; rm -rf /",
			code: ExitCannotExecute, refused: `kubeskills: refused "echo before; kubectl get pods; rm -rf /": the policy says Never`},
		{name: "Never even when approved", command: "echo before; rm -rf /", approved: true,
			code: ExitCannotExecute, refused: "the policy says Never"},
		{name: "Ask in a run nobody approved", command: "echo before > out",
			code: ExitCannotExecute, refused: "the policy says Ask and no person approved this run"},
		{name: "Ask in an approved run", command: "echo before >out && echo done", approved: true, stdout: "done\n"},
		{name: "line that does not parse", command: "echo 'unterminated", approved: true, code: ExitSyntaxError},
		{name: "exit status kept", command: "echo a; exit 3", code: 3, stdout: "a\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			got := runShell(t, PolicySnapshot{DefaultAction: policy.Ask, Rules: shellRules, Approved: tc.approved},
				dir, tc.command, false)
			if got.code != tc.code || got.stdout != tc.stdout || len(got.ran) != 0 {
				t.Errorf("exit %d, stdout %q, programs %q; want %d, %q, none", got.code, got.stdout, got.ran, tc.code, tc.stdout)
			}
			if tc.refused != "" && (!strings.HasPrefix(got.stderr, RefusalPrefix) || !strings.Contains(got.stderr, tc.refused) ||
				strings.Count(got.stderr, "\n") != 1) {
				t.Errorf("stderr = %q, want one refusal line containing %q", got.stderr, tc.refused)
			}
		})
	}
}

// TestShellNeedsAPolicy shows that the shell runs nothing without one.
func TestShellNeedsAPolicy(t *testing.T) {
	var stderr bytes.Buffer
	if code := (Shell{Command: "echo hi", Stderr: &stderr}).Run(context.Background()); code != ExitRunnerFailure {
		t.Errorf("exit = %d, want %d", code, ExitRunnerFailure)
	}
	if !strings.Contains(stderr.String(), "no policy") {
		t.Errorf("stderr = %q", stderr.String())
	}
	for _, args := range [][]string{
		{"-c", "echo hi"},
		{"--policy=" + approvedAll},
		{"--policy=" + approvedAll, "-c", "echo hi", "extra"},
		{`--policy={"defaultAction":"Maybe"}`, "-c", "echo hi"},
	} {
		var stdout, stderr bytes.Buffer
		if code := ShellMain(args, nil, &stdout, &stderr); code != ExitRunnerFailure || stdout.Len() != 0 || stderr.Len() == 0 {
			t.Errorf("ShellMain(%q) = %d, stdout %q, stderr %q; want %d, nothing, a reason",
				args, code, stdout.String(), stderr.String(), ExitRunnerFailure)
		}
	}
}

// TestShellSurvivesAnInterpreterPanic: the interpreter panics on
// test -R with an empty name. The runner reports a failure instead of
// crashing, and nothing after it runs.
func TestShellSurvivesAnInterpreterPanic(t *testing.T) {
	rules := append([]SnapshotRule{{Pattern: "test *", Action: policy.Always}}, shellRules...)
	got := runShell(t, PolicySnapshot{DefaultAction: policy.Ask, Rules: rules}, t.TempDir(), `test -R ''; echo after`, false)
	if got.code != ExitRunnerFailure || got.stdout != "" || !strings.Contains(got.stderr, "runner: the shell failed") {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, the failure", got.code, got.stdout, got.stderr, ExitRunnerFailure)
	}
}
