package admission

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// TestFinding_OnlyTheOperatorMakesWarmSandboxes: the operator hands an
// Agent's commands to the warm pods that Agent controls. It makes them
// under its own RBAC; someone who may write pods in the namespace, but
// not Agents' status, cannot create a pod controlled by the Agent, or make
// the Agent the controller of a pod of their own, so no pod of theirs is
// ever handed a command. A pod without that reference needs nothing new.
func TestFinding_OnlyTheOperatorMakesWarmSandboxes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	agent := &skillsv1.Agent{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ops"}, agent)).To(Succeed())
	agent.Spec.Sandbox = &skillsv1.AgentSandbox{Warm: 1}
	g.Expect(admin.Update(ctx, agent)).To(Succeed())
	var made corev1.Pod
	g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(admin.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{sandbox.LabelWarm})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1), "the operator makes the Agent's warm sandbox under its own RBAC")
		made = pods.Items[0]
	}, timeout, interval).Should(Succeed())

	role(t, ns, "write-pods", "jay", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"},
		Verbs: []string{"get", "create", "update", "delete"}})
	jay := as(t, "jay")
	forged := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-warm-forged", Labels: made.Labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "1d"}}}},
	}
	controller := metav1.OwnerReference{APIVersion: skillsv1.GroupVersion.String(), Kind: "Agent", Name: agent.Name, UID: agent.UID,
		Controller: ptr.To(true)}
	forged.OwnerReferences = []metav1.OwnerReference{controller}
	refused(t, jay, forged,
		"jay may not create Pod ops-warm-forged controlled by Agent ops: the operator alone makes an Agent's warm sandboxes",
		"Create the Pod without that owner reference")

	own := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "1d"}}}},
	}
	g.Expect(jay.Create(ctx, own)).To(Succeed(), "a pod that no Agent controls needs nothing new")
	err := update(jay, own, func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{controller}
		p.Labels = made.Labels
	})
	g.Expect(err).To(HaveOccurred(), "jay made the Agent the controller of a pod")
	g.Expect(err.Error()).To(ContainSubstring("jay may not update Pod own controlled by Agent ops"))
}
