package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// startBlock is what keeps a sandbox from starting its command: the
// reason and message the scheduler or the kubelet wrote on its pod.
type startBlock struct {
	Reason  string
	Message string
}

// blockingWaits are the reasons the kubelet gives a container it waits to
// start, on which it can make no progress by itself: an image it cannot
// pull, a Secret or ConfigMap the container names that is missing, a
// container the runtime refuses. ContainerCreating and PodInitializing
// are progress, and a sandbox never restarts its containers.
var blockingWaits = []string{
	"ErrImagePull", "ImagePullBackOff", "ImageInspectError", "ErrImageNeverPull", "RegistryUnavailable", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "PreCreateHookError", "PreStartHookError",
}

// podStartBlock says what keeps a sandbox pod from starting its command:
// the scheduler found no node for it, or the kubelet waits on one of its
// containers for a reason in blockingWaits. nil when nothing does, and for
// a pod that has ended or is being deleted.
func podStartBlock(pod *corev1.Pod) *startBlock {
	if podEnded(pod) || !pod.DeletionTimestamp.IsZero() {
		return nil
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &startBlock{Reason: c.Reason, Message: c.Message}
		}
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && slices.Contains(blockingWaits, w.Reason) {
			return &startBlock{Reason: w.Reason, Message: fmt.Sprintf("container %q: %s", cs.Name, w.Message)}
		}
	}
	return nil
}

// sameStartBlock tells whether two pods are blocked alike, or both not.
func sameStartBlock(a, b *corev1.Pod) bool {
	x, y := podStartBlock(a), podStartBlock(b)
	return x == nil && y == nil || x != nil && y != nil && *x == *y
}

// reasonFailedCreate is the reason of the Event the Job controller records
// on a Job whose pod it could not create: a ResourceQuota, a LimitRange or
// an admission webhook refused it.
const reasonFailedCreate = "FailedCreate"

// FailedCreateEvents selects the Events the operator caches: the Job
// controller's FailedCreate on a Job, and nothing else.
func FailedCreateEvents() fields.Selector {
	return fields.SelectorFromSet(fields.Set{"involvedObject.kind": "Job", "reason": reasonFailedCreate})
}

// jobStartBlock says what keeps the running Job's sandbox from starting
// its command: what its pods in the cache show, or, while it has none, the
// latest FailedCreate Event of the Job controller on it. nil when nothing
// does.
func (r *CommandRunReconciler) jobStartBlock(ctx context.Context, job *batchv1.Job) (*startBlock, error) {
	pods, err := jobPods(ctx, r.Client, job)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if b := podStartBlock(&pods[i]); b != nil {
			return b, nil
		}
	}
	if len(pods) > 0 {
		return nil, nil
	}
	var events corev1.EventList
	if err := r.List(ctx, &events, client.InNamespace(job.Namespace)); err != nil {
		return nil, fmt.Errorf("failed to list the Events of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	var latest *corev1.Event
	for i := range events.Items {
		ev := &events.Items[i]
		if ev.InvolvedObject.UID == job.UID && ev.Reason == reasonFailedCreate && (latest == nil || eventTime(ev).After(eventTime(latest))) {
			latest = ev
		}
	}
	if latest == nil {
		return nil, nil
	}
	return &startBlock{Reason: latest.Reason, Message: latest.Message}, nil
}

// eventTime is when an Event last happened.
func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}
