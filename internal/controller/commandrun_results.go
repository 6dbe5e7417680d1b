package controller

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// ResultReader reads what the runner reported for a finished Job.
type ResultReader interface {
	// Read returns the result of a finished Job's command. A Job whose pod
	// left no result gives a Result with Error set, not an error; a pod
	// that has not shown its final state yet gives ErrResultPending; other
	// errors are transient and retried.
	Read(ctx context.Context, job *batchv1.Job) (*runner.Result, error)
	// Ended returns the result of a Job that has not finished yet but
	// whose pod has: it ended on its own, not deleted, with the runner's
	// report. nil when there is none yet. The Job controller marks the Job
	// finished up to a second after its pod ended (it batches pod
	// updates); the command's result need not wait for that.
	Ended(ctx context.Context, job *batchv1.Job) (*runner.Result, error)
	// Pod returns the result of one sandbox pod that ended: false when its
	// command container never ran.
	Pod(ctx context.Context, pod *corev1.Pod) (*runner.Result, bool, error)
}

// ErrResultPending says that a finished Job's pod does not show its final
// state yet: the Job's completion can be seen before the kubelet's last
// status write of its pod, so the result is not there to read yet.
var ErrResultPending = errors.New("the Job finished, but its pod does not show its final state yet")

// LogFunc returns a container's log.
type LogFunc func(ctx context.Context, namespace, pod, container string) ([]byte, error)

// How much of a sandbox's log is read for its result: the runner writes
// the result line last, and it encodes at most the output status holds
// (two streams of 256 KiB, compressed), so the last lines and a few MiB
// hold it whatever else the log holds.
const (
	resultLogTailLines = 16
	resultLogMaxBytes  = 4 << 20
)

// PodLogs returns a LogFunc that reads the end of logs with client-go.
func PodLogs(cs kubernetes.Interface) LogFunc {
	return func(ctx context.Context, namespace, pod, container string) ([]byte, error) {
		opts := &corev1.PodLogOptions{Container: container, TailLines: ptr.To[int64](resultLogTailLines), LimitBytes: ptr.To[int64](resultLogMaxBytes)}
		return cs.CoreV1().Pods(namespace).GetLogs(pod, opts).DoRaw(ctx)
	}
}

// PodResultReader reads the result from the sandbox pod: its termination
// message, and its log when the result is larger than a termination message
// holds.
type PodResultReader struct {
	// Pods lists the sandbox pods (a cached client).
	Pods client.Reader
	// Live lists them from the API server, when the cache shows no result:
	// the cache may lag behind the pod's final state.
	Live client.Reader
	// Logs reads a container's log.
	Logs LogFunc
}

// NewPodResultReader returns a reader of the pods in the cache pods, then
// from the API server live, whose logs logs reads.
func NewPodResultReader(pods, live client.Reader, logs LogFunc) *PodResultReader {
	return &PodResultReader{Pods: pods, Live: live, Logs: logs}
}

// Read implements ResultReader. The pods are read from the cache first;
// when it shows no command that ended, from the API server. A pod that
// has not ended gives ErrResultPending; no pod at all, or one that ended
// without running the command, a Result that says so.
func (p *PodResultReader) Read(ctx context.Context, job *batchv1.Job) (*runner.Result, error) {
	pods, err := jobPods(ctx, p.Pods, job)
	if err != nil {
		return nil, err
	}
	if res, ok, err := p.fromPods(ctx, pods); ok || err != nil {
		return res, err
	}
	if pods, err = jobPods(ctx, p.Live, job); err != nil {
		return nil, err
	}
	if res, ok, err := p.fromPods(ctx, pods); ok || err != nil {
		return res, err
	}
	if len(pods) == 0 {
		if _, deadlineExceeded := jobFinished(job); deadlineExceeded {
			return &runner.Result{ExitCode: -1, Error: "the Job's deadline passed before its sandbox pod reported a result, " +
				"and the pod is gone (see the Job's events)"}, nil
		}
		return &runner.Result{ExitCode: -1, Error: "the sandbox pod was deleted before its result was read"}, nil
	}
	for i := range pods {
		if podEnded(&pods[i]) {
			return &runner.Result{ExitCode: -1, Error: neverRan(&pods[i])}, nil
		}
	}
	return nil, ErrResultPending
}

// Ended implements ResultReader, from the cache only: it is asked when a
// pod's end was seen there.
func (p *PodResultReader) Ended(ctx context.Context, job *batchv1.Job) (*runner.Result, error) {
	pods, err := jobPods(ctx, p.Pods, job)
	if err != nil {
		return nil, err
	}
	ended := pods[:0]
	for _, pod := range pods {
		if podEnded(&pod) && pod.DeletionTimestamp.IsZero() {
			ended = append(ended, pod)
		}
	}
	res, _, err := p.fromPods(ctx, ended)
	return res, err
}

// Pod implements ResultReader.
func (p *PodResultReader) Pod(ctx context.Context, pod *corev1.Pod) (*runner.Result, bool, error) {
	return p.fromPods(ctx, []corev1.Pod{*pod})
}

// podEnded tells whether a pod is in a final phase.
func podEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// jobPods lists the pods the Job controls.
func jobPods(ctx context.Context, r client.Reader, job *batchv1.Job) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{sandbox.LabelCommandRun: job.Labels[sandbox.LabelCommandRun]}); err != nil {
		return nil, fmt.Errorf("failed to list pods of Job %s: %w", klog.KObj(job), err)
	}
	pods := list.Items[:0]
	for _, pod := range list.Items {
		if isControlledBy(&pod, job) {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// fromPods reads the result of the first pod whose command container
// ended after it started; false when none did.
func (p *PodResultReader) fromPods(ctx context.Context, pods []corev1.Pod) (*runner.Result, bool, error) {
	for i := range pods {
		pod := &pods[i]
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name != sandbox.ContainerCommand || cs.State.Terminated == nil {
				continue
			}
			term := cs.State.Terminated
			if term.Reason == sandbox.ReasonNotStarted {
				// The runtime could not start the container: the runner never
				// ran, and the message is the runtime's, not a result. The Job
				// makes another pod (sandbox.PodFailurePolicy).
				continue
			}
			if term.Message == "" {
				return &runner.Result{ExitCode: int(term.ExitCode), Error: fmt.Sprintf("the sandbox reported no result (%s)", term.Reason)}, true, nil
			}
			res, err := runner.ReadResult(term.Message, func() ([]byte, error) {
				return p.Logs(ctx, pod.Namespace, pod.Name, sandbox.ContainerCommand)
			})
			if errors.Is(err, runner.ErrNoResult) {
				return &runner.Result{ExitCode: int(term.ExitCode), Error: "the sandbox's result could not be read: " + err.Error()}, true, nil
			}
			return res, err == nil, err
		}
	}
	return nil, false, nil
}

// neverRan says why a pod that ended never ran the command: the init
// container that failed, or the command container the runtime could not
// start, when one did.
func neverRan(pod *corev1.Pod) string {
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("the sandbox pod ended without running the command: init container %q exited %d (%s)", cs.Name, t.ExitCode, t.Reason)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == sandbox.ContainerCommand && t != nil && t.Reason == sandbox.ReasonNotStarted {
			return "the sandbox pod ended without running the command: its command container never started: " + clip(t.Message, 512)
		}
	}
	return "the sandbox pod ended without running the command (see the Job's events)"
}

// retireToken deletes the finished sandbox pods of a run that had an
// identity, once its result is stored and before the run ends. Their
// ServiceAccount token is bound to the pod, so the API server refuses it
// once the pod is gone: a command that printed its token (cat is allowed by
// many read-only policies) hands the agent a dead credential, since the
// agent reads the output only once the run has ended. The pods have ended,
// so nothing is cut short; each is deleted at once.
func (r *CommandRunReconciler) retireToken(ctx context.Context, job *batchv1.Job) error {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{sandbox.LabelCommandRun: job.Labels[sandbox.LabelCommandRun]}); err != nil {
		return fmt.Errorf("failed to list pods of Job %s: %w", klog.KObj(job), err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !isControlledBy(pod, job) {
			continue
		}
		err := r.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete sandbox pod %s, whose token must die before its run ends: %w", klog.KObj(pod), err)
		}
	}
	return nil
}
