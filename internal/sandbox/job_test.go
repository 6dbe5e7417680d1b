package sandbox

import (
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
)

const (
	testRunnerImage  = "ghcr.io/kubeskills/kubeskills:v0.1.0"
	testDefaultImage = "ghcr.io/kubeskills/toolbox:v0.1.0"
)

// testRun is a CommandRun as the agent creates it.
func testRun() *skillsv1.CommandRun {
	return &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Name: "ops-7f3a", Namespace: "team-a", UID: types.UID("run-uid-1")},
		Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: `kubectl get pods -o json | jq '.items | length'`},
	}
}

// testPolicy is a policy whose sandbox sets every field.
func testPolicy() *skillsv1.CommandPolicy {
	return &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "team-a"},
		Spec: skillsv1.CommandPolicySpec{Sandbox: &skillsv1.Sandbox{
			Image:   "registry.example/tools:2",
			Timeout: &metav1.Duration{Duration: 10 * time.Minute},
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			OutputLimitBytes:        ptr.To[int32](4096),
			RuntimeClassName:        ptr.To("gvisor"),
			TTLSecondsAfterFinished: ptr.To[int32](60),
			EnvFromSecrets: []skillsv1.SecretEnv{
				{SecretName: "github-token", Prefix: "GH_"},
				{SecretName: "registry"},
			},
			Egress: &skillsv1.Egress{CIDRs: []string{"10.0.0.0/8"}, Ports: []int32{443}, DNS: true},
		}},
	}
}

// testSkill is a served Skill spread over shards.
func testSkill(shards ...string) *skillsv1.Skill {
	return &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Name: "pdf-tools", Namespace: "team-a"},
		Status:     skillsv1.SkillStatus{ConfigMaps: shards},
	}
}

// testBundleImage is a skill bundle pinned by digest.
const testBundleImage = "registry.example/skills/pdf-tools@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// testBundledSkill is a served Skill whose files come from an image; its
// SKILL.md is in one ConfigMap.
func testBundledSkill(pullPolicy string) *skillsv1.Skill {
	s := testSkill("skill-pdf-tools")
	s.Spec.Bundle = &skillsv1.SkillBundle{Image: testBundleImage, PullPolicy: pullPolicy}
	return s
}

// variant is one input to the builders with what every hardening check
// expects of it.
type variant struct {
	name         string
	params       Params
	wantDeadline int64
	wantTTL      int32
}

func variants() []variant {
	return []variant{
		{
			name:         "no policy, no skill",
			params:       Params{Run: testRun(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: 30 * time.Second},
			wantDeadline: 30 + 120 + 5 + 30,
			wantTTL:      300,
		},
		{
			name: "policy without sandbox, skill in one shard",
			params: Params{Run: testRun(), Policy: &skillsv1.CommandPolicy{}, Skill: testSkill("skill-pdf-tools"),
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: 2 * time.Minute},
			wantDeadline: 120 + 120 + 5 + 30,
			wantTTL:      300,
		},
		{
			name: "full sandbox, skill in three shards",
			params: Params{Run: testRun(), Policy: testPolicy(),
				Skill:       testSkill("skill-pdf-tools", "skill-pdf-tools--1", "skill-pdf-tools--2"),
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: 1500 * time.Millisecond},
			wantDeadline: 2 + 120 + 5 + 30,
			wantTTL:      60,
		},
		{
			name:         "unresolved timeout takes the policy's",
			params:       Params{Run: testRun(), Policy: testPolicy(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage},
			wantDeadline: 600 + 120 + 5 + 30,
			wantTTL:      60,
		},
		{
			name: "identity, skill in one shard",
			params: Params{Run: testRun(), Policy: identityPolicy("cluster-reader", nil), Skill: testSkill("skill-pdf-tools"),
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute,
				APIServer: []APIEndpoint{{IP: "10.0.0.1", Port: 6443}}},
			wantDeadline: 60 + 120 + 5 + 30,
			wantTTL:      300,
		},
		{
			name: "identity and a long timeout",
			params: Params{Run: testRun(), Policy: identityPolicy("cluster-reader", nil), Skill: testBundledSkill(""),
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: 3 * time.Hour},
			wantDeadline: 3*3600 + 120 + 5 + 30,
			wantTTL:      300,
		},
		{
			name: "full sandbox, bundled skill",
			params: Params{Run: testRun(), Policy: testPolicy(), Skill: testBundledSkill("IfNotPresent"),
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute},
			wantDeadline: 60 + 120 + 5 + 30,
			wantTTL:      60,
		},
		{
			name: "runner from its image, skill in one shard",
			params: Params{Run: testRun(), Policy: testPolicy(), Skill: testSkill("skill-pdf-tools"), RunnerFromImage: true,
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute},
			wantDeadline: 60 + 120 + 5 + 30,
			wantTTL:      60,
		},
		{
			name: "runner from its image, bundled skill",
			params: Params{Run: testRun(), Policy: testPolicy(), Skill: testBundledSkill("IfNotPresent"), RunnerFromImage: true,
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute},
			wantDeadline: 60 + 120 + 5 + 30,
			wantTTL:      60,
		},
		{
			name:         "the largest policy the CRDs admit, with a fence check",
			params:       largestParams(),
			wantDeadline: 300 + 120 + 5 + 30,
			wantTTL:      300,
		},
	}
}

// TestRunnerFromItsImageIsMountedNotCopied: where the cluster runs image
// volumes, the runner is the operator image's own file, mounted read-only
// in the command container alone, and no container copies it.
func TestRunnerFromItsImageIsMountedNotCopied(t *testing.T) {
	for _, skill := range []*skillsv1.Skill{nil, testSkill("skill-pdf-tools"), testBundledSkill("IfNotPresent")} {
		p := Params{Run: testRun(), Policy: testPolicy(), Skill: skill, RunnerFromImage: true,
			RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute}
		spec := Job(p).Spec.Template.Spec
		var runner *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == "runner" {
				runner = &spec.Volumes[i]
			}
		}
		want := corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: testRunnerImage, PullPolicy: corev1.PullIfNotPresent}}
		if runner == nil || !reflect.DeepEqual(runner.VolumeSource, want) {
			t.Fatalf("runner volume = %+v, want the image volume %+v", runner, want)
		}
		for _, c := range spec.InitContainers {
			if c.Name == ContainerInstallRunner {
				t.Errorf("the runner is copied by %s though it is mounted from its image", c.Name)
			}
			for _, m := range c.VolumeMounts {
				if m.Name == "runner" {
					t.Errorf("init container %s mounts the runner", c.Name)
				}
			}
		}
		wantMount := corev1.VolumeMount{Name: "runner", MountPath: "/kubeskills/image", ReadOnly: true}
		if got := spec.Containers[0].VolumeMounts[0]; !reflect.DeepEqual(got, wantMount) {
			t.Errorf("command container mounts %+v, want %+v", got, wantMount)
		}
		if got := spec.Containers[0].Command[0]; got != "/kubeskills/image/usr/local/bin/runner" {
			t.Errorf("command runs %s, want the image's runner", got)
		}
	}
}

func TestJobMetadata(t *testing.T) {
	run := testRun()
	p := Params{Run: run, RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute}
	job := Job(p)
	if job.Name != "ops-7f3a" || job.Namespace != "team-a" {
		t.Errorf("job is %s/%s, want team-a/ops-7f3a", job.Namespace, job.Name)
	}
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		t.Errorf("type = %s %s", job.APIVersion, job.Kind)
	}
	wantLabels := map[string]string{
		"kubeskills.io/commandrun":     "ops-7f3a",
		"kubeskills.io/agent":          "ops",
		"app.kubernetes.io/managed-by": "kubeskills",
	}
	if !reflect.DeepEqual(job.Labels, wantLabels) {
		t.Errorf("job labels = %v, want %v", job.Labels, wantLabels)
	}
	wantLabels["kubeskills.io/fence"] = FenceOf(p).Hash
	if !reflect.DeepEqual(job.Spec.Template.Labels, wantLabels) {
		t.Errorf("pod labels = %v, want %v", job.Spec.Template.Labels, wantLabels)
	}
	checkOwner(t, job.OwnerReferences, run)
}

// checkOwner asserts a single controller reference to the run.
func checkOwner(t *testing.T, refs []metav1.OwnerReference, run *skillsv1.CommandRun) {
	t.Helper()
	want := []metav1.OwnerReference{{
		APIVersion:         "kubeskills.io/v1alpha1",
		Kind:               "CommandRun",
		Name:               run.Name,
		UID:                run.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}}
	if !reflect.DeepEqual(refs, want) {
		t.Errorf("ownerReferences = %+v, want %+v", refs, want)
	}
}

func TestActiveDeadlineSeconds(t *testing.T) {
	cases := []struct {
		timeout time.Duration
		want    int64
	}{
		{5 * time.Minute, 455},
		{30 * time.Second, 185},
		{1500 * time.Millisecond, 157},
		{time.Nanosecond, 156},
		{time.Hour, 3755},
	}
	for _, tc := range cases {
		if got := ActiveDeadlineSeconds(tc.timeout); got != tc.want {
			t.Errorf("ActiveDeadlineSeconds(%s) = %d, want %d", tc.timeout, got, tc.want)
		}
		// The runner must be able to time out, stop the command and report
		// before the Job's deadline.
		if slack := time.Duration(ActiveDeadlineSeconds(tc.timeout))*time.Second - runner.DefaultFenceWait - tc.timeout - RunnerGrace; slack < 10*time.Second {
			t.Errorf("ActiveDeadlineSeconds(%s) leaves %s after the runner's grace", tc.timeout, slack)
		}
	}
}

func TestResolveTimeout(t *testing.T) {
	policy := func(d time.Duration) *skillsv1.CommandPolicy {
		return &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{Sandbox: &skillsv1.Sandbox{Timeout: &metav1.Duration{Duration: d}}}}
	}
	run := func(d time.Duration) *skillsv1.CommandRun {
		r := testRun()
		r.Spec.Timeout = &metav1.Duration{Duration: d}
		return r
	}
	cases := []struct {
		name   string
		run    *skillsv1.CommandRun
		policy *skillsv1.CommandPolicy
		want   time.Duration
	}{
		{"nothing set", testRun(), nil, DefaultTimeout},
		{"policy without sandbox", testRun(), &skillsv1.CommandPolicy{}, DefaultTimeout},
		{"policy only", testRun(), policy(time.Minute), time.Minute},
		{"run shorter than policy", run(10 * time.Second), policy(time.Minute), 10 * time.Second},
		{"run longer than policy", run(time.Hour), policy(time.Minute), time.Minute},
		{"run longer than the default", run(time.Hour), nil, DefaultTimeout},
		{"run zero", run(0), policy(time.Minute), time.Minute},
		{"policy zero", run(time.Hour), policy(0), DefaultTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ResolveTimeout(tc.run, tc.policy); got != tc.want {
				t.Errorf("ResolveTimeout() = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCommandContainer(t *testing.T) {
	cases := []struct {
		name    string
		params  Params
		image   string
		command []string
		env     []corev1.EnvVar
	}{
		{
			name:   "defaults",
			params: Params{Run: testRun(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: 30 * time.Second},
			image:  testDefaultImage,
			command: []string{"/kubeskills/bin/runner", "run", "--timeout=30s", "--grace=5s", "--output-limit=65536",
				"--result-file=/dev/termination-log", `--policy={"defaultAction":"Never","approved":false}`,
				"--", `kubectl get pods -o json | jq '.items | length'`},
			env: append(gitEnv(), corev1.EnvVar{Name: "HOME", Value: "/tmp"}, corev1.EnvVar{Name: "TMPDIR", Value: "/tmp"}),
		},
		{
			name: "policy sandbox and a skill",
			params: Params{Run: testRun(), Policy: testPolicy(), Skill: testSkill("skill-pdf-tools"),
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: 2 * time.Minute},
			image: "registry.example/tools:2",
			command: []string{"/kubeskills/bin/runner", "run", "--timeout=2m0s", "--grace=5s", "--output-limit=4096",
				"--result-file=/dev/termination-log", `--policy={"approved":false}`,
				"--", `kubectl get pods -o json | jq '.items | length'`},
			env: append(gitEnv(), corev1.EnvVar{Name: "HOME", Value: "/tmp"}, corev1.EnvVar{Name: "SKILL_DIR", Value: "/skill"},
				corev1.EnvVar{Name: "TMPDIR", Value: "/tmp"}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := Job(tc.params).Spec.Template.Spec
			if len(spec.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(spec.Containers))
			}
			c := spec.Containers[0]
			if c.Name != "command" || c.Image != tc.image {
				t.Errorf("container %s image %s, want command image %s", c.Name, c.Image, tc.image)
			}
			if !reflect.DeepEqual(c.Command, tc.command) || len(c.Args) != 0 {
				t.Errorf("command = %q args %q, want %q", c.Command, c.Args, tc.command)
			}
			if !reflect.DeepEqual(c.Env, tc.env) {
				t.Errorf("env = %+v, want %+v", c.Env, tc.env)
			}
			if c.WorkingDir != "/tmp" {
				t.Errorf("workingDir = %q, want /tmp", c.WorkingDir)
			}
			if c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
				t.Errorf("termination message %s %s, want /dev/termination-log File", c.TerminationMessagePath, c.TerminationMessagePolicy)
			}
			runnerMount, ok := mount(c, "/kubeskills/bin")
			if !ok || !runnerMount.ReadOnly || runnerMount.Name != volumeRunner {
				t.Errorf("runner mount = %+v, %t, want read-only", runnerMount, ok)
			}
		})
	}
}

func TestInstallRunnerContainer(t *testing.T) {
	spec := Job(Params{Run: testRun(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute}).Spec.Template.Spec
	if len(spec.InitContainers) != 1 {
		t.Fatalf("%d init containers, want 1", len(spec.InitContainers))
	}
	c := spec.InitContainers[0]
	want := []string{"/usr/local/bin/runner", "install", "/kubeskills/bin/runner"}
	if c.Name != "install-runner" || c.Image != testRunnerImage || !reflect.DeepEqual(c.Command, want) {
		t.Errorf("init container %s image %s command %q", c.Name, c.Image, c.Command)
	}
	m, ok := mount(c, "/kubeskills/bin")
	if !ok || m.ReadOnly || len(c.VolumeMounts) != 1 {
		t.Errorf("mounts = %+v, want only a writable /kubeskills/bin", c.VolumeMounts)
	}
	if vol := volume(&batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}, m.Name); vol == nil || vol.EmptyDir == nil {
		t.Errorf("runner volume = %+v, want an emptyDir", vol)
	}
}

func TestSecretsOnlyInCommandContainer(t *testing.T) {
	job := Job(Params{Run: testRun(), Policy: testPolicy(), Skill: testSkill("skill-pdf-tools"),
		RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute})
	want := []corev1.EnvFromSource{
		{Prefix: "GH_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "github-token"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "registry"}}},
	}
	spec := job.Spec.Template.Spec
	if got := spec.Containers[0].EnvFrom; !reflect.DeepEqual(got, want) {
		t.Errorf("command envFrom = %+v, want %+v", got, want)
	}
	if len(spec.InitContainers) != 2 {
		t.Fatalf("%d init containers, want 2", len(spec.InitContainers))
	}
	for _, c := range spec.InitContainers {
		if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
			t.Errorf("init container %s has env %+v envFrom %+v", c.Name, c.Env, c.EnvFrom)
		}
	}
	for _, c := range allContainers(job) {
		for _, e := range c.Env {
			if e.ValueFrom != nil {
				t.Errorf("container %s takes %s from %+v", c.Name, e.Name, e.ValueFrom)
			}
		}
	}
	for _, vol := range spec.Volumes {
		if vol.Secret != nil || vol.Projected != nil {
			t.Errorf("volume %s mounts a Secret", vol.Name)
		}
	}
	noSecrets := Job(Params{Run: testRun(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute})
	if got := noSecrets.Spec.Template.Spec.Containers[0].EnvFrom; got != nil {
		t.Errorf("envFrom without secrets = %+v, want nil", got)
	}
}

// TestKeepAfterResult: the time a Job is kept after its run's result comes
// from its annotation; a Job without one, or with one that is not a number
// of seconds, says nothing, and the operator leaves it alone.
func TestKeepAfterResult(t *testing.T) {
	job := Job(Params{Run: testRun(), Policy: testPolicy(), RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute})
	if got, ok := KeepAfterResult(job); !ok || got != time.Minute {
		t.Errorf("KeepAfterResult = %s, %t; want 1m0s, true", got, ok)
	}
	for _, v := range []string{"", "-1", "5m", "99999999999"} {
		job.Annotations[AnnotationTTLSecondsAfterFinished] = v
		if got, ok := KeepAfterResult(job); ok {
			t.Errorf("KeepAfterResult of %q = %s, true; want false", v, got)
		}
	}
	delete(job.Annotations, AnnotationTTLSecondsAfterFinished)
	if got, ok := KeepAfterResult(job); ok {
		t.Errorf("KeepAfterResult without the annotation = %s, true; want false", got)
	}
}
