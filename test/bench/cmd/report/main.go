// Command report runs the kubeskills benchmarks (`make bench`) and writes
// their table to BENCHMARKS.md and to standard output: the policy
// benchmarks of internal/policy, the exec-supervision benchmarks of
// internal/runner, then the benchmarks of test/bench against the envtest
// API server, each figure beside its baseline and its target.
//
// Figures measured elsewhere are read from JSON files, by default
// bin/bench/e2e.json, bin/bench/load.json and bin/bench/burst.json, when
// they exist. The
// end-to-end tests (test/e2e, `make e2e`) write to the first the
// real-cluster half of the command start, `echo hi` asked of an agent
// against a plain Job, in seconds:
//
//	{"date": "2026-11-30T12:27:49Z", "runs": 3,
//	 "commandRunP50": 4.66, "commandRunP90": 5.41, "plainJobP50": 3.07, "plainJobP90": 3.12,
//	 "ratioP50": 1.51, "ratioP90": 1.74}
//
// and, in the same run, the same chat asked of an agent whose command runs
// in a warm sandbox, with the cost of a waiting warm sandbox and of its
// refill (seconds, MiB, millicores):
//
//	{"plainJobP99": 3.2, "warm": {"pool": 2, "chatP50": 0.26, "chatP99": 0.43,
//	 "ratioP50": 0.09, "ratioP99": 0.14, "createdToRecordedP50": 0.115, "createdToRecordedP99": 0.2,
//	 "refillP50": 2.0, "refillMax": 2.3, "refills": 3, "refilledAfterRunP50": 1.7,
//	 "idle": {"runnerRSSMiB": 1.3, "runnerVmRSSMiB": 7.7, "podRSSMiB": 1.9, "cpuMillicores": 0,
//	          "windowSeconds": 20}}}
//
// The file may also hold rows of the table as they are:
//
//	{"rows": [{"item": "4", "measure": "…", "result": "…", "baseline": "…",
//	           "ratio": "…", "target": "≤ 1.2×", "status": "met"}]}
//
// They go into the table after the rows of the same item. `make chaos`
// writes its rows that way: the load test's, item 6, to
// bin/bench/load.json, and the burst's, item 4, to bin/bench/burst.json.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kubeskills/kubeskills/internal/testenv"
)

// Row is one line of the table.
type Row struct {
	Item     string `json:"item"`
	Measure  string `json:"measure"`
	Result   string `json:"result"`
	Baseline string `json:"baseline"`
	Ratio    string `json:"ratio"`
	Target   string `json:"target"`
	// Status is "met", "missed" or empty when there is no target.
	Status string `json:"status"`
}

// extraFile is the format of the file of figures measured elsewhere.
type extraFile struct {
	Rows []Row `json:"rows"`
	// The end-to-end tests' command start: `echo hi` asked of an agent on a
	// real cluster against a plain Job, in seconds.
	Date          string   `json:"date"`
	Runs          int      `json:"runs"`
	CommandRunP50 *float64 `json:"commandRunP50"`
	CommandRunP90 float64  `json:"commandRunP90"`
	PlainJobP50   float64  `json:"plainJobP50"`
	PlainJobP90   float64  `json:"plainJobP90"`
	RatioP50      float64  `json:"ratioP50"`
	RatioP90      float64  `json:"ratioP90"`
	PlainJobP99   float64  `json:"plainJobP99"`
	// Steps, when the file has them, break both sides down.
	Steps *commandSteps `json:"steps"`
	// Warm, when the file has it, is the warm sandbox's side of the same
	// run.
	Warm *warmFigures `json:"warm"`
}

// warmFigures are `echo hi` asked in a chat of an agent whose command runs
// in a warm sandbox, in seconds, with what a waiting warm sandbox costs.
type warmFigures struct {
	// Pool is how many warm sandboxes the agent keeps.
	Pool     int     `json:"pool"`
	ChatP50  float64 `json:"chatP50"`
	ChatP99  float64 `json:"chatP99"`
	RatioP50 float64 `json:"ratioP50"`
	RatioP99 float64 `json:"ratioP99"`
	// CreatedToRecorded runs from the CommandRun's creation until its
	// result is recorded, both seen on a watch.
	CreatedToRecordedP50 float64 `json:"createdToRecordedP50"`
	CreatedToRecordedP99 float64 `json:"createdToRecordedP99"`
	// Refill runs from a warm pod's deletion until a replacement waits;
	// RefilledAfterRun from a run's end until its pool is full again.
	RefillP50           float64 `json:"refillP50"`
	RefillMax           float64 `json:"refillMax"`
	Refills             int     `json:"refills"`
	RefilledAfterRunP50 float64 `json:"refilledAfterRunP50"`
	// Idle is a waiting warm sandbox as the kubelet reports it: the RSS of
	// its command container (runnerRSSMiB) and pod (podRSSMiB), the CPU of
	// the container over windowSeconds (cpuMillicores), and the runner
	// process's VmRSS (runnerVmRSSMiB).
	Idle map[string]float64 `json:"idle"`
}

func main() {
	root := testenv.RepoRoot()
	var o options
	flag.StringVar(&o.out, "out", filepath.Join(root, "BENCHMARKS.md"), "The Markdown file to write.")
	flag.StringVar(&o.extra, "extra", filepath.Join(root, "bin", "bench", "e2e.json")+","+filepath.Join(root, "bin", "bench", "load.json")+
		","+filepath.Join(root, "bin", "bench", "burst.json"),
		"Rows measured elsewhere, as JSON files separated by commas; a file that does not exist is skipped.")
	flag.StringVar(&o.notes, "notes", filepath.Join(root, "test", "bench", "findings.md"), "Markdown appended after the table: the profiles and fixes.")
	flag.StringVar(&o.raw, "raw", filepath.Join(root, "bin", "bench", "raw.txt"), "Where the raw output of the benchmarks is kept.")
	flag.StringVar(&o.from, "from", "", "Write the table from the raw output of an earlier run instead of running the benchmarks.")
	flag.StringVar(&o.policyTime, "policy-benchtime", "0.5s", "The -benchtime of the typical and 1 KiB policy benchmarks.")
	flag.StringVar(&o.latencyTime, "latency-benchtime", "3s", "The -benchtime of the policy latency benchmark.")
	flag.StringVar(&o.execTime, "exec-benchtime", "40x", "The -benchtime of the exec-supervision benchmarks: pairs of runs, each timed.")
	flag.StringVar(&o.only, "only", "", "Run only the benchmark steps whose package path contains this (\"internal/runner\"); the table shows the rest as not measured.")
	flag.DurationVar(&o.timeout, "timeout", 13*time.Minute, "The timeout of the envtest benchmarks.")
	flag.Parse()
	if err := run(root, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	out, extra, notes, raw, from string
	policyTime, latencyTime      string
	execTime, only               string
	timeout                      time.Duration
}

// Lines the raw output starts and ends with, so that -from can tell when
// and under what load the run was made.
const (
	rawStarted = "# bench started "
	rawEnded   = "# bench ended "
)

func run(root string, o options) error {
	var text string
	if o.from != "" {
		data, err := os.ReadFile(o.from)
		if err != nil {
			return err
		}
		text = string(data)
	} else {
		var err error
		if text, err = runBenchmarks(root, o); err != nil {
			return err
		}
	}
	var r results
	r.parse(text)
	rows := table(r)
	var extra []Row
	var steps *commandSteps
	for _, path := range strings.Split(o.extra, ",") {
		more, moreSteps, err := readExtra(path)
		if err != nil {
			return err
		}
		extra = append(extra, more...)
		if moreSteps != nil {
			steps = moreSteps
		}
	}
	rows = merge(rows, extra)
	env := environment{
		cpu:        r.cpu,
		cores:      runtime.NumCPU(),
		memory:     memTotal(),
		goVersion:  goVersion(root),
		kubernetes: r.kubernetes,
		date:       r.started.UTC(),
		duration:   r.ended.Sub(r.started).Round(time.Second),
		load:       [2]string{r.load[0], r.load[1]},
	}
	var doc bytes.Buffer
	writeDocument(&doc, env, rows, r, steps, len(extra) > 0)
	if notes, err := os.ReadFile(o.notes); err == nil {
		doc.WriteString("\n")
		doc.Write(notes)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(o.out, doc.Bytes(), 0o644); err != nil {
		return err
	}
	var tbl bytes.Buffer
	writeTable(&tbl, rows)
	fmt.Print(tbl.String())
	fmt.Fprintf(os.Stderr, "bench: wrote %s\n", o.out)
	return nil
}

// runBenchmarks runs the benchmarks and returns their output, which it also
// keeps in o.raw.
func runBenchmarks(root string, o options) (string, error) {
	var raw bytes.Buffer
	fmt.Fprintf(&raw, "%s%s load %s\n", rawStarted, time.Now().UTC().Format(time.RFC3339), loadAverage())
	steps := [][]string{
		{"test", "-run", "^$", "-bench", "^Benchmark(Decide(Typical|Pipeline1KiB)|ParsePipeline1KiB)$", "-benchmem", "-benchtime", o.policyTime, "./internal/policy/"},
		{"test", "-run", "^$", "-bench", "^BenchmarkDecideLatency$", "-benchmem", "-benchtime", o.latencyTime, "./internal/policy/"},
		{"test", "-run", "^$", "-bench", "^BenchmarkDecideScaling$", "-benchtime", "1x", "./internal/policy/"},
		{"test", "-run", "^$", "-bench", "^Benchmark(ExecSupervision|SkillScript50)$", "-benchtime", o.execTime, "./internal/runner/"},
		{"test", "-tags", "bench", "-run", "^$", "-bench", ".", "-benchtime", "1x", "-timeout", o.timeout.String(), "./test/bench/"},
	}
	for _, args := range steps {
		if o.only != "" && !strings.Contains(args[len(args)-1], o.only) {
			continue
		}
		fmt.Fprintln(os.Stderr, "bench: go", strings.Join(args, " "))
		if err := goCommand(root, args, &raw); err != nil {
			_ = writeFile(o.raw, raw.Bytes())
			return "", fmt.Errorf("go %s: %w (output kept in %s)", strings.Join(args, " "), err, o.raw)
		}
	}
	fmt.Fprintf(&raw, "%s%s load %s\n", rawEnded, time.Now().UTC().Format(time.RFC3339), loadAverage())
	return raw.String(), writeFile(o.raw, raw.Bytes())
}

// goCommand runs go with args in dir, copying its output to stderr and to
// raw.
func goCommand(dir string, args []string, raw *bytes.Buffer) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	w := io.MultiWriter(raw, os.Stderr)
	cmd.Stdout, cmd.Stderr = w, w
	return cmd.Run()
}

// results are the metrics of every benchmark, by name (without the
// GOMAXPROCS suffix) and unit.
type results struct {
	metrics    map[string]map[string]float64
	cpu        string
	kubernetes string
	// started and ended are when the run started and ended, and load the
	// load average then.
	started, ended time.Time
	load           [2]string
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// parse reads the lines of `go test -bench` output.
func (r *results) parse(text string) {
	if r.metrics == nil {
		r.metrics = map[string]map[string]float64{}
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "cpu: "); ok {
			r.cpu = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "kubeskills-bench: kubernetes "); ok {
			r.kubernetes = strings.TrimSpace(v)
		}
		for i, prefix := range []string{rawStarted, rawEnded} {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				at, load, _ := strings.Cut(v, " load ")
				t, _ := time.Parse(time.RFC3339, at)
				if i == 0 {
					r.started = t
				} else {
					r.ended = t
				}
				r.load[i] = load
			}
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procsSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
		r.metrics[name] = m
	}
}

// get returns a metric, and whether it was measured.
func (r results) get(name, unit string) (float64, bool) {
	v, ok := r.metrics[name][unit]
	return v, ok
}

// table builds the rows from the metrics; a figure not measured shows as
// "not measured".
func table(r results) []Row {
	var rows []Row
	add := func(row Row) { rows = append(rows, row) }
	m := func(name, unit string) float64 {
		v, ok := r.get(name, unit)
		if !ok {
			return math.NaN()
		}
		return v
	}

	// 1. Skill throughput. A Skill costs at least skillWrites API writes
	// (the Skill, its ConfigMap, its status) where the floor costs one (the
	// ConfigMap), so the target is the floor times skillWrites, with 20%
	// for the operator's own work.
	st := "SkillThroughput"
	const skillWrites, skillSlack = 3.0, 1.2
	skillTarget := fmt.Sprintf("≤ %s× (%s × %s writes × the floor)", num(skillSlack*skillWrites, 1), num(skillSlack, 1), num(skillWrites, 0))
	add(Row{Item: "1", Measure: "1,000 Skills applied → all Ready with their ConfigMaps",
		Result: secs(m(st, "create-s")), Baseline: "same 1,000 ConfigMaps applied directly: " + secs(m(st, "floor-create-s")),
		Ratio: times(m(st, "create-ratio")), Target: skillTarget, Status: atMost(m(st, "create-ratio"), skillSlack*skillWrites)})
	add(Row{Item: "1", Measure: "1,000 Skills updated → all Ready with their ConfigMaps",
		Result: secs(m(st, "update-s")), Baseline: "same 1,000 ConfigMaps updated directly: " + secs(m(st, "floor-update-s")),
		Ratio: times(m(st, "update-ratio")), Target: skillTarget, Status: atMost(m(st, "update-ratio"), skillSlack*skillWrites)})
	// Writes per Skill are every write the API server served in the phase
	// over 1,000, to one decimal: the few writes of the API server's own
	// housekeeping are not the Skills'.
	perSkill := func(unit string) float64 { return math.Round(m(st, unit)*10) / 10 }
	add(Row{Item: "1", Measure: "API writes per Skill (apiserver_request_total), the client's apply of the Skill included: created / updated",
		Result:   num(perSkill("create-writes/skill"), 1) + " / " + num(perSkill("update-writes/skill"), 1),
		Baseline: "the floor: " + num(perSkill("floor-create-writes/skill"), 1) + " / " + num(perSkill("floor-update-writes/skill"), 1),
		Target:   "≤ " + num(skillWrites, 1), Status: atMost(math.Max(perSkill("create-writes/skill"), perSkill("update-writes/skill")), skillWrites)})

	// 2. Agent catalog.
	ac := "AgentCatalog"
	add(Row{Item: "2", Measure: fmt.Sprintf("Agent selecting 1,000 Skills → catalog written (%s KiB, %s ConfigMap)", num(m(ac, "catalog-KiB"), 0), num(m(ac, "catalog-shards"), 0)),
		Result: secs(m(ac, "catalog-s")), Baseline: "same catalog ConfigMap applied directly: " + secs(m(ac, "catalog-floor-s")),
		Ratio: times(m(ac, "catalog-s") / m(ac, "catalog-floor-s"))})
	add(Row{Item: "2", Measure: "Runtime loads the catalog from disk: median / worst of 30; memory allocated / retained",
		Result:   fmt.Sprintf("%s / %s; %s / %s MiB", ms(m(ac, "load-ms")), ms(m(ac, "load-max-ms")), num(m(ac, "load-alloc-MiB"), 1), num(m(ac, "load-heap-MiB"), 1)),
		Baseline: "bare JSON decoding of the same files: " + ms(m(ac, "load-floor-ms")),
		Ratio:    times(m(ac, "load-ms") / m(ac, "load-floor-ms")), Target: "≤ 100 ms", Status: atMost(m(ac, "load-max-ms"), 100)})
	add(Row{Item: "2", Measure: "One Skill edited → the Agent's catalog names its new content",
		Result: secs(m(ac, "propagate-s")), Baseline: "one ConfigMap apply: " + ms(m(ac, "propagate-floor-ms")),
		Ratio: times(m(ac, "propagate-s") * 1000 / m(ac, "propagate-floor-ms"))})
	add(Row{Item: "2", Measure: "Runtime reloads the rewritten catalog",
		Result: ms(m(ac, "reload-ms")), Baseline: "first load (median): " + ms(m(ac, "load-ms")),
		Ratio: times(m(ac, "reload-ms") / m(ac, "load-ms")), Target: "≤ 100 ms", Status: atMost(m(ac, "reload-ms"), 100)})

	// 3. Policy.
	lo, hi, loA, hiA := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for name := range r.metrics {
		if strings.HasPrefix(name, "DecideTypical/") {
			lo, hi = math.Min(lo, m(name, "ns/op")), math.Max(hi, m(name, "ns/op"))
			loA, hiA = math.Min(loA, m(name, "allocs/op")), math.Max(hiA, m(name, "allocs/op"))
		}
	}
	add(Row{Item: "3", Measure: "Decision, 5 typical commands (20–200 B): mean time; allocations",
		Result: fmt.Sprintf("%s–%s; %s–%s allocs", micros(lo), micros(hi), num(loA, 0), num(hiA, 0))})
	for _, c := range []struct{ name, measure string }{
		{"DecideLatency/simple", "Decision, typical 32 B command: p50 / p99 (CPU p99)"},
		{"DecideLatency/script", "Decision, typical 172 B script: p50 / p99 (CPU p99)"},
	} {
		add(Row{Item: "3", Measure: c.measure,
			Result:   fmt.Sprintf("%s / %s (%s)", micros(m(c.name, "p50-ns")), micros(m(c.name, "p99-ns")), micros(m(c.name, "cpu-p99-ns"))),
			Baseline: "shell parse alone: " + latencies(m, c.name, "parse-"),
			Ratio:    times(m(c.name, "cpu-p99-ratio")) + " of the parse's CPU p99"})
	}
	pl := "DecideLatency/pipeline1KiB"
	add(Row{Item: "3", Measure: "Decision, 1 KiB pipeline: p50 / p99 (CPU p99)",
		Result: latencies(m, pl, ""),
		Baseline: fmt.Sprintf("shell parse alone: %s; fixed work as long as the median decision: %s / %s",
			latencies(m, pl, "parse-"), micros(m(pl, "spin-p50-ns")), micros(m(pl, "spin-p99-ns"))),
		Ratio:  times(m(pl, "cpu-p99-ratio")) + " of the parse's CPU p99",
		Target: "CPU p99 ≤ 2× the parse's", Status: atMost(m(pl, "cpu-p99-ratio"), 2)})
	add(Row{Item: "3", Measure: "Decision, 1 KiB pipeline: allocations and memory per decision",
		Result:   fmt.Sprintf("%s allocs, %s KiB", num(m("DecidePipeline1KiB", "allocs/op"), 0), num(m("DecidePipeline1KiB", "B/op")/1024, 1)),
		Baseline: fmt.Sprintf("shell parse alone: %s allocs, %s KiB", num(m("ParsePipeline1KiB", "allocs/op"), 0), num(m("ParsePipeline1KiB", "B/op")/1024, 1)),
		Ratio:    times(m("DecidePipeline1KiB", "allocs/op")/m("ParsePipeline1KiB", "allocs/op")) + " of the parse's",
		Target:   "≤ 100 allocs", Status: atMost(m("DecidePipeline1KiB", "allocs/op"), 100)})
	growth, worst, maxNsB := adversarialGrowth(r)
	add(Row{Item: "3", Measure: "Decision, adversarial inputs 1–64 KiB (15 kinds, table below): cost per byte; its growth from 4 to 64 KiB, worst kind",
		Result:   fmt.Sprintf("≤ %s ns/B", num(maxNsB, 0)),
		Baseline: "same kind at 4 KiB", Ratio: fmt.Sprintf("%s (%s)", times(growth), worst),
		Target: "linear: ≤ 2× (quadratic would be 16×)", Status: atMost(growth, 2)})

	// 4. Command start.
	cs := "CommandStart"
	jobBaseline := fmt.Sprintf("same Job created directly, from the create call until seen on the same watch: %s / %s", ms(m(cs, "job-p50-ms")), ms(m(cs, "job-p99-ms")))
	add(Row{Item: "4", Measure: "CommandRun created → its Job created (envtest, 200 runs, seen on a watch): p50 / p99",
		Result:   fmt.Sprintf("%s / %s", ms(m(cs, "created-p50-ms")), ms(m(cs, "created-p99-ms"))),
		Baseline: jobBaseline,
		Ratio:    fmt.Sprintf("%s / %s", times(m(cs, "created-p50-ratio")), times(m(cs, "created-p99-ratio"))),
		Target:   "≤ 1.2×", Status: atMost(math.Max(m(cs, "created-p50-ratio"), m(cs, "created-p99-ratio")), 1.2)})
	add(Row{Item: "4", Measure: "The same, from the start of the CommandRun's create call: p50 / p99",
		Result:   fmt.Sprintf("%s / %s", ms(m(cs, "run-p50-ms")), ms(m(cs, "run-p99-ms"))),
		Baseline: jobBaseline,
		Ratio:    fmt.Sprintf("%s / %s", times(m(cs, "p50-ratio")), times(m(cs, "p99-ratio")))})

	// 5. Manager footprint.
	mf := "ManagerFootprint"
	add(Row{Item: "5", Measure: "Manager process, resident memory at rest with 5,000 Skills and 100 Agents (VmRSS; Go heap in use)",
		Result:   fmt.Sprintf("%s MiB (%s MiB)", num(m(mf, "rest-rss-MiB"), 0), num(m(mf, "rest-heap-MiB"), 0)),
		Baseline: "on an empty cluster: " + num(m(mf, "empty-rss-MiB"), 0) + " MiB",
		Ratio:    times(m(mf, "rest-rss-MiB") / m(mf, "empty-rss-MiB")), Target: "≤ 120 MiB", Status: atMost(m(mf, "rest-rss-MiB"), 120)})
	add(Row{Item: "5", Measure: "The same, with 20,000 ConfigMaps (1 KiB each) and 5,000 pods of others added to the cluster (VmRSS; Go heap in use)",
		Result:   fmt.Sprintf("%s MiB (%s MiB)", num(m(mf, "unrelated-rss-MiB"), 0), num(m(mf, "unrelated-heap-MiB"), 0)),
		Baseline: "at rest without them: " + num(m(mf, "rest-rss-MiB"), 0) + " MiB",
		Ratio:    times(m(mf, "unrelated-ratio")), Target: "within 10 % (≤ 1.10×)", Status: atMost(m(mf, "unrelated-ratio"), 1.10)})
	add(Row{Item: "5", Measure: "Manager peak memory while 1,000 of the Skills are updated (VmHWM)",
		Result:   num(m(mf, "update-hwm-MiB"), 0) + " MiB",
		Baseline: "peak while the fleet was created: " + num(m(mf, "load-hwm-MiB"), 0) + " MiB",
		Ratio:    times(m(mf, "update-hwm-MiB") / m(mf, "load-hwm-MiB")), Target: "≤ 150 MiB", Status: atMost(m(mf, "update-hwm-MiB"), 150)})
	add(Row{Item: "5", Measure: "Manager CPU time (utime + stime): creating the fleet / 10 s at rest / 1,000 updates",
		Result: fmt.Sprintf("%s CPU in %s / %s / %s CPU in %s", secs(m(mf, "load-cpu-s")), secs(m(mf, "load-s")), secs(m(mf, "rest-cpu-s")),
			secs(m(mf, "update-cpu-s")), secs(m(mf, "update-s")))})

	// 7. Exec supervision. Each figure pairs the same line supervised
	// (runner.Run) and unsupervised (the runner's shell alone).
	es, ss := "ExecSupervision", "SkillScript50"
	add(Row{Item: "7", Measure: fmt.Sprintf("Exec supervision, cost per exec: a line of %s programs (/usr/bin/true), supervised − unsupervised, ÷ %s: p50 / p90 (CPU p50)",
		num(m(es, "programs"), 0), num(m(es, "programs"), 0)),
		Result: fmt.Sprintf("%s / %s (CPU %s)", msMicros(m(es, "overhead-p50-ms/exec")), msMicros(m(es, "overhead-p90-ms/exec")),
			msMicros(m(es, "cpu-overhead-p50-ms/exec"))),
		Baseline: fmt.Sprintf("one exec unsupervised (the line's p50 ÷ %s): %s (CPU %s)", num(m(es, "programs"), 0),
			msMicros(m(es, "unsupervised-p50-ms/exec")), msMicros(m(es, "cpu-unsupervised-p50-ms/exec"))),
		Target: "≤ 2 ms per exec (p50)", Status: atMost(m(es, "overhead-p50-ms/exec"), 2)})
	add(Row{Item: "7", Measure: "The same line of 50 programs, supervised: p50 / p90",
		Result:   fmt.Sprintf("%s / %s", ms(m(es, "supervised-p50-ms")), ms(m(es, "supervised-p90-ms"))),
		Baseline: fmt.Sprintf("unsupervised: %s / %s", ms(m(es, "unsupervised-p50-ms")), ms(m(es, "unsupervised-p90-ms"))),
		Ratio:    times(m(es, "supervised-p50-ms") / m(es, "unsupervised-p50-ms"))})
	add(Row{Item: "7", Measure: "A line of one program, supervised: p50 (the cost per run); the overhead's growth per added program, 1 → 50: p50",
		Result:   fmt.Sprintf("%s; %s per program", ms(m(es, "one-supervised-p50-ms")), msMicros(m(es, "marginal-p50-ms/exec"))),
		Baseline: "unsupervised: " + ms(m(es, "one-unsupervised-p50-ms")),
		Ratio:    times(m(es, "one-supervised-p50-ms") / m(es, "one-unsupervised-p50-ms"))})
	add(Row{Item: "7", Measure: "A skill script of 50 programs (cat, grep, sort, cut…), each judged and allowed: p50 / p90 (CPU p50); supervised − unsupervised per exec (51 with its sh): p50",
		Result: fmt.Sprintf("%s / %s (CPU %s); %s", ms(m(ss, "supervised-p50-ms")), ms(m(ss, "supervised-p90-ms")),
			ms(m(ss, "cpu-supervised-p50-ms")), msMicros(m(ss, "overhead-p50-ms/exec"))),
		Baseline: fmt.Sprintf("the same script unsupervised: %s / %s (CPU %s)", ms(m(ss, "unsupervised-p50-ms")), ms(m(ss, "unsupervised-p90-ms")),
			ms(m(ss, "cpu-unsupervised-p50-ms"))),
		Ratio:  fmt.Sprintf("%s (CPU %s)", times(m(ss, "p50-ratio")), times(m(ss, "cpu-supervised-p50-ms")/m(ss, "cpu-unsupervised-p50-ms"))),
		Target: "≤ 2 ms per exec (p50)", Status: atMost(m(ss, "overhead-p50-ms/exec"), 2)})

	// 8. Tracing overhead: each figure with tracing on against tracing
	// off, interleaved in the same run.
	for _, c := range []struct{ name, measure, unit string }{
		{"TracingChat", "`echo hi` asked of an agent in a chat → its answer, the operator judging and recording the run (envtest, %s chats each way in %s blocks, interleaved): p50 / p90 (memory allocated per chat)", "chats"},
		{"TracingDecision", "CommandRun created → its policy decision recorded, seen on a watch (envtest, %s runs each way in %s blocks, interleaved): p50 / p90 (memory allocated per run)", "runs"},
	} {
		add(Row{Item: "8", Measure: "Tracing on against off: " + fmt.Sprintf(c.measure, num(m(c.name, c.unit), 0), num(m(c.name, "blocks"), 0)),
			Result: fmt.Sprintf("%s / %s (%s KiB)", msFine(m(c.name, "on-p50-ms")), msFine(m(c.name, "on-p90-ms")), num(m(c.name, "on-alloc-KiB"), 0)),
			Baseline: fmt.Sprintf("tracing off, same run: %s / %s (%s KiB)", msFine(m(c.name, "off-p50-ms")), msFine(m(c.name, "off-p90-ms")),
				num(m(c.name, "off-alloc-KiB"), 0)),
			Ratio: fmt.Sprintf("%s (95 %% interval %s–%s; one block: %s–%s; memory %s)", timesFine(m(c.name, "p50-ratio")),
				timesFine(m(c.name, "p50-ratio-ci-lo")), timesFine(m(c.name, "p50-ratio-ci-hi")),
				times(m(c.name, "block-ratio-min")), times(m(c.name, "block-ratio-max")), times(m(c.name, "alloc-ratio"))),
			Target: "≤ 1.05× (p50)", Status: atMost(m(c.name, "p50-ratio"), 1.05)})
	}
	return rows
}

// latencies formats the p50 / p99 of a latency benchmark and its CPU p99,
// for the metrics whose names start with prefix ("" for the decision,
// "parse-" for the parse alone).
func latencies(m func(name, unit string) float64, name, prefix string) string {
	return fmt.Sprintf("%s / %s (%s)", micros(m(name, prefix+"p50-ns")), micros(m(name, prefix+"p99-ns")), micros(m(name, prefix+"cpu-p99-ns")))
}

// adversarialGrowth returns the largest growth of ns/B from 4 to 64 KiB
// over the adversarial kinds, the kind it is for, and the largest ns/B
// seen. At 1 KiB a whole decision stays in the CPU's caches, which makes it
// cheaper per byte for reasons that have nothing to do with the algorithm;
// from 4 KiB on, a cost that grows faster than the input shows as ns/B
// growing with it.
func adversarialGrowth(r results) (growth float64, kind string, maxNsB float64) {
	growth = math.NaN()
	for name, m := range r.metrics {
		k, ok := strings.CutPrefix(name, "DecideScaling/")
		if !ok {
			continue
		}
		if g, ok := m["growth"]; ok && (math.IsNaN(growth) || g > growth) {
			growth, kind = g, k
		}
		for unit, v := range m {
			if strings.HasPrefix(unit, "ns/B-") {
				maxNsB = math.Max(maxNsB, v)
			}
		}
	}
	return growth, kind, maxNsB
}

// readExtra reads the rows measured elsewhere; none when the file does not
// exist.
func readExtra(path string) ([]Row, *commandSteps, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var e extraFile
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, nil, fmt.Errorf("failed to read the rows of %s: %w", path, err)
	}
	rows := e.Rows
	if e.CommandRunP50 != nil {
		measure := fmt.Sprintf("`echo hi` asked of an agent on a real cluster → its result (end-to-end tests, %d runs, %s): p50 / p90",
			e.Runs, e.Date)
		if e.Steps != nil {
			measure = fmt.Sprintf("`echo hi` asked of an agent in a chat on a real cluster → its answer (end-to-end tests, %d runs, %s): p50 / p90",
				e.Runs, e.Date)
		}
		if e.Warm != nil {
			measure = fmt.Sprintf("Cold path (the agent keeps no warm sandbox: a Job per command): `echo hi` asked in a chat on a real cluster → its answer "+
				"(end-to-end tests, %d runs, %s): p50 / p90", e.Runs, e.Date)
		}
		rows = append(rows, Row{Item: "4",
			Measure:  measure,
			Result:   fmt.Sprintf("%s / %s", secs(*e.CommandRunP50), secs(e.CommandRunP90)),
			Baseline: fmt.Sprintf("plain Job running `echo hi`, created until its log is read: %s / %s", secs(e.PlainJobP50), secs(e.PlainJobP90)),
			Ratio:    fmt.Sprintf("%s / %s", times(e.RatioP50), times(e.RatioP90)),
			Target:   "≤ 1.2× (p50)", Status: atMost(e.RatioP50, 1.2)})
	}
	if e.Warm != nil {
		rows = append(rows, warmRows(e)...)
	}
	return rows, e.Steps, nil
}

// warmRows are the rows of the warm sandboxes, item 4, each against the
// plain Job of the same run.
func warmRows(e extraFile) []Row {
	w := e.Warm
	plain := fmt.Sprintf("plain Job running `echo hi`, same run: %s / %s", secs(e.PlainJobP50), secs(plainP99(e)))
	plainP50 := fmt.Sprintf("plain Job running `echo hi`, same run: %s (p50)", secs(e.PlainJobP50))
	idle := func(key string) float64 {
		v, ok := w.Idle[key]
		if !ok {
			return math.NaN()
		}
		return v
	}
	rss := math.Max(idle("runnerRSSMiB"), idle("podRSSMiB"))
	if v := idle("runnerVmRSSMiB"); !math.IsNaN(v) {
		rss = math.Max(rss, v)
	}
	idleStatus := atMost(rss, 15)
	if idleStatus == "met" {
		// No CPU: less than a thousandth of a core, which rounds to none.
		idleStatus = atMost(idle("cpuMillicores"), 0.999)
	}
	return []Row{
		{Item: "4", Measure: fmt.Sprintf("Warm sandbox (a pool of %d, full again before each chat): `echo hi` asked in a chat on a real cluster → its answer "+
			"(end-to-end tests, %d runs, %s): p50 / p99", w.Pool, e.Runs, e.Date),
			Result:   fmt.Sprintf("%s / %s", secs(w.ChatP50), secs(w.ChatP99)),
			Baseline: plain,
			Ratio:    fmt.Sprintf("%s / %s", times(w.RatioP50), times(w.RatioP99)),
			Target:   "p50 ≤ 0.5 s, p99 ≤ 1 s, ≤ 0.2× (p50)",
			Status:   allMet(atMost(w.ChatP50, 0.5), atMost(w.ChatP99, 1), atMost(w.RatioP50, 0.2))},
		{Item: "4", Measure: "Warm sandbox: CommandRun created → its result recorded (both seen on a watch): p50 / p99",
			Result:   fmt.Sprintf("%s / %s", secs(w.CreatedToRecordedP50), secs(w.CreatedToRecordedP99)),
			Baseline: plainP50,
			Ratio:    times(w.CreatedToRecordedP50 / e.PlainJobP50),
			Target:   "≤ 250 ms (p50)", Status: atMost(w.CreatedToRecordedP50, 0.25)},
		{Item: "4", Measure: fmt.Sprintf("A waiting warm sandbox, over %s: resident memory of its runner (cgroup RSS; the process's VmRSS) and of its pod; CPU",
			secs(idle("windowSeconds"))),
			Result: fmt.Sprintf("%s MiB (%s MiB); %s MiB; %s millicores", num(idle("runnerRSSMiB"), 1), num(idle("runnerVmRSSMiB"), 1),
				num(idle("podRSSMiB"), 1), num(idle("cpuMillicores"), 2)),
			Target: "≤ 15 MiB RSS, no CPU", Status: idleStatus},
		{Item: "4", Measure: fmt.Sprintf("Refill: a warm sandbox deleted → its replacement waits (%d times): p50 / max; a run's end → its pool full again: p50",
			w.Refills),
			Result:   fmt.Sprintf("%s / %s; %s", secs(w.RefillP50), secs(w.RefillMax), secs(w.RefilledAfterRunP50)),
			Baseline: plainP50,
			Ratio:    times(w.RefillP50 / e.PlainJobP50)},
	}
}

// plainP99 is the plain Job's p99, or its p90 in a file without one.
func plainP99(e extraFile) float64 {
	if e.PlainJobP99 > 0 {
		return e.PlainJobP99
	}
	return e.PlainJobP90
}

// allMet is "met" when every status is, else the first that is not.
func allMet(statuses ...string) string {
	for _, s := range statuses {
		if s != "met" {
			return s
		}
	}
	return "met"
}

// commandSteps are the medians, in seconds from the start, of the steps of
// a command on the real cluster, each [name, seconds]: asked in a chat,
// and as a plain Job.
type commandSteps struct {
	Chat     [][2]any `json:"chat"`
	PlainJob [][2]any `json:"plainJob"`
	// WarmChat is the chat whose command runs in a warm sandbox.
	WarmChat [][2]any `json:"warmChat"`
}

// writeCommandSteps writes the steps of item 4 on the real cluster, side by
// side where both sides have the step.
func writeCommandSteps(w *bytes.Buffer, steps *commandSteps) {
	if steps == nil {
		return
	}
	w.WriteString("\nItem 4 on the real cluster, by step: the median time from the start (the chat's request; the plain Job's " +
		"create call) until a watch on the namespace first saw each step, and the time since the step before.\n\n")
	w.WriteString("| step | chat: since the start | since the step before | plain Job: since the start | since the step before |\n")
	w.WriteString("| --- | ---: | ---: | ---: | ---: |\n")
	plain := map[string]float64{}
	var plainOrder []string
	for _, s := range steps.PlainJob {
		name, _ := s[0].(string)
		v, _ := s[1].(float64)
		plain[name] = v
		plainOrder = append(plainOrder, name)
	}
	// In the order they came: a run's decision is recorded with its Job,
	// and its status says so a moment after.
	chat := slices.Clone(steps.Chat)
	slices.SortStableFunc(chat, func(a, b [2]any) int {
		x, _ := a[1].(float64)
		y, _ := b[1].(float64)
		return cmp.Compare(x, y)
	})
	prevChat, prevPlain := 0.0, 0.0
	shown := map[string]bool{}
	for _, s := range chat {
		name, _ := s[0].(string)
		v, _ := s[1].(float64)
		plainCells := "| | |"
		if p, ok := plain[name]; ok {
			plainCells = fmt.Sprintf("| %s | %s |", secs(p), secs(p-prevPlain))
			prevPlain = p
			shown[name] = true
		}
		fmt.Fprintf(w, "| %s | %s | %s %s\n", name, secs(v), secs(v-prevChat), plainCells)
		prevChat = v
	}
	for _, name := range plainOrder {
		if !shown[name] {
			p := plain[name]
			fmt.Fprintf(w, "| %s | | | %s | %s |\n", name, secs(p), secs(p-prevPlain))
			prevPlain = p
		}
	}
	if len(steps.WarmChat) == 0 {
		return
	}
	w.WriteString("\nThe same chat, its command run in a warm sandbox: no pod starts, the operator hands the command to one " +
		"that waits and records the result its runner sends back, then deletes the pod before the run ends.\n\n")
	w.WriteString("| step | warm chat: since the start | since the step before |\n| --- | ---: | ---: |\n")
	warm := slices.Clone(steps.WarmChat)
	slices.SortStableFunc(warm, func(a, b [2]any) int {
		x, _ := a[1].(float64)
		y, _ := b[1].(float64)
		return cmp.Compare(x, y)
	})
	prev := 0.0
	for _, st := range warm {
		name, _ := st[0].(string)
		v, _ := st[1].(float64)
		fmt.Fprintf(w, "| %s | %s | %s |\n", name, secs(v), secs(v-prev))
		prev = v
	}
}

// merge puts each extra row after the last row of its item.
func merge(rows, extra []Row) []Row {
	out := append([]Row(nil), rows...)
	for _, e := range extra {
		at := len(out)
		for i, r := range out {
			if r.Item == e.Item {
				at = i + 1
			}
		}
		out = append(out[:at], append([]Row{e}, out[at:]...)...)
	}
	return out
}

// environment is what the run ran on.
type environment struct {
	cpu        string
	cores      int
	memory     string
	goVersion  string
	kubernetes string
	date       time.Time
	duration   time.Duration
	load       [2]string
}

func writeDocument(w *bytes.Buffer, env environment, rows []Row, r results, steps *commandSteps, haveExtra bool) {
	fmt.Fprintf(w, "# Benchmarks\n\n")
	fmt.Fprintf(w, "Written by `make bench` (test/bench/cmd/report); do not edit the table by hand. "+
		"Every figure stands beside a baseline measured in the same run, on the same machine and the same API server, "+
		"so that the ratios mean something on a machine whose absolute speed varies.\n\n")
	fmt.Fprintf(w, "| | |\n| --- | --- |\n")
	fmt.Fprintf(w, "| Date | %s |\n", env.date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "| Machine | %s, %d cores, %s memory |\n", orUnknown(env.cpu), env.cores, orUnknown(env.memory))
	fmt.Fprintf(w, "| Load average (1, 5, 15 min) | %s at the start, %s at the end |\n", orUnknown(env.load[0]), orUnknown(env.load[1]))
	fmt.Fprintf(w, "| Go | %s |\n", orUnknown(env.goVersion))
	fmt.Fprintf(w, "| Kubernetes (envtest kube-apiserver and etcd) | %s |\n", orUnknown(env.kubernetes))
	fmt.Fprintf(w, "| Duration of the run | %s |\n\n", env.duration)
	w.WriteString("## Results\n\n")
	writeTable(w, rows)
	if haveExtra {
		w.WriteString("\nRows from a real cluster are read from bin/bench/e2e.json, which `make e2e` writes (item 4), and " +
			"bin/bench/load.json and bin/bench/burst.json, which `make chaos` writes (items 6 and 4): they come from those runs, not from this one.\n")
	} else {
		w.WriteString("\nThe real-cluster rows, item 4's `echo hi` asked of an agent and burst, and item 6's load, are measured by `make e2e` " +
			"and `make chaos`; they appear here when bin/bench/e2e.json, bin/bench/load.json and bin/bench/burst.json exist " +
			"(format: see test/bench/cmd/report).\n")
	}
	writeBreakdown(w, r)
	writeCommandSteps(w, steps)
	w.WriteString("\n## How each figure is measured\n\n")
	w.WriteString(method)
	w.WriteString("\n## Policy: cost per byte of adversarial inputs (ns/B)\n\n")
	writeAdversarial(w, r)
}

// method says how the figures are taken.
const method = `1. **Skill throughput** (BenchmarkSkillThroughput). 16 client goroutines server-side apply 1,000 Skills
   (about 4 KiB of instructions and files each) into a namespace while the operator runs in-process with its default
   4 Skill workers; the time runs from the first apply until a watch has seen every Skill Ready with
   status.servedGeneration equal to its generation (the operator writes the ConfigMap before it writes that status).
   The floor is the same 1,000 ConfigMaps, built as the operator builds them, applied by 16 goroutines into another
   namespace of the same API server while the operator runs. Then every Skill and every floor ConfigMap is updated.
2. **Agent catalog** (BenchmarkAgentCatalog). An Agent selecting those 1,000 Skills by label is created; the time runs
   until a watch sees its status name a catalog revision of 1,000 skills. The catalog ConfigMaps are then written to
   disk as the kubelet mounts them (internal/kubeletfs) and the runtime's store (internal/catalog.Open) loads them 30
   times; memory is what one load allocates and what a loaded store keeps on the heap. One Skill is then edited; the
   time runs until the Agent's status names a new catalog revision, and the runtime reloads the remounted catalog.
3. **Policy** (internal/policy, BenchmarkDecideTypical, BenchmarkDecidePipeline1KiB, BenchmarkDecideLatency,
   BenchmarkDecideScaling), with the realistic 40-rule policy of the decision table. The latency benchmark times
   every decision on its own; p99 is wall-clock time, and CPU p99 the CPU time of the thread, which leaves out the time
   the OS gave to other processes. The baselines are the shell parser alone (mvdan.cc/sh, one parser reused, as the
   judge reuses its parsers) on the same command, parsed right after each decision so that both meet the same machine
   and the same garbage collector (BenchmarkParsePipeline1KiB for its allocations), and fixed work that allocates
   nothing (hashing) taking as long as the median decision, whose tail is the machine's own.
4. **Command start** (BenchmarkCommandStart). 200 CommandRuns of ` + "`echo hi`" + ` (allowed by the Agent's policy) are created
   one at a time; each is timed until a watch on Jobs sees its Job, from the moment the CommandRun exists (its create
   call returned) and from the start of that call. The baseline creates the same Job (internal/sandbox.Job) directly
   and times it from its create call until the same watch sees it, alternating with the runs. The Agent's fences exist
   before the first run, as they do once an Agent is made. On the real cluster (` + "`make e2e`" + `, test/e2e/latency_test.go), the
   scripted model asks for ` + "`echo hi`" + ` in a chat, and the time runs from the chat's request until its answer; the baseline
   is a plain Job running ` + "`echo hi`" + ` in the same image, created until its log is read, alternating with the chats. A
   watch on the namespace's CommandRuns, Jobs and pods, started before each, times every step between. Each round first asks
   an agent that keeps two warm sandboxes (` + "`spec.sandbox.warm: 2`" + `), once both wait, so that its command runs in one; then
   the cold path, an agent that keeps none; then the plain Job, each once the warm pool is full again. The warm run's
   creation and its recorded result are both seen on that watch. A waiting warm sandbox's cost comes from the kubelet's
   stats summary (through the API server's node proxy): the RSS of its command container and of its pod, and the CPU time
   of the container over 20 s, from two samples the kubelet took at least that far apart; the runner process's VmRSS is
   read from /proc on the node. The refill is timed from the delete call of a waiting warm pod (grace period 0, as the
   operator deletes one its run took) until a replacement waits (Ready) and the pool is full again.
5. **Manager footprint** (BenchmarkManagerFootprint). ` + "`go build ./cmd/manager`" + ` runs as a process of its own against an API
   server of its own (admin kubeconfig, no webhooks, no leader election). VmRSS and VmHWM come from /proc/PID/status,
   CPU from utime + stime in /proc/PID/stat. 5,000 Skills are created, then 100 Agents selecting 50 each; at rest is
   once every catalog is written, the manager has used at most 5% of a CPU for 10 s (the CPU at rest is that window's) and
   its VmRSS, which falls for a while as the Go runtime returns freed memory, has fallen by at most 1 MiB in 10 s. Then
   20,000 ConfigMaps of 1 KiB and 5,000 pods of a typical web Deployment (Pending: envtest has no scheduler), none of
   them the operator's, are created in another namespace, and the manager is measured at rest again. VmHWM is reset
   (/proc/PID/clear_refs) before 1,000 Skills are updated, and
   the update ends when every Agent's catalog lists the new content.
6. **Load on a real cluster** (` + "`make chaos`" + `, test/e2e/load_test.go), after the chaos rounds on the same cluster, with the
   operator's two replicas. 200 CommandRuns are filed at once as the agent's ServiceAccount, every other one a command
   the policy asks a person about; each command first counts its start with a counter in the model's pod, then prints
   its key. Once the Always runs have ended, the asked ones are approved with ` + "`kubectl skills approve`" + `, eight at a
   time. Meanwhile 50 chats arrive at the agent at once; the scripted model answers each after 3 s; a chat answered
   429 waits as Retry-After says and asks again. Times come from each run's creation and completion timestamps
   (whole seconds); the baselines are the same command filed alone three times and one chat alone. The manager's
   goroutines and resident memory are read from its metrics endpoint every 2 s.
7. **Exec supervision** (internal/runner, BenchmarkExecSupervision, BenchmarkSkillScript50). Each iteration runs the same
   line supervised, as the sandbox runs it (runner.Run: the runner's shell under ptrace, every exec of its tree judged,
   programs only from the machine's program folders), and unsupervised, as the sandbox ran it before: the runner's shell
   alone (` + "`runner sh --policy=… -c LINE`" + `), which still judges the line and each simple command, started and waited
   for directly. The two alternate, in turns of order, and each run is timed from its start until its end; CPU time is
   that of the benchmark's process (the supervisor, the readers of the output) and of every process of the command
   (getrusage). The policy allows the programs by rule and nothing else, and no person approved the run, so every exec
   is judged. The overhead of an iteration is its supervised minus its unsupervised time, over the programs the line
   runs; p50 and p90 are over the iterations (` + "`-exec-benchtime`" + `, 40 by default). The lines are 50 runs of
   /usr/bin/true (not the shell's builtin) and one; the growth of the overhead from one to 50 programs, over 49, is the
   cost per exec without the cost per run. The skill script is a ` + "`#!/bin/sh`" + ` file of 50 programs (printf, basename,
   date, cut, sort, uniq, head, tail, grep, wc, tr, cat, true) summarising a listing of 200 pods, allowed by a rule whose
   children are judged; with its own sh that is 51 execs, each judged and allowed. On a machine under load, the wall
   times vary by more than the overhead between runs; the CPU times vary less.
8. **Tracing overhead** (BenchmarkTracingChat, BenchmarkTracingDecision). Each measure runs with tracing on and off
   in the same run, against the same API server and operator, one operation each way in turn, in the order on, off,
   off, on (and again), so that neither side gains from the order, nor from how the machine drifts as objects pile
   up. They do so in blocks, each in a namespace of its own with an Agent of its own: 2 blocks of 64 chats (8 of 480
   runs for the decision) each way, after 3 untimed each way in each block. The figures are each side's p50 and p90
   over all blocks and the ratio of the p50s. Beside it: the ratio's 95 % interval, by the bootstrap (the ratio taken
   again 1,000 times over times drawn with replacement from each block's, as many as it has; the middle 95 % of those
   ratios), and the least and the greatest ratio of one block's p50s, which show how far the figure of fewer runs
   strays.
   Tracing on is what the agent and the operator have once an OTLP endpoint is set (internal/telemetry.Setup): a
   tracer provider each, every span sampled, the batch span processor with its defaults, the OTLP/HTTP exporter
   sending to a collector on loopback that reads each request whole and discards it. Before an operation with tracing
   off, what the providers hold is exported, untimed, so that no export falls in one; the export's memory counts on
   the side with tracing on. Tracing off is the no-op provider, what the programs have when no endpoint is set. The
   chat goes to the agent runtime (internal/agent), served as cmd/agent serves it but without a bearer token, authenticated
   as the Agent's ServiceAccount under the Role the operator made, with the catalog the operator wrote mounted as the
   kubelet mounts it; its scripted model (internal/agent/modeltest) asks for ` + "`echo hi`" + ` (run_command), then answers with the
   tool's result. The runtime files a CommandRun and watches it; the operator, in-process with its default workers,
   judges it (allowed by the policy) and creates its Job; once a watch sees the Job, its pod, the runner's result in it
   (with, for a traced run, the runner's span of the command) and the Job's end are written as the Job controller and
   the kubelet would; the operator records the result, and the runtime hands it to the model. Each chat is timed from
   its request until its answer is read; a traced chat makes 7 spans (invoke_agent, two model calls, execute_tool,
   judge, sandbox, command). Not in the path: a model's own time (the scripted one answers at once, so a real model's
   seconds would only dilute the ratio), a pod's start and the command's own run, the CommandRun admission policies of
   config/admission, and a network between the processes. The decision's CommandRuns of ` + "`echo hi`" + ` are filed as the agent
   files them: with tracing on, under a span of the agent's tracer, whose traceparent the run carries. Each is timed
   from its create call's return until a watch sees status.decision; the next is filed once the run's status says its
   Job was made (Running), so that each is judged by an operator at rest. The operator makes its judge span once the
   decision is stored. Memory is what the benchmarks' process, where the agent, the operator, the stand-ins and the
   collector run, allocated on its heap per chat or run (runtime/metrics /gc/heap/allocs:bytes), the exports at the end
   of each block included. The process's CPU time is not shown: one garbage collection costs the CPU time of several
   runs, and which block it falls in weighs more than tracing does.
`

func writeTable(w *bytes.Buffer, rows []Row) {
	w.WriteString("| # | Measure | Result | Baseline | Ratio | Target | |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		status := ""
		switch r.Status {
		case "met":
			status = "met"
		case "missed":
			status = "**missed**"
		default:
			status = r.Status
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Item, r.Measure, r.Result, orDash(r.Baseline), orDash(r.Ratio), orDash(r.Target), status)
	}
}

// writeBreakdown says where the time of items 1 and 4 goes.
func writeBreakdown(w *bytes.Buffer, r results) {
	st := "SkillThroughput"
	w.WriteString("\n## Where the time goes\n\n")
	w.WriteString("Item 1, by phase: the CPU time each process used and the write requests the API server served " +
		"(apiserver_request_total), per Skill. The operator's phases include the client's writes of the Skills.\n\n")
	w.WriteString("| phase | wall | kube-apiserver CPU | etcd CPU | operator and client CPU | writes per Skill |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, p := range []struct{ key, name, wall string }{
		{"floor-create", "floor: 1,000 ConfigMaps created", "floor-create-s"},
		{"create", "operator: 1,000 Skills created → Ready", "create-s"},
		{"floor-update", "floor: 1,000 ConfigMaps updated", "floor-update-s"},
		{"update", "operator: 1,000 Skills updated → Ready", "update-s"},
	} {
		get := func(unit string) float64 {
			v, ok := r.get(st, unit)
			if !ok {
				return math.NaN()
			}
			return v
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", p.name, secs(get(p.wall)), secs(get(p.key+"-apiserver-cpu-s")),
			secs(get(p.key+"-etcd-cpu-s")), secs(get(p.key+"-process-cpu-s")), num(get(p.key+"-writes/skill"), 1))
	}
	cs := "CommandStart"
	get := func(unit string) float64 {
		v, ok := r.get(cs, unit)
		if !ok {
			return math.NaN()
		}
		return v
	}
	fmt.Fprintf(w, "\nItem 4, medians from the start of the CommandRun's create call: the call returns after %s, and its Job "+
		"is seen after %s; the agent's fences were made with the agent, so the run makes no network object of its own. "+
		"A Job created directly is seen %s after its create call starts (the call itself: %s).\n",
		ms(get("run-create-p50-ms")), ms(get("run-p50-ms")), ms(get("job-p50-ms")), ms(get("rtt-p50-ms")))
}

// writeAdversarial writes ns/B by kind and size.
func writeAdversarial(w *bytes.Buffer, r results) {
	sizes := []string{"1KiB", "4KiB", "16KiB", "64KiB"}
	var names []string
	for name := range r.metrics {
		if kind, ok := strings.CutPrefix(name, "DecideScaling/"); ok {
			names = append(names, kind)
		}
	}
	sort.Strings(names)
	w.WriteString("BenchmarkDecideScaling: each figure is the least of 7 rounds of at least 30 ms, the sizes taken in turn (what " +
		"else runs only ever adds time). A cost linear in the input keeps ns/B flat as the input grows; a quadratic one would " +
		"multiply it by 16 from 4 to 64 KiB. At 1 KiB a whole decision stays in the CPU's caches, which can make it cheaper " +
		"per byte. Inputs with more than 1,024 nesting tokens are refused before parsing, which is why `parens` gets cheaper " +
		"per byte.\n\n")
	w.WriteString("| kind | " + strings.Join(sizes, " | ") + " | 64 KiB ÷ 4 KiB |\n| --- |" + strings.Repeat(" ---: |", len(sizes)+1) + "\n")
	for _, k := range names {
		cells := make([]string, 0, len(sizes)+1)
		for _, s := range sizes {
			v, _ := r.get("DecideScaling/"+k, "ns/B-"+s)
			cells = append(cells, num(v, 0))
		}
		g, _ := r.get("DecideScaling/"+k, "growth")
		cells = append(cells, times(g))
		fmt.Fprintf(w, "| %s | %s |\n", k, strings.Join(cells, " | "))
	}
}

// Formatting. NaN, a figure not measured, shows as "not measured".

func secs(v float64) string {
	if math.IsNaN(v) {
		return "not measured"
	}
	if v < 1 {
		return fmt.Sprintf("%.0f ms", v*1000)
	}
	return fmt.Sprintf("%.1f s", v)
}

func ms(v float64) string {
	if math.IsNaN(v) {
		return "not measured"
	}
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	if v < 10 {
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// msFine formats a figure in milliseconds as ms does, with a decimal up
// to 100 ms: two sides a few percent apart read apart.
func msFine(v float64) string {
	if !math.IsNaN(v) && v < 100 {
		return fmt.Sprintf("%.1f ms", v)
	}
	return ms(v)
}

// msMicros formats a figure in milliseconds as micros does: a cost per
// exec is a fraction of a millisecond.
func msMicros(v float64) string { return micros(v * 1e6) }

func micros(ns float64) string {
	if math.IsNaN(ns) || math.IsInf(ns, 0) {
		return "not measured"
	}
	us := ns / 1000
	switch {
	case us >= 1000:
		return fmt.Sprintf("%.2f ms", us/1000)
	case us < 10:
		return fmt.Sprintf("%.1f µs", us)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func times(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}

// timesFine is times to a thousandth, for a ratio judged against a
// target a hundredth away.
func timesFine(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	return fmt.Sprintf("%.3f×", v)
}

func num(v float64, decimals int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// atMost is "met" when v is at most limit, "missed" above it, and "" when v
// was not measured.
func atMost(v, limit float64) string {
	switch {
	case math.IsNaN(v):
		return "not measured"
	case v <= limit:
		return "met"
	}
	return "missed"
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// memTotal is MemTotal of /proc/meminfo, in GiB.
func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	return ""
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], ", ")
}

// goVersion is the version of the go command that runs the benchmarks.
func goVersion(dir string) string {
	cmd := exec.Command("go", "env", "GOVERSION")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
