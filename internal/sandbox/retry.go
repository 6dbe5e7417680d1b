package sandbox

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// ExitNotStarted is the exit code the container runtime gives a container
// it could not start (reason StartError): containerd's, when a kubelet
// restart cancels the start, say. The runner in a sandbox never exits with
// it (it exits 0 once it wrote its result and 125 when it could not), so a
// command container that ended with it never ran the runner.
const ExitNotStarted int32 = 128

// ReasonNotStarted is the reason the kubelet gives such a container, with
// the runtime's error as its termination message, not a result.
const ReasonNotStarted = "StartError"

// StartRetries is how many more pods a sandbox Job makes after pods that
// failed before their command could start: one. Its backoffLimit, and
// its podFailurePolicy (see PodFailurePolicy) counts only those failures;
// every other failure fails the Job at once. A kubelet restart, say,
// while an init container starts, loses that pod, and the pod the Job
// then makes runs the command.
const StartRetries int32 = 1

// PodFailurePolicy is the podFailurePolicy of a sandbox Job whose pod has
// the given spec. The Job controller matches a failed pod against its
// rules in order, and the first that matches decides:
//
//  1. The command container ended with ExitNotStarted: the runtime could
//     not start it, so the command never ran, and the failure counts
//     toward backoffLimit.
//  2. The command container ended with any other exit code but 0: the
//     Job fails. The runner failed, or was killed, while the command may
//     have run, or be half done.
//  3. One per init container ("install-runner", "unpack-skill"): it ended
//     with an exit code other than 0, and the failure counts toward
//     backoffLimit (StartRetries), which lets the Job make one more pod.
//     Init containers run, in order, to a successful end before the
//     kubelet starts the command container; one that failed proves that
//     the command never started in this pod. This is also how the kubelet
//     reports a pod it lost while starting it: when a kubelet restart, an
//     eviction or a deletion ends a pod before it was initialized, the
//     kubelet marks the init container it had not seen end (the first,
//     when none had started) terminated with exit code 137
//     (ContainerStatusUnknown), and the command container stays waiting.
//  4. The pod was placed on a node (PodScheduled), a kubelet ran it
//     (Ready) or it was disrupted (DisruptionTarget: preempted, evicted,
//     its node drained, tainted or gone): the Job fails. Such a pod may
//     have run the command, although no exit code says so: the status of
//     a pod on a lost node still shows it running, and a pod that a
//     kubelet refused at admission shows nothing. Without this rule the
//     failure would count toward backoffLimit and could run the command
//     a second time.
//
// So only a pod that matches no rule, one the scheduler never placed,
// counts toward backoffLimit besides the failures to start a container:
// it never reached a node, let alone ran the command. The command's own
// exit status is in the runner's result, never the container's exit code,
// which is why ExitNotStarted can tell; the runtime's code for a container
// it lost (137) is also a kill's, and fails the Job.
//
// The Job also replaces a pod only once it has ended (podReplacementPolicy
// Failed, the only one the API server allows with a podFailurePolicy): a
// pod being stopped never runs beside its replacement.
func PodFailurePolicy(spec corev1.PodSpec) *batchv1.PodFailurePolicy {
	rules := []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionCount,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(ContainerCommand),
			Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
			Values:        []int32{ExitNotStarted},
		},
	}, {
		Action:      batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: failedExit(ContainerCommand),
	}}
	for _, c := range spec.InitContainers {
		rules = append(rules, batchv1.PodFailurePolicyRule{
			Action:      batchv1.PodFailurePolicyActionCount,
			OnExitCodes: failedExit(c.Name),
		})
	}
	var placed []batchv1.PodFailurePolicyOnPodConditionsPattern
	for _, cond := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReady} {
		for _, status := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown} {
			placed = append(placed, batchv1.PodFailurePolicyOnPodConditionsPattern{Type: cond, Status: status})
		}
	}
	placed = append(placed, batchv1.PodFailurePolicyOnPodConditionsPattern{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})
	rules = append(rules, batchv1.PodFailurePolicyRule{
		Action:          batchv1.PodFailurePolicyActionFailJob,
		OnPodConditions: placed,
	})
	return &batchv1.PodFailurePolicy{Rules: rules}
}

// failedExit matches a container that ended with any exit code but 0.
func failedExit(container string) *batchv1.PodFailurePolicyOnExitCodesRequirement {
	return &batchv1.PodFailurePolicyOnExitCodesRequirement{
		ContainerName: ptr.To(container),
		Operator:      batchv1.PodFailurePolicyOnExitCodesOpNotIn,
		Values:        []int32{0},
	}
}
