package agent_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// expiringWatches is a client whose first watches of CommandRuns end as
// the API server ends them: the first is refused 410 Gone, its
// resourceVersion compacted away ("too old resource version"); the second
// sends that as an ERROR event and ends; the third ends at once, as a
// watch the server timed out. Later watches reach the API server.
type expiringWatches struct {
	client.WithWatch
	mu      sync.Mutex
	watches int
}

func (e *expiringWatches) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	if _, ok := list.(*skillsv1.CommandRunList); !ok {
		return e.WithWatch.Watch(ctx, list, opts...)
	}
	e.mu.Lock()
	e.watches++
	n := e.watches
	e.mu.Unlock()
	const tooOld = "too old resource version: 1 (2)"
	switch n {
	case 1:
		return nil, apierrors.NewResourceExpired(tooOld)
	case 2:
		w := watch.NewFakeWithChanSize(1, false)
		w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: tooOld})
		w.Stop()
		return w, nil
	case 3:
		w := watch.NewFake()
		w.Stop()
		return w, nil
	}
	return e.WithWatch.Watch(ctx, list, opts...)
}

func (e *expiringWatches) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.watches
}

// TestCommandResultSurvivesAnExpiredWatch: the watches on a command's run
// expire, are refused as too old and time out while the command runs; the
// caller still gets the command's output once it ends, not an error.
func TestCommandResultSurvivesAnExpiredWatch(t *testing.T) {
	g := NewWithT(t)
	ns, kube, _ := commandSetup(t, nil)
	identity, err := agent.WhoAmI(context.Background(), kube)
	g.Expect(err).NotTo(HaveOccurred())
	expiring := &expiringWatches{WithWatch: kube}
	f := newFixture(t, options{ns: ns, kube: expiring, store: mountServed(t, ns, "hello"),
		config: func(c *agent.Config) { c.Identity = identity }})

	type answer struct {
		code int
		body []byte
	}
	done := make(chan answer, 1)
	go func() {
		code, body := f.do(t, http.MethodPost, "/v1/commands", f.token, map[string]string{"command": "echo hi"})
		done <- answer{code, body}
	}()
	run := waitRun(t, ns, "echo hi", skillsv1.PhaseRunning)
	finishJob(t, ns, run.Name, &runner.Result{Stdout: "hi\n"})
	var got answer
	g.Eventually(done, timeout).Should(Receive(&got))
	g.Expect(got.code).To(Equal(http.StatusOK), string(got.body))
	res := toolResult(t, string(got.body))
	g.Expect(res).To(HaveKeyWithValue("phase", "Succeeded"))
	g.Expect(res).To(HaveKeyWithValue("stdout", "hi\n"))
	g.Expect(expiring.count()).To(BeNumerically(">", 3), "every failing watch was met, then a real one")
}

// TestCommandWaitEndsForALongOrDeletedRun: a command that outlives the
// command wait comes back still running, with its run's name to wait on;
// a run deleted while it is waited for comes back deleted.
func TestCommandWaitEndsForALongOrDeletedRun(t *testing.T) {
	g := NewWithT(t)
	const wait = 2 * time.Second
	f, _ := commandFixture(t, nil, func(c *agent.Config) { c.CommandWait = wait })

	code, body := f.do(t, http.MethodPost, "/v1/commands", f.token, map[string]string{"command": "echo slow"})
	g.Expect(code).To(Equal(http.StatusOK), string(body))
	slow := waitRun(t, f.ns, "echo slow", skillsv1.PhaseRunning)
	g.Expect(toolResult(t, string(body))).To(And(HaveKeyWithValue("phase", "Running"), HaveKeyWithValue("run", slow.Name),
		HaveKeyWithValue("message", ContainSubstring("still Running after 2s"))))

	done := make(chan []byte, 1)
	go func() {
		_, body := f.do(t, http.MethodPost, "/v1/commands", f.token, map[string]string{"command": "echo doomed"})
		done <- body
	}()
	doomed := waitRun(t, f.ns, "echo doomed", skillsv1.PhaseRunning)
	g.Expect(k8s.Delete(context.Background(), doomed)).To(Succeed())
	g.Eventually(done, timeout).Should(Receive(WithTransform(func(b []byte) map[string]any { return toolResult(t, string(b)) },
		HaveKeyWithValue("phase", "Deleted"))))
}

// TestCommandThatCannotStartIsReportedAtOnce: when the run's sandbox cannot
// start (the scheduler finds no node for its pod), the command comes back
// within seconds, not after the command wait, saying why, with the run's
// name to wait on once that is resolved.
func TestCommandThatCannotStartIsReportedAtOnce(t *testing.T) {
	g := NewWithT(t)
	f, _ := commandFixture(t, nil, func(c *agent.Config) { c.CommandWait = time.Hour })

	done := make(chan []byte, 1)
	go func() {
		_, body := f.do(t, http.MethodPost, "/v1/commands", f.token, map[string]string{"command": "echo stuck"})
		done <- body
	}()
	run := waitRun(t, f.ns, "echo stuck", skillsv1.PhaseRunning)
	ctx := context.Background()
	g.Expect(operator.StartPod(ctx, k8s, f.ns, run.Name)).To(Succeed())
	var pods corev1.PodList
	g.Expect(k8s.List(ctx, &pods, client.InNamespace(f.ns), client.MatchingLabels{sandbox.LabelCommandRun: run.Name})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	pod := &pods.Items[0]
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
	g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())

	var body []byte
	g.Eventually(done, timeout).Should(Receive(&body))
	g.Expect(toolResult(t, string(body))).To(And(HaveKeyWithValue("phase", "Running"), HaveKeyWithValue("run", run.Name),
		HaveKeyWithValue("message", "not started: The sandbox of Job "+run.Name+" cannot start the command: Unschedulable: "+
			"0/1 nodes are available: 1 Insufficient cpu. The run goes on and starts once that is resolved: "+
			"call command_status with run \""+run.Name+"\" to wait for it again")))
}

// TestQueuedCommandSaysSo: a command past its agent's bound on commands
// running at once comes back after the approval wait, not the command
// wait, saying it waits in line and where, with its run's name to wait on;
// it starts once the running one ends.
func TestQueuedCommandSaysSo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, _ := commandFixture(t, nil, func(c *agent.Config) { c.CommandWait, c.ApprovalWait = 2*time.Second, time.Second })
	a := &skillsv1.Agent{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "ops"}, a)).To(Succeed())
	a.Spec.Sandbox = &skillsv1.AgentSandbox{MaxRunning: 1}
	g.Expect(k8s.Update(ctx, a)).To(Succeed())

	code, body := f.do(t, http.MethodPost, "/v1/commands", f.token, map[string]string{"command": "echo first"})
	g.Expect(code).To(Equal(http.StatusOK), string(body))
	first := waitRun(t, f.ns, "echo first", skillsv1.PhaseRunning)

	code, body = f.do(t, http.MethodPost, "/v1/commands", f.token, map[string]string{"command": "echo second"})
	g.Expect(code).To(Equal(http.StatusOK), string(body))
	second := waitRun(t, f.ns, "echo second", skillsv1.PhasePending)
	g.Expect(toolResult(t, string(body))).To(And(HaveKeyWithValue("phase", "Pending"), HaveKeyWithValue("run", second.Name),
		HaveKeyWithValue("message", "queued: 1st in line: Agent ops runs at most 1 command at once (spec.sandbox.maxRunning) "+
			"and runs 1 now. The run starts in its turn: call command_status with run \""+second.Name+"\" to wait for it")))

	finishJob(t, f.ns, first.Name, &runner.Result{Stdout: "first\n"})
	waitRun(t, f.ns, "echo second", skillsv1.PhaseRunning)
}
