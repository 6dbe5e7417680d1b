package runner

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policy/policytest"
)

// alwaysRun is one line of the corpus that a policy judges Always, with
// the simple commands the judge listed.
type alwaysRun struct {
	policyName string
	snapshot   PolicySnapshot
	line       string
	allowed    map[string]bool
}

// alwaysRuns judges every line of the corpus under every policy and
// returns the pairs judged Always.
func alwaysRuns(t *testing.T, c policytest.Corpus) []alwaysRun {
	t.Helper()
	var out []alwaysRun
	for _, np := range c.Policies {
		m, err := policy.Compile(np.Policy)
		if err != nil {
			t.Fatalf("policy %s: %v", np.Name, err)
		}
		snap := PolicySnapshot{DefaultAction: np.Policy.Default}
		for _, r := range np.Policy.Rules {
			snap.Rules = append(snap.Rules, SnapshotRule{Pattern: r.Pattern, Action: r.Action})
		}
		for _, l := range c.Lines {
			d := m.Decide(l.Command)
			if d.Action != policy.Always {
				continue
			}
			out = append(out, alwaysRun{policyName: np.Name, snapshot: snap, line: l.Command, allowed: partNames(d.Parts)})
		}
	}
	return out
}

// TestDifferential_AlwaysLinesRunOnlyWhatTheJudgeSaw is the differential
// test of the command boundary. Every line of the adversarial corpus that a
// policy judges Always runs three ways: the way the sandbox runs it (the
// runner's shell under that policy), under real dash and under busybox sh.
// Each run happens in a fresh folder with only logging stand-ins on PATH,
// and the canary must hold: every program started is one of the simple
// commands the judge listed for the line, nothing in the folder was
// created or changed, and the /tmp paths the corpus uses as payload
// targets are untouched. The runner must also not refuse a line the judge
// allowed: what the judge saw is what runs.
func TestDifferential_AlwaysLinesRunOnlyWhatTheJudgeSaw(t *testing.T) {
	dash, busybox := requireShells(t)
	corpus, err := policytest.Default()
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, 0, len(corpus.Lines))
	for _, l := range corpus.Lines {
		lines = append(lines, l.Command)
	}
	shimDir := writeShims(t, lines)
	canaries := canaryPaths(lines)
	canariesBefore := statePaths(canaries)

	runs := alwaysRuns(t, corpus)
	if len(runs) < 50 {
		t.Fatalf("only %d (policy, line) pairs are judged Always: the corpus is not exercising the shells", len(runs))
	}
	var (
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
	)
	fail := func(r alwaysRun, sh shellRunner, problems []string) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf("%s, judged Always under %s, under %s:\n\t%s\n\tthe judge listed %q",
			quoteLine(r.line), r.policyName, sh.name, strings.Join(problems, "\n\t"), sortedKeys(r.allowed)))
	}
	sem := make(chan struct{}, max(4, 2*runtime.NumCPU()))
	spawn := func(f func()) {
		wg.Add(1)
		sem <- struct{}{}
		go func() { defer func() { <-sem; wg.Done() }(); f() }()
	}
	// The runner runs each line under its policy. dash and busybox know
	// no policy: each line runs once under each, and every policy that
	// judged it Always checks the run against what its judge listed.
	byLine := map[string][]alwaysRun{}
	for _, r := range runs {
		spawn(func() {
			sh := theRunner(r.snapshot)
			if problems := canaryCheck(t, sh, shimDir, r.line, r.allowed); len(problems) > 0 {
				fail(r, sh, problems)
			}
		})
		byLine[r.line] = append(byLine[r.line], r)
	}
	for line, pairs := range byLine {
		for _, sh := range []shellRunner{dash, busybox} {
			spawn(func() {
				run := runCanary(t, sh, shimDir, line)
				for _, r := range pairs {
					if problems := run.problems(sh, r.allowed); len(problems) > 0 {
						fail(r, sh, problems)
					}
				}
			})
		}
	}
	wg.Wait()
	for _, d := range diffStates(canariesBefore, statePaths(canaries)) {
		failures = append(failures, "a payload target outside the sandbox was written: "+d)
	}
	t.Logf("%d (policy, line) pairs judged Always, each run by the runner; %d lines, each run by dash and busybox sh",
		len(runs), len(byLine))
	if len(failures) > 0 {
		t.Errorf("%d runs broke the canary:\n%s", len(failures), strings.Join(failures, "\n"))
	}
}

// quoteLine quotes a line for a failure message.
func quoteLine(line string) string {
	return fmt.Sprintf("%q", clip(line, 200))
}

// TestCanaryNotices shows that the canary catches what it is for: a line
// that runs a program the judge did not list, and one that writes a file,
// under each of the three shells.
func TestCanaryNotices(t *testing.T) {
	dash, busybox := requireShells(t)
	shimDir := writeShims(t, nil)
	everything := PolicySnapshot{DefaultAction: policy.Always, Approved: true}
	cases := []struct {
		name, line string
		allowed    map[string]bool
		want       string
	}{
		{name: "unlisted program", line: "echo hi; kubectl get pods", allowed: map[string]bool{"echo": true},
			want: `ran ["kubectl" "get" "pods"], which the judge did not list`},
		{name: "write", line: "echo hi > out", allowed: map[string]bool{"echo": true}, want: "wrote: work/out created"},
		{name: "change", line: "echo hi >> ~/.bashrc", allowed: map[string]bool{"echo": true}, want: "wrote: home/.bashrc changed"},
		{name: "clean", line: "echo hi; kubectl get pods", allowed: map[string]bool{"echo": true, "kubectl": true}},
	}
	for _, tc := range cases {
		for _, sh := range []shellRunner{theRunner(everything), dash, busybox} {
			t.Run(tc.name+"/"+sh.name, func(t *testing.T) {
				problems := canaryCheck(t, sh, shimDir, tc.line, tc.allowed)
				got := strings.Join(problems, "\n")
				if tc.want == "" && len(problems) > 0 || tc.want != "" && !strings.Contains(got, tc.want) {
					t.Errorf("canary found %q, want %q", got, tc.want)
				}
			})
		}
	}
	if _, err := os.Stat(shimDir + "/touch"); err != nil {
		t.Errorf("no shim for touch: %v", err)
	}
}
