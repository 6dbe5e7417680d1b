package admission

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestOwnerReferences_OperatorMayBlockDeletionOfItsKinds: the API server
// enforces OwnerReferencesPermissionEnforcement, as hardened clusters do,
// so a child that blocks its owner's deletion needs update on the owner's
// finalizers. A user who may create ConfigMaps but holds no such grant is
// refused; the operator, under config/rbac, may own children by each of the
// kinds whose controllers make them: Skill, Agent and CommandRun.
func TestOwnerReferences_OperatorMayBlockDeletionOfItsKinds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	skl := skill(ns, "notes")
	g.Expect(admin.Create(ctx, skl)).To(Succeed())
	agent := &skillsv1.Agent{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ops"}, agent)).To(Succeed())
	run := newRun(ns, "asked", "ops", "ls /", "admin")
	g.Expect(admin.Create(ctx, run)).To(Succeed())

	operatorEnv, err := env.InstallOperatorConfig(ctx, "rbac")
	g.Expect(err).NotTo(HaveOccurred())
	operator, err := client.New(operatorEnv.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	role(t, ns, "configmaps", "cory", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	cory := as(t, "cory")

	for _, owner := range []client.Object{skl, agent, run} {
		gvk, err := admin.GroupVersionKindFor(owner)
		g.Expect(err).NotTo(HaveOccurred())
		child := func(name string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}}}
		}
		err = cory.Create(ctx, child("by-cory-"+owner.GetName()))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a user without %s finalizers blocked its deletion: %v", gvk.Kind, err)
		g.Expect(err.Error()).To(ContainSubstring("finalizers"))
		g.Expect(operator.Create(ctx, child("by-operator-"+owner.GetName()))).To(Succeed(), "the operator may not own a child by a %s", gvk.Kind)
	}
}

// skill is a small valid Skill ns/name.
func skill(ns, name string) *skillsv1.Skill {
	return &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       skillsv1.SkillSpec{Description: "Team notes.", Instructions: "# Notes\n\nRead them.\n"},
	}
}
