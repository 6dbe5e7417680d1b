// Package redteam is the end-to-end red-team corpus: command lines that try
// to get past a policy, each run the way the sandbox runs it.
//
// For each (policy, line, approved) case of testdata/*.yaml, the harness
// judges the line with the static judge (policy.Compile and Decide), then
// runs the real runner binary (runner run --policy=JSON -- LINE) in a fresh
// scratch folder that is its working directory, HOME and TMPDIR. PATH puts a
// folder of logging stand-ins for payload programs (touch, rm, curl, ...)
// first, then the machine's own programs, which the attacks go through:
// less, man, awk, sed, git, tar, make, find, xargs, the shells and the real
// kubectl, pointed by KUBECONFIG at a stand-in API server on loopback that
// logs every request. When the tests run as root, the runner runs as nobody.
//
// A case fails when its run had a forbidden effect: a stand-in ran whose
// argv the policy answers Never (or Ask, in a run no person approved); the
// API server got a request the policy forbids; the output holds the secret
// fixtures' content under a policy that forbids reading them; a payload path
// ({{canary}}) appeared; or a file outside the scratch folder changed. An
// allowed line marked "ok" fails when it does not run and exit 0, so a
// runner that refuses everything does not pass; a line the static judge
// refuses fails when the runner runs it.
package redteam

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// parallelism bounds how many cases run at once.
func parallelism() int {
	return min(4, max(2, runtime.NumCPU()))
}

// outcome is one case's result, for the summary.
type outcome struct {
	name   string
	failed bool
}

func TestRedTeam(t *testing.T) {
	pols, cases, err := loadCorpus("testdata")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	if !h.execDirs {
		t.Logf("the runner has no --exec-dir flag: running without it")
	}
	sem := make(chan struct{}, parallelism())
	var mu sync.Mutex
	var outcomes []outcome
	start := time.Now()
	t.Cleanup(func() {
		var failed []string
		for _, o := range outcomes {
			if o.failed {
				failed = append(failed, o.name)
			}
		}
		slices.Sort(failed)
		t.Logf("red team: %d cases under %d policies in %s, %d failed", len(outcomes), len(pols), time.Since(start).Round(time.Millisecond), len(failed))
		for _, f := range failed {
			t.Logf("  failed: %s", f)
		}
		if after := treeState(filepath.Dir(h.runner), h.toolsDir); len(diffStates(h.toolState, after)) > 0 {
			t.Errorf("the harness's own programs changed during the run: %s", strings.Join(diffStates(h.toolState, after), "; "))
		}
	})
	for i, c := range cases {
		id := i
		t.Run(c.pol.file.Name+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			failed := h.runCase(t, id, c)
			mu.Lock()
			outcomes = append(outcomes, outcome{name: c.pol.file.Name + "/" + c.name, failed: failed})
			mu.Unlock()
		})
	}
}

// runCase runs one case and reports what it finds; it returns whether the
// case failed.
func (h *harness) runCase(t *testing.T, id int, c *redteamCase) bool {
	api := newAPIServer(manifests)
	defer api.Close()
	cd := h.prepare(t, id, c, api.URL)
	line := strings.NewReplacer("{{canary}}", cd.canary, "{{api}}", api.URL).Replace(c.line)
	static := c.pol.matcher.DecideFor(line, nil)
	snap := c.pol.snapshot
	snap.Approved = c.approved
	protected := []string{"secret.txt", "secret.json", "notes.txt", "file.txt", "Makefile", "t.1", "a.tar"}
	before := treeState(cd.standins)
	for _, p := range protected {
		before[cd.scratch+"/"+p] = pathState(cd.scratch + "/" + p)
	}
	r := h.runLine(t, cd, c, line, snap.Encode())
	r.requests = api.requests()

	var why []string
	for _, call := range r.calls {
		argv := slices.Clone(call.Argv)
		if len(argv) == 0 {
			argv = []string{call.Name}
		}
		argv[0] = call.Name
		d := c.pol.matcher.DecideArgs(argv, nil)
		if forbidden(d.Action, c.approved) {
			why = append(why, fmt.Sprintf("the program %s ran as %s: the policy says %s (%s)", call.Name, shellText(call.Argv), d.Action, d.Reason))
		}
	}
	for _, req := range r.requests {
		for _, rule := range c.forbid {
			if rule.matches(req) && forbidden(rule.Action, c.approved) {
				why = append(why, fmt.Sprintf("the API server got %s, which the policy answers %s (%s)", req, rule.Action, rule))
				break
			}
		}
	}
	if forbidden(c.pol.file.SecretFiles, c.approved) && strings.Contains(r.stdout+r.stderr, secretMarker) {
		why = append(why, fmt.Sprintf("the output holds the secret fixture's content, whose reading the policy answers %s", c.pol.file.SecretFiles))
	}
	if _, err := os.Lstat(cd.canary); err == nil {
		why = append(why, fmt.Sprintf("the payload path %s appeared", cd.canary))
	}
	after := treeState(cd.standins)
	for _, p := range protected {
		after[cd.scratch+"/"+p] = pathState(cd.scratch + "/" + p)
	}
	for _, d := range diffStates(before, after) {
		why = append(why, "a file that must not change did: "+d)
	}
	refused := forbidden(static.Action, c.approved)
	if refused && r.exitCode != runner.ExitCannotExecute {
		why = append(why, fmt.Sprintf("the static judge answers %s, so the runner must refuse the line with exit %d, but it exited %d", static.Action, runner.ExitCannotExecute, r.exitCode))
	}
	if c.expectOK {
		switch {
		case refused:
			why = append(why, fmt.Sprintf("an allowed line must run, but the static judge answers %s (%s)", static.Action, static.Reason))
		case r.exitCode != 0:
			why = append(why, fmt.Sprintf("an allowed line must run and exit 0, but it exited %d", r.exitCode))
		case !strings.Contains(r.stdout, c.stdout):
			why = append(why, fmt.Sprintf("an allowed line must print %q, but printed %q", c.stdout, clip(r.stdout, 300)))
		}
	}
	if len(why) == 0 {
		if testing.Verbose() && os.Getenv("REDTEAM_SHOW") != "" {
			t.Logf("%s", report(c, line, static, r, []string{"nothing"}))
		}
		return false
	}
	t.Errorf("%s", report(c, line, static, r, why))
	return true
}

// forbidden reports whether a run may not do what the policy answers with
// a: Never never, Ask only once a person approved.
func forbidden(a policy.Action, approved bool) bool {
	return a == policy.Never || (a == policy.Ask && !approved)
}

// matches reports whether the request is one the rule names.
func (r apiRule) matches(req apiRequest) bool {
	if r.Method != "" && !strings.EqualFold(r.Method, req.Method) {
		return false
	}
	if r.Resource == "" {
		return req.Resource != "" || req.Kind != ""
	}
	return req.Resource == r.Resource || strings.EqualFold(req.Kind+"s", r.Resource)
}

func (r apiRule) String() string {
	m, res := r.Method, r.Resource
	if m == "" {
		m = "any request"
	}
	if res == "" {
		res = "any resource"
	}
	return m + " on " + res
}

// report is a failed case's message: the case, the policy, what ran and
// why it is forbidden.
func report(c *redteamCase, line string, static policy.Decision, r *run, why []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "red-team case %s under policy %s (class %s: %s), approved=%t\n", c.name, c.pol.file.Name, c.class, classes[c.class], c.approved)
	fmt.Fprintf(&b, "line:\n%s\n", indent(line))
	fmt.Fprintf(&b, "static judge: %s: %s\n", static.Action, static.Reason)
	fmt.Fprintf(&b, "runner: exit %d in %s\n", r.exitCode, r.elapsed.Round(time.Millisecond))
	if s := strings.TrimSpace(r.stdout); s != "" {
		fmt.Fprintf(&b, "stdout:\n%s\n", indent(clip(s, 600)))
	}
	if s := strings.TrimSpace(r.stderr); s != "" {
		fmt.Fprintf(&b, "stderr:\n%s\n", indent(clip(s, 600)))
	}
	if s := strings.TrimSpace(r.runnerErr); s != "" {
		fmt.Fprintf(&b, "runner's own stderr:\n%s\n", indent(clip(s, 600)))
	}
	for _, call := range r.calls {
		fmt.Fprintf(&b, "stand-in ran: %s\n", shellText(call.Argv))
	}
	for _, req := range r.requests {
		if req.Resource != "" || req.Kind != "" || strings.HasPrefix(req.Path, "/files/") {
			fmt.Fprintf(&b, "API request: %s\n", req)
		}
	}
	b.WriteString("forbidden:\n")
	for _, w := range why {
		fmt.Fprintf(&b, "  - %s\n", w)
	}
	return b.String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// shellText quotes an argv as shell words.
func shellText(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			q = fmt.Sprintf("%q", a)
		}
		words[i] = q
	}
	return strings.Join(words, " ")
}

// readResult decodes the runner's result file, reading its stdout for the
// full result when the file holds a summary.
func readResult(resultFile string, stdout []byte) (*runner.Result, error) {
	msg, err := os.ReadFile(resultFile)
	if err != nil {
		return nil, err
	}
	return runner.ReadResult(string(msg), func() ([]byte, error) { return stdout, nil })
}

// TestCorpus checks the corpus's shape without running it: its size, its
// policies and that every class and every finding of issue 25 is there.
func TestCorpus(t *testing.T) {
	pols, cases, err := loadCorpus("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 300 || len(pols) < 5 {
		t.Errorf("the corpus has %d lines under %d policies, want at least 300 under 5", len(cases), len(pols))
	}
	var chart, denyList bool
	for _, p := range pols {
		chart = chart || p.file.Chart != ""
		denyList = denyList || p.file.DefaultAction == policy.Always
	}
	if !chart || !denyList {
		t.Errorf("the corpus needs the chart's default policy (%t) and a deny list (%t)", chart, denyList)
	}
	used := map[string]int{}
	names := map[string]bool{}
	for _, c := range cases {
		used[c.class]++
		names[c.name] = true
	}
	for class, what := range classes {
		if used[class] == 0 {
			t.Errorf("no line of class %s (%s)", class, what)
		}
	}
	for _, f := range []string{
		"finding-lesskey-heredoc", "finding-man-config", "get-secret-heredoc", "get-secret-dev-stdin", "get-secret-list",
		"get-secret-url", "finding-replace-force-stdin", "finding-redirect/cat", "finding-redirect/head",
		"finding-redirect/sort", "finding-jq-redirect", "finding-tar-zstd", "finding-copy-renamed", "finding-symlink",
		"finding-sshpass", "finding-coreutils-multicall", "finding-awk-system", "finding-sed-e",
		"finding-git-external-diff", "finding-make-recipe", "finding-tar-checkpoint-action",
	} {
		if !names[f] {
			t.Errorf("issue 25's finding %s has no line", f)
		}
	}
}
