package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// runMessage is the message of a run's Succeeded condition.
func runMessage(run *skillsv1.CommandRun) string {
	if c := condition(run.Status.Conditions, skillsv1.SucceededCondition); c != nil {
		return c.Message
	}
	return ""
}

// TestResultWaitsForThePodsFinalState: the Job's completion can reach the
// operator before its pod's final state does. The run then waits, Running,
// and records the command's result once the pod shows it, rather than end
// Failed for good as if the command never ran.
func TestResultWaitsForThePodsFinalState(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	g.Expect(k8s.Create(ctx, newRun(ns, "late-pod", "echo late"))).To(Succeed())
	waitPhase(t, ns, "late-pod", skillsv1.PhaseRunning)

	res := &runner.Result{ExitCode: 0, Stdout: "late\n", DurationMillis: 12}
	g.Expect(operator.StartPod(ctx, k8s, ns, "late-pod")).To(Succeed())
	g.Expect(operatortest.EndJob(ctx, k8s, ns, "late-pod", res, false)).To(Succeed())

	run := &skillsv1.CommandRun{}
	notEnded := func(g Gomega) {
		g.Expect(k8s.Get(ctx, keyOf(ns, "late-pod"), run)).To(Succeed())
		if run.Status.Phase.Terminal() {
			StopTrying(fmt.Sprintf("the run ended %s before its pod's final state was written: %s", run.Status.Phase, runMessage(run))).Now()
		}
	}
	g.Eventually(func(g Gomega) {
		notEnded(g)
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseRunning))
		g.Expect(runMessage(run)).To(Equal("Job late-pod finished; waiting for its pod's final state"))
	}, timeout, interval).Should(Succeed())
	// Several polls of the pod go by without a result.
	g.Consistently(notEnded, 3*time.Second, interval).Should(Succeed())

	g.Expect(operator.EndPod(ctx, k8s, ns, "late-pod", res)).To(Succeed())
	done := waitPhase(t, ns, "late-pod", skillsv1.PhaseSucceeded)
	g.Expect(done.Status.Result).NotTo(BeNil())
	g.Expect(done.Status.Result.Stdout).To(Equal("late\n"))
	g.Expect(done.Status.Result.ExitCode).To(Equal(ptr.To[int32](0)))
	g.Expect(done.Status.Result.Message).To(BeEmpty())
	g.Expect(runMessage(done)).To(Equal("The command exited 0"))
	expectKstatus(g, done)
}

// TestResultOfAPodDeletedSaysSo: a Job that finished with no pod left to
// read ends its run Failed, saying the pod was deleted: not that the
// command never ran, which a pod deleted mid-command did.
func TestResultOfAPodDeletedSaysSo(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	g.Expect(k8s.Create(ctx, newRun(ns, "gone-pod", "echo gone"))).To(Succeed())
	waitPhase(t, ns, "gone-pod", skillsv1.PhaseRunning)
	g.Expect(operatortest.EndJob(ctx, k8s, ns, "gone-pod", &runner.Result{ExitCode: 137}, false)).To(Succeed())

	done := waitPhase(t, ns, "gone-pod", skillsv1.PhaseFailed)
	g.Expect(done.Status.Result).NotTo(BeNil())
	g.Expect(done.Status.Result.Message).To(Equal("the sandbox pod was deleted before its result was read"))
	g.Expect(runMessage(done)).To(ContainSubstring("the sandbox pod was deleted before its result was read"))
}

// TestRunOutlivesItsJob: a finished run whose Job is deleted (by a person
// or a TTL controller, or by the operator once the policy's
// ttlSecondsAfterFinished passed) keeps its phase and result, and is
// deleted by the history no earlier than its maxAge after the run ended.
func TestRunOutlivesItsJob(t *testing.T) {
	const maxAge = 5 * time.Second
	for _, tc := range []struct {
		name string
		ttl  *int32
		// deleteJob deletes the Job, or leaves it to the operator.
		deleteJob bool
	}{
		{name: "deleted by hand", deleteJob: true},
		{name: "deleted by the operator", ttl: ptr.To[int32](0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := commandSetup(t, func(p *skillsv1.CommandPolicy) {
				p.Spec.History = &skillsv1.RunHistory{MaxAge: &metav1.Duration{Duration: maxAge}}
				if tc.ttl != nil {
					p.Spec.Sandbox = &skillsv1.Sandbox{TTLSecondsAfterFinished: tc.ttl}
				}
			})
			g.Expect(k8s.Create(ctx, newRun(ns, "outlives", "echo kept"))).To(Succeed())
			waitPhase(t, ns, "outlives", skillsv1.PhaseRunning)
			finishJob(t, ns, "outlives", &runner.Result{Stdout: "kept\n"}, false)
			done := waitPhase(t, ns, "outlives", skillsv1.PhaseSucceeded)
			g.Expect(done.Status.CompletionTime).NotTo(BeNil())
			due := done.Status.CompletionTime.Add(maxAge)

			if tc.deleteJob {
				job := &batchv1.Job{}
				g.Expect(k8s.Get(ctx, keyOf(ns, "outlives"), job)).To(Succeed())
				g.Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
			}
			g.Eventually(func() bool {
				return apierrors.IsNotFound(k8s.Get(ctx, keyOf(ns, "outlives"), &batchv1.Job{}))
			}, timeout, interval).Should(BeTrue(), "the Job was never deleted")

			kept := func(g Gomega) {
				run := &skillsv1.CommandRun{}
				err := k8s.Get(ctx, keyOf(ns, "outlives"), run)
				if apierrors.IsNotFound(err) && time.Now().Before(due) {
					StopTrying(fmt.Sprintf("the run was deleted %s before its history's maxAge", time.Until(due))).Now()
				}
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded))
				g.Expect(run.Status.Result).NotTo(BeNil())
				g.Expect(run.Status.Result.Stdout).To(Equal("kept\n"))
				g.Expect(run.Status.CompletionTime).To(Equal(done.Status.CompletionTime))
			}
			// Present while its Job is gone, until shortly before it is due.
			kept(g)
			if left := time.Until(due) - 500*time.Millisecond; left > 0 {
				g.Consistently(kept, left, interval).Should(Succeed())
			}

			var deletedAt time.Time
			g.Eventually(func() bool {
				err := k8s.Get(ctx, keyOf(ns, "outlives"), &skillsv1.CommandRun{})
				deletedAt = time.Now()
				return apierrors.IsNotFound(err)
			}, maxAge+timeout, interval).Should(BeTrue(), "the history never deleted the run")
			g.Expect(deletedAt).To(BeTemporally(">=", due), "the run was deleted before CompletionTime + maxAge")
		})
	}
}

// TestJobWithZeroTTLStillReportsItsResult: a policy that keeps finished
// Jobs for 0 seconds still gets the command's result. The Job has no
// ttlSecondsAfterFinished, which would let the TTL controller delete it,
// and its pod, as soon as it finished; the operator deletes it once the
// run's result is recorded, never before.
func TestJobWithZeroTTLStillReportsItsResult(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, func(p *skillsv1.CommandPolicy) {
		p.Spec.Sandbox = &skillsv1.Sandbox{TTLSecondsAfterFinished: ptr.To[int32](0)}
	})
	g.Expect(k8s.Create(ctx, newRun(ns, "zero-ttl", "echo still"))).To(Succeed())
	waitPhase(t, ns, "zero-ttl", skillsv1.PhaseRunning)
	job := &batchv1.Job{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "zero-ttl"), job)).To(Succeed())
	g.Expect(job.Spec.TTLSecondsAfterFinished).To(BeNil(), "the TTL controller could delete the Job before its result is read")

	finishJob(t, ns, "zero-ttl", &runner.Result{Stdout: "still\n"}, false)
	// The run is read before the Job each time: when the Job is first seen
	// gone, the run read a moment before must already hold the result.
	g.Eventually(func(g Gomega) {
		run := &skillsv1.CommandRun{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "zero-ttl"), run)).To(Succeed())
		err := k8s.Get(ctx, keyOf(ns, "zero-ttl"), &batchv1.Job{})
		if apierrors.IsNotFound(err) && run.Status.Phase != skillsv1.PhaseSucceeded {
			StopTrying(fmt.Sprintf("the Job was deleted while the run was %q, before its result was recorded", run.Status.Phase)).Now()
		}
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Job is still there: %v", err)
		g.Expect(run.Status.Result).NotTo(BeNil())
		g.Expect(run.Status.Result.Stdout).To(Equal("still\n"))
	}, timeout, interval).Should(Succeed())

	// The run itself stays, for as long as the history says.
	run := &skillsv1.CommandRun{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "zero-ttl"), run)).To(Succeed())
	g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded))
}

// TestResultArrivesWhenThePodEnds: a command's result is recorded as soon
// as its pod ends, without waiting for the Job controller to mark the Job
// finished (it batches pod updates, up to a second); the Job's end, when it
// comes, changes nothing but lets the Job be retired.
func TestResultArrivesWhenThePodEnds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, func(p *skillsv1.CommandPolicy) {
		p.Spec.Sandbox = &skillsv1.Sandbox{TTLSecondsAfterFinished: ptr.To[int32](0)}
	})
	for _, res := range []*runner.Result{{Stdout: "hi\n"}, {ExitCode: 3, Stderr: "no\n"}} {
		name := fmt.Sprintf("pod-ends-%d", res.ExitCode)
		g.Expect(k8s.Create(ctx, newRun(ns, name, "echo hi"))).To(Succeed())
		waitPhase(t, ns, name, skillsv1.PhaseRunning)
		g.Expect(operator.EndPod(ctx, k8s, ns, name, res)).To(Succeed())

		want := skillsv1.PhaseSucceeded
		if res.ExitCode != 0 {
			want = skillsv1.PhaseFailed
		}
		done := waitPhase(t, ns, name, want)
		g.Expect(done.Status.Result.Stdout).To(Equal(res.Stdout))
		g.Expect(done.Status.Result.Stderr).To(Equal(res.Stderr))
		g.Expect(done.Status.Result.ExitCode).To(Equal(ptr.To(int32(res.ExitCode))))
		job := &batchv1.Job{}
		g.Expect(k8s.Get(ctx, keyOf(ns, name), job)).To(Succeed())
		g.Expect(job.Status.Conditions).To(BeEmpty(), "the stand-in Job controller has not marked the Job yet")

		g.Expect(operatortest.EndJob(ctx, k8s, ns, name, res, false)).To(Succeed())
		g.Eventually(func(g Gomega) {
			err := k8s.Get(ctx, keyOf(ns, name), &batchv1.Job{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the finished Job is not retired: %v", err)
		}, timeout, interval).Should(Succeed())
		run := &skillsv1.CommandRun{}
		g.Expect(k8s.Get(ctx, keyOf(ns, name), run)).To(Succeed())
		g.Expect(run.Status.Phase).To(Equal(want))
		g.Expect(run.Status.Result).To(Equal(done.Status.Result))
	}
}

// TestPodStoppedByAFailingJobWaitsForTheJob: once the Job controller has
// decided the Job fails (its deadline passed) and stops the pod, the
// pod's end is not the command's: the run follows the Job, and says the
// command timed out.
func TestPodStoppedByAFailingJobWaitsForTheJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	startedRun(t, ns, "deadline", "echo slow")
	job := &batchv1.Job{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "deadline"), job)).To(Succeed())
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue,
		Reason: batchv1.JobReasonDeadlineExceeded, LastTransitionTime: now}}
	g.Expect(k8s.Status().Update(ctx, job)).To(Succeed())

	stopped := &runner.Result{ExitCode: 143, Error: "stopped by SIGTERM"}
	g.Expect(operator.EndPod(ctx, k8s, ns, "deadline", stopped)).To(Succeed())
	g.Consistently(func(g Gomega) {
		run := &skillsv1.CommandRun{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "deadline"), run)).To(Succeed())
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseRunning))
	}, 2*time.Second, interval).Should(Succeed())

	g.Expect(operatortest.EndJob(ctx, k8s, ns, "deadline", stopped, true)).To(Succeed())
	done := waitPhase(t, ns, "deadline", skillsv1.PhaseTimedOut)
	g.Expect(done.Status.Result.Stderr).To(BeEmpty())
}

// startError writes the status the kubelet gives a pod whose command
// container the runtime could not start (a kubelet restart during the
// start, say): Failed, the container terminated with reason StartError,
// sandbox.ExitNotStarted and the runtime's error as its message.
func startError(ctx context.Context, pod *corev1.Pod) error {
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: sandbox.ContainerCommand,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: sandbox.ExitNotStarted, Reason: "StartError",
			Message: "failed to create containerd task: failed to create shim task: context canceled", StartedAt: now, FinishedAt: now}},
	}}}
	return k8s.Status().Update(ctx, pod)
}

// jobPod returns the one pod of the run's Job.
func jobPod(g Gomega, ns, run string) *corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8s.List(context.Background(), &pods, client.InNamespace(ns))).To(Succeed())
	job := &jobs(g, ns, run)[0]
	var pod *corev1.Pod
	for i := range pods.Items {
		if metav1.IsControlledBy(&pods.Items[i], job) {
			g.Expect(pod).To(BeNil(), "two pods")
			pod = &pods.Items[i]
		}
	}
	g.Expect(pod).NotTo(BeNil())
	return pod
}

// TestCommandContainerThatNeverStartedHoldsNoResult: a pod whose command
// container the runtime could not start never ran the command, and the
// Job makes another pod for it (sandbox.PodFailurePolicy). Its end is no
// result: the run's result is the next pod's.
func TestCommandContainerThatNeverStartedHoldsNoResult(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	startedRun(t, ns, "second-pod", "echo hi")
	first := jobPod(g, ns, "second-pod")
	g.Expect(startError(ctx, first)).To(Succeed())

	job := &jobs(g, ns, "second-pod")[0]
	noLogs := func(context.Context, string, string, string) ([]byte, error) { return nil, fmt.Errorf("no log") }
	reader := controller.NewPodResultReader(k8s, k8s, noLogs)
	res, err := reader.Ended(ctx, job)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(BeNil(), "a pod whose command container never started gave a result")

	// The Job's second pod runs the command.
	want := &runner.Result{Stdout: "hi\n"}
	_, msg, _, err := runner.Encode(want)
	g.Expect(err).NotTo(HaveOccurred())
	second := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-second", Labels: first.Labels, OwnerReferences: first.OwnerReferences},
		Spec:       *job.Spec.Template.Spec.DeepCopy(),
	}
	g.Expect(k8s.Create(ctx, second)).To(Succeed())
	now := metav1.Now()
	second.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name:  sandbox.ContainerCommand,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: string(msg), StartedAt: now, FinishedAt: now}},
	}}}
	g.Expect(k8s.Status().Update(ctx, second)).To(Succeed())
	res, err = reader.Ended(ctx, job)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).NotTo(BeNil())
	g.Expect(res.Stdout).To(Equal("hi\n"))

	done := waitPhase(t, ns, "second-pod", skillsv1.PhaseSucceeded)
	g.Expect(done.Status.Result.Stdout).To(Equal("hi\n"))
}

// TestCommandContainerThatNeverStartedEndsTheRun: when the Job has given
// up on pods whose command container the runtime could not start, the run
// ends Failed, saying the command did not run, rather than read the
// runtime's error as a result forever.
func TestCommandContainerThatNeverStartedEndsTheRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	startedRun(t, ns, "no-start", "echo hi")
	g.Expect(startError(ctx, jobPod(g, ns, "no-start"))).To(Succeed())
	g.Expect(operatortest.EndJob(ctx, k8s, ns, "no-start", nil, false)).To(Succeed())

	done := waitPhase(t, ns, "no-start", skillsv1.PhaseFailed)
	g.Expect(done.Status.Result.Message).To(Equal("the sandbox pod ended without running the command: its command container never started: " +
		"failed to create containerd task: failed to create shim task: context canceled"))
}

// TestRunSaysWhyItsSandboxCannotStart: while the scheduler finds no node
// for the sandbox pod, or the kubelet cannot pull its image, the run, still
// Running, says so at once: Stalled, with the pod's own reason and message,
// counted once per reason in the metrics.
// Once the pod gets past it, Stalled goes, and the run ends as its command
// does.
func TestRunSaysWhyItsSandboxCannotStart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	startedRun(t, ns, "blocked", "echo hi")
	pod := jobPod(g, ns, "blocked")
	stalled := func(reason, msg string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			run := &skillsv1.CommandRun{}
			g.Expect(k8s.Get(ctx, keyOf(ns, "blocked"), run)).To(Succeed())
			g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseRunning))
			c := condition(run.Status.Conditions, skillsv1.StalledCondition)
			g.Expect(c).NotTo(BeNil(), "no Stalled condition")
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(reason))
			g.Expect(c.Message).To(Equal("The sandbox of Job blocked cannot start the command: " + reason + ": " + msg))
			g.Expect(c.ObservedGeneration).To(Equal(run.Generation))
			g.Expect(runMessage(run)).To(Equal(c.Message))
			g.Expect(condition(run.Status.Conditions, skillsv1.ReconcilingCondition).Status).To(Equal(metav1.ConditionTrue))
		}, timeout, interval).Should(Succeed())
	}

	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
	g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
	stalled("Unschedulable", "0/1 nodes are available: 1 Insufficient cpu.")

	pod.Status = corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: sandbox.ContainerCommand, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ImagePullBackOff", Message: `Back-off pulling image "toolbox:nope"`}}}}}
	g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
	stalled("ImagePullBackOff", `container "command": Back-off pulling image "toolbox:nope"`)
	// Counted once the status that says so is stored, which the test may
	// read first.
	for _, reason := range []string{"Unschedulable", "ImagePullBackOff"} {
		g.Eventually(func(g Gomega) {
			g.Expect(metric(g, "kubeskills_sandbox_start_failures_total", map[string]string{"namespace": ns, "reason": reason})).To(Equal(1.0))
		}, timeout, interval).Should(Succeed(), "the metrics count each reason the sandbox could not start, once")
	}

	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	pod.Status.Phase = corev1.PodRunning
	g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		run := &skillsv1.CommandRun{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "blocked"), run)).To(Succeed())
		g.Expect(condition(run.Status.Conditions, skillsv1.StalledCondition)).To(BeNil())
		g.Expect(runMessage(run)).To(Equal("Running in Job blocked"))
	}, timeout, interval).Should(Succeed())

	g.Expect(operator.EndPod(ctx, k8s, ns, "blocked", &runner.Result{Stdout: "hi\n"})).To(Succeed())
	done := waitPhase(t, ns, "blocked", skillsv1.PhaseSucceeded)
	g.Expect(condition(done.Status.Conditions, skillsv1.StalledCondition)).To(BeNil())
	for _, reason := range []string{"Unschedulable", "ImagePullBackOff"} {
		g.Expect(metric(g, "kubeskills_sandbox_start_failures_total", map[string]string{"namespace": ns, "reason": reason})).To(Equal(1.0),
			"each reason is counted once over the run's life")
	}
}

// TestRunSaysWhyItsJobHasNoPod: when the Job controller cannot create the
// sandbox's pod (a ResourceQuota refuses it), it records a FailedCreate
// Event on the Job, as here; the run, still Running, says so at once.
func TestRunSaysWhyItsJobHasNoPod(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil)
	g.Expect(k8s.Create(ctx, newRun(ns, "quota", "echo hi"))).To(Succeed())
	waitPhase(t, ns, "quota", skillsv1.PhaseRunning)
	job := &jobs(g, ns, "quota")[0]
	const refusal = `Error creating: pods "quota-x7k2p" is forbidden: exceeded quota: sandboxes, requested: pods=1, used: pods=4, limited: pods=4`
	now := metav1.Now()
	g.Expect(k8s.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: "quota.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: ns, Name: job.Name, UID: job.UID},
		Reason:         "FailedCreate", Message: refusal, Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "job-controller"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
	})).To(Succeed())

	g.Eventually(func(g Gomega) {
		run := &skillsv1.CommandRun{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "quota"), run)).To(Succeed())
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseRunning))
		c := condition(run.Status.Conditions, skillsv1.StalledCondition)
		g.Expect(c).NotTo(BeNil(), "no Stalled condition")
		g.Expect(c.Reason).To(Equal("FailedCreate"))
		g.Expect(c.Message).To(Equal("The sandbox of Job quota cannot start the command: FailedCreate: " + refusal))
	}, timeout, interval).Should(Succeed())

	// The quota is raised: the Job controller makes the pod, which runs.
	g.Expect(operator.StartPod(ctx, k8s, ns, "quota")).To(Succeed())
	g.Expect(operator.EndPod(ctx, k8s, ns, "quota", &runner.Result{Stdout: "hi\n"})).To(Succeed())
	done := waitPhase(t, ns, "quota", skillsv1.PhaseSucceeded)
	g.Expect(condition(done.Status.Conditions, skillsv1.StalledCondition)).To(BeNil())
}
