package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodStartBlock(t *testing.T) {
	waiting := func(reason, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "command", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
	}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu."}
	cases := []struct {
		name string
		pod  corev1.PodStatus
		want *startBlock
	}{
		{name: "just created", pod: corev1.PodStatus{Phase: corev1.PodPending}},
		{name: "no node fits", pod: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable}},
			want: &startBlock{Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}},
		{name: "scheduled", pod: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}},
		{name: "pulling", pod: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting("ContainerCreating", "")}}},
		{name: "image not found", pod: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{waiting("ImagePullBackOff", `Back-off pulling image "toolbox:nope"`)}},
			want: &startBlock{Reason: "ImagePullBackOff", Message: `container "command": Back-off pulling image "toolbox:nope"`}},
		{name: "init container's image", pod: corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "install-runner",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}},
			want: &startBlock{Reason: "ErrImagePull", Message: `container "install-runner": not found`}},
		{name: "missing Secret", pod: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{waiting("CreateContainerConfigError", `secret "db" not found`)}},
			want: &startBlock{Reason: "CreateContainerConfigError", Message: `container "command": secret "db" not found`}},
		{name: "ended", pod: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{unschedulable}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := podStartBlock(&corev1.Pod{Status: tc.pod})
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("podStartBlock = %+v, want %+v", got, tc.want)
			}
		})
	}
	deleted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.Now())},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable}}}
	if got := podStartBlock(deleted); got != nil {
		t.Errorf("a pod being deleted is blocked: %+v", got)
	}
}
