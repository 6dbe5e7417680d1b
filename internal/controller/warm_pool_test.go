package controller_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// warmSetup is commandSetup with an agent that keeps n warm sandboxes,
// each waiting at most idle (the default when zero).
func warmSetup(t *testing.T, n int32, idle time.Duration, mutate func(*skillsv1.CommandPolicy)) string {
	t.Helper()
	g := NewWithT(t)
	ns := commandSetup(t, mutate)
	agent := &skillsv1.Agent{}
	g.Expect(k8s.Get(context.Background(), keyOf(ns, "ops"), agent)).To(Succeed())
	before := agent.DeepCopy()
	agent.Spec.Sandbox = &skillsv1.AgentSandbox{Warm: n}
	if idle > 0 {
		agent.Spec.Sandbox.IdleTimeout = &metav1.Duration{Duration: idle}
	}
	// A patch: the operator writes the agent too.
	g.Expect(k8s.Patch(context.Background(), agent, client.MergeFrom(before))).To(Succeed())
	return ns
}

// warmRun is newRun as created by the test's client, the admin: the
// identity admission policy, once another test installed it, checks it.
func warmRun(ns, name, command string) *skillsv1.CommandRun {
	run := newRun(ns, name, command)
	run.Spec.RequestedBy = "admin"
	return run
}

// warmPods lists the warm pods of agent ops that are not being deleted.
func warmPods(g Gomega, ns string) []corev1.Pod {
	var list corev1.PodList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{sandbox.LabelAgent: "ops"},
		client.HasLabels{sandbox.LabelWarm})).To(Succeed())
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp.IsZero() {
			out = append(out, p)
		}
	}
	return out
}

// warmKubelet runs every warm pod of the namespace as a kubelet would
// (operator.ServeWarm) until the test ends; then it stops the runners
// still waiting.
type warmKubelet struct {
	mu     sync.Mutex
	served map[string]*operatortest.WarmPod
}

func startWarmKubelet(t *testing.T, ns string) *warmKubelet {
	t.Helper()
	k := &warmKubelet{served: map[string]*operatortest.WarmPod{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var list corev1.PodList
			if err := k8s.List(ctx, &list, client.InNamespace(ns), client.HasLabels{sandbox.LabelWarm}); err == nil {
				for i := range list.Items {
					pod := &list.Items[i]
					k.mu.Lock()
					_, seen := k.served[pod.Name]
					k.mu.Unlock()
					if seen || !pod.DeletionTimestamp.IsZero() || pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending {
						continue
					}
					w, err := operator.ServeWarm(ctx, k8s, pod)
					if err != nil {
						t.Logf("serving warm pod %s: %v", pod.Name, err)
						continue
					}
					k.mu.Lock()
					k.served[pod.Name] = w
					k.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, w := range k.served {
			w.Signal(syscall.SIGTERM)
			_, _ = w.Wait(10 * time.Second)
		}
	})
	return k
}

// describe says where the runner of warm pod name is, for failures.
func (k *warmKubelet) describe(name string) string {
	k.mu.Lock()
	w := k.served[name]
	k.mu.Unlock()
	switch {
	case name == "":
		return "none"
	case w == nil:
		return "never served"
	case w.Reached(10*time.Millisecond) != nil:
		return fmt.Sprintf("served at %s; no handoff reached it", w.IP)
	}
	if res, err := w.Wait(10 * time.Millisecond); err == nil {
		return fmt.Sprintf("served at %s; a handoff reached it; its runner ended with %+v", w.IP, *res)
	}
	return fmt.Sprintf("served at %s; a handoff reached it; its runner has not ended", w.IP)
}

// pod returns the runner of the warm pod name, once it is served.
func (k *warmKubelet) pod(t *testing.T, name string) *operatortest.WarmPod {
	t.Helper()
	var w *operatortest.WarmPod
	NewWithT(t).Eventually(func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		w = k.served[name]
		return w != nil
	}, timeout, interval).Should(BeTrue(), "warm pod %s was never served", name)
	return w
}

// TestWarmPoolFillsHandsOverAndRefills follows the life of an agent's warm
// sandboxes: the pool is made, fenced and opened to the operator alone; a
// run is handed to one, answers with the runner's result without any Job,
// the pod is deleted with its run's end, and another takes its place.
func TestWarmPoolFillsHandsOverAndRefills(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := warmSetup(t, 2, 0, nil)

	var first []corev1.Pod
	g.Eventually(func(g Gomega) {
		first = warmPods(g, ns)
		g.Expect(first).To(HaveLen(2))
	}, timeout, interval).Should(Succeed())
	agent := &skillsv1.Agent{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "ops"), agent)).To(Succeed())
	hash := regexp.MustCompile(`^--handoff-sha256=[0-9a-f]{64}$`)
	for _, pod := range first {
		g.Expect(metav1.IsControlledBy(&pod, agent)).To(BeTrue())
		g.Expect(pod.Labels).To(HaveKeyWithValue(sandbox.LabelCommandRun, ""), "the base fence selects it")
		g.Expect(pod.Labels[sandbox.LabelWarm]).To(Equal(first[0].Labels[sandbox.LabelWarm]))
		g.Expect(pod.Spec.ActiveDeadlineSeconds).NotTo(BeNil())
		c := pod.Spec.Containers[0]
		g.Expect(c.Command[1]).To(Equal("serve"))
		g.Expect(c.Command).To(ContainElement(MatchRegexp(hash.String())))
		g.Expect(c.Command).To(ContainElement("--policy-generation=1"))
		g.Expect(c.StartupProbe.Exec.Command).To(Equal([]string{sandbox.RunnerPath, "ready", sandbox.WarmReadyFile}))
		g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	}
	g.Expect(first[0].Spec.Containers[0].Command).NotTo(Equal(first[1].Spec.Containers[0].Command), "each pod has a secret of its own")

	np := &networkingv1.NetworkPolicy{}
	g.Expect(k8s.Get(ctx, keyOf(ns, sandbox.WarmIngressName("ops")), np)).To(Succeed())
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
	g.Expect(np.Spec.Egress).To(BeEmpty())
	g.Expect(np.Spec.Ingress).To(HaveLen(1))
	in := np.Spec.Ingress[0]
	g.Expect(in.Ports).To(HaveLen(1))
	g.Expect(*in.Ports[0].Port).To(Equal(intstr.FromInt32(runner.HandoffPort)))
	g.Expect(in.From).To(HaveLen(1))
	g.Expect(in.From[0].PodSelector.MatchLabels).To(Equal(controller.OperatorPodLabels))
	g.Expect(in.From[0].NamespaceSelector.MatchLabels).To(Equal(map[string]string{corev1.LabelMetadataName: "kubeskills-system"}))
	g.Expect(in.From[0].IPBlock).To(BeNil())
	g.Expect(k8s.Get(ctx, keyOf(ns, sandbox.FenceName("ops", sandbox.BaseFenceHash)), &networkingv1.NetworkPolicy{})).To(Succeed())

	kubelet := startWarmKubelet(t, ns)
	waitWarmRunning(t, ns, 2)
	g.Expect(k8s.Create(ctx, warmRun(ns, "warm-echo", "echo hi"))).To(Succeed())
	run := waitPhase(t, ns, "warm-echo", skillsv1.PhaseSucceeded)
	g.Expect(run.Status.Result.Stdout).To(Equal("hi\n"))
	g.Expect(*run.Status.Result.ExitCode).To(BeZero())
	g.Expect(run.Status.JobName).To(BeEmpty())
	g.Expect(run.Status.WarmPod).To(BeElementOf(first[0].Name, first[1].Name))
	g.Expect(jobs(g, ns, "warm-echo")).To(BeEmpty())

	used := kubelet.pod(t, run.Status.WarmPod)
	res, err := used.Wait(timeout)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Stdout).To(Equal("hi\n"), "the pod ran the run's command")
	g.Eventually(func() bool {
		err := k8s.Get(ctx, keyOf(ns, run.Status.WarmPod), &corev1.Pod{})
		return apierrors.IsNotFound(err)
	}, timeout, interval).Should(BeTrue(), "the used pod is deleted with its run's end")
	g.Eventually(func(g Gomega) {
		pods := warmPods(g, ns)
		g.Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			g.Expect(p.Name).NotTo(Equal(run.Status.WarmPod))
		}
	}, timeout, interval).Should(Succeed(), "another pod replaces the one taken")
}

// TestOnlyTheOperatorHandsAWarmPodItsCommand: what a pod's spec shows
// (the SHA-256 of its secret) opens no pod, and a refused handoff leaves
// the pod waiting for its run; two runs never share a pod.
func TestOnlyTheOperatorHandsAWarmPodItsCommand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := warmSetup(t, 2, 0, nil)
	kubelet := startWarmKubelet(t, ns)
	var pods []corev1.Pod
	g.Eventually(func(g Gomega) {
		pods = warmPods(g, ns)
		g.Expect(pods).To(HaveLen(2))
	}, timeout, interval).Should(Succeed())

	target := kubelet.pod(t, pods[0].Name)
	spec := ""
	for _, arg := range target.Pod.Spec.Containers[0].Command {
		if v, ok := cutPrefix(arg, "--handoff-sha256="); ok {
			spec = v
		}
	}
	g.Expect(spec).NotTo(BeEmpty())
	addr := net.JoinHostPort(target.IP, strconv.Itoa(runner.HandoffPort))
	forged := runner.Handoff{RunUID: "forged", Command: "echo forged", Policy: runner.PolicySnapshot{DefaultAction: "Always"}.Encode(),
		TimeoutMillis: 1000, OutputLimit: 100, PolicyGeneration: 1}
	for _, secret := range []string{spec, "", "0000"} {
		_, err := runner.HandOff(ctx, http.DefaultClient, addr, secret, forged, nil)
		g.Expect(err).To(MatchError(runner.ErrNotHandedOver), "secret %q", secret)
	}

	waitWarmRunning(t, ns, 2)
	for _, name := range []string{"one", "two"} {
		g.Expect(k8s.Create(ctx, warmRun(ns, name, "echo "+name))).To(Succeed())
	}
	// A run may find a pod not yet running in the operator's cache, which
	// lags the test's view, or a handoff that a loaded machine timed out:
	// it then runs in a Job, ended here as the kubelet would.
	one := succeedsWherever(t, ns, "one", kubelet)
	two := succeedsWherever(t, ns, "two", kubelet)
	g.Expect(one.Status.Result.Stdout).To(Equal("one\n"))
	g.Expect(two.Status.Result.Stdout).To(Equal("two\n"))
	g.Expect(one.Status.WarmPod).NotTo(Equal(two.Status.WarmPod))
	for _, run := range []*skillsv1.CommandRun{one, two} {
		if run.Status.WarmPod == "" {
			continue
		}
		res, err := kubelet.pod(t, run.Status.WarmPod).Wait(timeout)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Stdout).To(Equal(run.Status.Result.Stdout), "each pod ran its own run only")
	}
}

// succeedsWherever waits for the run, which echoes its name, to succeed
// in a warm pod or, should no warm pod take it, in the Job it gets. When
// it does not, the failure says where the run's warm pod is.
func succeedsWherever(t *testing.T, ns, name string, kubelet *warmKubelet) *skillsv1.CommandRun {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	run := &skillsv1.CommandRun{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, keyOf(ns, name), run)).To(Succeed())
		if run.Status.Phase.Terminal() || run.Status.JobName == "" {
			g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded), "%v", run.Status.Conditions)
			return
		}
		// The status names the Job before it is created.
		job := &batchv1.Job{}
		g.Expect(k8s.Get(ctx, keyOf(ns, run.Status.JobName), job)).To(Succeed())
		if job.Status.Succeeded == 0 {
			g.Expect(operator.FinishJob(ctx, k8s, ns, run.Status.JobName, &runner.Result{Stdout: name + "\n"}, false)).To(Succeed())
		}
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded), "%v", run.Status.Conditions)
	}, timeout, interval).Should(Succeed(), func() string {
		return fmt.Sprintf("run %s/%s never succeeded; its warm pod %q: %s", ns, name, run.Status.WarmPod, kubelet.describe(run.Status.WarmPod))
	})
	return run
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

// TestWarmPoolReplacesPodsOfAnOldShape: a policy edit changes the shape
// of the agent's sandboxes; the pods that wait under the old one go, and
// new ones come, pinned to the new generation.
func TestWarmPoolReplacesPodsOfAnOldShape(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := warmSetup(t, 1, 0, nil)
	var old []corev1.Pod
	g.Eventually(func(g Gomega) {
		old = warmPods(g, ns)
		g.Expect(old).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())

	pol := &skillsv1.CommandPolicy{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "ops-policy"), pol)).To(Succeed())
	before := pol.DeepCopy()
	pol.Spec.Rules = append(pol.Spec.Rules, skillsv1.PolicyRule{Pattern: "date", Action: skillsv1.ActionAlways})
	g.Expect(k8s.Patch(ctx, pol, client.MergeFrom(before))).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := warmPods(g, ns)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Name).NotTo(Equal(old[0].Name))
		g.Expect(pods[0].Labels[sandbox.LabelWarm]).NotTo(Equal(old[0].Labels[sandbox.LabelWarm]))
		g.Expect(pods[0].Spec.Containers[0].Command).To(ContainElement("--policy-generation=2"))
	}, timeout, interval).Should(Succeed())

	agent := &skillsv1.Agent{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "ops"), agent)).To(Succeed())
	unwarmed := agent.DeepCopy()
	unwarmed.Spec.Sandbox.Warm = 0
	g.Expect(k8s.Patch(ctx, unwarmed, client.MergeFrom(agent))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(warmPods(g, ns)).To(BeEmpty()) }, timeout, interval).Should(Succeed())
}

// TestIdleWarmPodIsReplaced: a warm pod that waited its idle timeout ends
// without a command, and a new one, with a new secret and token, replaces
// it.
func TestIdleWarmPodIsReplaced(t *testing.T) {
	g := NewWithT(t)
	ns := warmSetup(t, 1, 2*time.Second, nil)
	kubelet := startWarmKubelet(t, ns)
	var first []corev1.Pod
	g.Eventually(func(g Gomega) {
		first = warmPods(g, ns)
		g.Expect(first).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())
	res, err := kubelet.pod(t, first[0].Name).Wait(timeout)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.NoCommand).To(BeTrue())
	g.Eventually(func(g Gomega) {
		pods := warmPods(g, ns)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Name).NotTo(Equal(first[0].Name))
	}, timeout, interval).Should(Succeed())
}

// TestWarmRunSurvivesAnOperatorRestart: the operator stops while a warm
// pod runs its command; the next one hands the same run over again, which
// the pod answers with that run's result: the command ran once, and no
// Job was made.
func TestWarmRunSurvivesAnOperatorRestart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := warmSetup(t, 1, 0, allowSleep)
	kubelet := startWarmKubelet(t, ns)
	waitWarmRunning(t, ns, 1)

	g.Expect(k8s.Create(ctx, warmRun(ns, "restarted", "sleep 2; echo once"))).To(Succeed())
	run := waitPhase(t, ns, "restarted", skillsv1.PhaseRunning)
	g.Expect(run.Status.WarmPod).NotTo(BeEmpty())
	restartOperator(t)

	run = waitPhase(t, ns, "restarted", skillsv1.PhaseSucceeded)
	g.Expect(run.Status.Result.Stdout).To(Equal("once\n"))
	g.Expect(jobs(g, ns, "restarted")).To(BeEmpty())
	res, err := kubelet.pod(t, run.Status.WarmPod).Wait(timeout)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Stdout).To(Equal("once\n"))
}

// TestWarmPodDeletedMidCommand: a warm pod deleted while its command runs
// is stopped; its runner reports the stop, which is the run's result. A
// pod gone while no operator followed it fails the run: the command may
// have run, so it never runs again, in a Job or elsewhere.
func TestWarmPodDeletedMidCommand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := warmSetup(t, 1, 0, allowSleep)
	kubelet := startWarmKubelet(t, ns)
	waitWarmRunning(t, ns, 1)

	g.Expect(k8s.Create(ctx, warmRun(ns, "stopped", "sleep 30"))).To(Succeed())
	run := waitPhase(t, ns, "stopped", skillsv1.PhaseRunning)
	w := kubelet.pod(t, run.Status.WarmPod)
	// Running is recorded as the handoff starts: the stop must come after
	// it reached the pod, or the pod refuses it and the run takes a Job.
	g.Expect(w.Reached(timeout)).To(Succeed())
	g.Expect(k8s.Delete(ctx, w.Pod)).To(Succeed())
	w.Signal(syscall.SIGTERM)
	run = waitPhase(t, ns, "stopped", skillsv1.PhaseFailed)
	g.Expect(*run.Status.Result.ExitCode).To(Equal(int32(128 + int(syscall.SIGTERM))))
	g.Expect(jobs(g, ns, "stopped")).To(BeEmpty())

	waitWarmRunning(t, ns, 1)
	g.Expect(k8s.Create(ctx, warmRun(ns, "orphaned", "sleep 30"))).To(Succeed())
	run = waitPhase(t, ns, "orphaned", skillsv1.PhaseRunning)
	w = kubelet.pod(t, run.Status.WarmPod)
	operator.Stop()
	g.Expect(k8s.Delete(ctx, w.Pod)).To(Succeed())
	w.Signal(syscall.SIGKILL)
	startOperator(t)
	run = waitPhase(t, ns, "orphaned", skillsv1.PhaseFailed)
	g.Expect(condition(run.Status.Conditions, skillsv1.SucceededCondition).Message).To(ContainSubstring("is not run again"))
	g.Consistently(func(g Gomega) { g.Expect(jobs(g, ns, "orphaned")).To(BeEmpty()) }, 300*time.Millisecond, interval).Should(Succeed())
}

// TestWarmPodWhoseRunnerDiedPassesTheRunOn: a warm pod shown running
// whose runner was killed (nothing answers at its address) refuses the
// handoff; the kubelet then reports its container killed, without a
// result. The run was never handed over, so it runs once, in a Job, and
// is not failed for what the dead pod did not report.
func TestWarmPodWhoseRunnerDiedPassesTheRunOn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := warmSetup(t, 1, 0, nil)
	pod := showWarmRunning(t, ns, "127.0.255.254")

	g.Expect(k8s.Create(ctx, warmRun(ns, "passed-on", "echo hi"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		var run skillsv1.CommandRun
		g.Expect(k8s.Get(ctx, keyOf(ns, "passed-on"), &run)).To(Succeed())
		g.Expect(run.Status.WarmPod + run.Status.JobName).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed())
	endWarmPod(t, pod, "")
	runsOnceInAJob(t, ns, "passed-on")
}

// TestWarmPodThatEndedWithoutTakingTheRunPassesItOn: a warm pod whose
// runner was dying as the handoff came (the connection is made, then
// broken) leaves it unknown whether the command was taken. Its
// termination message tells: empty, the runner took nothing, and the run
// runs once, in a Job; the record a runner writes as it takes a command
// fails the run instead, and it never runs again.
func TestWarmPodThatEndedWithoutTakingTheRunPassesItOn(t *testing.T) {
	for _, c := range []struct {
		name, message string
		passedOn      bool
	}{
		{name: "nothing taken", message: "", passedOn: true},
		{name: "taken", message: takenMessage(t), passedOn: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := warmSetup(t, 1, 0, nil)
			// The dying runner: the connection is made, and broken at once.
			ip := "127.0.255.253"
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(runner.HandoffPort)))
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { _ = l.Close() })
			reached := make(chan struct{}, 8)
			go func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					_ = conn.Close()
					reached <- struct{}{}
				}
			}()
			pod := showWarmRunning(t, ns, ip)

			g.Expect(k8s.Create(ctx, warmRun(ns, "dying", "echo hi"))).To(Succeed())
			g.Eventually(reached, timeout).Should(Receive(), "no handoff reached the dying runner")
			var run skillsv1.CommandRun
			g.Expect(k8s.Get(ctx, keyOf(ns, "dying"), &run)).To(Succeed())
			g.Expect(run.Status.WarmPod).To(Equal(pod.Name))
			endWarmPod(t, pod, c.message)

			if c.passedOn {
				runsOnceInAJob(t, ns, "dying")
				return
			}
			failed := waitPhase(t, ns, "dying", skillsv1.PhaseFailed)
			g.Expect(failed.Status.Result.Message).To(ContainSubstring("the command may have run"))
			g.Consistently(func(g Gomega) { g.Expect(jobs(g, ns, "dying")).To(BeEmpty()) }, 300*time.Millisecond, interval).Should(Succeed())
		})
	}
}

// showWarmRunning writes, as a kubelet would, that the namespace's one
// warm pod runs at ip, and returns it.
func showWarmRunning(t *testing.T, ns, ip string) corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	var pod corev1.Pod
	g.Eventually(func(g Gomega) {
		pods := warmPods(g, ns)
		g.Expect(pods).To(HaveLen(1))
		pod = pods[0]
	}, timeout, interval).Should(Succeed())
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, StartTime: &now,
		ContainerStatuses: []corev1.ContainerStatus{{Name: sandbox.ContainerCommand, Started: ptr.To(true), Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	g.Expect(k8s.Status().Update(context.Background(), &pod)).To(Succeed())
	return pod
}

// endWarmPod writes, as a kubelet would, that the warm pod's runner was
// killed, leaving the termination message message.
func endWarmPod(t *testing.T, pod corev1.Pod, message string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&pod), &pod)).To(Succeed())
	started := pod.Status.StartTime
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses[0].Started = ptr.To(false)
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "Error", Message: message, StartedAt: *started, FinishedAt: metav1.Now()}}
	g.Expect(k8s.Status().Update(ctx, &pod)).To(Succeed())
}

// runsOnceInAJob checks that the run, which no warm pod took, gets a Job
// and succeeds there, once.
func runsOnceInAJob(t *testing.T, ns, name string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		var run skillsv1.CommandRun
		g.Expect(k8s.Get(context.Background(), keyOf(ns, name), &run)).To(Succeed())
		g.Expect(run.Status.Phase.Terminal()).To(BeFalse(), "%s: %v", run.Status.Phase, run.Status.Conditions)
		g.Expect(run.Status.JobName).NotTo(BeEmpty())
		// The status names the Job before it is created.
		g.Expect(jobs(g, ns, name)).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())
	finishJob(t, ns, name, &runner.Result{Stdout: "hi\n"}, false)
	done := waitPhase(t, ns, name, skillsv1.PhaseSucceeded)
	g.Expect(done.Status.Result.Stdout).To(Equal("hi\n"))
	g.Expect(done.Status.WarmPod).To(BeEmpty())
	g.Expect(jobs(g, ns, name)).To(HaveLen(1))
}

// takenMessage is a termination message as a warm runner leaves it once
// it took a command and before it reported the command's result (the
// operator reads any message there as the result).
func takenMessage(t *testing.T) string {
	t.Helper()
	_, msg, _, err := runner.Encode(&runner.Result{ExitCode: runner.ExitRunnerFailure,
		Error: "the sandbox reported no result: its runner ended after it took the command, so the command may have run"})
	if err != nil {
		t.Fatal(err)
	}
	return string(msg)
}

// allowSleep lets the policy run sleep, a command that takes a while.
func allowSleep(p *skillsv1.CommandPolicy) {
	p.Spec.Rules = append(p.Spec.Rules, skillsv1.PolicyRule{Pattern: "sleep *", Action: skillsv1.ActionAlways})
}

// waitWarmRunning waits until the agent's n warm pods run: a run made
// before takes a Job of its own.
func waitWarmRunning(t *testing.T, ns string, n int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		pods := warmPods(g, ns)
		g.Expect(pods).To(HaveLen(n))
		for _, p := range pods {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}
	}, timeout, interval).Should(Succeed())
}

// restartOperator stops the package's operator and starts another, as a
// restart of its pod would.
func restartOperator(t *testing.T) {
	t.Helper()
	operator.Stop()
	startOperator(t)
}

// startOperator starts the package's operator anew.
func startOperator(t *testing.T) {
	t.Helper()
	var err error
	operator, err = operatortest.Start(env, manager.Options{SkillWorkers: 4, RunWorkers: 4})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// TestWarmRunReportsItsRunnersSpans: a traced run handed to a warm pod
// asks its runner for spans; the runner reports the command's and its
// programs' (never their arguments: runner.Span has no field for them),
// and the operator makes them children of the run's sandbox span, in the
// tool call's trace.
func TestWarmRunReportsItsRunnersSpans(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	exp := operatortest.RecordSpans(t)
	ns := warmSetup(t, 1, 0, func(p *skillsv1.CommandPolicy) {
		p.Spec.Rules = append(p.Spec.Rules, skillsv1.PolicyRule{Pattern: "cat *", Action: skillsv1.ActionAlways})
	})
	startWarmKubelet(t, ns)
	waitWarmRunning(t, ns, 1)

	// A run may find the pod not yet running in the operator's cache,
	// which lags the test's view: it then takes a Job, ended here as the
	// kubelet would, and the next run is filed.
	for i := 0; ; i++ {
		name := fmt.Sprintf("traced-%d", i)
		run := warmRun(ns, name, "cat /dev/null")
		run.Annotations = map[string]string{skillsv1.AnnotationTraceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
		g.Expect(k8s.Create(ctx, run)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, keyOf(ns, name), run)).To(Succeed())
			g.Expect(run.Status.WarmPod+run.Status.JobName).NotTo(BeEmpty(), "%s: %+v", run.Status.Phase, run.Status.Decision)
		}, timeout, interval).Should(Succeed())
		if run.Status.WarmPod != "" {
			waitPhase(t, ns, name, skillsv1.PhaseSucceeded)
			break
		}
		g.Expect(i).To(BeNumerically("<", 3), "no run reached the warm pod")
		finishJob(t, ns, name, &runner.Result{}, false)
		waitPhase(t, ns, name, skillsv1.PhaseSucceeded)
		exp.Reset()
	}
	g.Eventually(func(g Gomega) {
		named := operatortest.SpansByName(exp.GetSpans())
		sandbox, command, program := named["sandbox"], named["command"], named["exec"]
		g.Expect(sandbox.SpanContext.TraceID().String()).To(Equal("4bf92f3577b34da6a3ce929d0e0e4736"))
		g.Expect(operatortest.SpanAttributes(sandbox)).To(HaveKeyWithValue("kubeskills.sandbox.kind", "warm"))
		g.Expect(command.Parent.SpanID()).To(Equal(sandbox.SpanContext.SpanID()))
		g.Expect(program.Parent.SpanID()).To(Equal(sandbox.SpanContext.SpanID()))
		g.Expect(operatortest.SpanAttributes(program)).To(HaveKeyWithValue("process.executable.name", "cat"))
		g.Expect(operatortest.SpanAttributes(command)).To(HaveKeyWithValue("process.exit.code", "0"))
		g.Expect(operatortest.SpanAttributes(program)).To(HaveKeyWithValue("kubeskills.policy.action", "Always"))
	}, timeout, interval).Should(Succeed())
}
