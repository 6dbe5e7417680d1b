// Package operatortest runs the kubeskills operator in tests, against the
// real API server of internal/testenv, with stand-ins for only what envtest
// lacks: the Job controller and the kubelet, which a sandbox Job needs to
// finish and to serve its pod's log.
package operatortest

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// Images the operator is given in tests.
const (
	Image        = "example.com/kubeskills:test"
	SandboxImage = "example.com/toolbox:test"
)

// Operator is the operator's manager running against a test API server.
type Operator struct {
	// logs holds the container logs a kubelet would serve, by
	// namespace/pod/container.
	logs sync.Map
	stop func()
}

// Start runs the operator's manager as cmd/manager builds it, with the test
// images, reading sandbox results from the pods FinishJob writes (the logs
// a kubelet would serve are kept here). The
// manager runs as the operator's ServiceAccount, bound by config/rbac
// (installed here unless e already is that identity), never as an admin.
// Zero fields of o get test defaults; metrics and probes are off unless o
// gives their address. The manager logs to stderr only when
// KUBESKILLS_TEST_LOG is set.
func Start(e *testenv.Env, o manager.Options) (*Operator, error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(testLog())))
	op := &Operator{}
	operator := e
	if !e.IsOperator() {
		var err error
		if operator, err = e.InstallOperatorConfig(context.Background(), "rbac"); err != nil {
			return nil, err
		}
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = "0"
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = "0"
	}
	// Tests may run a second manager beside the first, as a restart does.
	o.SkipControllerNameValidation = true
	o.SkillWorkers, o.RunWorkers = max(o.SkillWorkers, 2), max(o.RunWorkers, 2)
	if o.Image == "" {
		o.Image = Image
	}
	if o.SandboxImage == "" {
		o.SandboxImage = SandboxImage
	}
	if o.Namespace == "" {
		// Where the operator is installed (InstallOperatorConfig): its
		// warm sandboxes' handoff key outlives a restart there. The runner
		// is copied, as no kubelet runs a probe here.
		o.Namespace = "kubeskills-system"
		if o.RunnerVolume == "" {
			o.RunnerVolume = controller.RunnerVolumeCopy
		}
	}
	// The manager reads results as in production, from its cache and the
	// API server; only the kubelet's logs are a stand-in.
	if o.Logs == nil {
		o.Logs = op.log
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, operator.Config, o)
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	op.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				fmt.Fprintln(os.Stderr, "the operator stopped with:", err)
			}
		})
	}
	return op, nil
}

// Stop stops the manager and waits for it; once stopped, it does nothing.
func (op *Operator) Stop() { op.stop() }

func (op *Operator) log(_ context.Context, ns, pod, container string) ([]byte, error) {
	if log, ok := op.logs.Load(ns + "/" + pod + "/" + container); ok {
		return log.([]byte), nil
	}
	return nil, fmt.Errorf("no log for %s/%s %s", ns, pod, container)
}

// FinishJob does what the Job controller and the kubelet would for the
// sandbox Job ns/name: a pod of the Job ran, its runner reported res
// (through the termination message, and the log it keeps), and then the
// Job completed, or failed when the exit code is not 0. A nil res is a pod
// that ended without running the command; deadlineExceeded fails the Job on
// its deadline.
func (op *Operator) FinishJob(ctx context.Context, c client.Client, ns, name string, res *runner.Result, deadlineExceeded bool) error {
	if err := op.EndPod(ctx, c, ns, name, res); err != nil {
		return err
	}
	return EndJob(ctx, c, ns, name, res, deadlineExceeded)
}

// EndJob writes the status the Job controller writes once the pod of the
// sandbox Job ns/name ended with res: complete, since the runner exits 0
// once it wrote its result, whatever the command's exit status; failed when
// res is nil (no pod reported) or deadlineExceeded. It writes only the Job: the
// pod's own final state is EndPod's, which the kubelet writes on its own
// schedule, before or after.
func EndJob(ctx context.Context, c client.Client, ns, name string, res *runner.Result, deadlineExceeded bool) error {
	return EndJobAt(ctx, c, ns, name, res, deadlineExceeded, time.Now())
}

// jobTrackingFinalizer is the finalizer the Job controller puts on the
// pods of a Job, and takes off once it has counted their end.
const jobTrackingFinalizer = "batch.kubernetes.io/job-tracking"

// EndJobAt is EndJob with the Job ended at the time at: a Job that ended
// a while ago, whose pod has not shown its final state since. As the Job
// controller does, it first takes its finalizer off the Job's pod.
func EndJobAt(ctx context.Context, c client.Client, ns, name string, res *runner.Result, deadlineExceeded bool, at time.Time) error {
	job := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
		return err
	}
	pod := &corev1.Pod{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName(job)}, pod)
	switch {
	case err == nil && slices.Contains(pod.Finalizers, jobTrackingFinalizer):
		before := pod.DeepCopy()
		pod.Finalizers = slices.DeleteFunc(pod.Finalizers, func(f string) bool { return f == jobTrackingFinalizer })
		if err := c.Patch(ctx, pod, client.MergeFrom(before)); err != nil {
			return err
		}
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	now := metav1.NewTime(at)
	if job.Status.StartTime == nil {
		job.Status.StartTime = &now
	}
	if res != nil && !deadlineExceeded {
		job.Status.Succeeded, job.Status.CompletionTime = 1, &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	} else {
		reason := batchv1.JobReasonBackoffLimitExceeded
		if deadlineExceeded {
			reason = batchv1.JobReasonDeadlineExceeded
		}
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: now},
		}
	}
	return c.Status().Update(ctx, job)
}

// StartPod creates the pod of the sandbox Job ns/name as the Job
// controller would, with the status the kubelet writes once the command
// runs: Running, its command container started.
func (op *Operator) StartPod(ctx context.Context, c client.Client, ns, name string) error {
	_, err := op.pod(ctx, c, ns, name)
	return err
}

// EndPod writes the final state of the pod of the sandbox Job ns/name, as
// the kubelet would once the runner reported res (creating the pod first if
// StartPod did not): its command container terminated with res in its
// termination message, and res in its log. A nil res is a pod that ended
// without running the command: its first init container failed.
func (op *Operator) EndPod(ctx context.Context, c client.Client, ns, name string, res *runner.Result) error {
	pod, err := op.pod(ctx, c, ns, name)
	if err != nil {
		return err
	}
	now := metav1.Now()
	if res == nil {
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodFailed,
			InitContainerStatuses: []corev1.ContainerStatus{{
				Name:  sandbox.ContainerInstallRunner,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: now, FinishedAt: now}},
			}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name:  sandbox.ContainerCommand,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}},
			}},
		}
		return c.Status().Update(ctx, pod)
	}
	logLine, msg, _, err := runner.Encode(res)
	if err != nil {
		return err
	}
	op.logs.Store(pod.Namespace+"/"+pod.Name+"/"+sandbox.ContainerCommand, logLine)
	// The runner exits 0 once it wrote the result, whatever the command's
	// exit status, which the result holds.
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name: sandbox.ContainerCommand,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Completed", Message: string(msg), StartedAt: now, FinishedAt: now,
		}},
	}}}
	return c.Status().Update(ctx, pod)
}

// pod returns the pod of the sandbox Job ns/name, creating it, running its
// command, when it does not exist yet.
func (op *Operator) pod(ctx context.Context, c client.Client, ns, name string) (*corev1.Pod, error) {
	job := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName(job)}, pod)
	if !apierrors.IsNotFound(err) {
		return pod, err
	}
	pod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: podName(job), Labels: job.Spec.Template.Labels,
			// The Job controller's: a deleted pod stays until the
			// controller has counted it (EndJob).
			Finalizers:      []string{jobTrackingFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	if err := c.Create(ctx, pod); err != nil {
		return nil, err
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, ContainerStatuses: []corev1.ContainerStatus{{
		Name: sandbox.ContainerCommand, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// podName is the name the Job controller gives the Job's pod.
func podName(job *batchv1.Job) string { return job.Name + "-x7k2p" }

// testLog keeps the manager quiet unless KUBESKILLS_TEST_LOG is set.
func testLog() io.Writer {
	if os.Getenv("KUBESKILLS_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// ServedShards reads back the ConfigMaps that serve the Skill ns/name and
// their content, shard 0 first.
func ServedShards(ctx context.Context, c client.Reader, ns, name string) ([]corev1.ConfigMap, []skill.Shard, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{skillsv1.LabelSkill: name}); err != nil {
		return nil, nil, err
	}
	shard := func(cm corev1.ConfigMap) int {
		i, _ := strconv.Atoi(cm.Labels[controller.LabelShard])
		return i
	}
	sort.Slice(list.Items, func(i, j int) bool { return shard(list.Items[i]) < shard(list.Items[j]) })
	shards := make([]skill.Shard, len(list.Items))
	for i, cm := range list.Items {
		shards[i] = skill.Shard{Data: cm.Data, BinaryData: cm.BinaryData}
	}
	return list.Items, shards, nil
}
