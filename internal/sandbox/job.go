package sandbox

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// Volume names.
const (
	volumeRunner = "runner"
	volumeTmp    = "tmp"
	volumeSkill  = "skill"
	// volumeShardPrefix plus a shard's index names its ConfigMap volume.
	volumeShardPrefix = "skill-shard-"
)

// shardMode is the mode of the files of a mounted shard: readable, since
// the unpack-skill container runs as UserID, and nothing more.
const shardMode int32 = 0o444

// AnnotationTTLSecondsAfterFinished on a sandbox Job says how long, in
// seconds, the Job and its pod are kept after the run's result is recorded:
// the policy's sandbox.ttlSecondsAfterFinished when the Job was made. The
// Job itself has no ttlSecondsAfterFinished, since the TTL controller
// counts from the Job's end and may delete it, and its pod, before the
// operator read the result; the operator deletes it instead.
const AnnotationTTLSecondsAfterFinished = "kubeskills.io/ttl-seconds-after-finished"

// AnnotationDecision on a sandbox Job is the decision it runs under
// (status.decision of its run), as JSON. The Job records it as it is
// created, in the same write: the decision a command runs under is never
// lost, even when the run's status, written after, is.
const AnnotationDecision = "kubeskills.io/decision"

// Job builds the Job that runs p.Run: named after the run, in its
// namespace, controlled by it, hardened as the package documentation says,
// and annotated with the run's decision. The same Params always give the
// same Job.
func Job(p Params) *batchv1.Job {
	sb := sandboxOf(p.Policy)
	meta := objectMeta(p.Run)
	meta.Annotations = map[string]string{AnnotationTTLSecondsAfterFinished: strconv.Itoa(int(ttlSecondsAfterFinished(sb)))}
	if d := p.Run.Status.Decision; d != nil {
		if b, err := json.Marshal(d); err == nil {
			meta.Annotations[AnnotationDecision] = string(b)
		}
	}
	command := RunnerCommand(p.timeout(), outputLimit(sb), PolicySnapshot(p), p.Run.Spec.Command)
	spec := podSpec(p, sb, command, ActiveDeadlineSeconds(p.timeout()))
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			// A pod that failed before its command started is replaced
			// StartRetries times; any other failure fails the Job at once
			// (PodFailurePolicy), so a command never runs twice.
			BackoffLimit:          ptr.To(StartRetries),
			PodFailurePolicy:      PodFailurePolicy(spec),
			PodReplacementPolicy:  ptr.To(batchv1.Failed),
			ActiveDeadlineSeconds: ptr.To(ActiveDeadlineSeconds(p.timeout())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: PodLabels(p)},
				Spec:       spec,
			},
		},
	}
}

// DecisionOf returns the decision a sandbox Job runs under
// (AnnotationDecision); false when the Job does not say (one made by an
// earlier version) or says something unreadable.
func DecisionOf(job *batchv1.Job) (*skillsv1.PolicyDecision, bool) {
	raw, ok := job.Annotations[AnnotationDecision]
	if !ok {
		return nil, false
	}
	d := &skillsv1.PolicyDecision{}
	if err := json.Unmarshal([]byte(raw), d); err != nil {
		return nil, false
	}
	return d, true
}

// KeepAfterResult returns how long a sandbox Job is kept after its run's
// result is recorded, from its AnnotationTTLSecondsAfterFinished; false
// when the Job does not say (one made by an earlier version, which has a
// ttlSecondsAfterFinished of its own) or says something that is not a
// number of seconds.
func KeepAfterResult(job *batchv1.Job) (time.Duration, bool) {
	v, ok := job.Annotations[AnnotationTTLSecondsAfterFinished]
	if !ok {
		return 0, false
	}
	secs, err := strconv.ParseInt(v, 10, 32)
	if err != nil || secs < 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

// podSpec builds the sandbox pod whose command container runs command (a
// runner command line) and which runs for at most deadline seconds.
func podSpec(p Params, sb *skillsv1.Sandbox, command []string, deadline int64) corev1.PodSpec {
	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		TerminationGracePeriodSeconds: ptr.To(TerminationGracePeriodSeconds),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(UserID),
			RunAsGroup:     ptr.To(UserID),
			FSGroup:        ptr.To(UserID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Volumes: []corev1.Volume{
			emptyDir(volumeRunner, RunnerVolumeSize),
			emptyDir(volumeTmp, TmpVolumeSize),
		},
		InitContainers: []corev1.Container{installRunnerContainer(p.RunnerImage)},
		Containers:     []corev1.Container{commandContainer(p, sb, command)},
	}
	if p.RunnerFromImage {
		spec.Volumes[0] = corev1.Volume{
			Name: volumeRunner,
			VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
				Reference:  p.RunnerImage,
				PullPolicy: corev1.PullIfNotPresent,
			}},
		}
		spec.InitContainers = nil
	}
	if sa := p.serviceAccountName(); sa != "" {
		// The pod runs as the policy's identity, whose token only the
		// command container mounts: automounting stays off, so the init
		// containers never hold it.
		spec.ServiceAccountName = sa
		spec.Volumes = append(spec.Volumes, tokenVolume(TokenExpirationSeconds(deadline)))
	}
	if sb.RuntimeClassName != nil && *sb.RuntimeClassName != "" {
		spec.RuntimeClassName = ptr.To(*sb.RuntimeClassName)
	}
	if b := skillBundle(p.Skill); b != nil {
		spec.Volumes = append(spec.Volumes, bundleVolume(b))
	} else if shards := skillShards(p.Skill); shards != nil {
		spec.Volumes = append(spec.Volumes, emptyDir(volumeSkill, SkillVolumeSize))
		for i, name := range shards {
			spec.Volumes = append(spec.Volumes, corev1.Volume{
				Name: volumeShardPrefix + strconv.Itoa(i),
				VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: name},
					DefaultMode:          ptr.To(shardMode),
				}},
			})
		}
		spec.InitContainers = append(spec.InitContainers, unpackSkillContainer(p.RunnerImage, len(shards), p.SkillHash))
	}
	return spec
}

// skillShards returns the names of the ConfigMaps holding the run's skill,
// shard 0 first, or nil when the run serves no skill. A skill with no
// ConfigMaps in its status gives an empty list: unpack-skill then fails
// with a clear message rather than the command running without its skill.
func skillShards(s *skillsv1.Skill) []string {
	if s == nil {
		return nil
	}
	return append([]string{}, s.Status.ConfigMaps...)
}

// skillBundle returns the bundle of the run's skill, or nil when the run
// serves no skill or one whose files are in its ConfigMaps.
func skillBundle(s *skillsv1.Skill) *skillsv1.SkillBundle {
	if s == nil || s.Spec.Bundle == nil || s.Spec.Bundle.Image == "" {
		return nil
	}
	return s.Spec.Bundle
}

// bundleVolume is the skill volume of a bundled skill: its image, which the
// kubelet mounts read-only. An empty pull policy is left for the API server
// to default from the image's tag.
func bundleVolume(b *skillsv1.SkillBundle) corev1.Volume {
	return corev1.Volume{
		Name: volumeSkill,
		VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
			Reference:  b.Image,
			PullPolicy: corev1.PullPolicy(b.PullPolicy),
		}},
	}
}

// installRunnerContainer copies the runner from the operator image into
// the runner volume.
func installRunnerContainer(image string) corev1.Container {
	return corev1.Container{
		Name:                     ContainerInstallRunner,
		Image:                    image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  []string{RunnerImagePath, "install", RunnerPath},
		Resources:                initResources(),
		VolumeMounts:             []corev1.VolumeMount{{Name: volumeRunner, MountPath: RunnerDir}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurityContext(),
	}
}

// unpackSkillContainer lays the skill out of its mounted shards into the
// skill volume. It alone mounts the shard ConfigMaps.
func unpackSkillContainer(image string, shards int, hash string) corev1.Container {
	command := []string{RunnerImagePath, "unpack-skill", "--to", SkillDir}
	if hash != "" {
		command = append(command, "--expect-hash", hash)
	}
	mounts := []corev1.VolumeMount{{Name: volumeSkill, MountPath: SkillDir}}
	for i := 0; i < shards; i++ {
		dir := ShardsDir + "/" + strconv.Itoa(i)
		command = append(command, dir)
		mounts = append(mounts, corev1.VolumeMount{
			Name:      volumeShardPrefix + strconv.Itoa(i),
			MountPath: dir,
			ReadOnly:  true,
		})
	}
	return corev1.Container{
		Name:                     ContainerUnpackSkill,
		Image:                    image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  command,
		Resources:                initResources(),
		VolumeMounts:             mounts,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurityContext(),
	}
}

// commandContainer runs the runner command line command in the toolbox
// image. Its termination message is the runner's result.
func commandContainer(p Params, sb *skillsv1.Sandbox, command []string) corev1.Container {
	image := sb.Image
	if image == "" {
		image = p.DefaultImage
	}
	mounts := []corev1.VolumeMount{
		{Name: volumeRunner, MountPath: RunnerDir, ReadOnly: true},
		{Name: volumeTmp, MountPath: TmpDir},
	}
	if p.RunnerFromImage {
		mounts[0].MountPath = RunnerImageDir
	}
	env := append([]corev1.EnvVar{
		{Name: "HOME", Value: TmpDir},
		{Name: "TMPDIR", Value: TmpDir},
	}, gitSafety...)
	if p.Skill != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: volumeSkill, MountPath: SkillDir, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: EnvSkillDir, Value: SkillDir})
	}
	command = append([]string(nil), command...)
	if p.RunnerFromImage {
		command[0] = RunnerImageRunner
	}
	if p.serviceAccountName() != "" {
		mounts = append(mounts, tokenMount())
		env = append(env, corev1.EnvVar{Name: EnvKubeconfig, Value: KubeconfigPath})
		command = withRunnerFlag(command, "--kubeconfig="+KubeconfigPath)
	}
	if p.FenceCheck != "" {
		command = withRunnerFlag(command, "--await-fence="+p.FenceCheck)
	}
	if traced(p.Run) {
		command = withRunnerFlag(command, "--"+runner.SpansFlag)
	}
	sort.Slice(env, func(i, j int) bool { return env[i].Name < env[j].Name })
	return corev1.Container{
		Name:                     ContainerCommand,
		Image:                    image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  command,
		WorkingDir:               TmpDir,
		Env:                      env,
		EnvFrom:                  envFromSecrets(sb.EnvFromSecrets),
		Resources:                resources(sb),
		VolumeMounts:             mounts,
		TerminationMessagePath:   ResultFile,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurityContext(),
	}
}

// gitSafety is git configuration, given through the environment, that keeps
// git from running programs a repository's own files name: a skill bundle
// (an image, which admission cannot look into) may hold a bare repository
// or a .git folder whose config sets core.fsmonitor or hooks. A command line
// that changes these variables is an assignment, which the policy never
// allows without a person.
var gitSafety = []corev1.EnvVar{
	{Name: "GIT_CONFIG_COUNT", Value: "3"},
	{Name: "GIT_CONFIG_KEY_0", Value: "core.fsmonitor"},
	{Name: "GIT_CONFIG_VALUE_0", Value: "false"},
	{Name: "GIT_CONFIG_KEY_1", Value: "core.hooksPath"},
	{Name: "GIT_CONFIG_VALUE_1", Value: "/dev/null"},
	{Name: "GIT_CONFIG_KEY_2", Value: "safe.bareRepository"},
	{Name: "GIT_CONFIG_VALUE_2", Value: "explicit"},
}

// RunnerCommand is the main container's command line: the installed runner
// running command with the timeout, RunnerGrace and the output cap under
// the policy that judged it, writing its result to ResultFile. The command
// stays one argument; the runner interprets it itself and judges it, and
// every simple command and redirection in it, against the policy again.
//
// The policy is one --policy flag, or, when its JSON is longer than
// runner.PolicyPartBytes, several that the runner joins in order
// (runner.PolicyArgs): Linux starts no program with an argument longer
// than 128 KiB, and a CommandPolicy may hold more rules than that. Every
// part is in the pod's command, which nobody can change once the Job
// exists.
func RunnerCommand(timeout time.Duration, outputLimitBytes int32, pol runner.PolicySnapshot, command string) []string {
	cmd := []string{
		RunnerPath, "run",
		"--timeout=" + timeout.String(),
		"--grace=" + RunnerGrace.String(),
		"--output-limit=" + strconv.FormatInt(int64(outputLimitBytes), 10),
		"--result-file=" + ResultFile,
	}
	cmd = append(cmd, runner.PolicyArgs(pol.Encode())...)
	return append(cmd, "--", command)
}

// traced tells whether run belongs to a trace (its traceparent
// annotation): its runner then reports the command's spans.
func traced(run *skillsv1.CommandRun) bool {
	return run != nil && run.Annotations[skillsv1.AnnotationTraceparent] != ""
}

// withRunnerFlag puts a flag of the runner before the "--" that ends them,
// or at the end of a command line without one ("runner serve").
func withRunnerFlag(command []string, flag string) []string {
	out := make([]string, 0, len(command)+1)
	for i, arg := range command {
		if arg == "--" {
			out = append(out, flag)
			return append(out, command[i:]...)
		}
		out = append(out, arg)
	}
	return append(out, flag)
}

// PolicySnapshot is the policy the runner enforces for p.Run: the rules
// (with whether each trusts its command's programs) and default action of
// p.Policy, the allowed-tools of p.Skill, and
// whether people approved the run (p.Approved).
// Without a policy nothing may run, so a nil p.Policy gives a snapshot
// whose default action is Never.
func PolicySnapshot(p Params) runner.PolicySnapshot {
	var snap runner.PolicySnapshot
	if p.Policy == nil {
		snap.DefaultAction = policy.Never
		return snap
	}
	snap.DefaultAction = policy.Action(p.Policy.Spec.DefaultAction)
	for _, r := range p.Policy.Spec.Rules {
		snap.Rules = append(snap.Rules, runner.SnapshotRule{Pattern: r.Pattern, Action: policy.Action(r.Action), Children: snapshotChildren(r.Children)})
	}
	if p.Skill != nil {
		snap.AllowedTools = append([]string(nil), p.Skill.Spec.AllowedTools...)
	}
	snap.Approved = p.Approved
	return snap
}

// snapshotChildren is a rule's children as the runner reads them:
// runner.ChildrenTrusted, or empty for judged (Judged or unset), so that
// nothing but the one word the runner trusts can stop its judging.
func snapshotChildren(c skillsv1.ChildrenMode) string {
	if c == skillsv1.ChildrenTrusted {
		return runner.ChildrenTrusted
	}
	return ""
}

// envFromSecrets exposes the policy's Secrets, in the policy's order: when
// two give the same variable, the later one wins, as the policy's author
// wrote it. Variables the container sets itself (HOME, TMPDIR, SKILL_DIR)
// take precedence over any Secret.
func envFromSecrets(secrets []skillsv1.SecretEnv) []corev1.EnvFromSource {
	if len(secrets) == 0 {
		return nil
	}
	out := make([]corev1.EnvFromSource, 0, len(secrets))
	for _, s := range secrets {
		out = append(out, corev1.EnvFromSource{
			Prefix:    s.Prefix,
			SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: s.SecretName}},
		})
	}
	return out
}

// containerSecurityContext is the hardening every sandbox container gets.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// emptyDir is a size-limited emptyDir volume on the node's disk.
func emptyDir(name, size string) corev1.Volume {
	limit := resource.MustParse(size)
	return corev1.Volume{
		Name:         name,
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}},
	}
}
