//go:build bench

package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/sandbox"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

const (
	// runCount is how many CommandRuns, and raw Jobs, are timed.
	runCount = 200
	// runWarmup runs are made first and not timed.
	runWarmup = 5
)

// BenchmarkCommandStart creates CommandRuns of an allowed command one at a
// time and times each until its Job is seen on a watch: from the moment the
// CommandRun exists (its create call returned), and from the start of that
// call. The baseline creates the same Job directly, also one at a time,
// seen on the same watch; the two alternate, so load changes hit both.
//
// Metrics: created-p50-ms and created-p99-ms (CommandRun created to Job
// seen), run-p50-ms and run-p99-ms (from the CommandRun's create call),
// job-p50-ms and job-p99-ms (Job create call to Job seen), their ratios,
// and rtt-p50-ms, the bare Job create round trip; run-create-p50-ms (the
// CommandRun's create call) says where the time of a run goes.
func BenchmarkCommandStart(b *testing.B) {
	ctx := context.Background()
	e := operatorEnv(b)
	for b.Loop() {
		ns := e.Namespace(b)
		// Every run's Job is timed, and none ends: none waits in line.
		pol, agent := commandAgent(ctx, b, e, ns, "http://127.0.0.1:1/v1", runWarmup+runCount)
		jobs := watchAdded(ctx, b, watcher(b, e), &batchv1.JobList{}, ns)
		defer jobs.stop()
		// Where the time of a run goes: its create call, then until its
		// Job is seen.
		var creates, fromCreated []time.Duration

		runJob := func(name string) time.Duration {
			run := &skillsv1.CommandRun{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       skillsv1.CommandRunSpec{Agent: agent.Name, Command: "echo hi"},
			}
			seen := jobs.expect(name)
			start := time.Now()
			if err := e.Client.Create(ctx, run); err != nil {
				b.Fatal(err)
			}
			created := time.Now()
			creates = append(creates, created.Sub(start))
			at := jobs.wait(b, name, seen)
			fromCreated = append(fromCreated, at.Sub(created))
			return at.Sub(start)
		}
		var rtts []time.Duration
		rawJob := func(name string) time.Duration {
			run := &skillsv1.CommandRun{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", len(rtts)))},
				Spec:       skillsv1.CommandRunSpec{Agent: agent.Name, Command: "echo hi"},
			}
			job := sandbox.Job(sandbox.Params{Run: run, Policy: pol, RunnerImage: operatortest.Image, DefaultImage: operatortest.SandboxImage})
			seen := jobs.expect(name)
			start := time.Now()
			if err := e.Client.Create(ctx, job); err != nil {
				b.Fatal(err)
			}
			rtts = append(rtts, time.Since(start))
			return jobs.wait(b, name, seen).Sub(start)
		}
		for i := range runWarmup {
			runJob(fmt.Sprintf("warmup-%d", i))
			rawJob(fmt.Sprintf("warmup-raw-%d", i))
		}
		rtts, creates, fromCreated = rtts[:0], creates[:0], fromCreated[:0]
		var runs, raws []time.Duration
		for i := range runCount {
			runs = append(runs, runJob(fmt.Sprintf("run-%03d", i)))
			raws = append(raws, rawJob(fmt.Sprintf("raw-%03d", i)))
		}
		report := func(p float64, unit string, ds []time.Duration) float64 {
			v := millis(percentile(ds, p))
			b.ReportMetric(v, unit)
			return v
		}
		r50, r99 := report(50, "run-p50-ms", runs), report(99, "run-p99-ms", runs)
		j50, j99 := report(50, "job-p50-ms", raws), report(99, "job-p99-ms", raws)
		report(50, "rtt-p50-ms", rtts)
		report(50, "run-create-p50-ms", creates)
		c50, c99 := report(50, "created-p50-ms", fromCreated), report(99, "created-p99-ms", fromCreated)
		b.ReportMetric(r50/j50, "p50-ratio")
		b.ReportMetric(r99/j99, "p99-ratio")
		b.ReportMetric(c50/j50, "created-p50-ratio")
		b.ReportMetric(c99/j99, "created-p99-ratio")
	}
}

// commandAgent creates, in ns, the Agent "ops" whose CommandPolicy allows
// `echo *` and refuses `rm *`, selecting no Skill, with model as its
// model's URL and at most maxRunning commands at once (the default when 0),
// and waits for its fences, which are made with it, off the runs' path, as
// a run would find them.
func commandAgent(ctx context.Context, b *testing.B, e *testenv.Env, ns, model string, maxRunning int32) (*skillsv1.CommandPolicy, *skillsv1.Agent) {
	b.Helper()
	pol := &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-policy"},
		Spec: skillsv1.CommandPolicySpec{Rules: []skillsv1.PolicyRule{
			{Pattern: "echo *", Action: skillsv1.ActionAlways},
			{Pattern: "rm *", Action: skillsv1.ActionNever},
		}},
	}
	agent := &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: skillsv1.AgentSpec{
			Skills:    skillsv1.SkillSelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelBatch: "none"}}},
			Model:     skillsv1.Model{BaseURL: model, Name: "bench"},
			PolicyRef: &skillsv1.LocalRef{Name: pol.Name},
		},
	}
	if maxRunning > 0 {
		agent.Spec.Sandbox = &skillsv1.AgentSandbox{MaxRunning: maxRunning}
	}
	for _, obj := range []client.Object{pol, agent} {
		if err := e.Client.Create(ctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	waitFences(ctx, b, e, ns, agent.Name)
	return pol, agent
}

// waitFences waits until agent's two fences, the base one and that of its
// policy's egress, exist in ns.
func waitFences(ctx context.Context, b *testing.B, e *testenv.Env, ns, agent string) {
	b.Helper()
	var found int
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var list networkingv1.NetworkPolicyList
		if err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{sandbox.LabelAgent: agent},
			client.HasLabels{sandbox.LabelFence}); err != nil {
			return false, err
		}
		found = len(list.Items)
		return found == 2, nil
	})
	if err != nil {
		b.Fatalf("agent %s/%s has %d fences after a minute, want 2: %v", ns, agent, found, err)
	}
}

// addedWatch records when each object of a kind in a namespace is first
// seen.
type addedWatch struct {
	mu    sync.Mutex
	seen  map[string]chan time.Time
	watch watch.Interface
}

func watchAdded(ctx context.Context, b *testing.B, c client.WithWatch, list client.ObjectList, ns string) *addedWatch {
	b.Helper()
	wi, err := c.Watch(ctx, list, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	jw := &addedWatch{seen: map[string]chan time.Time{}, watch: wi}
	go func() {
		for ev := range wi.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			now := time.Now()
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			jw.mu.Lock()
			if ch := jw.seen[obj.GetName()]; ch != nil {
				select {
				case ch <- now:
				default:
				}
			}
			jw.mu.Unlock()
		}
	}()
	return jw
}

// expect registers a name before the object is created.
func (jw *addedWatch) expect(name string) chan time.Time {
	ch := make(chan time.Time, 1)
	jw.mu.Lock()
	jw.seen[name] = ch
	jw.mu.Unlock()
	return ch
}

// wait returns when the object was seen.
func (jw *addedWatch) wait(b *testing.B, name string, ch chan time.Time) time.Time {
	select {
	case t := <-ch:
		return t
	case <-time.After(time.Minute):
		b.Fatalf("%s not seen within a minute", name)
		return time.Time{}
	}
}

func (jw *addedWatch) stop() { jw.watch.Stop() }
