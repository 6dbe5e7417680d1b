package sandbox

import (
	"fmt"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// checkRetries says what in a Job's retries could run its command twice:
// only a failed init container, or a command container that never started
// (ExitNotStarted), may be counted toward a backoffLimit of StartRetries,
// nothing is ignored (which would replace pods without bound), a command
// container that ended otherwise fails the Job right after, and a pod that
// reached a node fails it last.
func checkRetries(j *batchv1.Job) string {
	if msg := wantInt32(j.Spec.BackoffLimit, StartRetries); msg != "" {
		return "backoffLimit: " + msg
	}
	pfp := j.Spec.PodFailurePolicy
	if pfp == nil || len(pfp.Rules) < 2 {
		return fmt.Sprintf("podFailurePolicy = %+v: every failure but a start's would count toward backoffLimit", pfp)
	}
	if len(pfp.Rules) < 3 {
		return fmt.Sprintf("podFailurePolicy = %+v: a command container that ended must fail the Job", pfp)
	}
	notStarted, ended, last := pfp.Rules[0], pfp.Rules[1], pfp.Rules[len(pfp.Rules)-1]
	if notStarted.Action != batchv1.PodFailurePolicyActionCount || notStarted.OnExitCodes == nil ||
		ptr.Deref(notStarted.OnExitCodes.ContainerName, "") != ContainerCommand ||
		notStarted.OnExitCodes.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn || !slices.Equal(notStarted.OnExitCodes.Values, []int32{ExitNotStarted}) {
		return fmt.Sprintf("first rule %+v: only a command container that never started may be counted", notStarted)
	}
	if ended.Action != batchv1.PodFailurePolicyActionFailJob || ended.OnExitCodes == nil ||
		ptr.Deref(ended.OnExitCodes.ContainerName, "") != ContainerCommand || !anyFailure(ended.OnExitCodes) {
		return fmt.Sprintf("second rule %+v: a command container that ended must fail the Job", ended)
	}
	if last.Action != batchv1.PodFailurePolicyActionFailJob ||
		!slices.Contains(last.OnPodConditions, batchv1.PodFailurePolicyOnPodConditionsPattern{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}) ||
		!slices.Contains(last.OnPodConditions, batchv1.PodFailurePolicyOnPodConditionsPattern{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}) {
		return fmt.Sprintf("last rule %+v: a pod that reached a node must fail the Job", last)
	}
	var counted []string
	for i, r := range pfp.Rules {
		switch r.Action {
		case batchv1.PodFailurePolicyActionFailJob:
		case batchv1.PodFailurePolicyActionCount:
			name := ""
			if r.OnExitCodes != nil {
				name = ptr.Deref(r.OnExitCodes.ContainerName, "")
			}
			if i == 0 {
				continue
			}
			if !slices.ContainsFunc(j.Spec.Template.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == name }) {
				return fmt.Sprintf("rule %d %+v counts a failure that is not an init container's", i, r)
			}
			counted = append(counted, name)
		default:
			return fmt.Sprintf("rule %d %+v: only FailJob and Count are bounded by backoffLimit", i, r)
		}
	}
	if len(counted) != len(j.Spec.Template.Spec.InitContainers) {
		return fmt.Sprintf("failures counted of %q, want every init container's", counted)
	}
	return ""
}

// anyFailure tells whether an exit code requirement matches every exit
// code but 0.
func anyFailure(r *batchv1.PodFailurePolicyOnExitCodesRequirement) bool {
	return r.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && slices.Equal(r.Values, []int32{0})
}

// outcome is what the Job controller does after a pod failed.
type outcome string

const (
	newPod  outcome = "makes a new pod"
	failJob outcome = "fails the Job"
)

// afterFailures replays failed pods, one after the other, against a Job's
// podFailurePolicy and backoffLimit, as the Job controller does
// (pkg/controller/job/pod_failure_policy.go of Kubernetes): the first rule
// that matches decides; exit code rules look at the terminated containers,
// then init containers, whose exit code is not 0; a failure that matches
// no rule is counted. The Job fails once a FailJob rule matches or the
// counted failures exceed backoffLimit.
func afterFailures(job *batchv1.Job, pods ...*corev1.Pod) outcome {
	failed := int32(0)
	for _, pod := range pods {
		action := batchv1.PodFailurePolicyActionCount
		for _, r := range job.Spec.PodFailurePolicy.Rules {
			if matchesExit(r.OnExitCodes, pod.Status.ContainerStatuses) || matchesExit(r.OnExitCodes, pod.Status.InitContainerStatuses) ||
				matchesCondition(r.OnPodConditions, pod.Status.Conditions) {
				action = r.Action
				break
			}
		}
		switch action {
		case batchv1.PodFailurePolicyActionFailJob:
			return failJob
		case batchv1.PodFailurePolicyActionCount:
			failed++
		}
		if failed > *job.Spec.BackoffLimit {
			return failJob
		}
	}
	return newPod
}

func matchesExit(r *batchv1.PodFailurePolicyOnExitCodesRequirement, statuses []corev1.ContainerStatus) bool {
	if r == nil {
		return false
	}
	for _, s := range statuses {
		t := s.State.Terminated
		if t == nil || t.ExitCode == 0 || r.ContainerName != nil && *r.ContainerName != s.Name {
			continue
		}
		if slices.Contains(r.Values, t.ExitCode) == (r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) {
			return true
		}
	}
	return false
}

func matchesCondition(patterns []batchv1.PodFailurePolicyOnPodConditionsPattern, conds []corev1.PodCondition) bool {
	for _, c := range conds {
		for _, p := range patterns {
			if c.Type == p.Type && c.Status == p.Status {
				return true
			}
		}
	}
	return false
}

// Container states of failed pods, as the kubelet reports them.
var (
	waiting   = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	running   = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	completed = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	// lost is a container the kubelet could not find when the pod ended,
	// after a restart, say.
	lost = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown"}}
)

func exited(code int32, reason string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}
}

// failedPod is a failed sandbox pod with the given states of its init
// containers, in order, and of its command container, and the given
// conditions (type=status) besides those the kubelet sets on every pod
// it ran.
func failedPod(inits []corev1.ContainerState, command corev1.ContainerState, conds ...corev1.PodCondition) *corev1.Pod {
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: conds}}
	for i, st := range inits {
		name := []string{ContainerInstallRunner, ContainerUnpackSkill}[i]
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{Name: name, State: st})
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerCommand, State: command}}
	return pod
}

// ranOnANode are the conditions of a pod a kubelet ran.
var ranOnANode = []corev1.PodCondition{
	{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	{Type: corev1.PodInitialized, Status: corev1.ConditionFalse},
	{Type: corev1.PodReady, Status: corev1.ConditionFalse},
	{Type: corev1.ContainersReady, Status: corev1.ConditionFalse},
}

func withCondition(t corev1.PodConditionType) []corev1.PodCondition {
	return append(slices.Clone(ranOnANode), corev1.PodCondition{Type: t, Status: corev1.ConditionTrue})
}

// TestJobRetriesOnlyPodsThatNeverStartedTheCommand replays failed pods
// against the sandbox Job: a pod whose init container failed, which never
// started the command, is replaced, once; any pod that may have started
// it fails the Job at once.
func TestJobRetriesOnlyPodsThatNeverStartedTheCommand(t *testing.T) {
	params := Params{Run: testRun(), Policy: testPolicy(), Skill: testSkill("skill-pdf-tools"),
		RunnerImage: testRunnerImage, DefaultImage: testDefaultImage}
	job := Job(params)
	cases := []struct {
		name string
		pods []*corev1.Pod
		want outcome
	}{
		{name: "the kubelet restarted while install-runner started",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{lost, waiting}, waiting, ranOnANode...)}, want: newPod},
		{name: "the kubelet restarted while unpack-skill ran",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, lost}, waiting, ranOnANode...)}, want: newPod},
		{name: "unpack-skill refused the shards",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, exited(125, "Error")}, waiting, ranOnANode...)}, want: newPod},
		{name: "preempted before the command started",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{lost, waiting}, waiting, withCondition(corev1.DisruptionTarget)...)},
			want: newPod},
		{name: "the replacement failed to start too",
			pods: []*corev1.Pod{
				failedPod([]corev1.ContainerState{lost, waiting}, waiting, ranOnANode...),
				failedPod([]corev1.ContainerState{lost, waiting}, waiting, ranOnANode...),
			}, want: failJob},
		{name: "the replacement ran the command, which failed",
			pods: []*corev1.Pod{
				failedPod([]corev1.ContainerState{lost, waiting}, waiting, ranOnANode...),
				failedPod([]corev1.ContainerState{completed, completed}, exited(1, "Error"), ranOnANode...),
			}, want: failJob},
		{name: "the command failed",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, completed}, exited(1, "Error"), ranOnANode...)}, want: failJob},
		{name: "the command was killed for memory",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, completed}, exited(137, "OOMKilled"), ranOnANode...)}, want: failJob},
		// The runner exits 0 once it wrote the command's result, so the
		// runtime's code for a container it could not start is never the
		// runner's.
		{name: "the command container could not start",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, completed}, exited(ExitNotStarted, "StartError"), ranOnANode...)}, want: newPod},
		{name: "the command container could not start, twice",
			pods: []*corev1.Pod{
				failedPod([]corev1.ContainerState{completed, completed}, exited(ExitNotStarted, "StartError"), ranOnANode...),
				failedPod([]corev1.ContainerState{completed, completed}, exited(ExitNotStarted, "StartError"), ranOnANode...),
			}, want: failJob},
		{name: "the runner could not write its result",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, completed}, exited(125, "Error"), ranOnANode...)}, want: failJob},
		{name: "the kubelet lost the running command",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, completed}, lost, ranOnANode...)}, want: failJob},
		{name: "preempted while the command ran",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, completed}, exited(143, "Error"), withCondition(corev1.DisruptionTarget)...)},
			want: failJob},
		// PodGC fails the pods of a node that is gone: their last status
		// shows the command running, no exit code.
		{name: "its node is gone",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, completed}, running, withCondition(corev1.DisruptionTarget)...)},
			want: failJob},
		// PodGC fails a terminating pod of an out-of-service node without
		// a condition of its own.
		{name: "deleted on a node out of service",
			pods: []*corev1.Pod{failedPod([]corev1.ContainerState{completed, completed}, running, ranOnANode...)}, want: failJob},
		{name: "refused by the kubelet at admission",
			pods: []*corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "UnexpectedAdmissionError",
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}}, want: failJob},
		// PodGC fails a pod deleted before the scheduler saw it: it never
		// reached a node.
		{name: "deleted before it was scheduled",
			pods: []*corev1.Pod{{Status: corev1.PodStatus{Phase: corev1.PodFailed}}}, want: newPod},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := afterFailures(job, tc.pods...); got != tc.want {
				t.Errorf("the Job controller %s, want it %s", got, tc.want)
			}
		})
	}
}

// TestJobWithoutInitContainersNeverRetriesAStartedPod: when the runner
// comes from an image volume and the skill from an image, the pod has no
// init container. A pod that reached a node is replaced only when the
// runtime could not start its command container; every other failure
// fails the Job.
func TestJobWithoutInitContainersNeverRetriesAStartedPod(t *testing.T) {
	job := Job(Params{Run: testRun(), Policy: testPolicy(), Skill: testBundledSkill("IfNotPresent"), RunnerFromImage: true,
		RunnerImage: testRunnerImage, DefaultImage: testDefaultImage})
	if n := len(job.Spec.Template.Spec.InitContainers); n != 0 {
		t.Fatalf("%d init containers", n)
	}
	for _, pod := range []*corev1.Pod{
		failedPod(nil, lost, ranOnANode...),
		failedPod(nil, waiting, withCondition(corev1.DisruptionTarget)...),
		failedPod(nil, exited(143, "Error"), ranOnANode...),
	} {
		if got := afterFailures(job, pod); got != failJob {
			t.Errorf("after a pod with command %+v, the Job controller %s", pod.Status.ContainerStatuses[0].State, got)
		}
	}
	if got := afterFailures(job, failedPod(nil, exited(ExitNotStarted, "StartError"), ranOnANode...)); got != newPod {
		t.Errorf("after a pod whose command container never started, the Job controller %s, want it %s", got, newPod)
	}
}
