package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

func newPolicy(ns, name string) *skillsv1.CommandPolicy {
	return &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: skillsv1.CommandPolicySpec{
			Rules: []skillsv1.PolicyRule{
				{Pattern: "kubectl get *", Action: skillsv1.ActionAlways},
				{Pattern: "kubectl delete *", Action: skillsv1.ActionNever},
			},
			Examples: []skillsv1.PolicyExample{
				{Command: "kubectl get pods -A", Expect: skillsv1.ActionAlways},
				{Command: "kubectl get pods; kubectl delete pod web-0", Expect: skillsv1.ActionNever},
				{Command: "kubectl rollout restart deploy/web", Expect: skillsv1.ActionAsk},
			},
		},
	}
}

// waitPolicy waits until the controller has observed the current generation.
func waitPolicy(t *testing.T, ns, name string) *skillsv1.CommandPolicy {
	t.Helper()
	g := NewWithT(t)
	p := &skillsv1.CommandPolicy{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), keyOf(ns, name), p)).To(Succeed())
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
	}, timeout, interval).Should(Succeed())
	return p
}

func TestPolicyWithPassingExamplesIsReady(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	g.Expect(k8s.Create(context.Background(), newPolicy(ns, "read-only"))).To(Succeed())
	p := waitPolicy(t, ns, "read-only")
	ready := condition(p.Status.Conditions, skillsv1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	g.Expect(ready.Message).To(Equal("2 rules, default Ask; 3 examples pass"))
	g.Expect(p.Status.RuleCount).To(Equal(int32(2)))
}

// TestPolicyCarriesItsOwnTests: a failing example makes the policy
// Ready=False and Stalled, naming the command, with a Warning Event; fixing
// it makes the policy Ready.
func TestPolicyCarriesItsOwnTests(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newPolicy(ns, "wrong-example")
	obj.Spec.Examples = append(obj.Spec.Examples, skillsv1.PolicyExample{Command: "kubectl delete ns prod", Expect: skillsv1.ActionAlways})
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())

	p := waitPolicy(t, ns, obj.Name)
	ready := condition(p.Status.Conditions, skillsv1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(skillsv1.ValidationFailedReason))
	g.Expect(ready.Message).To(ContainSubstring(`examples[3] "kubectl delete ns prod": expected Always, got Never`))
	g.Expect(condition(p.Status.Conditions, skillsv1.StalledCondition).Status).To(Equal(metav1.ConditionTrue))
	g.Eventually(func(g Gomega) {
		g.Expect(events(g, p)).To(ContainElement(And(
			HaveField("Type", corev1.EventTypeWarning),
			HaveField("Note", ContainSubstring("kubectl delete ns prod")))))
	}, timeout, interval).Should(Succeed())

	p.Spec.Examples[3].Expect = skillsv1.ActionNever
	g.Expect(k8s.Update(context.Background(), p)).To(Succeed())
	p = waitPolicy(t, ns, obj.Name)
	g.Expect(condition(p.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(condition(p.Status.Conditions, skillsv1.StalledCondition)).To(BeNil())
}

func TestPolicyWithBadPatternIsStalled(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	obj := newPolicy(ns, "bad-pattern")
	obj.Spec.Rules = append(obj.Spec.Rules, skillsv1.PolicyRule{Pattern: "kubectl get; rm -rf /", Action: skillsv1.ActionAlways})
	obj.Spec.Examples = nil
	g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	p := waitPolicy(t, ns, obj.Name)
	ready := condition(p.Status.Conditions, skillsv1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Message).To(ContainSubstring("rules[2]"))
	g.Expect(ready.Message).To(ContainSubstring("pattern must be one command"))
}
