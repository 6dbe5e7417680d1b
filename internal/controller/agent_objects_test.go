package controller

import (
	"path"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/catalog"
)

// These are pure builder tests: no client, no API server.

const testBundleImage = "registry.example/skills/slides@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func testAgent() *skillsv1.Agent {
	return &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Name: "support", Namespace: "team-a", UID: types.UID("agent-uid-1")},
		Spec:       skillsv1.AgentSpec{Model: skillsv1.Model{BaseURL: "http://model.example/v1", Name: "small"}},
	}
}

// testCatalog is a catalog of two skills, neither bundled.
func testCatalog() *catalog.Catalog {
	return &catalog.Catalog{Agent: "support", Skills: []catalog.Entry{
		{Name: "pdf-forms", Description: "Fill PDF forms.", Invocation: catalog.InvocationAuto, ContentHash: "sha256:01", Shards: 1},
		{Name: "release-notes", Description: "Write release notes.", Invocation: catalog.InvocationAuto, ContentHash: "sha256:02", Shards: 2},
	}}
}

// withBundle returns the catalog with skill i bundled.
func withBundle(c *catalog.Catalog, i int, image, pullPolicy string) *catalog.Catalog {
	c.Skills[i].BundleImage, c.Skills[i].BundlePullPolicy = image, pullPolicy
	return c
}

func testDeployment(c *catalog.Catalog) corev1.PodTemplateSpec {
	return agentDeployment(agentParams{agent: testAgent(), image: "ghcr.io/kubeskills/agent:v0.1.0", catalog: c}).Spec.Template
}

func TestAgentObjectsBundleVolumes(t *testing.T) {
	cases := []struct {
		name    string
		catalog *catalog.Catalog
		// want maps each mount path to the image volume expected there.
		want map[string]corev1.ImageVolumeSource
	}{
		{"no bundle", testCatalog(), map[string]corev1.ImageVolumeSource{}},
		{"one bundle, pinned, IfNotPresent", withBundle(testCatalog(), 0, testBundleImage, "IfNotPresent"),
			map[string]corev1.ImageVolumeSource{
				"/var/run/kubeskills/skills/pdf-forms/bundle": {Reference: testBundleImage, PullPolicy: corev1.PullIfNotPresent},
			}},
		{"pull policy left to the API server", withBundle(testCatalog(), 1, "registry.example/notes:v2", ""),
			map[string]corev1.ImageVolumeSource{
				"/var/run/kubeskills/skills/release-notes/bundle": {Reference: "registry.example/notes:v2"},
			}},
		{"two bundles", withBundle(withBundle(testCatalog(), 0, testBundleImage, "Always"), 1, "registry.example/notes:v2", "Never"),
			map[string]corev1.ImageVolumeSource{
				"/var/run/kubeskills/skills/pdf-forms/bundle":     {Reference: testBundleImage, PullPolicy: corev1.PullAlways},
				"/var/run/kubeskills/skills/release-notes/bundle": {Reference: "registry.example/notes:v2", PullPolicy: corev1.PullNever},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testDeployment(tc.catalog).Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Containers))
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range pod.Containers[0].VolumeMounts {
				mounts[m.Name] = m
			}
			got := map[string]corev1.ImageVolumeSource{}
			names := map[string]bool{}
			for _, v := range pod.Volumes {
				if errs := validation.IsDNS1123Label(v.Name); len(errs) > 0 || names[v.Name] {
					t.Errorf("volume name %q is not a unique DNS label: %v", v.Name, errs)
				}
				names[v.Name] = true
				if v.Image == nil {
					continue
				}
				m, ok := mounts[v.Name]
				if !ok || !m.ReadOnly || m.SubPath != "" {
					t.Errorf("image volume %s is mounted as %+v, %t; want read-only, whole", v.Name, m, ok)
				}
				got[m.MountPath] = *v.Image
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("image volumes by mount path = %+v, want %+v", got, tc.want)
			}
			// SKILL.md shards stay mounted as for any skill.
			for _, e := range tc.catalog.Skills {
				for i := range e.Shards {
					if !hasConfigMapMount(pod, shardName(e.Name, i), path.Join(catalog.SkillsDir, e.Name, string(rune('0'+i)))) {
						t.Errorf("shard %d of %s is not mounted", i, e.Name)
					}
				}
			}
		})
	}
}

// hasConfigMapMount tells whether the pod mounts ConfigMap name read-only at
// mountPath.
func hasConfigMapMount(pod corev1.PodSpec, name, mountPath string) bool {
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != name {
			continue
		}
		for _, m := range pod.Containers[0].VolumeMounts {
			if m.Name == v.Name && m.MountPath == mountPath && m.ReadOnly {
				return true
			}
		}
	}
	return false
}

func TestAgentObjectsRollOnBundle(t *testing.T) {
	base := testDeployment(testCatalog())
	// The pods of agents without bundles keep the hash they had before
	// bundles existed: sha256("pdf-forms/1\nrelease-notes/2\n")[:16].
	if got := base.Annotations[AnnotationSkillsHash]; got != "88e4085398bb2f6f" {
		t.Errorf("skills hash without bundles = %s, want 88e4085398bb2f6f", got)
	}
	cases := []struct {
		name   string
		change func(c *catalog.Catalog)
		rolls  bool
	}{
		{"nothing", func(*catalog.Catalog) {}, false},
		{"content edit", func(c *catalog.Catalog) {
			c.Skills[0].ContentHash, c.Skills[0].Description = "sha256:03", "Fill PDF forms, faster."
		}, false},
		{"bundle added", func(c *catalog.Catalog) { withBundle(c, 0, testBundleImage, "") }, true},
		{"bundle added on the other skill", func(c *catalog.Catalog) { withBundle(c, 1, testBundleImage, "") }, true},
		{"bundle with a pull policy", func(c *catalog.Catalog) { withBundle(c, 0, testBundleImage, "Always") }, true},
		{"a shard more", func(c *catalog.Catalog) { c.Skills[0].Shards = 2 }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testCatalog()
			tc.change(c)
			got := testDeployment(c)
			if rolled := !equality.Semantic.DeepEqual(got, base); rolled != tc.rolls {
				t.Errorf("pod template changed: %t, want %t", rolled, tc.rolls)
			}
			if rehashed := got.Annotations[AnnotationSkillsHash] != base.Annotations[AnnotationSkillsHash]; rehashed != tc.rolls {
				t.Errorf("skills hash changed: %t, want %t", rehashed, tc.rolls)
			}
		})
	}
	// From one bundle to another, and back to none.
	bundled := testDeployment(withBundle(testCatalog(), 0, testBundleImage, ""))
	for name, other := range map[string]corev1.PodTemplateSpec{
		"another image":   testDeployment(withBundle(testCatalog(), 0, "registry.example/skills/slides:v2", "")),
		"bundle removed":  base,
		"the same bundle": testDeployment(withBundle(testCatalog(), 0, testBundleImage, "")),
	} {
		differs := !equality.Semantic.DeepEqual(bundled, other)
		if want := name != "the same bundle"; differs != want {
			t.Errorf("%s: pod template differs from the bundled one: %t, want %t", name, differs, want)
		}
	}
}

func TestAgentObjectsSelectBundle(t *testing.T) {
	served := func(name string, bundle *skillsv1.SkillBundle) skillsv1.Skill {
		return skillsv1.Skill{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
			Spec:       skillsv1.SkillSpec{Description: "Use " + name + ".", Bundle: bundle},
			Status: skillsv1.SkillStatus{ServedGeneration: 1, ContentHash: "sha256:" + name,
				ConfigMaps: []string{shardName(name, 0)}},
		}
	}
	matched := []skillsv1.Skill{
		served("inline", nil),
		served("pinned", &skillsv1.SkillBundle{Image: testBundleImage, PullPolicy: "IfNotPresent"}),
		served("tagged", &skillsv1.SkillBundle{Image: "registry.example/tagged:v1"}),
		served("empty-bundle", &skillsv1.SkillBundle{}),
	}
	sel := selectSkills(nil, matched)
	got := map[string][2]string{}
	for _, e := range sel.entries {
		got[e.Name] = [2]string{e.BundleImage, e.BundlePullPolicy}
	}
	want := map[string][2]string{
		"inline":       {"", ""},
		"pinned":       {testBundleImage, "IfNotPresent"},
		"tagged":       {"registry.example/tagged:v1", ""},
		"empty-bundle": {"", ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bundles by skill = %v, want %v", got, want)
	}
	if _, err := catalog.Encode(&catalog.Catalog{Agent: "support", Skills: sel.entries}, 0); err != nil {
		t.Errorf("Encode() of the selection error = %v", err)
	}
}

// TestAgentObjectsMemoryLimit: the agent's Go runtime keeps under 90% of
// its container's memory limit, the default one or the Agent's; with no
// limit it has none.
func TestAgentObjectsMemoryLimit(t *testing.T) {
	gomemlimit := func(a *skillsv1.Agent) (string, bool) {
		d := agentDeployment(agentParams{agent: a, image: "ghcr.io/kubeskills/agent:v0.1.0", catalog: testCatalog()})
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "GOMEMLIMIT" {
				return e.Value, true
			}
		}
		return "", false
	}
	a := testAgent()
	if v, ok := gomemlimit(a); v != "241591905" {
		t.Errorf("with the default limit of 256Mi, GOMEMLIMIT = %q (set: %t), want 241591905", v, ok)
	}
	a.Spec.Runtime = &skillsv1.AgentRuntime{Resources: &corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}}
	if v, ok := gomemlimit(a); v != "966367638" {
		t.Errorf("with a limit of 1Gi, GOMEMLIMIT = %q (set: %t), want 966367638", v, ok)
	}
	a.Spec.Runtime.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	if v, ok := gomemlimit(a); ok {
		t.Errorf("with no memory limit, GOMEMLIMIT = %q, want none", v)
	}
}

// TestAgentObjectsTracing: the agent's container gets the operator's
// tracing variables, so that its traces go where the operator's go.
func TestAgentObjectsTracing(t *testing.T) {
	tracing := []corev1.EnvVar{{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://collector.observability:4318"}}
	d := agentDeployment(agentParams{agent: testAgent(), image: "ghcr.io/kubeskills/agent:v0.1.0", catalog: testCatalog(), tracing: tracing})
	env := d.Spec.Template.Spec.Containers[0].Env
	if len(env) != 2 || env[1] != tracing[0] {
		t.Errorf("env = %v, want GOMEMLIMIT then %v", env, tracing)
	}
}
