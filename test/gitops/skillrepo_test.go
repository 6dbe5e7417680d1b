package gitops

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// repoDir is the example skill repository.
func repoDir() string { return filepath.Join(testenv.RepoRoot(), "examples", "skill-repo") }

// build runs kustomize on a directory, as Argo CD and Flux do, and returns
// the objects it writes.
func build(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := testenv.KustomizeBuild(dir)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(out)), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("failed to decode the output of kustomize build: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// sync server-side applies objects into a namespace, as a GitOps tool does.
func sync(t *testing.T, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		u = u.DeepCopy()
		u.SetNamespace(ns)
		err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("gitops-test"), client.ForceOwnership)
		if err != nil {
			t.Fatalf("server-side apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// copyRepo copies the example repository into a scratch directory, to be
// edited as a commit would.
func copyRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "skill-repo")
	if err := os.CopyFS(dir, os.DirFS(repoDir())); err != nil {
		t.Fatal(err)
	}
	return dir
}

// skillFolders lists the skill folders of the repository.
func skillFolders(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "skills"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// readySkill waits until a Skill is Ready for its latest generation.
func readySkill(t *testing.T, ns, name string) *skillsv1.Skill {
	t.Helper()
	return waitSkill(t, ns, name, func(g Gomega, s *skillsv1.Skill) {
		ready := apimeta.FindStatusCondition(s.Status.Conditions, skillsv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	})
}

// waitSkill waits until the operator observed a Skill's latest generation
// and check passes.
func waitSkill(t *testing.T, ns, name string, check func(Gomega, *skillsv1.Skill)) *skillsv1.Skill {
	t.Helper()
	s := &skillsv1.Skill{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		check(g, s)
	}, timeout, interval).Should(Succeed(), "Skill %s/%s", ns, name)
	return s
}

// TestRepositoryHoldsEverySkillFile: kustomize builds one skill source
// ConfigMap per folder under skills/, and each holds its folder exactly:
// read back as a skill, it is the skill `kubectl skills validate` reads
// from the folder, every file and executable bit included. A file added to
// a folder but not to kustomization.yaml fails here.
func TestRepositoryHoldsEverySkillFile(t *testing.T) {
	objs := build(t, repoDir())
	folders := skillFolders(t, repoDir())
	var names []string
	for _, u := range objs {
		names = append(names, u.GetKind()+"/"+u.GetName())
	}
	var want []string
	for _, f := range folders {
		want = append(want, "ConfigMap/"+f)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("kustomize build wrote %v, want one ConfigMap per skill folder %v", names, want)
	}
	for _, u := range objs {
		t.Run(u.GetName(), func(t *testing.T) {
			cm := &corev1.ConfigMap{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cm); err != nil {
				t.Fatal(err)
			}
			if cm.Labels[skillsv1.LabelSkillSource] != "true" {
				t.Errorf("labels %v lack %s=true", cm.Labels, skillsv1.LabelSkillSource)
			}
			obj, err := skillapi.FromSource(cm.Name, "default", cm.Data, cm.BinaryData)
			if err != nil {
				t.Fatal(err)
			}
			got, problems := skillapi.FromObject(obj)
			if len(problems) > 0 {
				t.Fatal(problems)
			}
			want, err := skill.ParseDir(filepath.Join(repoDir(), "skills", cm.Name))
			if err != nil {
				t.Fatal(err)
			}
			if report := skill.Validate(want, skill.Options{ExpectedName: cm.Name}); !report.OK() {
				t.Errorf("skills/%s is invalid: %v", cm.Name, report.Err())
			}
			if skill.Hash(got) != skill.Hash(want) {
				t.Errorf("ConfigMap %s does not hold skills/%s as it is:\n got files %v\nwant files %v",
					cm.Name, cm.Name, filesOf(got), filesOf(want))
			}
		})
	}
}

func filesOf(s *skill.Skill) []string {
	var out []string
	for _, f := range s.Files {
		mode := ""
		if f.Executable {
			mode = " (executable)"
		}
		out = append(out, f.Path+mode)
	}
	return out
}

// TestRepositorySyncs syncs the example repository as Argo CD or Flux
// would and follows its skills: each becomes Ready and served from its
// ConfigMaps; a commit that edits a SKILL.md changes the Skill; a commit
// that breaks one is reported on the Skill and the ConfigMap, while the
// last good content stays served; the next good commit serves again.
func TestRepositorySyncs(t *testing.T) {
	ns := env.Namespace(t)
	repo := copyRepo(t)
	sync(t, ns, build(t, repo))

	for _, name := range skillFolders(t, repo) {
		s := readySkill(t, ns, name)
		g := NewWithT(t)
		g.Expect(s.Status.ConfigMaps).To(Equal([]string{"skill-" + name}))
		g.Expect(metav1.GetControllerOf(s)).NotTo(BeNil())
		g.Expect(metav1.GetControllerOf(s).Kind).To(Equal("ConfigMap"))
		served := &corev1.ConfigMap{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "skill-" + name}, served)).To(Succeed())
		g.Expect(served.Data).To(HaveKey(skill.SkillFileName))
	}
	s := readySkill(t, ns, "rollout-check")
	NewWithT(t).Expect(s.Spec.Files).To(ContainElement(HaveField("Path", "references/runbooks/stuck-rollouts.md")))

	skillMD := filepath.Join(repo, "skills", "incident-summary", "SKILL.md")
	original, err := os.ReadFile(skillMD)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("edited", func(t *testing.T) {
		edited := strings.Replace(string(original), "Keep it under 200 words.", "Keep it under 120 words.", 1)
		writeFile(t, skillMD, edited)
		sync(t, ns, build(t, repo))
		s := waitSkill(t, ns, "incident-summary", func(g Gomega, s *skillsv1.Skill) {
			g.Expect(s.Spec.Instructions).To(ContainSubstring("under 120 words"))
			g.Expect(apimeta.IsStatusConditionTrue(s.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue())
		})
		NewWithT(t).Expect(s.Status.ServedGeneration).To(Equal(s.Generation))
		NewWithT(t).Expect(s.Generation).To(BeNumerically(">", 1))
	})

	t.Run("broken", func(t *testing.T) {
		writeFile(t, skillMD, strings.Replace(string(original), "---\nname:", "name:", 1))
		sync(t, ns, build(t, repo))
		s := waitSkill(t, ns, "incident-summary", func(g Gomega, s *skillsv1.Skill) {
			g.Expect(apimeta.IsStatusConditionTrue(s.Status.Conditions, skillsv1.StalledCondition)).To(BeTrue())
		})
		g := NewWithT(t)
		ready := apimeta.FindStatusCondition(s.Status.Conditions, skillsv1.ReadyCondition)
		g.Expect(ready.Reason).To(Equal(skillsv1.SourceInvalidReason))
		g.Expect(ready.Message).To(HavePrefix("The source of this Skill is invalid; generation 2 is still served."))
		g.Expect(ready.Message).To(ContainSubstring("ConfigMap incident-summary: SKILL.md: line 1:"))
		g.Expect(s.Spec.Instructions).To(ContainSubstring("under 120 words"), "the last good spec stays")
		g.Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == "incident-summary" && e.Type == corev1.EventTypeWarning {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ContainElement(HavePrefix("ConfigMap incident-summary: SKILL.md: line 1:")))
		}, timeout, interval).Should(Succeed())
	})

	t.Run("fixed", func(t *testing.T) {
		writeFile(t, skillMD, string(original))
		sync(t, ns, build(t, repo))
		s := waitSkill(t, ns, "incident-summary", func(g Gomega, s *skillsv1.Skill) {
			g.Expect(s.Spec.Instructions).To(ContainSubstring("under 200 words"))
			g.Expect(apimeta.IsStatusConditionTrue(s.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue())
		})
		NewWithT(t).Expect(s.Annotations).NotTo(HaveKey(skillsv1.AnnotationSourceError))
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
