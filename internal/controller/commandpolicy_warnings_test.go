package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestPolicyWarnings: a policy with a glued glob, defaultAction Always
// and an Always rule for git lists a warning of each kind, with the
// Warnings condition True and Ready True; fixing the rules clears them.
func TestPolicyWarnings(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wide"},
		Spec: skillsv1.CommandPolicySpec{
			DefaultAction: skillsv1.ActionAlways,
			Rules: []skillsv1.PolicyRule{
				{Pattern: "git log*", Action: skillsv1.ActionAlways},
				{Pattern: "git *", Action: skillsv1.ActionAlways},
				{Pattern: "rm *", Action: skillsv1.ActionNever},
			},
			Examples: []skillsv1.PolicyExample{{Command: "git log", Expect: skillsv1.ActionAlways}},
		},
	}
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())

	p := waitPolicy(t, ns, obj.Name)
	ready := condition(p.Status.Conditions, skillsv1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	warn := condition(p.Status.Conditions, skillsv1.WarningsCondition)
	g.Expect(warn).NotTo(BeNil())
	g.Expect(warn.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(warn.Reason).To(Equal(skillsv1.WarningsFoundReason))
	g.Expect(warn.Message).To(HavePrefix("3 warnings:"))
	g.Expect(warn.ObservedGeneration).To(Equal(p.Generation))
	g.Expect(p.Status.Warnings).To(HaveExactElements(
		HavePrefix("defaultAction: Always runs every command that no rule matches"),
		And(HavePrefix(`rules[0] "git log*": `), ContainSubstring(`matches "git log" and "git logx", not "git log --help"`),
			ContainSubstring(`Write "git log *"`)),
		And(HavePrefix(`rules[1] "git *": it also allows, without a person: `), ContainSubstring(`"git push --force origin main"`)),
	))

	p.Spec.DefaultAction = skillsv1.ActionAsk
	p.Spec.Rules[0].Pattern = "git log *"
	p.Spec.Rules[1].Pattern = "git status *"
	g.Expect(k8s.Update(context.Background(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), keyOf(ns, obj.Name), p)).To(Succeed())
		warn := condition(p.Status.Conditions, skillsv1.WarningsCondition)
		g.Expect(warn).NotTo(BeNil())
		g.Expect(warn.ObservedGeneration).To(Equal(p.Generation))
		g.Expect(warn.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(warn.Reason).To(Equal(skillsv1.NoWarningsReason))
		g.Expect(p.Status.Warnings).To(BeEmpty())
		g.Expect(condition(p.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
}

// TestPolicyWarningsKeepWithFailingExamples: warnings are listed while an
// example fails, and a policy whose rules do not compile has none.
func TestPolicyWarningsKeepWithFailingExamples(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "failing"},
		Spec: skillsv1.CommandPolicySpec{
			Rules:    []skillsv1.PolicyRule{{Pattern: "curl *", Action: skillsv1.ActionAlways}},
			Examples: []skillsv1.PolicyExample{{Command: "curl https://example.com", Expect: skillsv1.ActionNever}},
		},
	}
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	p := waitPolicy(t, ns, obj.Name)
	g.Expect(condition(p.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(condition(p.Status.Conditions, skillsv1.WarningsCondition).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(p.Status.Warnings).To(ConsistOf(And(HavePrefix(`rules[0] "curl *": `), ContainSubstring("writes a file"))))

	p.Spec.Rules = append(p.Spec.Rules, skillsv1.PolicyRule{Pattern: "ls; rm", Action: skillsv1.ActionAlways})
	g.Expect(k8s.Update(context.Background(), p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), keyOf(ns, obj.Name), p)).To(Succeed())
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		g.Expect(condition(p.Status.Conditions, skillsv1.WarningsCondition)).To(BeNil())
		g.Expect(p.Status.Warnings).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
}
