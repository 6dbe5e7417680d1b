package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
)

const sourceMD = `---
name: dns-debug
description: Finds why a pod cannot resolve a name.
---

# DNS debugging

Run scripts/resolve.sh POD NAME.
`

// sourceConfigMap is a skill source as kustomize's configMapGenerator
// writes it.
func sourceConfigMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{skillsv1.LabelSkillSource: "true"}},
		Data:       data,
	}
}

// waitSkillState waits until the Skill's Ready condition has the status and
// reason, for its latest generation, and returns the Skill.
func waitSkillState(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) *skillsv1.Skill {
	t.Helper()
	var s *skillsv1.Skill
	NewWithT(t).Eventually(func(g Gomega) {
		s = getSkill(g, ns, name)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		ready := condition(s.Status.Conditions, skillsv1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(status), ready.Message)
		g.Expect(ready.Reason).To(Equal(reason))
	}, timeout, interval).Should(Succeed())
	return s
}

// eventsWithReason waits for an Event of the given reason about obj and
// returns their notes.
func eventNotes(t *testing.T, obj *corev1.ConfigMap, reason string) []string {
	t.Helper()
	var notes []string
	NewWithT(t).Eventually(func(g Gomega) {
		notes = nil
		for _, e := range events(g, obj) {
			if e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).NotTo(BeEmpty())
	}, timeout, interval).Should(Succeed(), "no %s Event on ConfigMap %s", reason, obj.Name)
	return notes
}

// TestSkillFromSourceConfigMap follows a skill source through its life: a
// Skill owned by the ConfigMap is applied and served; an edit reaches it; a
// broken SKILL.md keeps the last content served and says why on both
// objects; a fix serves again; a hand edit of the Skill is undone; and the
// Skill goes when the ConfigMap stops being a source or is deleted.
func TestSkillFromSourceConfigMap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	cm := sourceConfigMap(ns, "dns-debug", map[string]string{
		"SKILL.md":            sourceMD,
		"scripts--resolve.sh": "kubectl exec \"$1\" -- nslookup \"$2\"\n",
	})
	g.Expect(k8s.Create(ctx, cm)).To(Succeed())

	s := waitSkillState(t, ns, "dns-debug", metav1.ConditionTrue, skillsv1.ReconciledReason)
	g.Expect(metav1.IsControlledBy(s, cm)).To(BeTrue(), "owner references %v", s.OwnerReferences)
	g.Expect(s.Spec.Description).To(Equal("Finds why a pod cannot resolve a name."))
	g.Expect(s.Spec.Files).To(HaveLen(1))
	g.Expect(s.Spec.Files[0].Path).To(Equal("scripts/resolve.sh"))
	g.Expect(s.Spec.Files[0].Executable).To(BeTrue())
	g.Expect(s.Status.ConfigMaps).To(Equal([]string{"skill-dns-debug"}))
	g.Expect(eventNotes(t, cm, controller.SkillAppliedReason)).To(ContainElement("Created Skill dns-debug"))

	t.Run("edit", func(t *testing.T) {
		g := NewWithT(t)
		cm.Data["references--coredns.md"] = "# CoreDNS\n"
		g.Expect(k8s.Update(ctx, cm)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(getSkill(g, ns, "dns-debug").Spec.Files).To(HaveLen(2))
		}, timeout, interval).Should(Succeed())
		s := waitSkillState(t, ns, "dns-debug", metav1.ConditionTrue, skillsv1.ReconciledReason)
		g.Expect(s.Status.ServedGeneration).To(Equal(int64(2)))
	})

	t.Run("broken SKILL.md", func(t *testing.T) {
		g := NewWithT(t)
		cm.Data["SKILL.md"] = "# DNS debugging\n\nNo front matter.\n"
		g.Expect(k8s.Update(ctx, cm)).To(Succeed())
		s := waitSkillState(t, ns, "dns-debug", metav1.ConditionFalse, skillsv1.SourceInvalidReason)
		msg := condition(s.Status.Conditions, skillsv1.ReadyCondition).Message
		g.Expect(msg).To(HavePrefix("The source of this Skill is invalid; generation 2 is still served. 1 problem:\n- ConfigMap dns-debug: SKILL.md: line 1:"))
		g.Expect(condition(s.Status.Conditions, skillsv1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(s.Annotations).To(HaveKey(skillsv1.AnnotationSourceError))
		g.Expect(s.Spec.Files).To(HaveLen(2), "the last spec stays")
		g.Expect(s.Status.ServedGeneration).To(Equal(int64(2)))
		g.Expect(eventNotes(t, cm, controller.InvalidSourceReason)[0]).To(HavePrefix("ConfigMap dns-debug: SKILL.md: line 1:"))
		g.Eventually(func(g Gomega) {
			var reasons []string
			for _, e := range events(g, s) {
				reasons = append(reasons, e.Reason)
			}
			g.Expect(reasons).To(ContainElement(skillsv1.SourceInvalidReason))
		}, timeout, interval).Should(Succeed())
	})

	t.Run("fixed", func(t *testing.T) {
		g := NewWithT(t)
		cm.Data["SKILL.md"] = sourceMD
		g.Expect(k8s.Update(ctx, cm)).To(Succeed())
		s := waitSkillState(t, ns, "dns-debug", metav1.ConditionTrue, skillsv1.ReconciledReason)
		g.Expect(s.Annotations).NotTo(HaveKey(skillsv1.AnnotationSourceError))
	})

	t.Run("hand edit undone", func(t *testing.T) {
		g := NewWithT(t)
		s := getSkill(g, ns, "dns-debug")
		s.Spec.Description = "Edited by hand."
		g.Expect(k8s.Update(ctx, s)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(getSkill(g, ns, "dns-debug").Spec.Description).To(Equal("Finds why a pod cannot resolve a name."))
		}, timeout, interval).Should(Succeed())
	})

	t.Run("label removed", func(t *testing.T) {
		g := NewWithT(t)
		delete(cm.Labels, skillsv1.LabelSkillSource)
		g.Expect(k8s.Update(ctx, cm)).To(Succeed())
		expectNoSkill(t, ns, "dns-debug")
	})

	t.Run("deleted", func(t *testing.T) {
		g := NewWithT(t)
		other := sourceConfigMap(ns, "other-skill", map[string]string{"SKILL.md": "---\nname: other-skill\ndescription: d\n---\nBody.\n"})
		g.Expect(k8s.Create(ctx, other)).To(Succeed())
		waitSkillState(t, ns, "other-skill", metav1.ConditionTrue, skillsv1.ReconciledReason)
		g.Expect(k8s.Delete(ctx, other)).To(Succeed())
		expectNoSkill(t, ns, "other-skill")
	})
}

func expectNoSkill(t *testing.T, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		err := k8s.Get(context.Background(), keyOf(ns, name), &skillsv1.Skill{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Skill %s/%s: %v", ns, name, err)
	}, timeout, interval).Should(Succeed())
}

// TestSkillSourceProblems: sources that cannot become a served Skill say
// why, and a source never takes over a Skill it did not make, nor does an
// unlabelled ConfigMap become a Skill.
func TestSkillSourceProblems(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)

	t.Run("broken from the start", func(t *testing.T) {
		g := NewWithT(t)
		cm := sourceConfigMap(ns, "no-skill-md", map[string]string{"README.md": "# Not a skill\n"})
		g.Expect(k8s.Create(ctx, cm)).To(Succeed())
		s := waitSkillState(t, ns, "no-skill-md", metav1.ConditionFalse, skillsv1.SourceInvalidReason)
		g.Expect(condition(s.Status.Conditions, skillsv1.ReadyCondition).Message).To(Equal(
			"The source of this Skill is invalid; nothing is served. 1 problem:\n" +
				"- ConfigMap no-skill-md: it has no SKILL.md key: add the skill's SKILL.md to the configMapGenerator's files"))
		g.Expect(s.Status.ConfigMaps).To(BeEmpty())
	})

	t.Run("refused by the API server", func(t *testing.T) {
		g := NewWithT(t)
		cm := sourceConfigMap(ns, "no-description", map[string]string{"SKILL.md": "---\nname: no-description\n---\nBody.\n"})
		g.Expect(k8s.Create(ctx, cm)).To(Succeed())
		s := waitSkillState(t, ns, "no-description", metav1.ConditionFalse, skillsv1.SourceInvalidReason)
		g.Expect(condition(s.Status.Conditions, skillsv1.ReadyCondition).Message).To(ContainSubstring("the API server refuses the Skill"))
		g.Expect(condition(s.Status.Conditions, skillsv1.ReadyCondition).Message).To(ContainSubstring("spec.description"))
	})

	t.Run("invalid for the operator", func(t *testing.T) {
		g := NewWithT(t)
		cm := sourceConfigMap(ns, "wrong-name", map[string]string{"SKILL.md": "---\nname: right-name\ndescription: d\n---\nBody.\n"})
		g.Expect(k8s.Create(ctx, cm)).To(Succeed())
		s := waitSkillState(t, ns, "wrong-name", metav1.ConditionFalse, skillsv1.ValidationFailedReason)
		g.Expect(condition(s.Status.Conditions, skillsv1.ReadyCondition).Message).To(ContainSubstring("metadata.name"))
	})

	t.Run("name that is no skill name", func(t *testing.T) {
		g := NewWithT(t)
		cm := sourceConfigMap(ns, "dns.debug", map[string]string{"SKILL.md": sourceMD})
		g.Expect(k8s.Create(ctx, cm)).To(Succeed())
		g.Expect(eventNotes(t, cm, controller.InvalidSourceReason)[0]).To(ContainSubstring("ConfigMap dns.debug cannot become a Skill"))
	})

	t.Run("Skill made by hand", func(t *testing.T) {
		g := NewWithT(t)
		own := &skillsv1.Skill{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "handmade"},
			Spec:       skillsv1.SkillSpec{Description: "Made by hand.", Instructions: "Body.\n"},
		}
		g.Expect(k8s.Create(ctx, own)).To(Succeed())
		cm := sourceConfigMap(ns, "handmade", map[string]string{"SKILL.md": "---\nname: handmade\ndescription: From Git.\n---\nBody.\n"})
		g.Expect(k8s.Create(ctx, cm)).To(Succeed())
		g.Expect(eventNotes(t, cm, controller.InvalidSourceReason)[0]).To(ContainSubstring("is not made from this ConfigMap"))
		s := getSkill(g, ns, "handmade")
		g.Expect(s.Spec.Description).To(Equal("Made by hand."))
		g.Expect(s.OwnerReferences).To(BeEmpty())
	})

	t.Run("unlabelled ConfigMap", func(t *testing.T) {
		g := NewWithT(t)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
			Data:       map[string]string{"SKILL.md": "---\nname: plain\ndescription: d\n---\nBody.\n"},
		}
		g.Expect(k8s.Create(ctx, cm)).To(Succeed())
		g.Consistently(func(g Gomega) {
			err := k8s.Get(ctx, keyOf(ns, "plain"), &skillsv1.Skill{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		}, time.Second, interval).Should(Succeed())
		// Labelled, it becomes one.
		cm.Labels = map[string]string{skillsv1.LabelSkillSource: "true"}
		g.Expect(k8s.Update(ctx, cm)).To(Succeed())
		s := waitSkillState(t, ns, "plain", metav1.ConditionTrue, skillsv1.ReconciledReason)
		g.Expect(s.OwnerReferences).To(ConsistOf(metav1.OwnerReference{
			APIVersion: "v1", Kind: "ConfigMap", Name: "plain", UID: cm.UID, Controller: ptr.To(true),
		}))
	})
}
