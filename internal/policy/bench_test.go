package policy

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// benchMatcher compiles the realistic policy for benchmarks.
func benchMatcher(b *testing.B) *Matcher {
	b.Helper()
	m, err := Compile(realisticPolicy())
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkDecideTypical judges everyday commands of 20 to 200 bytes.
func BenchmarkDecideTypical(b *testing.B) {
	commands := map[string]string{
		"simple":   "kubectl get pods -n shop -o wide",
		"pipeline": "kubectl get pods -A -o json | jq -r '.items[] | .metadata.name' | grep web | wc -l",
		"loop":     `for f in a.yaml b.yaml; do grep -n "image:" "$f" || echo "no image in $f"; done`,
		"refused":  "ls -la /tmp && sudo rm -rf / ; echo $(whoami) > /tmp/out",
		"script": `set -euo pipefail; if [[ -f deploy.yaml ]]; then cat deploy.yaml | grep -c kind; ` +
			`else kubectl get deploy web -o yaml | head -n 40; fi; git status -s; git log --oneline -n 5`,
	}
	m := benchMatcher(b)
	for name, c := range commands {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c)))
			for b.Loop() {
				m.Decide(c)
			}
		})
	}
}

// BenchmarkDecidePipeline1KiB judges a 1 KiB pipeline.
func BenchmarkDecidePipeline1KiB(b *testing.B) {
	c := pipeline1KiB()
	m := benchMatcher(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(c)))
	for b.Loop() {
		m.Decide(c)
	}
}

// BenchmarkParsePipeline1KiB parses the 1 KiB pipeline with the shell
// parser alone, one parser reused as the judge reuses its parsers: the
// floor of BenchmarkDecidePipeline1KiB's allocations.
func BenchmarkParsePipeline1KiB(b *testing.B) {
	c := pipeline1KiB()
	parser := syntax.NewParser()
	b.ReportAllocs()
	b.SetBytes(int64(len(c)))
	for b.Loop() {
		if _, err := parser.Parse(strings.NewReader(c), ""); err != nil {
			b.Fatal(err)
		}
	}
}

// adversarial builds inputs of at most n bytes designed to be costly:
// deep nesting of every kind, thousands of simple commands, long words.
func adversarial(n int) map[string]string {
	rep := func(prefix, unit, middle, closing, suffix string) string {
		k := (n - len(prefix) - len(middle) - len(suffix)) / (len(unit) + len(closing))
		return prefix + strings.Repeat(unit, k) + middle + strings.Repeat(closing, k) + suffix
	}
	nested := func(unit, middle, closing string) string {
		k := min((n-len(middle))/(len(unit)+len(closing)), MaxOpeners)
		return strings.Repeat(unit, k) + middle + strings.Repeat(closing, k)
	}
	return map[string]string{
		"semicolons": rep("", "ls;", "", "", ""),
		"pipes":      rep("", "ls|", "ls", "", ""),
		"andor":      rep("", "ls&&", "ls", "", ""),
		"blocks":     nested("{ ", "ls", ";}"),
		"subshells":  nested("( ", "ls", ")"),
		"cmdsubst":   "echo " + nested("$(", "ls", ")"),
		"ifs":        nested("if ls; then ", "ls", "; fi"),
		"expansions": "echo " + nested(`"${a:-`, "x", `}"`),
		"parens":     rep("", "(", "", ")", ""),
		"words":      rep("kubectl ", "$x ", "", "", ""),
		"globs":      rep("kubectl ", "get* ", "", "", ""),
		"wrappers":   rep("", "sudo ", "rm x", "", ""),
		"eval":       rep("", "eval ", "ls", "", ""),
		"heredocs":   rep("", "cat <<E\nx\nE\n", "", "", ""),
		"arithmetic": rep("echo $((", "1+", "1", "", "))"),
	}
}

// BenchmarkDecideAdversarial judges hostile inputs of 4, 16 and 64 KiB.
func BenchmarkDecideAdversarial(b *testing.B) {
	m := benchMatcher(b)
	for _, size := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"16KiB", 16 << 10}, {"64KiB", 64 << 10}} {
		for name, c := range adversarial(size.n) {
			b.Run(size.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(c)))
				for b.Loop() {
					m.Decide(c)
				}
			})
		}
	}
}

// BenchmarkDecideScaling judges each kind of adversarial input at 1, 4, 16
// and 64 KiB, in rounds that take every size in turn, and reports the cost
// per byte at each size (ns/B-1KiB ... ns/B-64KiB) and its growth from 4 to
// 64 KiB (growth): flat for a cost linear in the input, 16× for a quadratic
// one. Each figure is the least of the rounds: what else runs on the
// machine only ever adds time, so the least is the decision's own cost. Run
// it with -benchtime 1x.
func BenchmarkDecideScaling(b *testing.B) {
	const rounds, minRound = 7, 30 * time.Millisecond
	sizes := []int{1 << 10, 4 << 10, 16 << 10, 64 << 10}
	inputs := make([]map[string]string, len(sizes))
	for i, n := range sizes {
		inputs[i] = adversarial(n)
	}
	kinds := slices.Sorted(maps.Keys(inputs[0]))
	m := benchMatcher(b)
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			best := make([]float64, len(sizes))
			for b.Loop() {
				for round := range rounds {
					for i := range sizes {
						c := inputs[i][kind]
						n, start := 0, time.Now()
						for n == 0 || time.Since(start) < minRound {
							m.Decide(c)
							n++
						}
						perByte := float64(time.Since(start).Nanoseconds()) / float64(n) / float64(len(c))
						if round == 0 || perByte < best[i] {
							best[i] = perByte
						}
					}
				}
			}
			for i, n := range sizes {
				b.ReportMetric(best[i], fmt.Sprintf("ns/B-%dKiB", n>>10))
			}
			b.ReportMetric(best[3]/best[1], "growth")
		})
	}
}

// pipeline1KiB is a pipeline of grep stages, 1 KiB long.
func pipeline1KiB() string {
	stage := "grep -v 'kube-system' | "
	return "kubectl get pods -A -o wide | " + strings.Repeat(stage, (1024-40)/len(stage)) + "sort -u"
}

// BenchmarkDecideLatency times every decision on its own and reports the
// median and the 99th percentile, for typical commands and the 1 KiB
// pipeline, both in wall-clock time (p50-ns, p99-ns) and in the CPU time of
// the thread (cpu-p50-ns, cpu-p99-ns), which leaves out the time the OS gave
// to other processes: on a shared machine that time, not the decision,
// makes the wall-clock tail. The parse of the same command by the shell
// parser alone is the baseline (parse-p50-ns, parse-p99-ns, parse-cpu-p50-ns,
// parse-cpu-p99-ns, and cpu-p99-ratio, the decision's CPU p99 over the
// parse's): each decision is followed by a parse, so that both meet the
// same machine and the same garbage collector, and ns/op is the time of
// both. Hashing, fixed work that allocates nothing and takes as long as the
// median decision, shows the tail of the machine itself (spin-p50-ns,
// spin-p99-ns).
func BenchmarkDecideLatency(b *testing.B) {
	commands := []struct{ name, command string }{
		{"simple", "kubectl get pods -n shop -o wide"},
		{"script", `set -euo pipefail; if [[ -f deploy.yaml ]]; then cat deploy.yaml | grep -c kind; ` +
			`else kubectl get deploy web -o yaml | head -n 40; fi; git status -s; git log --oneline -n 5`},
		{"pipeline1KiB", pipeline1KiB()},
	}
	m := benchMatcher(b)
	for _, c := range commands {
		b.Run(c.name, func(b *testing.B) {
			// The thread's CPU clock counts only while it stays on one
			// thread.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			parser := syntax.NewParser()
			decide := func() { m.Decide(c.command) }
			parse := func() {
				if _, err := parser.Parse(strings.NewReader(c.command), ""); err != nil {
					b.Fatal(err)
				}
			}
			var decisions, parses timings
			for b.Loop() {
				decisions.time(decide)
				parses.time(parse)
			}
			// Fixed work that allocates nothing, as long as the median
			// decision: its tail is the machine's, not the code's.
			block := make([]byte, 1<<10)
			spin := func(rounds, n int) []time.Duration {
				ds := make([]time.Duration, n)
				for i := range ds {
					start := time.Now()
					for range rounds {
						sha256.Sum256(block)
					}
					ds[i] = time.Since(start)
				}
				return ds
			}
			rounds := 1
			for range 3 {
				rounds = max(1, int(float64(rounds)*float64(percentile(decisions.wall, 50))/float64(percentile(spin(rounds, 200), 50))))
			}
			spins := spin(rounds, min(len(decisions.wall), 20000))
			b.ReportMetric(float64(len(c.command)), "bytes")
			b.ReportMetric(float64(percentile(spins, 50)), "spin-p50-ns")
			b.ReportMetric(float64(percentile(spins, 99)), "spin-p99-ns")
			b.ReportMetric(float64(percentile(decisions.wall, 50)), "p50-ns")
			b.ReportMetric(float64(percentile(decisions.wall, 99)), "p99-ns")
			b.ReportMetric(float64(percentile(parses.wall, 50)), "parse-p50-ns")
			b.ReportMetric(float64(percentile(parses.wall, 99)), "parse-p99-ns")
			if len(decisions.cpu) > 0 && len(parses.cpu) > 0 {
				cpu99, parseCPU99 := percentile(decisions.cpu, 99), percentile(parses.cpu, 99)
				b.ReportMetric(float64(percentile(decisions.cpu, 50)), "cpu-p50-ns")
				b.ReportMetric(float64(cpu99), "cpu-p99-ns")
				b.ReportMetric(float64(percentile(parses.cpu, 50)), "parse-cpu-p50-ns")
				b.ReportMetric(float64(parseCPU99), "parse-cpu-p99-ns")
				b.ReportMetric(float64(cpu99)/float64(parseCPU99), "cpu-p99-ratio")
			}
		})
	}
}

// timings are the wall-clock and thread CPU times of runs of one function.
type timings struct {
	wall, cpu []time.Duration
}

// time runs f once and records how long it took; the CPU time is left out
// when the thread's clock cannot be read.
func (t *timings) time(f func()) {
	cpu0, _ := threadCPU()
	start := time.Now()
	f()
	t.wall = append(t.wall, time.Since(start))
	if cpu1, ok := threadCPU(); ok {
		t.cpu = append(t.cpu, cpu1-cpu0)
	}
}

// percentile returns the p-th percentile of ds (nearest rank); it sorts ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	k := int(math.Ceil(float64(len(ds))*p/100)) - 1
	return ds[min(max(k, 0), len(ds)-1)]
}

// TestAdversarialDecisions checks that hostile inputs are answered, never
// allowed, and quickly enough for a controller.
func TestAdversarialDecisions(t *testing.T) {
	m, err := Compile(realisticPolicy())
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range adversarial(64 << 10) {
		if len(c) > 64<<10 {
			t.Errorf("%s: %d bytes", name, len(c))
		}
		d := m.Decide(c)
		if d.Action == Always && name != "expansions" && name != "arithmetic" {
			t.Errorf("%s: 64 KiB input is Always: %s", name, short(d.Reason))
		}
		if len(d.Parts) > MaxParts {
			t.Errorf("%s: %d parts", name, len(d.Parts))
		}
	}
	if d := m.Decide(strings.Repeat("a", MaxCommandBytes+1)); d.Action != Ask || !strings.Contains(d.Reason, "longer than") {
		t.Errorf("over-long command: %s %s", d.Action, short(d.Reason))
	}
}
