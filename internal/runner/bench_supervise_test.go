//go:build linux

package runner

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// The cost of exec supervision, for `make bench` (test/bench/cmd/report):
// the same line run by the runner's shell with and without the
// supervisor, alternating, each timed on its own. Unsupervised is what the
// sandbox ran before supervision: the runner's shell, which judges the line
// and every simple command, started and waited for directly.
//
//	go test -run '^$' -bench 'ExecSupervision|SkillScript50' -benchtime 40x ./internal/runner/

// benchPrograms is the number of programs the long line runs.
const benchPrograms = 50

// benchPolicy allows the programs of the benchmarks and nothing else, as a
// skill's policy does; no person approved the run, so every exec is judged
// against the rules.
var benchPolicy = PolicySnapshot{DefaultAction: policy.Never, Rules: []SnapshotRule{
	{Pattern: "kubectl get *", Action: policy.Always},
	{Pattern: "kubectl ** delete **", Action: policy.Never},
	{Pattern: "cat ** *secret* **", Action: policy.Never},
	{Pattern: "true *", Action: policy.Always},
	{Pattern: "/usr/bin/true *", Action: policy.Always},
	{Pattern: "cat *", Action: policy.Always},
	{Pattern: "grep *", Action: policy.Always},
	{Pattern: "head *", Action: policy.Always},
	{Pattern: "tail *", Action: policy.Always},
	{Pattern: "sort *", Action: policy.Always},
	{Pattern: "uniq *", Action: policy.Always},
	{Pattern: "wc *", Action: policy.Always},
	{Pattern: "cut *", Action: policy.Always},
	{Pattern: "tr *", Action: policy.Always},
	{Pattern: "date *", Action: policy.Always},
	{Pattern: "printf *", Action: policy.Always},
	{Pattern: "/usr/bin/printf *", Action: policy.Always},
	{Pattern: "basename *", Action: policy.Always},
}}

// benchEnv is the environment of every run.
func benchEnv(dir string) []string {
	return []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C"}
}

// pair times one line supervised (Run, with this machine's program
// folders and execDirs) and unsupervised (the runner's shell alone).
type pair struct {
	b        *testing.B
	line     string
	policy   string
	dir      string
	execDirs []string
	exe      string
	// supervised and unsupervised are the durations of each run, and
	// supervisedCPU and unsupervisedCPU the CPU time it took: the runner's
	// process (the supervisor, the readers of the output) and every process
	// of the command.
	supervised, unsupervised       []time.Duration
	supervisedCPU, unsupervisedCPU []time.Duration
}

func newPair(b *testing.B, line string, snap PolicySnapshot, dir string, execDirs ...string) *pair {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	return &pair{b: b, line: line, policy: snap.Encode(), dir: dir, execDirs: execDirs, exe: exe}
}

// run times both, in the order that alternates with i, so neither side
// always meets the caches the other warmed.
func (p *pair) run(i int) {
	if i%2 == 0 {
		p.runSupervised()
		p.runUnsupervised()
		return
	}
	p.runUnsupervised()
	p.runSupervised()
}

func (p *pair) runSupervised() {
	p.b.Helper()
	cpu, start := cpuTime(p.b), time.Now()
	res := hostRun(Options{Command: p.line, Policy: p.policy, Dir: p.dir, Env: benchEnv(p.dir), ExecDirs: p.execDirs})
	p.supervised = append(p.supervised, time.Since(start))
	p.supervisedCPU = append(p.supervisedCPU, cpuTime(p.b)-cpu)
	if res.ExitCode != 0 {
		p.b.Fatalf("supervised run: exit %d, %q; stderr %q", res.ExitCode, res.Error, res.Stderr)
	}
}

func (p *pair) runUnsupervised() {
	p.b.Helper()
	cmd := exec.Command(p.exe, ShellSubcommand, "--policy="+p.policy, "-c", p.line)
	cmd.Dir, cmd.Env = p.dir, benchEnv(p.dir)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cpu, start := cpuTime(p.b), time.Now()
	err := cmd.Run()
	p.unsupervised = append(p.unsupervised, time.Since(start))
	p.unsupervisedCPU = append(p.unsupervisedCPU, cpuTime(p.b)-cpu)
	if err != nil {
		p.b.Fatalf("unsupervised run: %v; stderr %q", err, stderr.String())
	}
}

// overheads are the supervised minus the unsupervised duration of each
// pair, divided by n.
func (p *pair) overheads(n int) []time.Duration {
	return differences(p.supervised, p.unsupervised, n)
}

// cpuOverheads are the same for the CPU time.
func (p *pair) cpuOverheads(n int) []time.Duration {
	return differences(p.supervisedCPU, p.unsupervisedCPU, n)
}

// differences returns (a[i] - b[i]) / n for each i.
func differences(a, b []time.Duration, n int) []time.Duration {
	ds := make([]time.Duration, len(a))
	for i := range ds {
		ds[i] = (a[i] - b[i]) / time.Duration(n)
	}
	return ds
}

// cpuTime is the user and system CPU time of this process and of the
// children it has waited for, and of theirs.
func cpuTime(b *testing.B) time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}

// BenchmarkExecSupervision measures what the supervisor adds to each
// exec: a line of 50 programs (/usr/bin/true, not the shell's builtin) and
// a line of one, each supervised and unsupervised. The per-exec overhead
// of an iteration is its 50-program pair's difference over 50, which
// counts the supervisor's fixed cost per run too; the marginal cost per
// exec, without it, is the growth of that difference from 1 program to 50,
// over 49.
func BenchmarkExecSupervision(b *testing.B) {
	dir := b.TempDir()
	long := newPair(b, strings.TrimSuffix(strings.Repeat("/usr/bin/true; ", benchPrograms), "; "), benchPolicy, dir)
	one := newPair(b, "/usr/bin/true", benchPolicy, dir)
	i := 0
	for b.Loop() {
		long.run(i)
		one.run(i)
		i++
	}
	perExec := long.overheads(benchPrograms)
	marginal := make([]time.Duration, len(perExec))
	for i := range marginal {
		marginal[i] = ((long.supervised[i] - long.unsupervised[i]) - (one.supervised[i] - one.unsupervised[i])) / (benchPrograms - 1)
	}
	b.ReportMetric(float64(benchPrograms), "programs")
	b.ReportMetric(msec(percentile(perExec, 50)), "overhead-p50-ms/exec")
	b.ReportMetric(msec(percentile(perExec, 90)), "overhead-p90-ms/exec")
	b.ReportMetric(msec(percentile(marginal, 50)), "marginal-p50-ms/exec")
	b.ReportMetric(msec(percentile(long.cpuOverheads(benchPrograms), 50)), "cpu-overhead-p50-ms/exec")
	b.ReportMetric(msec(percentile(long.unsupervisedCPU, 50))/benchPrograms, "cpu-unsupervised-p50-ms/exec")
	b.ReportMetric(msec(percentile(long.supervised, 50)), "supervised-p50-ms")
	b.ReportMetric(msec(percentile(long.supervised, 90)), "supervised-p90-ms")
	b.ReportMetric(msec(percentile(long.unsupervised, 50)), "unsupervised-p50-ms")
	b.ReportMetric(msec(percentile(long.unsupervised, 90)), "unsupervised-p90-ms")
	b.ReportMetric(msec(percentile(long.unsupervised, 50))/benchPrograms, "unsupervised-p50-ms/exec")
	b.ReportMetric(msec(percentile(one.supervised, 50)), "one-supervised-p50-ms")
	b.ReportMetric(msec(percentile(one.unsupervised, 50)), "one-unsupervised-p50-ms")
	b.ReportMetric(msec(percentile(one.overheads(1), 50)), "one-overhead-p50-ms")
	b.ReportMetric(float64(len(perExec)), "samples")
}

// BenchmarkSkillScript50 runs a skill script of 50 programs, a rule
// allowing the script with its children judged and the policy allowing
// each of them, supervised against unsupervised: every one of the 50
// programs is judged, and runs.
func BenchmarkSkillScript50(b *testing.B) {
	dir := b.TempDir()
	skill := filepath.Join(dir, "skill")
	if err := os.Mkdir(skill, 0o755); err != nil {
		b.Fatal(err)
	}
	data := filepath.Join(dir, "pods.txt")
	if err := os.WriteFile(data, podListing(200), 0o644); err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(skill, "pods-report.sh")
	if err := os.WriteFile(script, []byte(skillScript50), 0o555); err != nil {
		b.Fatal(err)
	}
	// The script must be older than the run, or the supervisor refuses it
	// as a file the command wrote.
	settled(b, script)
	snap := benchPolicy
	snap.Rules = append([]SnapshotRule{
		{Pattern: script + " *", Action: policy.Always, Children: ChildrenJudged},
		{Pattern: filepath.Base(script) + " *", Action: policy.Always, Children: ChildrenJudged},
	}, snap.Rules...)
	p := newPair(b, script+" "+data, snap, dir, skill)
	i := 0
	for b.Loop() {
		p.run(i)
		i++
	}
	sup, unsup := percentile(p.supervised, 50), percentile(p.unsupervised, 50)
	b.ReportMetric(float64(skillScriptPrograms), "programs")
	b.ReportMetric(msec(sup), "supervised-p50-ms")
	b.ReportMetric(msec(percentile(p.supervised, 90)), "supervised-p90-ms")
	b.ReportMetric(msec(unsup), "unsupervised-p50-ms")
	b.ReportMetric(msec(percentile(p.unsupervised, 90)), "unsupervised-p90-ms")
	b.ReportMetric(float64(sup)/float64(unsup), "p50-ratio")
	b.ReportMetric(msec(percentile(p.overheads(skillScriptPrograms), 50)), "overhead-p50-ms/exec")
	b.ReportMetric(msec(percentile(p.supervisedCPU, 50)), "cpu-supervised-p50-ms")
	b.ReportMetric(msec(percentile(p.unsupervisedCPU, 50)), "cpu-unsupervised-p50-ms")
	b.ReportMetric(msec(percentile(p.cpuOverheads(skillScriptPrograms), 50)), "cpu-overhead-p50-ms/exec")
	b.ReportMetric(float64(len(p.supervised)), "samples")
}

// skillScriptPrograms is the number of programs skillScript50 runs: its
// own interpreter and the 50 programs it starts.
const skillScriptPrograms = 51

// skillScript50 is a report over a listing of pods, as a skill's script
// writes one: 50 programs, the printf of /usr/bin rather than dash's
// builtin, one pipeline after another.
const skillScript50 = `#!/bin/sh
# Summarises a listing of pods: NAMESPACE NAME PHASE RESTARTS NODE.
set -eu
pods="$1"
/usr/bin/printf '%s\n' "report of $(basename "$pods") at $(date -u +%Y-%m-%dT%H:%M:%SZ)"
/usr/bin/printf '%s pods\n' "$(wc -l < "$pods")"
echo "== pods by phase"
cut -d' ' -f3 "$pods" | sort | uniq -c | sort -rn
echo "== pods by namespace"
cut -d' ' -f1 "$pods" | sort | uniq -c | sort -rn | head -n 5
echo "== not running"
grep -v ' Running ' "$pods" | cut -d' ' -f1,2,3 | sort | head -n 10
echo "== most restarts"
sort -k4,4nr "$pods" | head -n 5 | cut -d' ' -f1,2,4
echo "== nodes"
cut -d' ' -f5 "$pods" | sort -u | wc -l
cut -d' ' -f5 "$pods" | sort | uniq -c | sort -rn | head -n 3
echo "== crash loops"
grep -c CrashLoopBackOff "$pods" || true
grep CrashLoopBackOff "$pods" | cut -d' ' -f1 | sort | uniq -c
echo "== pending"
grep ' Pending ' "$pods" | wc -l
echo "== names"
cut -d' ' -f2 "$pods" | tr '-' ' ' | cut -d' ' -f1 | sort -u | head -n 5
tail -n 3 "$pods" | cat
head -n 1 "$pods" | tr 'a-z' 'A-Z'
grep -q kube-system "$pods" && /usr/bin/printf '%s\n' "kube-system present"
/usr/bin/true
/usr/bin/printf '%s\n' "done at $(date -u +%s)"
`

// podListing is n lines of pods for skillScript50.
func podListing(n int) []byte {
	namespaces := []string{"kube-system", "shop", "payments", "search", "monitoring"}
	phases := []string{"Running", "Running", "Running", "Pending", "CrashLoopBackOff", "Succeeded"}
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "%s %s-%d-%05x %s %d node-%d\n", namespaces[i%len(namespaces)],
			[]string{"web", "api", "worker", "cache"}[i%4], i, i*7919, phases[i%len(phases)], i%13, i%7)
	}
	return []byte(sb.String())
}

// percentile returns the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

// msec is d in milliseconds.
func msec(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
