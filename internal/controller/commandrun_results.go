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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// ResultReader reads what the runner reported for a finished Job.
type ResultReader interface {
	// Read returns the result of a finished Job's command. A Job whose pod
	// left no result gives a Result with Error set, not an error; errors are
	// transient and retried.
	Read(ctx context.Context, job *batchv1.Job) (*runner.Result, error)
}

// LogFunc returns a container's log.
type LogFunc func(ctx context.Context, namespace, pod, container string) ([]byte, error)

// PodResultReader reads the result from the sandbox pod: its termination
// message, and its log when the result is larger than a termination message
// holds.
type PodResultReader struct {
	// Pods lists the sandbox pods (a cached client).
	Pods client.Reader
	// Logs reads a container's log.
	Logs LogFunc
}

// NewPodResultReader returns a reader that fetches logs with client-go.
func NewPodResultReader(pods client.Reader, cs kubernetes.Interface) *PodResultReader {
	return &PodResultReader{Pods: pods, Logs: func(ctx context.Context, namespace, pod, container string) ([]byte, error) {
		return cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	}}
}

// Read implements ResultReader.
func (p *PodResultReader) Read(ctx context.Context, job *batchv1.Job) (*runner.Result, error) {
	var pods corev1.PodList
	if err := p.Pods.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{sandbox.LabelCommandRun: job.Labels[sandbox.LabelCommandRun]}); err != nil {
		return nil, fmt.Errorf("failed to list pods of Job %s: %w", klog.KObj(job), err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !isControlledBy(pod, job) {
			continue
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name != sandbox.ContainerCommand || cs.State.Terminated == nil {
				continue
			}
			term := cs.State.Terminated
			if term.Message == "" {
				return &runner.Result{ExitCode: int(term.ExitCode), Error: fmt.Sprintf("the sandbox reported no result (%s)", term.Reason)}, nil
			}
			res, err := runner.ReadResult(term.Message, func() ([]byte, error) {
				return p.Logs(ctx, pod.Namespace, pod.Name, sandbox.ContainerCommand)
			})
			if errors.Is(err, runner.ErrNoResult) {
				return &runner.Result{ExitCode: int(term.ExitCode), Error: "the sandbox's result could not be read: " + err.Error()}, nil
			}
			return res, err
		}
	}
	return &runner.Result{ExitCode: -1, Error: "the sandbox pod ended without running the command (see the Job's events)"}, nil
}

// retireToken deletes the finished sandbox pods of a run that had an
// identity, before its result is recorded. Their ServiceAccount token is
// bound to the pod, so the API server refuses it once the pod is gone: a
// command that printed its token (cat is allowed by many read-only
// policies) hands the agent a dead credential, since the agent sees the
// output only in the recorded result. The pods have ended, so nothing is
// cut short; each is deleted at once, and only the pod that was read.
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
			return fmt.Errorf("failed to delete sandbox pod %s, whose token must die before its result is recorded: %w", klog.KObj(pod), err)
		}
	}
	return nil
}
