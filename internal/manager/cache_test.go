package manager_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
)

// managedBy is the label every object the operator makes carries.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "kubeskills"
)

// TestCacheHoldsOnlyTheOperatorsObjects runs the manager as cmd/manager
// builds it, under config/rbac, in a namespace that also holds ConfigMaps,
// pods, Secrets, ServiceAccounts, Services, Roles, RoleBindings and
// NetworkPolicies of others. A Skill is served and an Agent's catalog
// written all the same, and a shard deleted, or stripped of its labels, is
// put back; but the manager's cache holds none of the others' objects: of
// every one of these kinds it holds only the operator's, or the operator
// may not list and watch the kind at all, so no informer of it can exist.
func TestCacheHoldsOnlyTheOperatorsObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var o manager.Options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	g.Expect(fs.Parse(nil)).To(Succeed())
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.SkipControllerNameValidation = true
	o.Image, o.SandboxImage = operatortest.Image, operatortest.SandboxImage
	operator, err := env.InstallOperatorConfig(ctx, "rbac")
	g.Expect(err).NotTo(HaveOccurred())
	mctx, cancel := context.WithCancel(ctx)
	mgr, err := manager.New(mctx, operator.Config, o)
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	}()

	// The operator's own client, to ask what its RBAC allows.
	self, err := client.New(operator.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ns := env.Namespace(t)
	c := env.Client
	others := createOthers(ctx, t, ns)

	skill := &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "triage"},
		Spec: skillsv1.SkillSpec{
			Description:  "Finds why a workload is unhealthy. Use it when a pod restarts.",
			Instructions: "# Triage\n\nLook at the events first.\n",
		},
	}
	g.Expect(c.Create(ctx, skill)).To(Succeed())
	agent := &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helper"},
		Spec: skillsv1.AgentSpec{
			Skills: skillsv1.SkillSelection{Names: []string{"triage"}},
			Model:  skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
		},
	}
	g.Expect(c.Create(ctx, agent)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(skill), skill)).To(Succeed())
		g.Expect(skill.Status.ServedGeneration).To(Equal(skill.Generation))
		g.Expect(apimeta.IsStatusConditionTrue(skill.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(agent), agent)).To(Succeed())
		g.Expect(agent.Status.CatalogRevision).NotTo(BeEmpty())
		g.Expect(agent.Status.SkillCount).To(BeEquivalentTo(1))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	// A served Skill is cached without its content; its metadata, spec
	// fields and status are there for the reconcilers that read them.
	g.Eventually(func(g Gomega) {
		cached := &skillsv1.Skill{}
		g.Expect(mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(skill), cached)).To(Succeed())
		g.Expect(cached.Status.ServedGeneration).To(Equal(skill.Generation))
		g.Expect(cached.Spec.Description).To(Equal(skill.Spec.Description))
		g.Expect(cached.Spec.Instructions).To(BeEmpty())
		g.Expect(cached.ManagedFields).To(BeEmpty())
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	// The operator's ConfigMaps are all the cache holds of ConfigMaps.
	ours := []string{"agent-helper-catalog", "skill-triage"}
	g.Eventually(func(g Gomega) {
		g.Expect(cachedNames(ctx, g, mgr.GetCache(), ns, corev1.SchemeGroupVersion.WithKind("ConfigMap"))).To(Equal(ours))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	// A shard deleted is put back, and one stripped of its labels, which
	// leaves the cache, is labelled again: the scoped watch still sees what
	// happens to the operator's ConfigMaps.
	shard := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: "skill-triage"}
	g.Expect(c.Get(ctx, key, shard)).To(Succeed())
	g.Expect(c.Delete(ctx, shard)).To(Succeed())
	g.Eventually(func(g Gomega) {
		again := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, key, again)).To(Succeed())
		g.Expect(again.UID).NotTo(Equal(shard.UID))
		g.Expect(again.Data).To(HaveKeyWithValue("SKILL.md", ContainSubstring("Look at the events first.")),
			"the shard is put back with the content the cache does not hold")
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(c.Get(ctx, key, shard)).To(Succeed())
	shard.Labels = map[string]string{"team": "a"}
	g.Expect(c.Update(ctx, shard)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, shard)).To(Succeed())
		g.Expect(shard.Labels).To(HaveKeyWithValue(labelManagedBy, managedBy))
		g.Expect(shard.Labels).To(HaveKeyWithValue(skillsv1.LabelSkill, "triage"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	// A new generation is served from its content, then left out in turn.
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(skill), skill)).To(Succeed())
	skill.Spec.Instructions = "# Triage\n\nRead the logs next.\n"
	g.Expect(c.Update(ctx, skill)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, shard)).To(Succeed())
		g.Expect(shard.Data).To(HaveKeyWithValue("SKILL.md", ContainSubstring("Read the logs next.")))
		cached := &skillsv1.Skill{}
		g.Expect(mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(skill), cached)).To(Succeed())
		g.Expect(cached.Status.ServedGeneration).To(Equal(skill.Generation))
		g.Expect(cached.Spec.Instructions).To(BeEmpty())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	// Of every other kind, the cache holds only the operator's objects, or
	// cannot hold any.
	for _, gvk := range []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("Pod"),
		corev1.SchemeGroupVersion.WithKind("Secret"),
		corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
		corev1.SchemeGroupVersion.WithKind("Service"),
		rbacv1.SchemeGroupVersion.WithKind("Role"),
		rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
		networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"),
	} {
		t.Run(gvk.Kind, func(t *testing.T) {
			g := NewWithT(t)
			if !mayWatch(ctx, g, self, gvk) {
				return
			}
			names := cachedNames(ctx, g, mgr.GetCache(), ns, gvk)
			for _, other := range others[gvk.Kind] {
				g.Expect(names).NotTo(ContainElement(other), "the cache holds %s %s/%s, which is not the operator's", gvk.Kind, ns, other)
			}
			// What it holds is the operator's.
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			g.Expect(mgr.GetCache().List(ctx, list, client.InNamespace(ns))).To(Succeed())
			for _, item := range list.Items {
				g.Expect(item.Labels).To(HaveKeyWithValue(labelManagedBy, managedBy), "%s %s", gvk.Kind, item.Name)
			}
		})
	}
}

// createOthers fills ns with objects of others, which carry none of the
// operator's labels, and returns their names by kind. One ConfigMap is
// named as a skill's shard would be.
func createOthers(ctx context.Context, t *testing.T, ns string) map[string][]string {
	t.Helper()
	g := NewWithT(t)
	c := env.Client
	others := map[string][]string{}
	labels := map[string]string{"app.kubernetes.io/name": "web"}
	add := func(obj client.Object) {
		t.Helper()
		obj.SetNamespace(ns)
		obj.SetLabels(labels)
		g.Expect(c.Create(ctx, obj)).To(Succeed())
		kind := fmt.Sprintf("%T", obj)
		kind = kind[len("*v1."):]
		others[kind] = append(others[kind], obj.GetName())
	}
	add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}})
	add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "skill-lookalike"}, Data: map[string]string{"SKILL.md": "# Not a skill\n"}})
	for i := range 20 {
		add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-config-%02d", i)}, Data: map[string]string{"app.properties": "level=info\n"}})
		add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%02d", i)}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "web", Image: "registry.example.com/web:1"}},
		}})
	}
	add(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "web-tls"}, StringData: map[string]string{"tls.key": "not a key"}})
	add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: labels, Ports: []corev1.ServicePort{{Port: 80}},
	}})
	add(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "web"}})
	add(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "web"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "web", Namespace: ns}},
	})
	add(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: labels},
	}})
	return others
}

// cachedNames lists, from the manager's cache, the names of the objects of
// a kind in ns, sorted.
func cachedNames(ctx context.Context, g Gomega, r client.Reader, ns string, gvk schema.GroupVersionKind) []string {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	g.Expect(r.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	names := make([]string, 0, len(list.Items))
	for _, item := range list.Items {
		names = append(names, item.Name)
	}
	slices.Sort(names)
	return names
}

// mayWatch tells whether the operator may list and watch a kind in every
// namespace, as an informer of the manager's cache would.
func mayWatch(ctx context.Context, g Gomega, c client.Client, gvk schema.GroupVersionKind) bool {
	resource, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	g.Expect(err).NotTo(HaveOccurred())
	for _, verb := range []string{"list", "watch"} {
		review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Verb: verb, Group: gvk.Group, Version: gvk.Version, Resource: resource.Resource.Resource,
		}}}
		g.Expect(c.Create(ctx, review)).To(Succeed())
		if !review.Status.Allowed {
			return false
		}
	}
	return true
}
