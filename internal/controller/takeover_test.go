package controller_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// The API server of these tests runs no garbage collector, as the one of
// make run-local: the objects of a deleted owner stay, controlled by its UID.

// deleteAndWait deletes obj and waits until the API server no longer has it.
func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k8s.Delete(context.Background(), obj)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}, timeout, interval).Should(BeTrue())
}

// expectControlledBy checks that obj has exactly one controller, the object
// of UID uid.
func expectControlledBy(g Gomega, obj client.Object, uid types.UID) {
	var controllers []types.UID
	for _, ref := range obj.GetOwnerReferences() {
		if ptr.Deref(ref.Controller, false) {
			controllers = append(controllers, ref.UID)
		}
	}
	g.Expect(controllers).To(Equal([]types.UID{uid}), "%T %s", obj, obj.GetName())
}

// TestFinding_SkillRecreatedIsServed: a Skill deleted and created again
// under the same name, as `kubectl delete skill` then the same import
// applied again does, is served. The ConfigMap the deleted Skill left is
// taken over by the new one, once, and serves the new content.
func TestFinding_SkillRecreatedIsServed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	old := newSkill(ns, "recreated")
	g.Expect(k8s.Create(ctx, old)).To(Succeed())
	g.Expect(condition(waitSkill(t, ns, old.Name).Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	deleteAndWait(t, old)
	cms, _ := servedShards(g, ns, old.Name)
	g.Expect(cms).To(HaveLen(1), "no garbage collector removes the ConfigMap of the deleted Skill")
	expectControlledBy(g, &cms[0], old.UID)

	obj := newSkill(ns, "recreated")
	obj.Spec.Instructions = "# Crash loops\n\nThe method of the Skill made again.\n"
	g.Expect(k8s.Create(ctx, obj)).To(Succeed())
	got := waitSkill(t, ns, obj.Name)
	ready := condition(got.Status.Conditions, skillsv1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	g.Expect(condition(got.Status.Conditions, skillsv1.ReconcilingCondition)).To(BeNil())
	cms, shards := servedShards(g, ns, obj.Name)
	g.Expect(cms).To(HaveLen(1))
	expectControlledBy(g, &cms[0], got.UID)
	g.Expect(cms[0].Data[skill.SkillFileName]).To(ContainSubstring("The method of the Skill made again."))
	served, err := skill.Unpack(shards)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(skill.Hash(served)).To(Equal(got.Status.ContentHash))
	g.Eventually(func(g Gomega) {
		g.Expect(withReason(events(g, got), controller.ReasonTookOverLeftover)).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())

	// The same content applied again after one more delete is served too:
	// what the operator remembers of the ConfigMap it wrote is not taken
	// for the new Skill's.
	deleteAndWait(t, got)
	again := newSkill(ns, "recreated")
	again.Spec.Instructions = obj.Spec.Instructions
	g.Expect(k8s.Create(ctx, again)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s := getSkill(g, ns, again.Name)
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		g.Expect(condition(s.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		cms, _ := servedShards(g, ns, again.Name)
		g.Expect(cms).To(HaveLen(1))
		expectControlledBy(g, &cms[0], again.UID)
	}, timeout, interval).Should(Succeed())
}

// TestFinding_AgentRecreatedIsServed: an Agent deleted and created again
// under the same name takes over its catalog, Deployment, identity,
// Service and NetworkPolicy from the one deleted, an Event for each object
// whose stale reference server-side apply would not drop, and its catalog
// is the new one.
func TestFinding_AgentRecreatedIsServed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	g.Expect(k8s.Create(ctx, newSkill(ns, "health"))).To(Succeed())
	waitSkill(t, ns, "health")
	newAgent := func(instructions string) *skillsv1.Agent {
		return &skillsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
			Spec: skillsv1.AgentSpec{
				Skills:       skillsv1.SkillSelection{Names: []string{"health"}},
				Model:        skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
				Instructions: instructions,
			},
		}
	}
	old := newAgent("You are the first assistant.")
	g.Expect(k8s.Create(ctx, old)).To(Succeed())
	waitAgent(t, ns, "health")
	g.Expect(k8s.Get(ctx, keyOf(ns, "agent-ops"), &appsv1.Deployment{})).To(Succeed())
	// Server-side apply drops the stale reference by itself only while the
	// operator alone owns it. Another field manager co-owns it on two of
	// the objects, as `kubectl apply --server-side` of them as exported
	// would, so that it stays unless the operator takes them over.
	for _, gvk := range []string{"v1/ServiceAccount", "apps/v1/Deployment"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(gvk[:strings.LastIndex(gvk, "/")])
		u.SetKind(gvk[strings.LastIndex(gvk, "/")+1:])
		u.SetNamespace(ns)
		u.SetName("agent-ops")
		u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(old, skillsv1.GroupVersion.WithKind("Agent"))})
		g.Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("exported"))).To(Succeed())
	}
	deleteAndWait(t, old)

	a := newAgent("You are the assistant made again.")
	g.Expect(k8s.Create(ctx, a)).To(Succeed())
	got := waitAgent(t, ns, "health")
	makeAvailable(t, ns)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
		g.Expect(condition(got.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	g.Expect(loadCatalog(t, ns).Instructions).To(Equal("You are the assistant made again."))
	g.Expect(loadCatalog(t, ns).Revision()).To(Equal(got.Status.CatalogRevision))
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.ServiceAccount{},
		&rbacv1.Role{}, &rbacv1.RoleBinding{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}} {
		name := "agent-ops"
		if _, ok := obj.(*corev1.ConfigMap); ok {
			name = catalogShard(0)
		}
		g.Expect(k8s.Get(ctx, keyOf(ns, name), obj)).To(Succeed())
		expectControlledBy(g, obj, got.UID)
	}
	g.Eventually(func(g Gomega) {
		var took []string
		for _, e := range withReason(events(g, got), controller.ReasonTookOverLeftover) {
			took = append(took, e.Related.Kind+"/"+e.Related.Name)
		}
		g.Expect(took).To(ConsistOf("ConfigMap/"+catalogShard(0), "Deployment/agent-ops", "ServiceAccount/agent-ops"))
	}, timeout, interval).Should(Succeed())
}

// TestObjectOfAnotherControllerIsNotTakenOver: a ConfigMap of a Skill's
// name that something else controls, even an object of the same name of
// another kind, is left as it is, and the Skill says why it is not served.
func TestObjectOfAnotherControllerIsNotTakenOver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		labelled bool
		owner    metav1.OwnerReference
		message  string
	}{
		{
			name:    "deployment",
			owner:   metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "5b0c6bd2-0000-4000-8000-000000000001"},
			message: "ConfigMap %s/skill-foreign is controlled by Deployment web; refusing to take it over",
		},
		{
			name:     "agent-of-the-same-name",
			labelled: true,
			owner:    metav1.OwnerReference{APIVersion: skillsv1.GroupVersion.String(), Kind: "Agent", Name: "foreign", UID: "5b0c6bd2-0000-4000-8000-000000000002"},
			message:  "ConfigMap %s/skill-foreign is controlled by Agent foreign; refusing to take it over",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := namespace(t)
			tc.owner.Controller = ptr.To(true)
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "skill-foreign", OwnerReferences: []metav1.OwnerReference{tc.owner}},
				Data:       map[string]string{"app.conf": "not a skill"},
			}
			if tc.labelled {
				cm.Labels = map[string]string{skillsv1.LabelSkill: "foreign", "app.kubernetes.io/managed-by": "kubeskills"}
			}
			g.Expect(k8s.Create(ctx, cm)).To(Succeed())
			obj := newSkill(ns, "foreign")
			g.Expect(k8s.Create(ctx, obj)).To(Succeed())
			g.Eventually(func(g Gomega) {
				s := getSkill(g, ns, obj.Name)
				reconciling := condition(s.Status.Conditions, skillsv1.ReconcilingCondition)
				g.Expect(reconciling).NotTo(BeNil())
				g.Expect(reconciling.Reason).To(Equal(skillsv1.ReconcileFailedReason))
				g.Expect(reconciling.Message).To(ContainSubstring(tc.message, ns))
				g.Expect(condition(s.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionUnknown))
			}, timeout, interval).Should(Succeed())
			live := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cm), live)).To(Succeed())
			g.Expect(live.OwnerReferences).To(Equal(cm.OwnerReferences))
			g.Expect(live.Data).To(Equal(cm.Data))
			g.Expect(withReason(events(g, obj), controller.ReasonTookOverLeftover)).To(BeEmpty())
		})
	}
}

// TestAgentObjectOfAnotherControllerIsNotTakenOver: an Agent whose
// ServiceAccount's name is taken by an object something else controls
// leaves it as it is, and says why.
func TestAgentObjectOfAnotherControllerIsNotTakenOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "5b0c6bd2-0000-4000-8000-000000000003", Controller: ptr.To(true)}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-foreign", OwnerReferences: []metav1.OwnerReference{owner}}}
	g.Expect(k8s.Create(ctx, sa)).To(Succeed())
	a := &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign"},
		Spec: skillsv1.AgentSpec{
			Skills: skillsv1.SkillSelection{Names: []string{"missing"}},
			Model:  skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
		},
	}
	g.Expect(k8s.Create(ctx, a)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		reconciling := condition(a.Status.Conditions, skillsv1.ReconcilingCondition)
		g.Expect(reconciling).NotTo(BeNil())
		g.Expect(reconciling.Message).To(ContainSubstring("ServiceAccount %s/agent-foreign is controlled by Deployment web; refusing to take it over", ns))
	}, timeout, interval).Should(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sa), sa)).To(Succeed())
	g.Expect(sa.OwnerReferences).To(Equal([]metav1.OwnerReference{owner}))
	g.Expect(withReason(events(g, a), controller.ReasonTookOverLeftover)).To(BeEmpty())
}
