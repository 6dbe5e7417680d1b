//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// latencyRuns is how many commands each side of the comparison runs:
// E2E_LATENCY_RUNS, or 3, enough to see it work; the benchmark uses 20.
func latencyRuns() int {
	if n, err := strconv.Atoi(os.Getenv("E2E_LATENCY_RUNS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// latency measures what a command costs through kubeskills against the
// floor of the same work without it: `echo hi` asked of an agent in a chat
// (the model's call for the command, a CommandRun judged, a sandbox with
// the runner, the result read back and the model's answer) versus a plain
// Job running `echo hi` in the same image, created, Complete, and its log
// read. Each round asks the warm agent, whose command runs in a warm
// sandbox, then the ops agent, which keeps none (the cold path: a Job per
// command), then runs the plain Job; each starts once the warm agent's
// pool is full again, so that a round neither finds it short nor meets its
// refill. A watch on the namespace's runs, Jobs and pods times every step
// between (see clock). Then it measures an idle warm sandbox's cost and
// how long a deleted one takes to be replaced. It reports figures; it
// asserts only that every run worked, and where it ran.
func latency(t *testing.T, s *state) {
	g := NewWithT(t)
	var warm, ours, plain, warmRecorded, refilledAfterRun []time.Duration
	var warmSteps, ourSteps, plainSteps []map[string]time.Duration
	runs := latencyRuns()
	// ask asks agent for `echo hi` in a chat and returns when it started,
	// how long it took, its steps and its run.
	ask := func(a agentAPI, agent, question string) (time.Time, time.Duration, map[string]time.Duration, *skillsv1.CommandRun) {
		s.model.script(t,
			modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "echo hi"})),
			modeltest.Step{Content: "The command printed: ", EchoToolResults: true})
		clk := startClock(t)
		start := time.Now()
		answer := chatWith(t, a, agent, question)
		end := time.Now()
		g.Expect(answer).To(ContainSubstring(`hi\n`))
		g.Expect(answer).To(MatchRegexp(`"exitCode":\s*0`))
		steps := clk.steps(t, start, end, true)
		run := clk.run()
		g.Expect(run).NotTo(BeNil(), "the watch saw no run")
		g.Expect(run.Spec.Agent).To(Equal(agent))
		return start, end.Sub(start), steps, run
	}
	for i := range runs {
		waitWarm(t, warmAgent, warmPool, nil)
		// Each question differs: a chat that repeats an earlier one follows
		// the run it filed rather than file another.
		start, d, steps, run := ask(s.warm, warmAgent, fmt.Sprintf("Say hi from a warm sandbox (%d of %d).", i+1, runs))
		g.Expect(run.Status.WarmPod).NotTo(BeEmpty(), "the warm agent's command did not run in a warm sandbox: %s", runMessage(*run))
		g.Expect(run.Status.JobName).To(BeEmpty())
		warm = append(warm, d)
		warmSteps = append(warmSteps, steps)
		g.Expect(steps).To(HaveKey(stepRunCreated))
		g.Expect(steps).To(HaveKey(stepRunResult))
		warmRecorded = append(warmRecorded, steps[stepRunResult]-steps[stepRunCreated])
		// The run ends once its pod is deleted: the pool is full again
		// this long after.
		waitWarm(t, warmAgent, warmPool, func(p *corev1.Pod) bool { return p.Name != run.Status.WarmPod })
		refilledAfterRun = append(refilledAfterRun, time.Since(start.Add(steps[stepRunEnded])))

		_, d, steps, run = ask(s.agent, agentName, fmt.Sprintf("Say hi from the sandbox (%d of %d).", i+1, runs))
		g.Expect(run.Status.WarmPod).To(BeEmpty())
		g.Expect(run.Status.JobName).NotTo(BeEmpty(), "the ops agent's command did not run in a Job: %s", runMessage(*run))
		ours = append(ours, d)
		ourSteps = append(ourSteps, steps)

		waitWarm(t, warmAgent, warmPool, nil)
		clk := startClock(t)
		start = time.Now()
		d, out := plainJob(t, i)
		plain = append(plain, d)
		g.Expect(out).To(Equal("hi\n"))
		plainSteps = append(plainSteps, clk.steps(t, start, start.Add(d), false))
	}
	idle := idleWarmCost(t, warmAgent, 20*time.Second)
	refills := refillTimes(t, warmAgent, 3)

	p50, p90, p99 := percentile(ours, 50), percentile(ours, 90), percentile(ours, 99)
	b50, b90, b99 := percentile(plain, 50), percentile(plain, 90), percentile(plain, 99)
	w50, w99 := percentile(warm, 50), percentile(warm, 99)
	r50, r99 := percentile(warmRecorded, 50), percentile(warmRecorded, 99)
	report.set("echo hi via chat, warm sandbox p50/p99", fmt.Sprintf("%.2fs / %.2fs", w50.Seconds(), w99.Seconds()))
	report.set("echo hi via chat, warm: CommandRun created → result recorded p50/p99", fmt.Sprintf("%.0fms / %.0fms",
		ms(r50), ms(r99)))
	report.set("echo hi via chat p50/p90", fmt.Sprintf("%.2fs / %.2fs", p50.Seconds(), p90.Seconds()))
	report.set("echo hi as a plain Job p50/p90", fmt.Sprintf("%.2fs / %.2fs", b50.Seconds(), b90.Seconds()))
	report.set("chat / plain Job (p50)", fmt.Sprintf("%.2fx", p50.Seconds()/b50.Seconds()))
	report.set("warm chat / plain Job (p50)", fmt.Sprintf("%.2fx", w50.Seconds()/b50.Seconds()))
	report.set("idle warm sandbox: runner RSS (VmRSS), pod RSS, CPU", fmt.Sprintf("%.1f MiB (%.1f MiB), %.1f MiB, %.2f millicores",
		idle["runnerRSSMiB"], idle["runnerVmRSSMiB"], idle["podRSSMiB"], idle["cpuMillicores"]))
	report.set("warm sandbox deleted → replacement waiting p50", fmt.Sprintf("%.2fs", percentile(refills, 50).Seconds()))
	writeJSON(t, map[string]any{
		"date":          time.Now().UTC().Format(time.RFC3339),
		"runs":          runs,
		"commandRunP50": p50.Seconds(), "commandRunP90": p90.Seconds(), "commandRunP99": p99.Seconds(),
		"plainJobP50": b50.Seconds(), "plainJobP90": b90.Seconds(), "plainJobP99": b99.Seconds(),
		"ratioP50": p50.Seconds() / b50.Seconds(), "ratioP90": p90.Seconds() / b90.Seconds(),
		"steps": map[string]any{"chat": medianSteps(ourSteps), "plainJob": medianSteps(plainSteps), "warmChat": medianSteps(warmSteps)},
		"warm": map[string]any{
			"pool":     warmPool,
			"chatP50":  w50.Seconds(),
			"chatP99":  w99.Seconds(),
			"ratioP50": w50.Seconds() / b50.Seconds(), "ratioP99": w99.Seconds() / b99.Seconds(),
			"createdToRecordedP50": r50.Seconds(), "createdToRecordedP99": r99.Seconds(),
			"refilledAfterRunP50": percentile(refilledAfterRun, 50).Seconds(),
			"refillP50":           percentile(refills, 50).Seconds(),
			"refillMax":           slices.Max(refills).Seconds(),
			"refills":             len(refills),
			"idle":                idle,
		},
	}, "bench", "e2e.json")
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// The steps of a command, each the time from the start (the chat's request,
// or the plain Job's create call) until a watch first saw it; the pod's
// steps are those of the one pod made in between.
const (
	stepRunCreated   = "CommandRun created"
	stepRunDecided   = "decision recorded"
	stepWarmNamed    = "warm pod named"
	stepJobCreated   = "Job created"
	stepPodCreated   = "pod created"
	stepPodScheduled = "pod scheduled"
	stepPodStarted   = "container running"
	stepPodEnded     = "pod ended"
	stepJobEnded     = "Job complete"
	stepRunResult    = "result recorded"
	stepRunEnded     = "CommandRun succeeded"
	stepAnswered     = "answer received"
)

// stepOrder is the order steps are reported in.
var stepOrder = []string{stepRunCreated, stepRunDecided, stepWarmNamed, stepJobCreated, stepPodCreated, stepPodScheduled,
	stepPodStarted, stepPodEnded, stepJobEnded, stepRunResult, stepRunEnded, stepAnswered}

// clock watches the namespace's CommandRuns, Jobs and pods made after it
// started and records when each step was first seen. Warm sandbox pods
// are not counted: they are made before their command exists, and the
// ones made meanwhile replace others.
type clock struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	made    map[types.UID]bool
	last    *skillsv1.CommandRun
	cancel  context.CancelFunc
	done    sync.WaitGroup
	watches []watch.Interface
}

// startClock starts the watches from the namespace's state now: only
// objects made from then on are counted.
func startClock(t *testing.T) *clock {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	clk := &clock{seen: map[string]time.Time{}, made: map[types.UID]bool{}, cancel: cancel}
	for _, list := range []client.ObjectList{&skillsv1.CommandRunList{}, &batchv1.JobList{}, &corev1.PodList{}} {
		if err := c.client.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil {
			cancel()
			t.Fatal(err)
		}
		w, err := c.client.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		clk.watches = append(clk.watches, w)
		clk.done.Add(1)
		go func() {
			defer clk.done.Done()
			for ev := range w.ResultChan() {
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					clk.see(ev.Type, ev.Object, time.Now())
				}
			}
		}()
	}
	return clk
}

// see records the steps obj shows, when it was made since the clock
// started.
func (clk *clock) see(typ watch.EventType, obj runtime.Object, at time.Time) {
	meta, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	clk.mu.Lock()
	defer clk.mu.Unlock()
	if typ == watch.Added {
		clk.made[meta.GetUID()] = true
	}
	if !clk.made[meta.GetUID()] {
		return
	}
	if _, warm := meta.GetLabels()[sandbox.LabelWarm]; warm {
		return
	}
	var steps []string
	switch o := obj.(type) {
	case *skillsv1.CommandRun:
		clk.last = o.DeepCopy()
		steps = append(steps, stepRunCreated)
		if o.Status.Decision != nil {
			steps = append(steps, stepRunDecided)
		}
		if o.Status.WarmPod != "" {
			steps = append(steps, stepWarmNamed)
		}
		if o.Status.Result != nil {
			steps = append(steps, stepRunResult)
		}
		if o.Status.Phase == skillsv1.PhaseSucceeded {
			steps = append(steps, stepRunEnded)
		}
	case *batchv1.Job:
		steps = append(steps, stepJobCreated)
		if o.Status.Succeeded > 0 {
			steps = append(steps, stepJobEnded)
		}
	case *corev1.Pod:
		steps = append(steps, stepPodCreated)
		if o.Spec.NodeName != "" {
			steps = append(steps, stepPodScheduled)
		}
		for _, cs := range o.Status.ContainerStatuses {
			if cs.State.Running != nil || cs.State.Terminated != nil {
				steps = append(steps, stepPodStarted)
			}
		}
		if o.Status.Phase == corev1.PodSucceeded || o.Status.Phase == corev1.PodFailed {
			steps = append(steps, stepPodEnded)
		}
	}
	for _, step := range steps {
		if _, ok := clk.seen[step]; !ok {
			clk.seen[step] = at
		}
	}
}

// run is the last state the clock saw of the last CommandRun made since
// it started; nil when it saw none.
func (clk *clock) run() *skillsv1.CommandRun {
	clk.mu.Lock()
	defer clk.mu.Unlock()
	return clk.last
}

// steps stops the watches and returns each step's time from start; the
// end is the answer's (chat) or the log's (plain Job).
func (clk *clock) steps(t *testing.T, start, end time.Time, chat bool) map[string]time.Duration {
	t.Helper()
	// The last events may still be on their way: the end was seen by the
	// client first.
	NewWithT(t).Eventually(func() bool {
		clk.mu.Lock()
		defer clk.mu.Unlock()
		last := stepJobEnded
		if chat {
			last = stepRunEnded
		}
		at, ok := clk.seen[last]
		return ok && at.After(start)
	}).WithTimeout(10*time.Second).WithPolling(20*time.Millisecond).Should(BeTrue(), "the watch did not see the command end")
	clk.cancel()
	for _, w := range clk.watches {
		w.Stop()
	}
	clk.done.Wait()
	out := map[string]time.Duration{}
	for step, at := range clk.seen {
		if at.After(start) {
			out[step] = at.Sub(start)
		}
	}
	if chat {
		out[stepAnswered] = end.Sub(start)
	} else {
		out["log read"] = end.Sub(start)
	}
	return out
}

// medianSteps is the median of each step over the runs, in seconds, in
// stepOrder (then "log read"): a list of [step, seconds].
func medianSteps(runs []map[string]time.Duration) [][2]any {
	var out [][2]any
	for _, step := range append(slices.Clone(stepOrder), "log read") {
		var ds []time.Duration
		for _, r := range runs {
			if d, ok := r[step]; ok {
				ds = append(ds, d)
			}
		}
		if len(ds) == len(runs) && len(ds) > 0 {
			out = append(out, [2]any{step, percentile(ds, 50).Seconds()})
		}
	}
	return out
}

// plainJob runs `echo hi` as a bare Job in the toolbox image and returns
// the time from create to its log read, and the log.
func plainJob(t *testing.T, i int) (time.Duration, string) {
	t.Helper()
	ctx := context.Background()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plain-echo-%d", i), Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ptr.To[int32](60),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:                corev1.RestartPolicyNever,
				AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{
					Name: "echo", Image: toolbox, ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"echo", "hi"},
				}},
			}},
		},
	}
	start := time.Now()
	if err := c.client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	w, err := c.client.Watch(ctx, &batchv1.JobList{}, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": job.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deadline := time.After(2 * time.Minute)
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if j, ok := ev.Object.(*batchv1.Job); ok && (j.Status.Succeeded > 0 || j.Status.Failed > 0) {
				done = true
			}
		case <-deadline:
			t.Fatalf("Job %s did not finish", job.Name)
		}
	}
	var pods corev1.PodList
	if err := c.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job.Name}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of %s: %v %d", job.Name, err, len(pods.Items))
	}
	log, err := c.clientset.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(start), string(log)
}

// percentile is the nearest-rank percentile p of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank-1, 0)]
}
