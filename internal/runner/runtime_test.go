package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// Regression tests for the findings of the command boundary that the
// runner closes: each line runs the way the sandbox runs it (Run, under
// the policy, with logging stand-ins for programs) and must neither run
// nor write what the judge would not allow.

// runtimeCase is one line and the policy it runs under.
type runtimeCase struct {
	rules    []SnapshotRule
	def      policy.Action
	approved bool
	line     string
}

// runtimeResult is what running a runtimeCase did.
type runtimeResult struct {
	res     *Result
	ran     [][]string
	written []string
	box     *sandbox
}

// runRuntime runs c in a fresh sandbox with shims for every word of the
// line.
func runRuntime(t *testing.T, c runtimeCase) runtimeResult {
	t.Helper()
	shimDir := writeShims(t, []string{c.line})
	box := newSandbox(t, shimDir)
	before := treeState(box.root, box.log)
	snap := PolicySnapshot{DefaultAction: c.def, Rules: c.rules, Approved: c.approved}
	res := hostRun(Options{Command: c.line, Policy: snap.Encode(), Dir: box.work, Env: box.env, Timeout: 10 * time.Second})
	return runtimeResult{res: res, ran: box.ran(), written: diffStates(before, treeState(box.root, box.log)), box: box}
}

// wantRefused asserts the run was refused with one line naming refused,
// and that no program ran and nothing was written.
func (r runtimeResult) wantRefused(t *testing.T, refused string) {
	t.Helper()
	if r.res.ExitCode != ExitCannotExecute {
		t.Errorf("exit = %d, want %d (refused); stderr %q", r.res.ExitCode, ExitCannotExecute, r.res.Stderr)
	}
	if !strings.HasPrefix(r.res.Stderr, RefusalPrefix) || strings.Count(r.res.Stderr, "\n") != 1 ||
		!strings.Contains(r.res.Stderr, refused) {
		t.Errorf("stderr = %q, want one refusal line containing %q", r.res.Stderr, refused)
	}
	if r.res.Error != strings.TrimSuffix(r.res.Stderr, "\n") {
		t.Errorf("result error = %q, want the refusal line", r.res.Error)
	}
	r.wantNothingRunOrWritten(t)
}

// wantNothingRunOrWritten asserts that no program ran and no file was
// written.
func (r runtimeResult) wantNothingRunOrWritten(t *testing.T) {
	t.Helper()
	if len(r.ran) != 0 {
		t.Errorf("programs ran: %q", r.ran)
	}
	if len(r.written) != 0 {
		t.Errorf("files written: %q", r.written)
	}
}

// findRules allow find and refuse rm, as in the finding.
var findRules = []SnapshotRule{{Pattern: "find *", Action: policy.Always}, {Pattern: "rm *", Action: policy.Never}}

// TestRuntime_ExpandedFindExecIsRefused: `find . ${x:--exec} rm {} \;` hid
// -exec from the judge. Even in a run a person approved, the runner sees
// find's real argv and refuses the rm that -exec would run: the second line
// hides -exec where only the run can see it.
func TestRuntime_ExpandedFindExecIsRefused(t *testing.T) {
	rules := append([]SnapshotRule{{Pattern: "printf *", Action: policy.Always}}, findRules...)
	runRuntime(t, runtimeCase{rules: rules, def: policy.Ask, approved: true, line: `find . ${x:--exec} rm {} \;`}).
		wantRefused(t, `the policy says Never: "rm`)
	runRuntime(t, runtimeCase{rules: rules, def: policy.Ask, approved: true, line: `c=r; find . $(printf %s -exec) ${c}m {} \;`}).
		wantRefused(t, `refused "find . -exec rm '{}' ';'": the policy says Never: "rm`)
}

// TestRuntime_QuotedExpandedFindDeleteIsRefused: "${x:--delete}" is find's
// -delete at run time, which a run nobody approved may not use.
func TestRuntime_QuotedExpandedFindDeleteIsRefused(t *testing.T) {
	runRuntime(t, runtimeCase{rules: findRules, def: policy.Ask, line: `find . "${x:--delete}"`}).
		wantRefused(t, "find . ")
}

// TestRuntime_BracedFindExecIsRefused: {-exec,touch} expands to -exec
// touch, and touch is judged as the command -exec runs.
func TestRuntime_BracedFindExecIsRefused(t *testing.T) {
	runRuntime(t, runtimeCase{rules: findRules, def: policy.Never, approved: true, line: `find . {-exec,touch} p \;`}).
		wantRefused(t, "the policy says Never")
}

// TestRuntime_GlobbedFindExecIsRefused: -exe? matches a file named -exec
// in the working directory, and becomes find's -exec.
func TestRuntime_GlobbedFindExecIsRefused(t *testing.T) {
	r := runRuntime(t, runtimeCase{rules: findRules, def: policy.Ask, approved: true, line: `find . -exe? rm {} \;`})
	r.wantRefused(t, "the policy says Never")
	if _, err := os.Stat(filepath.Join(r.box.work, "-exec")); err != nil {
		t.Errorf("the file the glob matched is gone: %v", err)
	}
}

// TestRuntime_NULInANSICQuoteIsNeverRun: kubectl $'delete\0' pod web-0
// was Always under the docs' precedence example. A NUL byte never reaches
// a program.
func TestRuntime_NULInANSICQuoteIsNeverRun(t *testing.T) {
	rules := []SnapshotRule{{Pattern: "kubectl *", Action: policy.Always}, {Pattern: "kubectl get secrets *", Action: policy.Ask}}
	for _, line := range []string{`kubectl $'delete\0' pod web-0`, `$'rm\0' -rf x`, `kubectl get $'secrets\0' -A`} {
		t.Run(line, func(t *testing.T) {
			runRuntime(t, runtimeCase{rules: append(rules, findRules...), def: policy.Always, approved: true, line: line}).
				wantRefused(t, "the policy says Never")
		})
	}
}

// testRules allow test and its friends, as in the [[ findings.
var testRules = []SnapshotRule{
	{Pattern: "test *", Action: policy.Always}, {Pattern: "[ *", Action: policy.Always},
	{Pattern: "echo *", Action: policy.Always}, {Pattern: "rm *", Action: policy.Never},
}

// TestRuntime_DoubleBracketIsBashEverywhere: under dash and ash, [[ is a
// program and > a redirection, so [[ a > ~/.bashrc ]] truncated the file
// and [[ x =~ a|touch${IFS}/tmp/p ]] ran touch. The runner's shell reads
// [[ as bash does: a comparison and a regular expression, nothing run or
// written.
func TestRuntime_DoubleBracketIsBashEverywhere(t *testing.T) {
	for _, line := range []string{
		`[[ a > ~/.bashrc ]]`,
		`[[ -n x ]] && [[ b > ~/.bashrc ]]`,
		`[[ x =~ a|touch${IFS}p ]]`,
	} {
		t.Run(line, func(t *testing.T) {
			r := runRuntime(t, runtimeCase{rules: testRules, def: policy.Ask, approved: true, line: line})
			r.wantNothingRunOrWritten(t)
			if r.res.ExitCode != 0 && r.res.ExitCode != 1 {
				t.Errorf("exit = %d, want the test's 0 or 1; stderr %q", r.res.ExitCode, r.res.Stderr)
			}
		})
	}
}

// TestRuntime_ANSICQuoteBackslashIsOneEcho: echo $'\' ; touch p ; #' is one
// echo to the judge and three commands to dash. The runner's shell reads
// it as the judge does.
func TestRuntime_ANSICQuoteBackslashIsOneEcho(t *testing.T) {
	r := runRuntime(t, runtimeCase{rules: testRules, def: policy.Ask, approved: true, line: `echo $'\' ; touch p ; #'`})
	r.wantNothingRunOrWritten(t)
	if r.res.ExitCode != 0 || r.res.Stdout != "' ; touch p ; #\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want one echo", r.res.ExitCode, r.res.Stdout, r.res.Stderr)
	}
}

// TestRuntime_TestVSubscriptRunsNothing: bash's test -v evaluates an
// array subscript, so test ${x:--v} 'a[$(cmd)]' ran cmd where /bin/sh is
// bash. The runner's shell does not run it, and rm would be refused if it
// did.
func TestRuntime_TestVSubscriptRunsNothing(t *testing.T) {
	r := runRuntime(t, runtimeCase{rules: testRules, def: policy.Ask, approved: true,
		line: `test ${x:--v} 'a[$(rm -rf ~/.bashrc; touch p)]'`})
	r.wantNothingRunOrWritten(t)
	if r.res.ExitCode != 1 && r.res.ExitCode != ExitCannotExecute {
		t.Errorf("exit = %d, want 1 (not set) or %d (refused); stderr %q", r.res.ExitCode, ExitCannotExecute, r.res.Stderr)
	}
}

// TestRuntime_WriteInAnUnapprovedRunIsRefused: even under a policy that
// allows every command, a run nobody approved writes no file but
// /dev/null, however the path is spelled or opened.
func TestRuntime_WriteInAnUnapprovedRunIsRefused(t *testing.T) {
	everything := []SnapshotRule{{Pattern: "**", Action: policy.Always}}
	for _, line := range []string{`f=~/.bashrc; eval "echo x >$f"`, `echo x >/dev/null; exec 2>out`, `echo x >>a.txt`} {
		t.Run(line, func(t *testing.T) {
			runRuntime(t, runtimeCase{rules: everything, def: policy.Always, line: line}).wantRefused(t, "no person approved")
		})
	}
}
