package sandbox

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

func TestSkillMounts(t *testing.T) {
	shards := []string{"skill-pdf-tools", "skill-pdf-tools--1", "skill-pdf-tools--2"}
	job := Job(Params{Run: testRun(), Skill: testSkill(shards...), RunnerImage: testRunnerImage,
		DefaultImage: testDefaultImage, Timeout: time.Minute})
	spec := job.Spec.Template.Spec

	for i, name := range shards {
		vol := volume(job, volumeShardPrefix+string(rune('0'+i)))
		if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != name {
			t.Fatalf("shard %d volume = %+v, want ConfigMap %s", i, vol, name)
		}
		if mode := vol.ConfigMap.DefaultMode; mode == nil || *mode != 0o444 {
			t.Errorf("shard %d defaultMode = %v, want 0444", i, ptrString(mode))
		}
		if vol.ConfigMap.Optional != nil && *vol.ConfigMap.Optional {
			t.Errorf("shard %d is optional: the command could run without its skill", i)
		}
	}
	if vol := volume(job, volumeSkill); vol == nil || vol.EmptyDir == nil || vol.EmptyDir.SizeLimit == nil {
		t.Fatalf("skill volume = %+v, want a size-limited emptyDir", vol)
	}

	if len(spec.InitContainers) != 2 || spec.InitContainers[0].Name != "install-runner" {
		t.Fatalf("init containers = %d, want install-runner then unpack-skill", len(spec.InitContainers))
	}
	unpack := spec.InitContainers[1]
	wantCommand := []string{"/usr/local/bin/runner", "unpack-skill", "--to", "/skill",
		"/kubeskills/shards/0", "/kubeskills/shards/1", "/kubeskills/shards/2"}
	if unpack.Name != "unpack-skill" || unpack.Image != testRunnerImage || !reflect.DeepEqual(unpack.Command, wantCommand) {
		t.Errorf("unpack container %s image %s command %q, want %q", unpack.Name, unpack.Image, unpack.Command, wantCommand)
	}
	wantMounts := []corev1.VolumeMount{
		{Name: "skill", MountPath: "/skill"},
		{Name: "skill-shard-0", MountPath: "/kubeskills/shards/0", ReadOnly: true},
		{Name: "skill-shard-1", MountPath: "/kubeskills/shards/1", ReadOnly: true},
		{Name: "skill-shard-2", MountPath: "/kubeskills/shards/2", ReadOnly: true},
	}
	if !reflect.DeepEqual(unpack.VolumeMounts, wantMounts) {
		t.Errorf("unpack mounts = %+v, want %+v", unpack.VolumeMounts, wantMounts)
	}

	command := spec.Containers[0]
	m, ok := mount(command, "/skill")
	if !ok || !m.ReadOnly || m.Name != volumeSkill {
		t.Errorf("command's /skill mount = %+v, %t, want the skill volume read-only", m, ok)
	}
	for _, m := range command.VolumeMounts {
		if strings.HasPrefix(m.Name, volumeShardPrefix) {
			t.Errorf("the command mounts shard %s", m.Name)
		}
		if !m.ReadOnly && m.MountPath != TmpDir {
			t.Errorf("the command can write %s", m.MountPath)
		}
	}
}

func TestNoSkillNoSkillMounts(t *testing.T) {
	job := Job(Params{Run: testRun(), Policy: testPolicy(), RunnerImage: testRunnerImage,
		DefaultImage: testDefaultImage, Timeout: time.Minute})
	spec := job.Spec.Template.Spec
	var names []string
	for _, v := range spec.Volumes {
		names = append(names, v.Name)
	}
	if want := []string{"runner", "tmp"}; !reflect.DeepEqual(names, want) {
		t.Errorf("volumes = %q, want %q", names, want)
	}
	if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "install-runner" {
		t.Errorf("init containers = %+v, want install-runner only", spec.InitContainers)
	}
	if _, ok := mount(spec.Containers[0], SkillDir); ok {
		t.Error("the command mounts /skill without a skill")
	}
	for _, e := range spec.Containers[0].Env {
		if e.Name == EnvSkillDir {
			t.Error("SKILL_DIR is set without a skill")
		}
	}
}

func TestSkillWithoutConfigMapsStillUnpacks(t *testing.T) {
	// A skill not served yet must not let the command run without it:
	// unpack-skill runs with no shard and fails with a message.
	spec := Job(Params{Run: testRun(), Skill: testSkill(), RunnerImage: testRunnerImage,
		DefaultImage: testDefaultImage, Timeout: time.Minute}).Spec.Template.Spec
	if len(spec.InitContainers) != 2 {
		t.Fatalf("%d init containers, want 2", len(spec.InitContainers))
	}
	want := []string{"/usr/local/bin/runner", "unpack-skill", "--to", "/skill"}
	if got := spec.InitContainers[1].Command; !reflect.DeepEqual(got, want) {
		t.Errorf("unpack command = %q, want %q", got, want)
	}
}

func TestResources(t *testing.T) {
	q := resource.MustParse
	list := func(cpu, memory string) corev1.ResourceList {
		l := corev1.ResourceList{}
		if cpu != "" {
			l[corev1.ResourceCPU] = q(cpu)
		}
		if memory != "" {
			l[corev1.ResourceMemory] = q(memory)
		}
		return l
	}
	cases := []struct {
		name   string
		policy *corev1.ResourceRequirements
		want   corev1.ResourceRequirements
	}{
		{"defaults", nil, corev1.ResourceRequirements{Requests: list("50m", "64Mi"), Limits: list("500m", "256Mi")}},
		{"policy's kept whole",
			&corev1.ResourceRequirements{Requests: list("100m", "128Mi"), Limits: list("1", "1Gi")},
			corev1.ResourceRequirements{Requests: list("100m", "128Mi"), Limits: list("1", "1Gi")}},
		{"small limits clamp default requests",
			&corev1.ResourceRequirements{Limits: list("20m", "32Mi")},
			corev1.ResourceRequirements{Requests: list("20m", "32Mi"), Limits: list("20m", "32Mi")}},
		{"large requests raise default limits",
			&corev1.ResourceRequirements{Requests: list("2", "1Gi")},
			corev1.ResourceRequirements{Requests: list("2", "1Gi"), Limits: list("2", "1Gi")}},
		{"only memory set",
			&corev1.ResourceRequirements{Requests: list("", "100Mi"), Limits: list("", "200Mi")},
			corev1.ResourceRequirements{Requests: list("50m", "100Mi"), Limits: list("500m", "200Mi")}},
		{"other resources kept",
			&corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: q("1Gi")}},
			corev1.ResourceRequirements{Requests: list("50m", "64Mi"), Limits: corev1.ResourceList{
				corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("256Mi"), corev1.ResourceEphemeralStorage: q("1Gi")}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{Sandbox: &skillsv1.Sandbox{Resources: tc.policy}}}
			got := Job(Params{Run: testRun(), Policy: policy, RunnerImage: testRunnerImage,
				DefaultImage: testDefaultImage, Timeout: time.Minute}).Spec.Template.Spec.Containers[0].Resources
			if !semanticEqual(got, tc.want) {
				t.Errorf("resources = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRuntimeClassName(t *testing.T) {
	cases := []struct {
		name  string
		class *string
		want  *string
	}{
		{"unset", nil, nil},
		{"empty", ptr.To(""), nil},
		{"gvisor", ptr.To("gvisor"), ptr.To("gvisor")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			policy := &skillsv1.CommandPolicy{Spec: skillsv1.CommandPolicySpec{Sandbox: &skillsv1.Sandbox{RuntimeClassName: tc.class}}}
			got := Job(Params{Run: testRun(), Policy: policy, RunnerImage: testRunnerImage,
				DefaultImage: testDefaultImage, Timeout: time.Minute}).Spec.Template.Spec.RuntimeClassName
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("runtimeClassName = %s, want %s", ptrString(got), ptrString(tc.want))
			}
		})
	}
}

func TestJobIsDeterministicAndSharesNothing(t *testing.T) {
	for _, v := range variants() {
		t.Run(v.name, func(t *testing.T) {
			first := Job(v.params)
			if second := Job(v.params); !reflect.DeepEqual(first, second) {
				t.Fatal("two builds from the same Params differ")
			}
			// Changing a built Job must not change the input or the next build.
			c := &first.Spec.Template.Spec.Containers[0]
			c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("64")
			first.Labels[LabelAgent] = "changed"
			if v.params.Skill != nil && len(v.params.Skill.Status.ConfigMaps) > 0 {
				last := &first.Spec.Template.Spec.Volumes[len(first.Spec.Template.Spec.Volumes)-1]
				if last.Image != nil {
					last.Image.Reference = "changed"
				} else {
					last.ConfigMap.Name = "changed"
				}
			}
			again := Job(v.params)
			if semanticEqual(again, first) {
				t.Error("a change to a built Job reached the next build")
			}
			if v.params.Policy != nil && v.params.Policy.Spec.Sandbox != nil && v.params.Policy.Spec.Sandbox.Resources != nil {
				if got := v.params.Policy.Spec.Sandbox.Resources.Limits[corev1.ResourceCPU]; got.String() == "64" {
					t.Error("a change to a built Job reached the policy")
				}
			}
			if v.params.Run.Spec.Agent != "ops" {
				t.Error("a change to a built Job reached the run")
			}
		})
	}
}

func TestBundledSkillMounts(t *testing.T) {
	cases := []struct {
		name       string
		pullPolicy string
		policy     *skillsv1.CommandPolicy
		want       corev1.PullPolicy
	}{
		{"IfNotPresent, with Secrets", "IfNotPresent", testPolicy(), corev1.PullIfNotPresent},
		{"Always", "Always", nil, corev1.PullAlways},
		{"Never", "Never", testPolicy(), corev1.PullNever},
		{"unset is left to the API server", "", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := Job(Params{Run: testRun(), Policy: tc.policy, Skill: testBundledSkill(tc.pullPolicy),
				RunnerImage: testRunnerImage, DefaultImage: testDefaultImage, Timeout: time.Minute})
			spec := job.Spec.Template.Spec

			vol := volume(job, volumeSkill)
			if vol == nil || vol.Image == nil || vol.EmptyDir != nil || vol.ConfigMap != nil {
				t.Fatalf("skill volume = %+v, want an image volume only", vol)
			}
			if want := (corev1.ImageVolumeSource{Reference: testBundleImage, PullPolicy: tc.want}); *vol.Image != want {
				t.Errorf("image volume = %+v, want %+v", *vol.Image, want)
			}
			var names []string
			for _, v := range spec.Volumes {
				names = append(names, v.Name)
			}
			if want := []string{"runner", "tmp", "skill"}; !reflect.DeepEqual(names, want) {
				t.Errorf("volumes = %q, want %q: no shard is mounted for a bundled skill", names, want)
			}

			if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != ContainerInstallRunner {
				t.Fatalf("init containers = %d, want install-runner only", len(spec.InitContainers))
			}
			for _, c := range spec.InitContainers {
				if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
					t.Errorf("init container %s has env %+v envFrom %+v", c.Name, c.Env, c.EnvFrom)
				}
				if _, ok := mount(c, SkillDir); ok {
					t.Errorf("init container %s mounts the bundle", c.Name)
				}
			}

			command := spec.Containers[0]
			m, ok := mount(command, SkillDir)
			if want := (corev1.VolumeMount{Name: volumeSkill, MountPath: SkillDir, ReadOnly: true}); !ok || !reflect.DeepEqual(m, want) {
				t.Errorf("command's /skill mount = %+v, %t, want %+v", m, ok, want)
			}
			for _, m := range command.VolumeMounts {
				if !m.ReadOnly && m.MountPath != TmpDir {
					t.Errorf("the command can write %s", m.MountPath)
				}
			}
			if !slices.Contains(command.Env, corev1.EnvVar{Name: EnvSkillDir, Value: SkillDir}) {
				t.Errorf("env = %+v, want SKILL_DIR=/skill", command.Env)
			}
			if wantSecrets := tc.policy != nil; (len(command.EnvFrom) > 0) != wantSecrets {
				t.Errorf("command envFrom = %+v, want Secrets: %t", command.EnvFrom, wantSecrets)
			}
			for _, v := range spec.Volumes {
				if v.Secret != nil || v.Projected != nil {
					t.Errorf("volume %s mounts a Secret", v.Name)
				}
			}
		})
	}
}

func TestBundleWithoutImageUnpacksShards(t *testing.T) {
	s := testSkill("skill-pdf-tools")
	s.Spec.Bundle = &skillsv1.SkillBundle{}
	spec := Job(Params{Run: testRun(), Skill: s, RunnerImage: testRunnerImage,
		DefaultImage: testDefaultImage, Timeout: time.Minute}).Spec.Template.Spec
	if len(spec.InitContainers) != 2 || spec.InitContainers[1].Name != ContainerUnpackSkill {
		t.Errorf("init containers = %d, want install-runner and unpack-skill", len(spec.InitContainers))
	}
	for _, v := range spec.Volumes {
		if v.Image != nil {
			t.Errorf("volume %s is an image volume without an image", v.Name)
		}
	}
}

func TestBundleChangesTheJob(t *testing.T) {
	build := func(s *skillsv1.Skill) corev1.PodSpec {
		return Job(Params{Run: testRun(), Skill: s, RunnerImage: testRunnerImage,
			DefaultImage: testDefaultImage, Timeout: time.Minute}).Spec.Template.Spec
	}
	inline, bundled := build(testSkill("skill-pdf-tools")), build(testBundledSkill(""))
	if semanticEqual(inline, bundled) {
		t.Error("a bundled skill gives the same pod as an inline one")
	}
	other := testBundledSkill("")
	other.Spec.Bundle.Image = "registry.example/skills/pdf-tools:v2"
	if semanticEqual(bundled, build(other)) {
		t.Error("another bundle image gives the same pod")
	}
}
