package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestSkillWarnsAboutKeysOutsideTheSpecification: a Skill whose front matter
// has keys outside the six of the Agent Skills specification is served
// (Ready, the generation observed) with a warning in status.warnings, which
// goes when the keys go; generated front matter of an Explicit Skill holds
// disable-model-invocation, which brings the warning too.
func TestSkillWarnsAboutKeysOutsideTheSpecification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	obj := newSkill(ns, "portable")
	obj.Spec.FrontMatter = "name: portable\ndescription: " + obj.Spec.Description +
		"\nuser-invocable: true\nargument-hint: \"[pod]\"\n"
	g.Expect(k8s.Create(ctx, obj)).To(Succeed())

	served := func(generation int64) *skillsv1.Skill {
		t.Helper()
		got := waitSkill(t, ns, obj.Name)
		g.Expect(got.Generation).To(Equal(generation))
		ready := condition(got.Status.Conditions, skillsv1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
		g.Expect(ready.Reason).To(Equal(skillsv1.ReconciledReason))
		g.Expect(ready.ObservedGeneration).To(Equal(generation))
		g.Expect(condition(got.Status.Conditions, skillsv1.StalledCondition)).To(BeNil())
		g.Expect(got.Status.ServedGeneration).To(Equal(generation))
		return got
	}
	got := served(1)
	g.Expect(got.Status.Warnings).To(ConsistOf(HavePrefix(
		`spec.frontMatter: the front matter has 2 keys outside the six of the Agent Skills specification: "user-invocable" (line 4), "argument-hint" (line 5) (`)))

	update := func(mutate func(*skillsv1.Skill)) {
		g.Eventually(func() error {
			s := getSkill(g, ns, obj.Name)
			mutate(s)
			return k8s.Update(ctx, s)
		}, timeout, interval).Should(Succeed())
	}
	update(func(s *skillsv1.Skill) { s.Spec.FrontMatter = "" })
	g.Eventually(func(g Gomega) {
		g.Expect(getSkill(g, ns, obj.Name).Status.ObservedGeneration).To(Equal(int64(2)))
	}, timeout, interval).Should(Succeed())
	got = served(2)
	g.Expect(got.Status.Warnings).To(BeEmpty())

	update(func(s *skillsv1.Skill) { s.Spec.Invocation = skillsv1.InvocationExplicit })
	g.Eventually(func(g Gomega) {
		g.Expect(getSkill(g, ns, obj.Name).Status.ObservedGeneration).To(Equal(int64(3)))
	}, timeout, interval).Should(Succeed())
	got = served(3)
	g.Expect(got.Status.Warnings).To(ConsistOf(HavePrefix(
		`spec.frontMatter: the front matter has a key outside the six of the Agent Skills specification: "disable-model-invocation" (`)))
}
