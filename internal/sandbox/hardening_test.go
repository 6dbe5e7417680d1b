package sandbox

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/kubeskills/kubeskills/internal/runner"
)

// podCheck asserts one hardening field of the Job, whatever its input. check
// returns what is wrong, or ""; breaks undoes that one field, to show the
// check notices.
type podCheck struct {
	name   string
	check  func(v variant, job *batchv1.Job) string
	breaks func(job *batchv1.Job)
}

// containerCheck asserts one hardening field of every container.
type containerCheck struct {
	name   string
	check  func(c corev1.Container) string
	breaks func(c *corev1.Container)
}

var podChecks = []podCheck{
	{"pod runAsNonRoot",
		func(_ variant, j *batchv1.Job) string { return wantTrue(podSC(j).RunAsNonRoot) },
		func(j *batchv1.Job) { j.Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil }},
	{"pod runAsUser 65532",
		func(_ variant, j *batchv1.Job) string { return wantInt64(podSC(j).RunAsUser, 65532) },
		func(j *batchv1.Job) { j.Spec.Template.Spec.SecurityContext.RunAsUser = ptr.To[int64](0) }},
	{"pod runAsGroup 65532",
		func(_ variant, j *batchv1.Job) string { return wantInt64(podSC(j).RunAsGroup, 65532) },
		func(j *batchv1.Job) { j.Spec.Template.Spec.SecurityContext.RunAsGroup = nil }},
	{"pod fsGroup 65532",
		func(_ variant, j *batchv1.Job) string { return wantInt64(podSC(j).FSGroup, 65532) },
		func(j *batchv1.Job) { j.Spec.Template.Spec.SecurityContext.FSGroup = ptr.To[int64](0) }},
	{"pod seccompProfile RuntimeDefault",
		func(_ variant, j *batchv1.Job) string {
			if sp := podSC(j).SeccompProfile; sp == nil || sp.Type != corev1.SeccompProfileTypeRuntimeDefault || sp.LocalhostProfile != nil {
				return fmt.Sprintf("seccompProfile = %+v", sp)
			}
			return ""
		},
		func(j *batchv1.Job) {
			j.Spec.Template.Spec.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
		}},
	{"automountServiceAccountToken false",
		func(_ variant, j *batchv1.Job) string {
			return wantFalse(j.Spec.Template.Spec.AutomountServiceAccountToken)
		},
		func(j *batchv1.Job) { j.Spec.Template.Spec.AutomountServiceAccountToken = nil }},
	{"enableServiceLinks false",
		func(_ variant, j *batchv1.Job) string { return wantFalse(j.Spec.Template.Spec.EnableServiceLinks) },
		func(j *batchv1.Job) { j.Spec.Template.Spec.EnableServiceLinks = ptr.To(true) }},
	{"restartPolicy Never",
		func(_ variant, j *batchv1.Job) string {
			if got := j.Spec.Template.Spec.RestartPolicy; got != corev1.RestartPolicyNever {
				return fmt.Sprintf("restartPolicy = %q", got)
			}
			return ""
		},
		func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure }},
	{"a failed pod is replaced once, and only when its command never started",
		func(_ variant, j *batchv1.Job) string { return checkRetries(j) },
		func(j *batchv1.Job) { j.Spec.PodFailurePolicy = nil }},
	{"a pod is replaced only once it has ended",
		func(_ variant, j *batchv1.Job) string {
			if got := j.Spec.PodReplacementPolicy; got == nil || *got != batchv1.Failed {
				return fmt.Sprintf("podReplacementPolicy = %s, want Failed", ptrString(got))
			}
			return ""
		},
		func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed) }},
	{"activeDeadlineSeconds is timeout + fence wait + grace + margin",
		func(v variant, j *batchv1.Job) string { return wantInt64(j.Spec.ActiveDeadlineSeconds, v.wantDeadline) },
		func(j *batchv1.Job) { *j.Spec.ActiveDeadlineSeconds -= int64(DeadlineMargin / time.Second) }},
	{"terminationGracePeriodSeconds exceeds the runner's grace",
		func(_ variant, j *batchv1.Job) string {
			got := j.Spec.Template.Spec.TerminationGracePeriodSeconds
			if got == nil || *got <= int64(RunnerGrace/time.Second) {
				return fmt.Sprintf("terminationGracePeriodSeconds = %s, want more than %s", ptrString(got), RunnerGrace)
			}
			return ""
		},
		func(j *batchv1.Job) { j.Spec.Template.Spec.TerminationGracePeriodSeconds = nil }},
	// The TTL controller counts from the Job's end and could delete the
	// Job and its pod before the result is read: the operator deletes it.
	{"no ttlSecondsAfterFinished",
		func(_ variant, j *batchv1.Job) string {
			if j.Spec.TTLSecondsAfterFinished != nil {
				return fmt.Sprintf("ttlSecondsAfterFinished = %d, want none", *j.Spec.TTLSecondsAfterFinished)
			}
			return ""
		},
		func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](0) }},
	{"kept the policy's ttlSecondsAfterFinished after the result",
		func(v variant, j *batchv1.Job) string {
			got, ok := KeepAfterResult(j)
			if want := time.Duration(v.wantTTL) * time.Second; !ok || got != want {
				return fmt.Sprintf("kept %s after the result (annotated: %t), want %s", got, ok, want)
			}
			return ""
		},
		func(j *batchv1.Job) { delete(j.Annotations, AnnotationTTLSecondsAfterFinished) }},
	{"no host namespaces",
		func(_ variant, j *batchv1.Job) string {
			if s := j.Spec.Template.Spec; s.HostNetwork || s.HostPID || s.HostIPC {
				return "a host namespace is shared"
			}
			return ""
		},
		func(j *batchv1.Job) { j.Spec.Template.Spec.HostNetwork = true }},
	{"the ServiceAccount is the policy's identity, or none",
		func(v variant, j *batchv1.Job) string {
			s := j.Spec.Template.Spec
			if want := v.params.serviceAccountName(); s.ServiceAccountName != want || s.DeprecatedServiceAccount != "" {
				return fmt.Sprintf("serviceAccountName = %q, want %q", s.ServiceAccountName, want)
			}
			return ""
		},
		func(j *batchv1.Job) { j.Spec.Template.Spec.ServiceAccountName = "default" }},
	{"volumes are size-limited emptyDirs, ConfigMaps, images or the identity's short-lived token",
		func(v variant, j *batchv1.Job) string {
			for _, vol := range j.Spec.Template.Spec.Volumes {
				switch {
				case vol.EmptyDir != nil && vol.EmptyDir.SizeLimit != nil && vol.EmptyDir.Medium == "":
				case vol.ConfigMap != nil:
				case vol.Image != nil && vol.Image.Reference != "":
				case vol.Projected != nil && vol.Name == volumeToken && v.params.serviceAccountName() != "":
					if problem := checkTokenVolume(vol, v.wantDeadline); problem != "" {
						return problem
					}
				default:
					return fmt.Sprintf("volume %s is %+v", vol.Name, vol.VolumeSource)
				}
			}
			return ""
		},
		func(j *batchv1.Job) { j.Spec.Template.Spec.Volumes[0].EmptyDir.SizeLimit = nil }},
	{"the token is mounted read-only at the in-cluster path, only by the command",
		func(v variant, j *batchv1.Job) string {
			mounted := false
			for _, c := range allContainers(j) {
				for _, m := range c.VolumeMounts {
					if m.Name != volumeToken && !strings.HasPrefix(m.MountPath, "/var/run/secrets") {
						continue
					}
					if c.Name != ContainerCommand || m.Name != volumeToken || !m.ReadOnly || m.SubPath != "" ||
						m.MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" {
						return fmt.Sprintf("container %s mounts %+v", c.Name, m)
					}
					mounted = true
				}
			}
			if want := v.params.serviceAccountName() != ""; mounted != want {
				return fmt.Sprintf("token mounted: %t, want %t", mounted, want)
			}
			return ""
		},
		func(j *batchv1.Job) {
			spec := &j.Spec.Template.Spec
			spec.InitContainers[0].VolumeMounts = append(spec.InitContainers[0].VolumeMounts,
				corev1.VolumeMount{Name: volumeToken, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
		}},
	{"image volumes mounted read-only, only by the command",
		func(_ variant, j *batchv1.Job) string {
			for _, vol := range j.Spec.Template.Spec.Volumes {
				if vol.Image == nil {
					continue
				}
				for _, c := range allContainers(j) {
					for _, m := range c.VolumeMounts {
						if m.Name != vol.Name {
							continue
						}
						if c.Name != ContainerCommand || !m.ReadOnly || m.SubPath != "" || m.SubPathExpr != "" {
							return fmt.Sprintf("container %s mounts image volume %s as %+v", c.Name, vol.Name, m)
						}
					}
				}
			}
			return ""
		},
		func(j *batchv1.Job) {
			spec := &j.Spec.Template.Spec
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "bundle",
				VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/b:1"}}})
			spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "bundle", MountPath: "/b"})
		}},
	{"the command runs under the runner and the policy that judged it, never /bin/sh",
		func(v variant, j *batchv1.Job) string {
			cmd := j.Spec.Template.Spec.Containers[0].Command
			runnerPath := RunnerPath
			if v.params.RunnerFromImage {
				runnerPath = RunnerImageRunner
			}
			if len(cmd) < 4 || cmd[0] != runnerPath || cmd[1] != "run" || cmd[len(cmd)-2] != "--" {
				return fmt.Sprintf("command = %q", cmd)
			}
			for _, arg := range cmd[:len(cmd)-2] {
				if strings.Contains(arg, "/bin/sh") {
					return fmt.Sprintf("argument %q names a shell", arg)
				}
			}
			f, _, usageErr, err := runner.ParseRunArgs(cmd[2:], io.Discard)
			if err != nil || usageErr != nil {
				return fmt.Sprintf("the runner refuses its command line: %v", errors.Join(err, usageErr))
			}
			snap, err := runner.ParsePolicySnapshot(f.Policy)
			if err != nil {
				return err.Error()
			}
			if !reflect.DeepEqual(snap, PolicySnapshot(v.params)) {
				return fmt.Sprintf("policy = %+v, want %+v", snap, PolicySnapshot(v.params))
			}
			if _, err := snap.Compile(); err != nil {
				return err.Error()
			}
			return ""
		},
		func(j *batchv1.Job) {
			c := &j.Spec.Template.Spec.Containers[0]
			c.Command = slices.DeleteFunc(c.Command, func(arg string) bool { return strings.HasPrefix(arg, "--policy=") })
		}},
	{"/tmp is a writable emptyDir",
		func(_ variant, j *batchv1.Job) string {
			m, ok := mount(j.Spec.Template.Spec.Containers[0], TmpDir)
			if !ok || m.ReadOnly {
				return fmt.Sprintf("/tmp mount = %+v, %t", m, ok)
			}
			if vol := volume(j, m.Name); vol == nil || vol.EmptyDir == nil {
				return fmt.Sprintf("/tmp is backed by %+v", vol)
			}
			return ""
		},
		func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].VolumeMounts[1].MountPath = "/scratch" }},
}

var containerChecks = []containerCheck{
	{"readOnlyRootFilesystem",
		func(c corev1.Container) string { return wantTrue(sc(c).ReadOnlyRootFilesystem) },
		func(c *corev1.Container) { c.SecurityContext.ReadOnlyRootFilesystem = ptr.To(false) }},
	{"allowPrivilegeEscalation false",
		func(c corev1.Container) string { return wantFalse(sc(c).AllowPrivilegeEscalation) },
		func(c *corev1.Container) { c.SecurityContext.AllowPrivilegeEscalation = nil }},
	{"capabilities drop ALL, add none",
		func(c corev1.Container) string {
			caps := sc(c).Capabilities
			if caps == nil || !reflect.DeepEqual(caps.Drop, []corev1.Capability{"ALL"}) || len(caps.Add) != 0 {
				return fmt.Sprintf("capabilities = %+v", caps)
			}
			return ""
		},
		func(c *corev1.Container) { c.SecurityContext.Capabilities.Add = []corev1.Capability{"NET_RAW"} }},
	{"runAsNonRoot",
		func(c corev1.Container) string { return wantTrue(sc(c).RunAsNonRoot) },
		func(c *corev1.Container) { c.SecurityContext.RunAsNonRoot = ptr.To(false) }},
	{"not privileged, not root",
		func(c corev1.Container) string {
			s := sc(c)
			if (s.Privileged != nil && *s.Privileged) || (s.RunAsUser != nil && *s.RunAsUser == 0) {
				return fmt.Sprintf("securityContext = %+v", s)
			}
			return ""
		},
		func(c *corev1.Container) { c.SecurityContext.RunAsUser = ptr.To[int64](0) }},
	{"cpu and memory limits",
		func(c corev1.Container) string {
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				limit, ok := c.Resources.Limits[name]
				if !ok || limit.IsZero() {
					return fmt.Sprintf("no %s limit", name)
				}
				if request := c.Resources.Requests[name]; request.Cmp(limit) > 0 {
					return fmt.Sprintf("%s request %s exceeds its limit %s", name, request.String(), limit.String())
				}
			}
			return ""
		},
		func(c *corev1.Container) { delete(c.Resources.Limits, corev1.ResourceMemory) }},
	{"imagePullPolicy IfNotPresent",
		func(c corev1.Container) string {
			if c.ImagePullPolicy != corev1.PullIfNotPresent {
				return fmt.Sprintf("imagePullPolicy = %q", c.ImagePullPolicy)
			}
			return ""
		},
		func(c *corev1.Container) { c.ImagePullPolicy = corev1.PullAlways }},
	{"no host ports",
		func(c corev1.Container) string {
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					return fmt.Sprintf("hostPort %d", p.HostPort)
				}
			}
			return ""
		},
		func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}} }},
}

func TestJobHardening(t *testing.T) {
	for _, v := range variants() {
		job := Job(v.params)
		for _, pc := range podChecks {
			t.Run(v.name+"/"+pc.name, func(t *testing.T) {
				if problem := pc.check(v, job); problem != "" {
					t.Error(problem)
				}
			})
		}
		for _, c := range allContainers(job) {
			for _, cc := range containerChecks {
				t.Run(v.name+"/"+c.Name+"/"+cc.name, func(t *testing.T) {
					if problem := cc.check(c); problem != "" {
						t.Error(problem)
					}
				})
			}
		}
	}
}

// TestHardeningChecksNotice shows each check fails when its field is
// undone, so a passing TestJobHardening means every field is there.
func TestHardeningChecksNotice(t *testing.T) {
	v := variants()[2]
	for _, pc := range podChecks {
		job := Job(v.params)
		pc.breaks(job)
		if pc.check(v, job) == "" {
			t.Errorf("check %q passes on a Job without it", pc.name)
		}
	}
	for _, cc := range containerChecks {
		for i := range allContainers(Job(v.params)) {
			job := Job(v.params)
			spec := &job.Spec.Template.Spec
			c := &spec.Containers[0]
			if i < len(spec.InitContainers) {
				c = &spec.InitContainers[i]
			}
			cc.breaks(c)
			if cc.check(*c) == "" {
				t.Errorf("check %q passes on container %s without it", cc.name, c.Name)
			}
		}
	}
}

// allContainers returns the init containers then the containers.
func allContainers(job *batchv1.Job) []corev1.Container {
	spec := job.Spec.Template.Spec
	return append(slices.Clone(spec.InitContainers), spec.Containers...)
}

// mount finds a container's mount at path.
func mount(c corev1.Container, path string) (corev1.VolumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return m, true
		}
	}
	return corev1.VolumeMount{}, false
}

// volume finds a pod volume by name.
func volume(job *batchv1.Job, name string) *corev1.Volume {
	for i, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &job.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

func podSC(j *batchv1.Job) *corev1.PodSecurityContext {
	if sc := j.Spec.Template.Spec.SecurityContext; sc != nil {
		return sc
	}
	return &corev1.PodSecurityContext{}
}

func sc(c corev1.Container) *corev1.SecurityContext {
	if c.SecurityContext != nil {
		return c.SecurityContext
	}
	return &corev1.SecurityContext{}
}

func wantTrue(b *bool) string {
	if b == nil || !*b {
		return fmt.Sprintf("got %s, want true", ptrString(b))
	}
	return ""
}

func wantFalse(b *bool) string {
	if b == nil || *b {
		return fmt.Sprintf("got %s, want false", ptrString(b))
	}
	return ""
}

func wantInt64(got *int64, want int64) string {
	if got == nil || *got != want {
		return fmt.Sprintf("got %s, want %d", ptrString(got), want)
	}
	return ""
}

func wantInt32(got *int32, want int32) string {
	if got == nil || *got != want {
		return fmt.Sprintf("got %s, want %d", ptrString(got), want)
	}
	return ""
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// semanticEqual compares objects holding resource quantities.
func semanticEqual(a, b any) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// checkTokenVolume says what is wrong with the identity's volume: it must
// hold a token bound to the pod that lives at least the API server's
// minimum and longer than the Job, never the 3607 seconds the API server
// extends to a year, with the CA bundle and the namespace.
func checkTokenVolume(vol corev1.Volume, deadline int64) string {
	var token, ca, ns bool
	for _, src := range vol.Projected.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			exp := ptr.Deref(src.ServiceAccountToken.ExpirationSeconds, 0)
			if exp < 600 || exp <= deadline || exp == 3607 || src.ServiceAccountToken.Audience != "" || src.ServiceAccountToken.Path != "token" {
				return fmt.Sprintf("token projection %+v (expirationSeconds %d) for a deadline of %d", *src.ServiceAccountToken, exp, deadline)
			}
			token = true
		case src.ConfigMap != nil && src.ConfigMap.Name == "kube-root-ca.crt" && len(src.ConfigMap.Items) == 1 &&
			src.ConfigMap.Items[0] == corev1.KeyToPath{Key: "ca.crt", Path: "ca.crt"}:
			ca = true
		case src.DownwardAPI != nil && len(src.DownwardAPI.Items) == 1 && src.DownwardAPI.Items[0].Path == "namespace" &&
			src.DownwardAPI.Items[0].FieldRef != nil && src.DownwardAPI.Items[0].FieldRef.FieldPath == "metadata.namespace":
			ns = true
		default:
			return fmt.Sprintf("token volume projects %+v", src)
		}
	}
	if !token || !ca || !ns {
		return fmt.Sprintf("token volume holds token %t, ca.crt %t, namespace %t", token, ca, ns)
	}
	return ""
}
