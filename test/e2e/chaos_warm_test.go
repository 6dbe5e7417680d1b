//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// The warm faults kill warm sandboxes of the agent "chaos-warm" around
// their handoff: before one is handed its command, while its command runs,
// and right after it reported the result. Each round also files the
// form's commands for that agent, as the other faults do, so that the
// pool is busy and some runs take Jobs. Every run must end as the other
// faults' do (chaos.check): nothing lost, nothing run twice, no result
// but the command's own.

const (
	// chaosWarmAgent is the agent of chaos-warm-agent-values.yaml: the
	// chaos agent's policy, no skill, and warmPool warm sandboxes.
	chaosWarmAgent = "chaos-warm"
	// warmKills is how many warm pods killWarmAfterReport kills.
	warmKills = 3
)

var warmFaults = []fault{
	{name: "kill a warm sandbox before its handoff", agent: chaosWarmAgent, inject: killWarmBeforeHandoff},
	{name: "kill a warm sandbox during its command", agent: chaosWarmAgent, inject: killWarmDuringCommand},
	{name: "kill a warm sandbox right after it reported", agent: chaosWarmAgent, inject: killWarmAfterReport},
}

// playWarm installs the agent chaos-warm with its pool, meets every warm
// fault Rounds times, then empties the pool.
func (x *chaos) playWarm(t *testing.T) {
	installAgentWith(t, chaosWarmAgent, "test/e2e/testdata/chaos-warm-agent-values.yaml")
	x.warmRuns = c.impersonate(t, "system:serviceaccount:"+ns+":agent-"+chaosWarmAgent)
	setWarm(t, chaosWarmAgent, warmPool)
	waitWarm(t, chaosWarmAgent, warmPool, nil)
	defer func() {
		setWarm(t, chaosWarmAgent, 0)
		NewWithT(t).Eventually(func(g Gomega) { g.Expect(warmPods(g, chaosWarmAgent)).To(BeEmpty()) }, time.Minute, time.Second).Should(Succeed())
	}()
	for round := 1; round <= x.report.Form.Rounds; round++ {
		for i, f := range warmFaults {
			name := fmt.Sprintf("round %d warm fault %d %s", round, i+1, f.name)
			if !t.Run(name, func(t *testing.T) { x.round(t, round, f) }) {
				return
			}
		}
	}
}

// note adds a note to the report of the round under way.
func (x *chaos) note(format string, args ...any) {
	x.notes = append(x.notes, fmt.Sprintf(format, args...))
}

// killWarmBeforeHandoff kills the warm pod the operator hands the next
// command to, four times, and files a quick command as it does: the pod
// deleted (grace period 0), then its runner killed on the node (SIGKILL),
// which the API does not know yet, each first before the command is filed,
// then alongside. A runner killed before the run was filed never took it:
// the operator's handoff finds nothing, and the run must run elsewhere and
// succeed. Alongside, the pod may have taken the command first: then the
// run may fail saying its pod went (a victim), never run twice.
func killWarmBeforeHandoff(t *testing.T, x *chaos, _ []*chaosRun) []*chaosRun {
	t.Helper()
	ctx := context.Background()
	var filed []*chaosRun
	for i, kill := range []struct {
		how       string
		runner    bool
		alongside bool
	}{
		{how: "deleted", runner: false, alongside: false},
		{how: "its runner killed", runner: true, alongside: false},
		{how: "deleted", runner: false, alongside: true},
		{how: "its runner killed", runner: true, alongside: true},
	} {
		next := waitWarm(t, chaosWarmAgent, warmPool, namedByNoRun(t))[0]
		if kill.runner {
			// The API can show a pod waiting a moment after its runner
			// ended: the kill is of a pod whose runner runs.
			next = withRunner(t, next)
		}
		done := make(chan error, 1)
		do := func() {
			if kill.runner {
				done <- killRunner(next)
				return
			}
			done <- c.client.Delete(ctx, &next, client.GracePeriodSeconds(0))
		}
		if kill.alongside {
			go do()
		} else {
			do()
		}
		r := x.fileRunAs(t, chaosWarmAgent, quickCommand, "")
		if err := <-done; err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("failed to kill warm pod %s: %v", next.Name, err)
		}
		r.killed = next.Name
		when := "before"
		if kill.alongside {
			when = "as"
			r.victim = true
		} else if !kill.runner {
			// The operator may not have seen the deletion yet, and the
			// runner takes a command until its signal comes.
			r.victim = true
		}
		x.note("kill %d: warm pod %s %s %s %s was filed", i+1, next.Name, kill.how, when, r.name)
		filed = append(filed, r)
		// The next kill is of another pod: this one no longer waits once
		// the kubelet saw its runner gone.
		NewWithT(t).Eventually(func() bool {
			var now corev1.Pod
			err := c.client.Get(ctx, client.ObjectKeyFromObject(&next), &now)
			return apierrors.IsNotFound(err) || err == nil && (now.UID != next.UID || !warmWaiting(&now))
		}, time.Minute, 100*time.Millisecond).Should(BeTrue(), "warm pod %s still waits after it was killed", next.Name)
	}
	return filed
}

// withRunner returns pod, or, when no process of this machine runs its
// runner, another of the agent's waiting pods that has one.
func withRunner(t *testing.T, pod corev1.Pod) corev1.Pod {
	t.Helper()
	for range 5 {
		if _, ok := processWith(handoffArg(pod)); ok {
			return pod
		}
		t.Logf("warm pod %s shows waiting, but no process runs its runner: another is taken", pod.Name)
		gone := pod
		NewWithT(t).Eventually(func() bool { return !getPodOK(gone) }, time.Minute, 100*time.Millisecond).Should(BeTrue(),
			"warm pod %s still shows waiting without a runner", gone.Name)
		pod = waitWarm(t, chaosWarmAgent, warmPool, namedByNoRun(t))[0]
	}
	t.Fatalf("no waiting warm pod of %s has a runner on this machine", chaosWarmAgent)
	return pod
}

// namedByNoRun accepts the warm pods no CommandRun names: none of the
// round's runs is running in them.
func namedByNoRun(t *testing.T) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		var runs skillsv1.CommandRunList
		if err := c.client.List(context.Background(), &runs, client.InNamespace(ns)); err != nil {
			t.Logf("failed to list runs: %v", err)
			return false
		}
		for _, r := range runs.Items {
			if r.Status.WarmPod == p.Name {
				return false
			}
		}
		return true
	}
}

// killWarmDuringCommand files long commands into a full pool and kills
// the warm pod running each once its command started: deleted as a person
// would (its grace period: the runner stops the command and reports),
// deleted at once (grace period 0), and its runner killed on the node
// (SIGKILL: no report comes, the pod ends without a result). Each run must
// fail saying so, never run again.
func killWarmDuringCommand(t *testing.T, x *chaos, _ []*chaosRun) []*chaosRun {
	t.Helper()
	ctx := context.Background()
	var filed []*chaosRun
	for _, kill := range []struct {
		how    string
		opts   []client.DeleteOption
		runner bool
	}{
		{how: "deleted with its grace period"},
		{how: "deleted at once", opts: []client.DeleteOption{client.GracePeriodSeconds(0)}},
		{how: "its runner killed", runner: true},
	} {
		// A run filed as the pool fills may find no pod waiting in the
		// operator's view, which lags the test's, and take a Job: it runs
		// there and is checked as any other, and another is filed.
		var r *chaosRun
		var pod corev1.Pod
		for attempt := 1; r == nil; attempt++ {
			waitWarm(t, chaosWarmAgent, warmPool, namedByNoRun(t))
			filedNow := x.fileRunAs(t, chaosWarmAgent, longCommand, "")
			inJob := ""
			NewWithT(t).Eventually(func(g Gomega) {
				var run skillsv1.CommandRun
				g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: filedNow.name}, &run)).To(Succeed())
				if run.Status.JobName != "" {
					inJob = runMessage(run)
					return
				}
				g.Expect(run.Status.WarmPod).NotTo(BeEmpty(), "%s has no warm pod yet", filedNow.name)
				g.Expect(startCounts(t)[filedNow.key]).To(BeNumerically(">=", 1), "%s has not started", filedNow.name)
				g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: run.Status.WarmPod}, &pod)).To(Succeed())
			}, time.Minute, 200*time.Millisecond).Should(Succeed())
			if inJob == "" {
				r = filedNow
				break
			}
			filed = append(filed, filedNow)
			x.note("%s took a Job, not a warm sandbox: %s", filedNow.name, inJob)
			if attempt == 3 {
				t.Fatalf("3 runs filed into a full warm pool took Jobs; the last: %s", inJob)
			}
		}
		var err error
		if kill.runner {
			err = killRunner(pod)
		} else {
			err = c.client.Delete(ctx, &pod, kill.opts...)
		}
		if err != nil {
			t.Fatalf("failed to kill warm pod %s of %s: %v", pod.Name, r.name, err)
		}
		r.victim, r.killed = true, pod.Name
		filed = append(filed, r)
		x.note("warm pod %s %s while %s ran", pod.Name, kill.how, r.name)
	}
	return filed
}

// killWarmAfterReport files quick commands into a full pool, one at a
// time, and kills each one's warm pod as soon as a watch sees the run's
// result recorded and the run not ended yet: its runner (SIGKILL, on the
// node), if it has not ended yet, and the pod (grace period 0), unless
// the operator deleted it first. The run must end Succeeded with its
// result, as recorded.
func killWarmAfterReport(t *testing.T, x *chaos, _ []*chaosRun) []*chaosRun {
	t.Helper()
	ctx := context.Background()
	var filed []*chaosRun
	hits := 0
	for range warmKills {
		pool := map[string]corev1.Pod{}
		for _, p := range waitWarm(t, chaosWarmAgent, warmPool, namedByNoRun(t)) {
			pool[p.Name] = p
		}
		var runs skillsv1.CommandRunList
		if err := c.client.List(ctx, &runs, client.InNamespace(ns), client.Limit(1)); err != nil {
			t.Fatal(err)
		}
		w, err := c.client.Watch(ctx, &skillsv1.CommandRunList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: runs.ResourceVersion}})
		if err != nil {
			t.Fatal(err)
		}
		r := x.fileRunAs(t, chaosWarmAgent, quickCommand, "")
		filed = append(filed, r)
		outcome := watchForReport(t, w, r.name)
		w.Stop()
		if outcome.pod == "" {
			x.note("%s ended (%s) before a watch saw its result alone: no pod to kill", r.name, outcome.phase)
			continue
		}
		pod, ok := pool[outcome.pod]
		if !ok {
			t.Fatalf("%s ran in warm pod %s, not one of the pool it was filed into", r.name, outcome.pod)
		}
		r.killed = pod.Name
		// A runner ends once it answered: it is often gone already.
		runner := "its runner killed"
		if killRunner(pod) != nil {
			runner = "its runner had ended"
		}
		err = c.client.Delete(ctx, &pod, client.GracePeriodSeconds(0))
		switch {
		case apierrors.IsNotFound(err):
			x.note("warm pod %s of %s was gone when its result was seen (%s)", pod.Name, r.name, runner)
		case err != nil:
			t.Fatalf("failed to delete warm pod %s of %s: %v", pod.Name, r.name, err)
		default:
			hits++
			x.note("warm pod %s deleted right after %s reported (%s)", pod.Name, r.name, runner)
		}
	}
	if hits == 0 {
		x.note("no warm pod was still there to delete once its result was seen")
	}
	return filed
}

// reportSeen is what watchForReport saw: the warm pod of a run whose
// result was recorded before it ended, or the phase it ended in first.
type reportSeen struct {
	pod   string
	phase skillsv1.RunPhase
}

// watchForReport reads w until the run named name has its result recorded
// while not ended, or ends.
func watchForReport(t *testing.T, w watch.Interface, name string) reportSeen {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of %s ended", name)
			}
			run, isRun := ev.Object.(*skillsv1.CommandRun)
			if !isRun || run.Name != name {
				continue
			}
			switch {
			case run.Status.Phase.Terminal():
				return reportSeen{phase: run.Status.Phase}
			case run.Status.Result != nil && run.Status.WarmPod != "":
				return reportSeen{pod: run.Status.WarmPod}
			}
		case <-deadline:
			t.Fatalf("%s neither reported nor ended in 2m", name)
		}
	}
}

// runStory tells how a run whose warm pod was killed ended: its phase,
// where it ran, and what its events say of the warm sandboxes it was
// handed to.
func runStory(t *testing.T, run skillsv1.CommandRun) string {
	t.Helper()
	story := fmt.Sprintf("%s ended %s in %s", run.Name, run.Status.Phase, sandboxOf(t, run))
	if run.Status.WarmPod != "" {
		story += " " + run.Status.WarmPod
	}
	events, err := c.clientset.CoreV1().Events(ns).List(context.Background(),
		metav1.ListOptions{FieldSelector: "involvedObject.name=" + run.Name})
	if err != nil {
		return story
	}
	for _, ev := range events.Items {
		if strings.Contains(ev.Message, "did not take the command") || strings.Contains(ev.Message, "ended without taking") ||
			strings.Contains(ev.Message, "was deleted before it reported") {
			story += "; " + ev.Message
		}
	}
	if run.Status.Phase != skillsv1.PhaseSucceeded {
		story += "; " + runMessage(run)
	}
	return story
}
