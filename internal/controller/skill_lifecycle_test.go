package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
)

// update applies mutate to the latest Skill and writes it.
func update(t *testing.T, ns, name string, mutate func(*skillsv1.Skill)) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		s := getSkill(g, ns, name)
		mutate(s)
		return k8s.Update(context.Background(), s)
	}, timeout, interval).Should(Succeed())
}

// TestInvalidUpdateKeepsServedContent: a bad edit never breaks running
// agents. The last valid content stays in the ConfigMap, the status says
// which generation is served, and a fix serves the new generation.
func TestInvalidUpdateKeepsServedContent(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newSkill(ns, "kept-content")
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	good := waitSkill(t, ns, obj.Name)
	cms, _ := servedShards(g, ns, obj.Name)
	g.Expect(cms).To(HaveLen(1))
	servedVersion := cms[0].ResourceVersion

	update(t, ns, obj.Name, func(s *skillsv1.Skill) { s.Spec.Instructions = "" })
	bad := waitSkill(t, ns, obj.Name)
	g.Expect(bad.Generation).To(Equal(int64(2)))
	ready := condition(bad.Status.Conditions, skillsv1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Message).To(HavePrefix("Generation 2 is invalid; generation 1 is still served. 1 problem:"))
	g.Expect(bad.Status.ServedGeneration).To(Equal(int64(1)))
	g.Expect(bad.Status.ContentHash).To(Equal(good.Status.ContentHash))
	cms, _ = servedShards(g, ns, obj.Name)
	g.Expect(cms).To(HaveLen(1))
	g.Expect(cms[0].ResourceVersion).To(Equal(servedVersion), "the served ConfigMap must not change")

	update(t, ns, obj.Name, func(s *skillsv1.Skill) { s.Spec.Instructions = "# Crash loops\n\nNew method.\n" })
	fixed := waitSkill(t, ns, obj.Name)
	g.Expect(condition(fixed.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(condition(fixed.Status.Conditions, skillsv1.StalledCondition)).To(BeNil())
	g.Expect(fixed.Status.ServedGeneration).To(Equal(int64(3)))
	g.Expect(fixed.Status.ContentHash).NotTo(Equal(good.Status.ContentHash))
	cms, _ = servedShards(g, ns, obj.Name)
	g.Expect(cms[0].Data[skill.SkillFileName]).To(ContainSubstring("New method."))
	g.Expect(cms[0].Annotations[skillsv1.AnnotationContentHash]).To(Equal(fixed.Status.ContentHash))
}

// TestDisabledSkillStaysServedAndMarked: agents leave a Disabled skill out,
// but its content stays served, marked on the ConfigMap.
func TestDisabledSkillStaysServedAndMarked(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newSkill(ns, "disabled")
	obj.Spec.Invocation = skillsv1.InvocationDisabled
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	got := waitSkill(t, ns, obj.Name)
	g.Expect(condition(got.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	cms, _ := servedShards(g, ns, obj.Name)
	g.Expect(cms).To(HaveLen(1))
	g.Expect(cms[0].Annotations).To(HaveKeyWithValue(controller.AnnotationInvocation, "Disabled"))
}

// TestLargeSkillIsShardedAndShrinks serves a skill of a 70 KB SKILL.md and
// 1.2 MB of bundled XML (more than one ConfigMap holds, and more than etcd
// stores in one object until its files are compressed, as `kubectl skills
// import` does) over several ConfigMaps, then shrinks it and checks the
// extra ConfigMaps are deleted.
func TestLargeSkillIsShardedAndShrinks(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newSkill(ns, "large-runbook")
	obj.Spec.Instructions = "# Runbook\n\n" + strings.Repeat("Check each replica's readiness before you continue.\n", 1400)
	g.Expect(len(obj.Spec.Instructions)).To(BeNumerically(">", 70_000))
	for i := range 60 {
		text := fmt.Sprintf("<schema id=\"%d\">\n%s</schema>\n", i, strings.Repeat("  <element name=\"field\" type=\"string\"/>\n", 480))
		obj.Spec.Files = append(obj.Spec.Files, skillsv1.SkillFile{Path: fmt.Sprintf("references/schema-%02d.xsd", i), Content: ptr.To(text)})
	}
	want, _ := skillapi.FromObject(obj)
	size, err := skillapi.ObjectBytes(obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(size).To(BeNumerically(">", skillapi.MaxObjectBytes))
	g.Expect(skillapi.Fit(obj, skillapi.MaxObjectBytes)).To(BeTrue())
	// A Skill whose name is the large one's plus "-1" must not share a
	// ConfigMap with the large one's second shard.
	neighbour := newSkill(ns, "large-runbook-1")
	g.Expect(k8s.Create(context.Background(), neighbour)).To(Succeed())
	neighbourHash := waitSkill(t, ns, neighbour.Name).Status.ContentHash
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())

	got := waitSkill(t, ns, obj.Name)
	g.Expect(condition(got.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue),
		condition(got.Status.Conditions, skillsv1.ReadyCondition).Message)
	g.Expect(got.Status.SizeBytes).To(BeNumerically(">", 1_200_000))
	g.Expect(len(got.Status.ConfigMaps)).To(BeNumerically(">=", 2))
	g.Expect(got.Status.ConfigMaps).NotTo(ContainElements(getSkill(g, ns, neighbour.Name).Status.ConfigMaps),
		"two Skills are served from the same ConfigMap")
	cms, shards := servedShards(g, ns, obj.Name)
	g.Expect(cms).To(HaveLen(len(got.Status.ConfigMaps)))
	served, err := skill.Unpack(shards)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served.Files).To(Equal(want.Files), "the served files must be the uncompressed originals")
	g.Expect(skill.Hash(served)).To(Equal(got.Status.ContentHash))

	update(t, ns, obj.Name, func(s *skillsv1.Skill) { s.Spec.Files = s.Spec.Files[:2] })
	g.Eventually(func(g Gomega) {
		s := getSkill(g, ns, obj.Name)
		g.Expect(s.Status.ServedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.ConfigMaps).To(HaveLen(1))
		cms, _ := servedShards(g, ns, obj.Name)
		g.Expect(cms).To(HaveLen(1), "shards of the larger version must be deleted")
	}, timeout, interval).Should(Succeed())
	_, neighbourShards := servedShards(g, ns, neighbour.Name)
	neighbourServed, err := skill.Unpack(neighbourShards)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(skill.Hash(neighbourServed)).To(Equal(neighbourHash), "the neighbour's ConfigMap was taken over")
}

// TestDeletedConfigMapIsRestored: the operator puts back a ConfigMap that
// someone deleted.
func TestDeletedConfigMapIsRestored(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newSkill(ns, "restored")
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	waitSkill(t, ns, obj.Name)
	cms, _ := servedShards(g, ns, obj.Name)
	g.Expect(cms).To(HaveLen(1))
	g.Expect(k8s.Delete(context.Background(), &cms[0])).To(Succeed())
	g.Eventually(func(g Gomega) {
		var cm corev1.ConfigMap
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "skill-restored"}, &cm)).To(Succeed())
		g.Expect(cm.UID).NotTo(Equal(cms[0].UID))
		g.Expect(cm.Data).To(HaveKey(skill.SkillFileName))
	}, timeout, interval).Should(Succeed())
}

// TestBundleImageChangeIsNewContent: a Skill whose files come from an image
// serves new content when only the image changes.
func TestBundleImageChangeIsNewContent(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newSkill(ns, "bundled")
	obj.Spec.Files = nil
	obj.Spec.Bundle = &skillsv1.SkillBundle{Image: "registry.example.com/skills/bundled:v1"}
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	v1 := waitSkill(t, ns, obj.Name)
	g.Expect(condition(v1.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	update(t, ns, obj.Name, func(s *skillsv1.Skill) { s.Spec.Bundle.Image = "registry.example.com/skills/bundled:v2" })
	g.Eventually(func(g Gomega) {
		s := getSkill(g, ns, obj.Name)
		g.Expect(s.Status.ServedGeneration).To(Equal(s.Generation))
		g.Expect(s.Status.ContentHash).NotTo(Equal(v1.Status.ContentHash))
	}, timeout, interval).Should(Succeed())
}
