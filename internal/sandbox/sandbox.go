// Package sandbox builds the objects that run one CommandRun: a hardened
// Job, and the NetworkPolicies of its agent that fence its pod. The builders are pure: no
// client, no I/O, the same object for the same input, so the controller
// creates them once and tests compare them field by field.
//
// # The Job
//
// The pod satisfies the Pod Security "restricted" profile: it runs as user
// and group 65532 with runAsNonRoot, the RuntimeDefault seccomp profile,
// automountServiceAccountToken false and no service links; every container has a
// read-only root filesystem, no privilege escalation and every capability
// dropped. The pod runs once (restartPolicy Never). The Job makes a
// second pod only when the first failed before its command could start,
// an init container having failed (a kubelet restart while the pod
// starts, say), and fails at once on any other failure, so a command
// never runs twice (StartRetries, PodFailurePolicy). The Job has a
// deadline (see ActiveDeadlineSeconds) and is deleted by the operator
// ttlSecondsAfterFinished after the run's result is recorded (see
// AnnotationTTLSecondsAfterFinished); it is owned by its CommandRun.
//
// Volumes and containers, in order:
//
//   - volume "runner", an emptyDir: the init container "install-runner"
//     (the operator image) copies the runner into it with
//     `runner install /kubeskills/bin/runner`; the main container mounts it
//     read-only at /kubeskills/bin. With Params.RunnerFromImage it is
//     instead an image volume of the operator image, which the main
//     container mounts read-only at /kubeskills/image and whose runner,
//     /kubeskills/image/usr/local/bin/runner, it runs; there is no
//     "install-runner": nothing is copied.
//   - volume "tmp", an emptyDir mounted at /tmp in the main container: the
//     only place a command can write. It is also HOME, TMPDIR and the
//     working directory.
//   - when the run serves a skill, volume "skill", an emptyDir, and one
//     ConfigMap volume per shard of the skill ("skill-shard-0", ...),
//     mounted read-only at /kubeskills/shards/0, ... in the init container
//     "unpack-skill" (the operator image), which runs
//     `runner unpack-skill --to /skill /kubeskills/shards/0 ...` and lays
//     out SKILL.md and the bundled files, gzip-encoded ones decoded and
//     scripts executable. The main container mounts "skill" read-only at
//     /skill and finds it in $SKILL_DIR. The ConfigMaps are mounted only in
//     the init container.
//   - when the run's skill is bundled (spec.bundle.image), volume "skill" is
//     instead an image volume of that image, with spec.bundle.pullPolicy
//     (left for the API server to default when empty), and the pod has
//     neither shard volumes nor "unpack-skill". The main container mounts
//     it read-only at /skill, as above, so the image's files, laid out as
//     the skill folder, are at the same relative paths, with the modes the
//     image gives them. SKILL.md comes from the Skill object, not the
//     image: it is in /skill only if the image holds a copy, and commands
//     must not rely on it. Image volumes are read-only by nature, are never
//     in an init container and hold no Secret.
//
// The main container "command" runs in the policy's toolbox image:
//
//	/kubeskills/bin/runner run --timeout=T --grace=5s --output-limit=N \
//	    --result-file=/dev/termination-log --policy=JSON -- COMMAND
//
// and is the only container that sees the Secrets the policy names
// (envFrom), so neither the agent nor the operator image's init containers
// ever hold them. --policy carries the policy that judged the run
// (PolicySnapshot): the runner interprets the command itself, with the
// judge's parser, and judges the line, every simple command's expanded argv
// and every redirection against it again as they run. The image needs no
// shell of its own; /bin/sh is never used to read the command.
//
// Linux starts no program with an argument longer than 128 KiB, and the
// rules of a CommandPolicy may be twice that: a policy whose JSON is
// longer than runner.PolicyPartBytes (64 KiB) is given as several --policy
// flags, its JSON cut in pieces, in order, which the runner joins before
// it reads them (runner.PolicyArgs). A smaller one is one flag. Every
// piece is in the pod's command, which nobody changes once the Job exists.
//
// # The identity
//
// Without spec.sandbox.serviceAccountName the pod names no ServiceAccount
// and no container holds any token. With one, the pod runs as that
// ServiceAccount (of the policy's namespace, chosen by whoever wrote the
// policy, never by the agent), automounting stays off, and:
//
//   - volume "kube-api-access", projected: a token of the ServiceAccount
//     bound to the pod (the API server refuses it once the pod is gone),
//     living TokenExpirationSeconds (the Job's deadline plus TokenMargin, at
//     least 600 s, never 3607 s, which the API server would extend to a
//     year; the kubelet renews it at 80% of that), the cluster's CA bundle
//     from the ConfigMap kube-root-ca.crt and the pod's namespace, as
//     token, ca.crt and namespace;
//   - the command container, and no init container, mounts it read-only at
//     ServiceAccountDir, the standard in-cluster path, so client-go and
//     kubectl find it;
//   - the command container has KUBECONFIG=KubeconfigPath and the runner
//     --kubeconfig=KubeconfigPath: before the command runs, the runner
//     writes there a kubeconfig for the identity (the API server at
//     $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, the mounted
//     ca.crt, tokenFile pointing at the mounted token so renewals are
//     read, the mounted namespace), for scripts that read the current
//     context.
//
// # The NetworkPolicies
//
// An agent's sandboxes are fenced by NetworkPolicies of the agent, made
// with it and shared by its runs, so that no network object is made on a
// command's way to its Job. The base fence (BaseFence) selects every
// sandbox pod of the agent and allows nothing. A fence (FenceOf) selects
// the pods labelled with its hash (LabelFence) and allows no ingress;
// egress is denied but for: with an identity, the API server's addresses
// (Params.APIServer, read by APIServerEndpoints from the EndpointSlices of
// the kubernetes Service) on their port, each address alone (/32, /128);
// the CIDRs of the policy's sandbox.egress (optionally only on some TCP
// ports); and, with egress dns, port 53 of the cluster DNS pods in
// kube-system. A sandbox without identity and egress reaches nothing. Both
// must exist before the Job, so the pod never runs unfenced; a policy
// whose egress changes makes a new fence, and the old one stays while a
// pod it selects runs (FenceFinalizer).
package sandbox

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// Labels on the Job, its pod and the fences.
const (
	// LabelCommandRun holds the name of the CommandRun; the base fence
	// selects the agent's sandbox pods by it.
	LabelCommandRun = "kubeskills.io/commandrun"
	// LabelAgent holds the name of the Agent the command runs for.
	LabelAgent = "kubeskills.io/agent"
	// LabelManagedBy is the well-known label naming the tool that manages
	// an object.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "kubeskills"
)

// Container names.
const (
	// ContainerInstallRunner is the init container that copies the runner.
	ContainerInstallRunner = "install-runner"
	// ContainerUnpackSkill is the init container that lays out the skill.
	ContainerUnpackSkill = "unpack-skill"
	// ContainerCommand is the container that runs the command; its
	// termination message holds the runner's result.
	ContainerCommand = "command"
)

// Paths in the sandbox's containers.
const (
	// RunnerImagePath is where the operator image holds the runner.
	RunnerImagePath = "/usr/local/bin/runner"
	// RunnerImageDir is where the main container mounts the operator
	// image, read-only, when the runner comes from its image.
	RunnerImageDir = "/kubeskills/image"
	// RunnerImageRunner is the runner in RunnerImageDir.
	RunnerImageRunner = RunnerImageDir + RunnerImagePath
	// RunnerDir is where the runner is installed for the main container.
	RunnerDir = "/kubeskills/bin"
	// RunnerPath is the installed runner.
	RunnerPath = RunnerDir + "/runner"
	// ShardsDir holds one folder per mounted shard of the skill, named by
	// its index, in the unpack-skill container.
	ShardsDir = "/kubeskills/shards"
	// SkillDir is where the skill's folder is, read-only.
	SkillDir = "/skill"
	// TmpDir is the writable scratch folder, also HOME, TMPDIR and the
	// working directory.
	TmpDir = "/tmp"
	// ResultFile is the main container's termination message file.
	ResultFile = "/dev/termination-log"
	// EnvSkillDir names the environment variable holding SkillDir when the
	// run serves a skill.
	EnvSkillDir = "SKILL_DIR"
)

// UserID is the user and group every sandbox container runs as (the
// "nonroot" user of distroless images).
const UserID int64 = 65532

// Defaults for what a policy's sandbox leaves unset, and the fixed timing of
// the runner.
const (
	// DefaultTimeout is the longest a command runs when neither the run nor
	// the policy says.
	DefaultTimeout = 5 * time.Minute
	// DefaultOutputLimitBytes caps each of stdout and stderr.
	DefaultOutputLimitBytes int32 = 64 << 10
	// DefaultTTLSecondsAfterFinished keeps a finished Job and its pod for
	// five minutes after the run's result is recorded; the CommandRun
	// keeps the result.
	DefaultTTLSecondsAfterFinished int32 = 300
	// RunnerGrace is the time the runner gives the command between SIGTERM
	// and SIGKILL, at its timeout or when the pod is stopped.
	RunnerGrace = 5 * time.Second
	// DeadlineMargin is added to the Job's deadline beyond timeout, the
	// fence's wait and RunnerGrace. The deadline counts from the Job's start, so the margin
	// covers scheduling the pod, pulling images the node lacks (a bundled
	// skill's image among them), the init containers, the runner draining the output of killed processes (up to
	// half a second) and writing its result. A pod that takes longer than
	// that to start cuts the command short: the Job fails with
	// DeadlineExceeded, and the run has no result. A pod that replaces
	// one that failed to start (PodFailurePolicy) starts at least ten
	// seconds later (the Job controller's backoff), which the margin
	// covers too when the first pod failed quickly.
	DeadlineMargin = 30 * time.Second
	// TerminationGracePeriodSeconds gives a stopped pod's runner its
	// RunnerGrace and five more seconds to report before the kubelet kills
	// it.
	TerminationGracePeriodSeconds int64 = int64(RunnerGrace/time.Second) + 5
)

// Size limits of the sandbox's emptyDir volumes. A bundled skill's image
// volume is bounded by its image, not here.
const (
	// RunnerVolumeSize bounds the volume holding the runner.
	RunnerVolumeSize = "32Mi"
	// TmpVolumeSize bounds /tmp, all a command can write.
	TmpVolumeSize = "256Mi"
	// SkillVolumeSize bounds the unpacked skill: 64 ConfigMaps of 1 MiB,
	// with room for gzip-encoded files decoded.
	SkillVolumeSize = "256Mi"
)

// Params is what the builders need: the run, its policy, its skill and
// the operator's settings.
type Params struct {
	// Run is the CommandRun the objects are built for and owned by.
	Run *skillsv1.CommandRun
	// Policy is the CommandPolicy that judged the run; a nil policy or a
	// nil Spec.Sandbox means the defaults.
	Policy *skillsv1.CommandPolicy
	// Skill is the Skill the run serves, nil when it names none. Its
	// Status.ConfigMaps, in the run's namespace, are the shards mounted;
	// when it sets Spec.Bundle.Image, that image is mounted instead.
	Skill *skillsv1.Skill
	// Approved tells that as many people as the run's decision requires
	// approved it (CommandRun.Tally): the runner then runs what the policy
	// says to Ask about.
	Approved bool
	// SkillHash is the content hash the run's decision pinned (its
	// status.decision.skillHash): "unpack-skill" refuses shards holding
	// other content. Empty checks only that the shards are of one version.
	SkillHash string
	// RunnerImage is the operator image, which holds RunnerImagePath.
	RunnerImage string
	// RunnerFromImage mounts the runner from RunnerImage as an image
	// volume, read-only, rather than copying it with an init container:
	// only where the cluster runs image volumes (see the operator's
	// runner probe).
	RunnerFromImage bool
	// DefaultImage is the toolbox image used when the policy names none.
	DefaultImage string
	// Timeout is the command's timeout, already resolved (ResolveTimeout).
	// Zero or less is resolved here, never taken as no timeout.
	Timeout time.Duration
	// FenceCheck, when set, is an address ("host:port") the sandbox's
	// fence denies (see FenceCheck): the runner starts the command only
	// once a connection to it fails, so that a command never runs before
	// the network plugin put its fence in force.
	FenceCheck string
	// APIServer are the addresses of the API server (APIServerEndpoints),
	// which the fence opens when the policy names a ServiceAccount,
	// and only then. A sandbox with an identity and no addresses reaches no
	// API server: the controller refuses to run it.
	APIServer []APIEndpoint
}

// ResolveTimeout returns the timeout of a run: the policy's sandbox timeout
// (DefaultTimeout when unset), or the run's own when it is set and shorter.
// A run cannot ask for more time than its policy allows.
func ResolveTimeout(run *skillsv1.CommandRun, policy *skillsv1.CommandPolicy) time.Duration {
	limit := DefaultTimeout
	if sb := sandboxOf(policy); sb.Timeout != nil && sb.Timeout.Duration > 0 {
		limit = sb.Timeout.Duration
	}
	if run != nil && run.Spec.Timeout != nil && run.Spec.Timeout.Duration > 0 && run.Spec.Timeout.Duration < limit {
		return run.Spec.Timeout.Duration
	}
	return limit
}

// ActiveDeadlineSeconds is the Job's deadline for a command with this
// timeout, in whole seconds:
//
//	ceil(timeout) + runner.DefaultFenceWait + RunnerGrace + DeadlineMargin
//
// that is 300 + 120 + 5 + 30 = 455 for the default five minutes. The
// runner enforces the timeout itself, so that the result says TimedOut and
// keeps the output; the Job's deadline is the backstop for a pod that never
// starts the runner or a runner that hangs, and must leave the runner time
// to await the sandbox's fence, which it does before the command's time
// starts, to stop the command (RunnerGrace) and to write its result (in the
// margin).
func ActiveDeadlineSeconds(timeout time.Duration) int64 {
	seconds := int64(math.Ceil(timeout.Seconds()))
	return seconds + int64((runner.DefaultFenceWait+RunnerGrace+DeadlineMargin)/time.Second)
}

// DefaultResources are the main container's requests and limits when the
// policy sets none: a small share of CPU and memory, enough for curl, jq and
// git on a small repository, and a cap that keeps one command from starving
// its node.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("50m"),
			corev1.ResourceMemory: resource.MustParse("64Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("500m"),
			corev1.ResourceMemory: resource.MustParse("256Mi"),
		},
	}
}

// initResources are the init containers' requests and limits: copying the
// runner takes little, unpacking holds the whole skill in memory once.
func initResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10m"),
			corev1.ResourceMemory: resource.MustParse("32Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("500m"),
			corev1.ResourceMemory: resource.MustParse("256Mi"),
		},
	}
}

// resources returns the main container's requests and limits: the
// policy's, with each missing CPU or memory request or limit filled in from
// DefaultResources, so every sandbox is limited. A filled limit is never
// below the policy's request, and a filled request never above the policy's
// limit, so the result is always valid.
func resources(sb *skillsv1.Sandbox) corev1.ResourceRequirements {
	var out corev1.ResourceRequirements
	if sb.Resources != nil {
		out = *sb.Resources.DeepCopy()
	}
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	defaults := DefaultResources()
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		request, hasRequest := out.Requests[name]
		if _, hasLimit := out.Limits[name]; !hasLimit {
			limit := defaults.Limits[name]
			if hasRequest && request.Cmp(limit) > 0 {
				limit = request
			}
			out.Limits[name] = limit
		}
		if !hasRequest {
			request = defaults.Requests[name]
			if limit := out.Limits[name]; request.Cmp(limit) > 0 {
				request = limit
			}
			out.Requests[name] = request
		}
	}
	return out
}

// sandboxOf returns the policy's sandbox settings, empty when there are
// none.
func sandboxOf(policy *skillsv1.CommandPolicy) *skillsv1.Sandbox {
	if policy == nil || policy.Spec.Sandbox == nil {
		return &skillsv1.Sandbox{}
	}
	return policy.Spec.Sandbox
}

// timeout returns the run's timeout, resolving it when Params leaves it
// unset.
func (p Params) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return ResolveTimeout(p.Run, p.Policy)
}

// outputLimit returns the per-stream output cap.
func outputLimit(sb *skillsv1.Sandbox) int32 {
	if sb.OutputLimitBytes != nil && *sb.OutputLimitBytes > 0 {
		return *sb.OutputLimitBytes
	}
	return DefaultOutputLimitBytes
}

// ttlSecondsAfterFinished returns how long a finished Job is kept.
func ttlSecondsAfterFinished(sb *skillsv1.Sandbox) int32 {
	if sb.TTLSecondsAfterFinished != nil && *sb.TTLSecondsAfterFinished >= 0 {
		return *sb.TTLSecondsAfterFinished
	}
	return DefaultTTLSecondsAfterFinished
}

// Labels returns the labels of a run's Job.
func Labels(run *skillsv1.CommandRun) map[string]string {
	return map[string]string{
		LabelCommandRun: run.Name,
		LabelAgent:      run.Spec.Agent,
		LabelManagedBy:  ManagedBy,
	}
}

// PodLabels returns the labels of a run's pod: those of its Job, and
// LabelFence naming the fence that selects it (FenceOf).
func PodLabels(p Params) map[string]string {
	l := Labels(p.Run)
	l[LabelFence] = FenceOf(p).Hash
	return l
}

// objectMeta names an object after the run, in its namespace, labelled and
// controlled by it.
func objectMeta(run *skillsv1.CommandRun) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      run.Name,
		Namespace: run.Namespace,
		Labels:    Labels(run),
		OwnerReferences: []metav1.OwnerReference{
			*metav1.NewControllerRef(run, skillsv1.GroupVersion.WithKind("CommandRun")),
		},
	}
}
