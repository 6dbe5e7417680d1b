//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

// The load test: loadRuns CommandRuns filed at once, half of them waiting
// for a person, while loadChats chats arrive at the agent together. The
// agent serves DefaultMaxConcurrentRequests (32) at once and answers the
// rest 429 with Retry-After; a client that honours it gets every answer.
const (
	loadRuns  = 200
	loadChats = 50
	// chatDelay keeps each chat in flight long enough to fill the agent.
	chatDelay = 3 * time.Second
)

// loadReport is the load test's part of bin/chaos/report.json.
type loadReport struct {
	Runs          int     `json:"runs"`
	Asked         int     `json:"asked"`
	FileSeconds   float64 `json:"fileSeconds"`
	InFlight      int     `json:"inFlightAfterFiling"`
	AlwaysSeconds float64 `json:"alwaysDoneSeconds"`
	AskedSeconds  float64 `json:"askedDoneAfterApprovalSeconds"`
	RunP50Seconds float64 `json:"alwaysRunP50Seconds"`
	RunP90Seconds float64 `json:"alwaysRunP90Seconds"`
	// AloneP50Seconds is the same command filed alone: the baseline.
	AloneP50Seconds float64 `json:"aloneRunP50Seconds"`
	Problems        int     `json:"problems"`
	Chats           int     `json:"chats"`
	ChatsAnswered   int     `json:"chatsAnswered"`
	Answered429     int     `json:"answered429"`
	ChatFailures    int     `json:"chatFailures"`
	ChatP50Seconds  float64 `json:"chatP50Seconds"`
	ChatMaxSeconds  float64 `json:"chatMaxSeconds"`
	// ChatAloneSeconds is one chat alone: the baseline.
	ChatAloneSeconds float64      `json:"chatAloneSeconds"`
	ManagerBefore    managerLevel `json:"managerBefore"`
	ManagerPeak      managerLevel `json:"managerPeak"`
	ManagerAfter     managerLevel `json:"managerAfter"`
}

// loadTest files the runs and sends the chats, and checks that every run
// ended as its command says and every chat was answered.
func loadTest(t *testing.T, x *chaos) *loadReport {
	g := NewWithT(t)
	lr := &loadReport{Runs: loadRuns, Chats: loadChats, ManagerBefore: leaderLevel(t)}
	m := model{url: c.portForward(t, ns, "model", 8080)}
	steps := make([]modeltest.Step, loadChats+1)
	for i := range steps {
		steps[i] = modeltest.Step{Content: "ok", DelayMillis: int(chatDelay / time.Millisecond)}
	}
	m.script(t, steps...)
	agent := agentAPI{url: c.portForward(t, ns, "agent-"+chaosAgent, 80), token: x.agent.token}

	// The baselines: the same command filed alone, three times, and one
	// chat alone.
	var alone []time.Duration
	for range 3 {
		for _, run := range x.waitEnded(t, x.file(t, []commandKind{quickCommand})) {
			alone = append(alone, run.Status.CompletionTime.Sub(run.CreationTimestamp.Time))
		}
	}
	lr.AloneP50Seconds = seconds(alone, 50)
	first := chatUntilAnswered(agent)
	g.Expect(first.err).NotTo(HaveOccurred())
	lr.ChatAloneSeconds = first.took.Seconds()

	peak := watchPeak(t, &lr.ManagerPeak)
	chats := make(chan chatOutcome, loadChats)
	for range loadChats {
		go func() { chats <- chatUntilAnswered(agent) }()
	}

	kinds := make([]commandKind, loadRuns)
	for i := range kinds {
		kinds[i] = quickCommand
		if i%2 == 1 {
			kinds[i], lr.Asked = askAfter, lr.Asked+1
		}
	}
	start := time.Now()
	runs := x.file(t, kinds)
	lr.FileSeconds = time.Since(start).Seconds()
	lr.InFlight = inFlight(t, runs)

	var quick, asked []*chaosRun
	for _, r := range runs {
		if r.kind == quickCommand {
			quick = append(quick, r)
		} else {
			asked = append(asked, r)
		}
	}
	ended := x.waitEnded(t, quick)
	lr.AlwaysSeconds = time.Since(start).Seconds()
	var durations []time.Duration
	for _, r := range quick {
		run := ended[r.name]
		if run.Status.CompletionTime != nil {
			durations = append(durations, run.Status.CompletionTime.Sub(run.CreationTimestamp.Time))
		}
	}
	lr.RunP50Seconds, lr.RunP90Seconds = seconds(durations, 50), seconds(durations, 90)

	g.Eventually(func() int { return awaiting(t, asked) }, 3*time.Minute, time.Second).Should(Equal(len(asked)))
	approved := time.Now()
	approveAll(t, asked)
	for name, run := range x.waitEnded(t, asked) {
		ended[name] = run
	}
	lr.AskedSeconds = time.Since(approved).Seconds()

	starts := startCounts(t)
	for _, r := range runs {
		problems := x.check(t, r, ended[r.name], starts[r.key])
		lr.Problems += len(problems)
		for _, p := range problems {
			t.Error(p)
		}
	}

	var chatTimes []time.Duration
	for range loadChats {
		o := <-chats
		lr.Answered429 += o.throttled
		if o.err != nil {
			lr.ChatFailures++
			t.Errorf("a chat failed: %v", o.err)
			continue
		}
		lr.ChatsAnswered++
		chatTimes = append(chatTimes, o.took)
	}
	lr.ChatP50Seconds, lr.ChatMaxSeconds = seconds(chatTimes, 50), seconds(chatTimes, 100)
	peak()
	lr.ManagerAfter = settledLevel(t, lr.ManagerBefore)
	g.Expect(lr.Answered429).To(BeNumerically(">", 0), "%d chats at once never met the agent's bound", loadChats)
	writeLoadRows(t, lr, x.report)
	fmt.Printf("load: %d runs (%d asked) filed in %.1fs, %d in flight; Always done in %.1fs (p50 %.1fs, p90 %.1fs); "+
		"asked done %.1fs after approval; %d/%d chats answered, %d answers 429, chat p50 %.1fs max %.1fs; "+
		"manager %d→%d→%d goroutines, %.0f→%.0f→%.0f MiB\n",
		lr.Runs, lr.Asked, lr.FileSeconds, lr.InFlight, lr.AlwaysSeconds, lr.RunP50Seconds, lr.RunP90Seconds,
		lr.AskedSeconds, lr.ChatsAnswered, lr.Chats, lr.Answered429, lr.ChatP50Seconds, lr.ChatMaxSeconds,
		lr.ManagerBefore.Goroutines, lr.ManagerPeak.Goroutines, lr.ManagerAfter.Goroutines,
		lr.ManagerBefore.RSSMiB, lr.ManagerPeak.RSSMiB, lr.ManagerAfter.RSSMiB)
	return lr
}

// inFlight counts the runs that have not ended.
func inFlight(t *testing.T, runs []*chaosRun) int {
	t.Helper()
	var list skillsv1.CommandRunList
	if err := c.client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, r := range runs {
		ours[r.name] = true
	}
	n := 0
	for _, run := range list.Items {
		if ours[run.Name] && !run.Status.Phase.Terminal() {
			n++
		}
	}
	return n
}

// awaiting counts the runs that wait for a person.
func awaiting(t *testing.T, runs []*chaosRun) int {
	t.Helper()
	n := 0
	for _, r := range runs {
		var run skillsv1.CommandRun
		if err := c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: r.name}, &run); err == nil &&
			run.Status.Phase == skillsv1.PhaseAwaitingApproval {
			n++
		}
	}
	return n
}

// approveAll approves the runs with kubectl, a few at a time, as a team of
// approvers would.
func approveAll(t *testing.T, runs []*chaosRun) {
	t.Helper()
	work := make(chan *chaosRun)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if out, err := c.command(c.kubectl, "skills", "approve", r.name, "-n", ns, "--reason", "load", "--yes"); err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("%s: %v %s", r.name, err, out))
					mu.Unlock()
				}
			}
		}()
	}
	for _, r := range runs {
		work <- r
	}
	close(work)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("approvals failed: %v", failed)
	}
}

// watchPeak samples the leading manager's level every 2 s into peak until
// the returned function is called.
func watchPeak(t *testing.T, peak *managerLevel) func() {
	t.Helper()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			pod, err := leader()
			if err != nil {
				continue
			}
			if l, err := readLevel(t, pod); err == nil {
				peak.Goroutines = max(peak.Goroutines, l.Goroutines)
				peak.RSSMiB = max(peak.RSSMiB, l.RSSMiB)
				peak.Pod = l.Pod
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// chatOutcome is how one chat went.
type chatOutcome struct {
	took      time.Duration
	throttled int // answers 429 before the real one
	err       error
}

// chatUntilAnswered asks one question and, answered 429, waits as
// Retry-After says and asks again, up to 3 minutes.
func chatUntilAnswered(a agentAPI) chatOutcome {
	body, _ := json.Marshal(map[string]any{
		"model":    chaosAgent,
		"messages": []map[string]string{{"role": "user", "content": "Are you there?"}},
	})
	start := time.Now()
	var o chatOutcome
	for time.Since(start) < 3*time.Minute {
		req, err := http.NewRequest(http.MethodPost, a.url+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			o.err = err
			return o
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+a.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			o.err = err
			return o
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			o.took = time.Since(start)
			return o
		case http.StatusTooManyRequests:
			o.throttled++
			wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err != nil || wait < 1 {
				o.err = fmt.Errorf("429 without a Retry-After in seconds: %q", resp.Header.Get("Retry-After"))
				return o
			}
			time.Sleep(time.Duration(wait) * time.Second)
		default:
			o.err = fmt.Errorf("answered %d: %s", resp.StatusCode, data)
			return o
		}
	}
	o.err = fmt.Errorf("not answered within 3 minutes (%d answers 429)", o.throttled)
	return o
}

// seconds is the nearest-rank percentile p of ds in seconds; 0 if none.
func seconds(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	return percentile(ds, p).Seconds()
}

// writeLoadRows writes the load test's rows of BENCHMARKS.md to
// bin/bench/load.json, which `make bench` reads (test/bench/cmd/report).
func writeLoadRows(t *testing.T, lr *loadReport, r *chaosReport) {
	t.Helper()
	date := time.Now().UTC().Format(time.RFC3339)
	ratio := func(a, b float64) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	dropped := r.Lost + r.Duplicated + r.WrongResults
	status := "met"
	if dropped > 0 || lr.ChatFailures > 0 {
		status = "missed"
	}
	rows := []map[string]string{{
		"item": "6",
		"measure": fmt.Sprintf("%d CommandRuns filed at once on a real cluster, %d of them asked (`make chaos`, %s): "+
			"each Always run created → ended, p50 / p90", lr.Runs, lr.Asked, date),
		"result":   fmt.Sprintf("%.1f s / %.1f s", lr.RunP50Seconds, lr.RunP90Seconds),
		"baseline": fmt.Sprintf("the same command filed alone: %.1f s", lr.AloneP50Seconds),
		"ratio":    ratio(lr.RunP50Seconds, lr.AloneP50Seconds),
		"target":   "—",
	}, {
		"item": "6",
		"measure": fmt.Sprintf("The same: all %d Always runs ended; the %d asked ended after their approval; "+
			"lost, run twice or wrong, in the load and the %d chaos runs", lr.Runs-lr.Asked, lr.Asked, r.Runs),
		"result":   fmt.Sprintf("%.1f s; %.1f s; %d", lr.AlwaysSeconds, lr.AskedSeconds, dropped),
		"baseline": "—", "ratio": "—", "target": "0 lost", "status": status,
	}, {
		"item": "6",
		"measure": fmt.Sprintf("%d chats at once against an agent that serves 32 at once (the model answers in %s): "+
			"answered; answers 429 with Retry-After on the way; p50 / slowest", lr.Chats, chatDelay),
		"result":   fmt.Sprintf("%d of %d; %d; %.1f s / %.1f s", lr.ChatsAnswered, lr.Chats, lr.Answered429, lr.ChatP50Seconds, lr.ChatMaxSeconds),
		"baseline": fmt.Sprintf("one chat alone: %.1f s", lr.ChatAloneSeconds),
		"ratio":    ratio(lr.ChatP50Seconds, lr.ChatAloneSeconds),
		"target":   "all answered", "status": map[bool]string{true: "met", false: "missed"}[lr.ChatsAnswered == lr.Chats],
	}, {
		"item":     "6",
		"measure":  "Leading manager during the load: goroutines; resident memory (peak, then settled)",
		"result":   fmt.Sprintf("%d, %d; %.0f MiB, %.0f MiB", lr.ManagerPeak.Goroutines, lr.ManagerAfter.Goroutines, lr.ManagerPeak.RSSMiB, lr.ManagerAfter.RSSMiB),
		"baseline": fmt.Sprintf("before the load: %d; %.0f MiB", lr.ManagerBefore.Goroutines, lr.ManagerBefore.RSSMiB),
		"ratio":    ratio(lr.ManagerPeak.RSSMiB, lr.ManagerBefore.RSSMiB) + " (peak memory)",
		"target":   "—",
	}}
	writeJSON(t, map[string]any{"rows": rows}, "bench", "load.json")
}
