package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// A warm sandbox is a pod started before any command exists: its runner
// ("runner serve") awaits the fence, writes the kubeconfig and then waits
// for exactly one command, which the operator hands it over HTTP on
// runner.HandoffPort. It runs that command as a Job's pod would, answers
// with the result, writes it as its termination message too, and ends.
// The pod is never used twice.
//
// Only the operator can hand a command over: the runner takes one only
// with the secret whose SHA-256 is in its command line
// (--handoff-sha256), and the operator derives each pod's secret from a
// key only it holds. The pod's spec, which anyone who may read pods sees,
// holds the hash alone.
const (
	// LabelWarm on a warm sandbox pod is its shape (WarmShape): pods of
	// one shape are alike but for their names and secrets. A sandbox pod
	// of a run's Job has none.
	LabelWarm = "kubeskills.io/warm"
	// WarmReadyFile is created by the runner once it waits for its
	// command; the pod's startup probe looks for it.
	WarmReadyFile = TmpDir + "/.kubeskills-ready"
	// DefaultIdleTimeout is how long a warm sandbox waits for a command
	// before it ends and the operator starts another.
	DefaultIdleTimeout = 10 * time.Minute
	// warmPortName names the handoff port of the command container.
	warmPortName = "handoff"
	// warmProbePeriodSeconds is how often the kubelet looks for
	// WarmReadyFile until it exists; then it stops looking.
	warmProbePeriodSeconds int32 = 1
)

// WarmParams describes one warm sandbox of an agent. Params gives what a
// Job's sandbox has (Policy, images, APIServer, FenceCheck); Run and Skill
// are nil: the run is not known yet, and a run that serves a skill gets a
// Job.
type WarmParams struct {
	Params
	// Agent owns the pod.
	Agent *skillsv1.Agent
	// Name is the pod's name.
	Name string
	// SecretSHA256 is the hexadecimal SHA-256 of the secret the operator
	// hands the pod its command with.
	SecretSHA256 string
}

// IdleTimeout is how long the agent's warm sandboxes wait for a command.
func IdleTimeout(a *skillsv1.Agent) time.Duration {
	if a.Spec.Sandbox != nil && a.Spec.Sandbox.IdleTimeout != nil && a.Spec.Sandbox.IdleTimeout.Duration > 0 {
		return a.Spec.Sandbox.IdleTimeout.Duration
	}
	return DefaultIdleTimeout
}

// WarmCount is how many warm sandboxes the agent asks for.
func WarmCount(a *skillsv1.Agent) int {
	if a.Spec.Sandbox == nil {
		return 0
	}
	return int(a.Spec.Sandbox.Warm)
}

// WarmPod builds the warm sandbox w describes: a pod controlled by its
// agent, hardened and fenced as a Job's sandbox is, whose runner waits at
// most IdleTimeout for a command that runs at most the policy's timeout.
// Its pod-bound token, when the policy names a ServiceAccount, lives no
// longer than the pod may.
func WarmPod(w WarmParams) *corev1.Pod {
	shape := WarmShape(w)
	pod := warmPod(w)
	pod.Labels[LabelWarm] = shape
	return pod
}

// WarmShape is the hash of everything a warm sandbox is but its name and
// secret: its agent, its policy's generation and sandbox, the images and
// the fence. A warm sandbox whose shape is no longer the agent's is
// replaced.
func WarmShape(w WarmParams) string {
	w.Name, w.SecretSHA256 = "", ""
	pod := warmPod(w)
	data, err := json.Marshal(struct {
		Labels map[string]string
		Spec   corev1.PodSpec
	}{pod.Labels, pod.Spec})
	if err != nil {
		// A pod spec is made of strings, numbers and maps of them.
		panic(fmt.Sprintf("sandbox: cannot encode a warm pod: %v", err))
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:5])
}

// WarmTimeout is the longest command a warm sandbox of policy pol takes:
// the policy's sandbox timeout. A run that asks for less gets less.
func WarmTimeout(pol *skillsv1.CommandPolicy) time.Duration {
	return ResolveTimeout(nil, pol)
}

// warmPod is WarmPod without its shape label.
func warmPod(w WarmParams) *corev1.Pod {
	sb := sandboxOf(w.Policy)
	timeout := WarmTimeout(w.Policy)
	idle := IdleTimeout(w.Agent)
	deadline := ActiveDeadlineSeconds(timeout) + int64(math.Ceil(idle.Seconds()))
	spec := podSpec(w.Params, sb, serveCommand(w, timeout, idle), deadline)
	spec.ActiveDeadlineSeconds = ptr.To(deadline)
	c := &spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: warmPortName, ContainerPort: runner.HandoffPort, Protocol: corev1.ProtocolTCP}}
	ready := []string{RunnerPath, "ready", WarmReadyFile}
	if w.RunnerFromImage {
		ready[0] = RunnerImageRunner
	}
	c.StartupProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: ready}},
		PeriodSeconds: warmProbePeriodSeconds,
		// The runner is ready once its fence holds, which it waits for up
		// to runner.DefaultFenceWait; the pod's deadline ends it after.
		FailureThreshold: int32(deadline),
		TimeoutSeconds:   1,
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      w.Name,
			Namespace: w.Agent.Namespace,
			Labels: map[string]string{
				// Empty until the pod runs a command: the value names no
				// run, and the key has the base fence select the pod.
				LabelCommandRun: "",
				LabelAgent:      w.Agent.Name,
				LabelManagedBy:  ManagedBy,
				LabelFence:      FenceOf(w.Params).Hash,
			},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(w.Agent, skillsv1.GroupVersion.WithKind("Agent")),
			},
		},
		Spec: spec,
	}
}

// serveCommand is the warm sandbox's runner command line.
func serveCommand(w WarmParams, timeout, idle time.Duration) []string {
	return []string{
		RunnerPath, "serve",
		"--handoff-sha256=" + w.SecretSHA256,
		"--policy-generation=" + strconv.FormatInt(policyGeneration(w.Policy), 10),
		"--idle-timeout=" + idle.String(),
		"--max-timeout=" + timeout.String(),
		"--grace=" + RunnerGrace.String(),
		"--result-file=" + ResultFile,
		"--ready-file=" + WarmReadyFile,
		"--listen=:" + strconv.Itoa(runner.HandoffPort),
	}
}

// WarmIngressName is the name of the NetworkPolicy that lets the operator
// reach an agent's warm sandboxes.
func WarmIngressName(agent string) string { return "agent-" + agent + ".warm" }

// WarmIngress builds the one opening the agent's warm sandboxes have
// beyond their fences: TCP runner.HandoffPort from the peers given (the
// operator's pods), and nothing else. The fences allow no ingress at all;
// NetworkPolicies add up.
func WarmIngress(a *skillsv1.Agent, from []networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      WarmIngressName(a.Name),
			Namespace: a.Namespace,
			Labels:    map[string]string{LabelAgent: a.Name, LabelManagedBy: ManagedBy},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(a, skillsv1.GroupVersion.WithKind("Agent")),
			},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{
				MatchLabels: map[string]string{LabelAgent: a.Name, LabelManagedBy: ManagedBy},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: LabelWarm, Operator: metav1.LabelSelectorOpExists},
				},
			},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{
					Protocol: ptr.To(corev1.ProtocolTCP),
					Port:     ptr.To(intstr.FromInt32(runner.HandoffPort)),
				}},
				From: append([]networkingv1.NetworkPolicyPeer(nil), from...),
			}},
		},
	}
}

// Handoff is what the operator hands a warm sandbox to run p.Run: the
// command, the policy snapshot the runner enforces (PolicySnapshot), the
// run's timeout and output cap, and the pins the sandbox checks against
// its own: the policy generation and skill content the run was judged on.
func Handoff(p Params) runner.Handoff {
	return runner.Handoff{
		RunUID:           string(p.Run.UID),
		Command:          p.Run.Spec.Command,
		Policy:           PolicySnapshot(p).Encode(),
		TimeoutMillis:    p.timeout().Milliseconds(),
		OutputLimit:      int64(outputLimit(sandboxOf(p.Policy))),
		PolicyGeneration: policyGeneration(p.Policy),
		SkillHash:        p.SkillHash,
		Spans:            traced(p.Run),
	}
}

// policyGeneration is the generation of pol, 0 for none.
func policyGeneration(pol *skillsv1.CommandPolicy) int64 {
	if pol == nil {
		return 0
	}
	return pol.Generation
}
