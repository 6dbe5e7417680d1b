//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// The burst: many commands filed at once by several agents that each keep
// warm sandboxes and run a bounded number of commands at once. It checks
// that none is lost, run twice or wrong, and measures how fair the
// operator is across the agents.
const (
	// burstAgents file the burst, each with the chaos-warm agent's values:
	// two warm sandboxes, and the chart's bound of 5 commands at once.
	burstAgents = 5
	// burstRuns is how many runs the agents file in all, in turns.
	burstRuns = 100
)

// burstReport is what the burst measured.
type burstReport struct {
	Runs int `json:"runs"`
	// FileSeconds is how long filing every run took.
	FileSeconds float64 `json:"fileSeconds"`
	// AgentP50Seconds and AgentP99Seconds are, for each agent, its runs'
	// time from their create call's answer until a watch saw them end.
	AgentP50Seconds map[string]float64 `json:"agentP50Seconds"`
	AgentP99Seconds map[string]float64 `json:"agentP99Seconds"`
	// SlowestToFastest is the slowest agent's p50 over the fastest's.
	SlowestToFastest float64 `json:"slowestToFastest"`
	// Sandboxes counts where the runs ran: "warm pod", "Job".
	Sandboxes map[string]int `json:"sandboxes"`
	// MostQueued is the most runs of one agent seen waiting in line at once.
	MostQueued int `json:"mostQueued"`
	// Lost, Duplicated and Wrong count as the chaos report does.
	Lost       int `json:"lost"`
	Duplicated int `json:"duplicated"`
	Wrong      int `json:"wrong"`
}

// burst installs the agents, files burstRuns quick commands across them in
// turns, waits for every one to end and checks it.
func burst(t *testing.T, x *chaos) *burstReport {
	g := NewWithT(t)
	ctx := context.Background()
	b := &chaos{starts: x.starts, report: &chaosReport{Form: x.report.Form}, prefix: x.prefix + "b"}
	agents := make([]string, burstAgents)
	clients := map[string]client.Client{}
	for i := range agents {
		agents[i] = "burst-" + strconv.Itoa(i+1)
		installAgentWith(t, agents[i], "test/e2e/testdata/chaos-warm-agent-values.yaml")
		clients[agents[i]] = c.impersonate(t, "system:serviceaccount:"+ns+":agent-"+agents[i])
	}
	for _, a := range agents {
		g.Eventually(func(g Gomega) { g.Expect(warmPods(g, a)).To(HaveLen(2)) }, 3*time.Minute, time.Second).Should(Succeed())
	}

	// A watch times each run's end, and counts the runs of each agent
	// that wait in line.
	w, err := c.client.Watch(ctx, &skillsv1.CommandRunList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var mu sync.Mutex
	endSeen := map[string]time.Time{}
	queued := map[string]map[string]bool{}
	mostQueued := 0
	go func() {
		for ev := range w.ResultChan() {
			run, ok := ev.Object.(*skillsv1.CommandRun)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			mu.Lock()
			if run.Status.Phase.Terminal() {
				if _, seen := endSeen[run.Name]; !seen {
					endSeen[run.Name] = time.Now()
				}
			}
			if queued[run.Spec.Agent] == nil {
				queued[run.Spec.Agent] = map[string]bool{}
			}
			if run.Status.Phase == skillsv1.PhasePending && apimeta.IsStatusConditionTrue(run.Status.Conditions, skillsv1.QueuedCondition) {
				queued[run.Spec.Agent][run.Name] = true
			} else {
				delete(queued[run.Spec.Agent], run.Name)
			}
			mostQueued = max(mostQueued, len(queued[run.Spec.Agent]))
			mu.Unlock()
		}
	}()

	runs := make([]*chaosRun, burstRuns)
	filed := make([]time.Time, burstRuns)
	start := time.Now()
	for i := range runs {
		agent := agents[i%burstAgents]
		b.seq++
		r := &chaosRun{key: fmt.Sprintf("%s-%d", b.prefix, b.seq), kind: quickCommand, agent: agent}
		r.name = agent + "-" + r.key
		run := &skillsv1.CommandRun{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.name},
			Spec: skillsv1.CommandRunSpec{Agent: agent, Command: r.command(b.starts),
				RequestedBy: "system:serviceaccount:" + ns + ":agent-" + agent},
		}
		g.Expect(clients[agent].Create(ctx, run)).To(Succeed(), "filing %s", r.name)
		runs[i], filed[i] = r, time.Now()
	}
	br := &burstReport{Runs: burstRuns, FileSeconds: time.Since(start).Seconds(), Sandboxes: map[string]int{},
		AgentP50Seconds: map[string]float64{}, AgentP99Seconds: map[string]float64{}}

	ended := b.waitEnded(t, runs)
	g.Eventually(func() int { mu.Lock(); defer mu.Unlock(); return len(endSeen) }, time.Minute, 100*time.Millisecond).
		Should(BeNumerically(">=", len(runs)), "the watch saw every run end")
	starts := startCounts(t)
	byAgent := map[string][]time.Duration{}
	mu.Lock()
	for i, r := range runs {
		run := ended[r.name]
		br.Sandboxes[sandboxOf(t, run)]++
		for _, p := range b.check(t, r, run, starts[r.key]) {
			t.Error(p)
		}
		byAgent[r.agent] = append(byAgent[r.agent], endSeen[r.name].Sub(filed[i]))
	}
	br.MostQueued = mostQueued
	mu.Unlock()
	fastest, slowest := 0.0, 0.0
	for _, a := range agents {
		p50 := seconds(byAgent[a], 50)
		br.AgentP50Seconds[a], br.AgentP99Seconds[a] = p50, seconds(byAgent[a], 99)
		if fastest == 0 || p50 < fastest {
			fastest = p50
		}
		slowest = max(slowest, p50)
	}
	if fastest > 0 {
		br.SlowestToFastest = slowest / fastest
	}
	br.Lost, br.Duplicated, br.Wrong = b.report.Lost, b.report.Duplicated, b.report.WrongResults
	fmt.Printf("burst: %d runs from %d agents filed in %.1fs; p50 by agent %v, p99 %v; slowest/fastest p50 %.2f; "+
		"sandboxes %v; at most %d of one agent in line; %d lost, %d duplicated, %d wrong\n",
		br.Runs, burstAgents, br.FileSeconds, br.AgentP50Seconds, br.AgentP99Seconds, br.SlowestToFastest,
		br.Sandboxes, br.MostQueued, br.Lost, br.Duplicated, br.Wrong)
	writeBurstRows(t, br)
	g.Expect(br.Lost + br.Duplicated + br.Wrong).To(BeZero())
	return br
}

// writeBurstRows writes the burst's rows of BENCHMARKS.md to
// bin/bench/burst.json, which `make bench` reads (test/bench/cmd/report).
func writeBurstRows(t *testing.T, br *burstReport) {
	t.Helper()
	date := time.Now().UTC().Format(time.RFC3339)
	var p50s, p99s []string
	for i := range burstAgents {
		a := "burst-" + strconv.Itoa(i+1)
		p50s = append(p50s, fmt.Sprintf("%.1f", br.AgentP50Seconds[a]))
		p99s = append(p99s, fmt.Sprintf("%.1f", br.AgentP99Seconds[a]))
	}
	dropped := br.Lost + br.Duplicated + br.Wrong
	rows := []map[string]string{{
		"item": "4",
		"measure": fmt.Sprintf("A burst of %d CommandRuns filed at once by %d agents in turns, each with `warm: 2` and "+
			"`maxRunning: 5` (`make chaos`, %s): each agent's runs created → ended, p50; p99 (s)", br.Runs, burstAgents, date),
		"result":   strings.Join(p50s, " / ") + "; " + strings.Join(p99s, " / "),
		"baseline": "the fastest agent's p50",
		"ratio":    fmt.Sprintf("%.2f× (slowest agent's p50)", br.SlowestToFastest),
		"target":   "≤ 2×",
		"status":   map[bool]string{true: "met", false: "missed"}[br.SlowestToFastest <= 2],
	}, {
		"item":    "4",
		"measure": "The same burst: lost, run twice, wrong; where they ran; most runs of one agent waiting in line at once",
		"result": fmt.Sprintf("%d, %d, %d; %d in warm pods, %d in Jobs; %d", br.Lost, br.Duplicated, br.Wrong,
			br.Sandboxes["warm pod"], br.Sandboxes["Job"], br.MostQueued),
		"baseline": "—", "ratio": "—", "target": "0 lost, 0 duplicated, 0 wrong",
		"status": map[bool]string{true: "met", false: "missed"}[dropped == 0],
	}}
	writeJSON(t, map[string]any{"rows": rows}, "bench", "burst.json")
}
