package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/controller"
)

// agentSetup creates skills in a new namespace: health and disabled (label
// team=ops), broken (team=ops, invalid), triage (no label); a policy that
// never allows rm; and an Agent "ops" selecting team=ops plus triage,
// missing and health by name.
func agentSetup(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, nil) // makes Agent "ops"; replace it below
	g.Expect(k8s.Delete(ctx, &skillsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"}})).To(Succeed())
	mk := func(name string, labels map[string]string, mutate func(*skillsv1.Skill)) {
		s := newSkill(ns, name)
		s.Labels = labels
		if mutate != nil {
			mutate(s)
		}
		g.Expect(k8s.Create(ctx, s)).To(Succeed())
	}
	ops := map[string]string{"team": "ops"}
	mk("health", ops, func(s *skillsv1.Skill) { s.Spec.AllowedTools = []string{"Bash(kubectl get:*)", "Bash(rm:*)"} })
	mk("disabled", ops, func(s *skillsv1.Skill) { s.Spec.Invocation = skillsv1.InvocationDisabled })
	mk("broken", ops, func(s *skillsv1.Skill) { s.Spec.Instructions = "" })
	mk("triage", nil, func(s *skillsv1.Skill) { s.Spec.Invocation = skillsv1.InvocationExplicit })
	a := &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: skillsv1.AgentSpec{
			Skills: skillsv1.SkillSelection{
				Selector: &metav1.LabelSelector{MatchLabels: ops},
				Names:    []string{"triage", "missing", "health"},
			},
			Model:        skillsv1.Model{BaseURL: "https://models.example.com/v1", Name: "gpt-test", APIKeySecretRef: &skillsv1.SecretKeyRef{Name: "model"}},
			PolicyRef:    &skillsv1.LocalRef{Name: "ops-policy"},
			Instructions: "You are the on-call assistant.",
		},
	}
	g.Expect(k8s.Create(ctx, a)).To(Succeed())
	return ns
}

// waitAgent waits until the Agent's status lists want skills in its catalog.
func waitAgent(t *testing.T, ns string, want ...string) *skillsv1.Agent {
	t.Helper()
	g := NewWithT(t)
	a := &skillsv1.Agent{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), keyOf(ns, "ops"), a)).To(Succeed())
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		var names []string
		for _, s := range a.Status.Skills {
			names = append(names, s.Name)
		}
		g.Expect(names).To(Equal(want))
	}, timeout, interval).Should(Succeed())
	return a
}

// loadCatalog reads the catalog ConfigMaps the way the agent runtime reads
// its mounts.
func loadCatalog(t *testing.T, ns string) *catalog.Catalog {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	for i := range catalog.MaxShards {
		var cm corev1.ConfigMap
		err := k8s.Get(context.Background(), keyOf(ns, catalogShard(i)), &cm)
		if apierrors.IsNotFound(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		shard := filepath.Join(dir, strconv.Itoa(i))
		g.Expect(os.MkdirAll(shard, 0o755)).To(Succeed())
		for k, v := range cm.Data {
			g.Expect(os.WriteFile(filepath.Join(shard, k), []byte(v), 0o644)).To(Succeed())
		}
	}
	c, err := catalog.Load(dir)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func catalogShard(i int) string {
	if i == 0 {
		return "agent-ops-catalog"
	}
	return "agent-ops-catalog-" + strconv.Itoa(i)
}

// makeAvailable writes the Deployment's status as the deployment controller
// would once its pods are ready (envtest runs no controller-manager).
func makeAvailable(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), keyOf(ns, "agent-ops"), d); err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		return k8s.Status().Update(context.Background(), d)
	}, timeout, interval).Should(Succeed())
}

func TestAgentRunsWithItsCatalog(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := agentSetup(t)
	a := waitAgent(t, ns, "health", "triage")

	g.Expect(a.Status.ExcludedSkills).To(ConsistOf(
		skillsv1.ExcludedSkill{Name: "broken", Reason: skillsv1.ExcludedInvalid, Message: "no valid generation is served: see kubectl describe skill broken"},
		skillsv1.ExcludedSkill{Name: "disabled", Reason: skillsv1.ExcludedDisabled, Message: "its invocation is Disabled"},
		skillsv1.ExcludedSkill{Name: "health", Reason: skillsv1.ExcludedDuplicate, Message: "selected both by name and by the selector; it is listed once"},
		skillsv1.ExcludedSkill{Name: "missing", Reason: skillsv1.ExcludedNotFound, Message: "no Skill of this name in the namespace"},
	))
	g.Expect(a.Status.SkillCount).To(Equal(int32(2)))
	g.Expect(a.Status.Endpoint).To(Equal("http://agent-ops." + ns + ".svc"))
	g.Expect(a.Status.MCPEndpoint).To(Equal("http://agent-ops."+ns+".svc/mcp"), "MCP is on unless turned off")
	g.Expect(a.Status.TokenSecretName).To(Equal("ops-token"))
	g.Expect(a.Status.Warnings).To(ConsistOf(`skill health expects "Bash(rm:*)", which CommandPolicy ops-policy never allows`))
	ready := condition(a.Status.Conditions, skillsv1.ReadyCondition)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(controller.DeploymentNotAvailableReason))

	cat := loadCatalog(t, ns)
	g.Expect(cat.Revision()).To(Equal(a.Status.CatalogRevision))
	g.Expect(cat.Instructions).To(Equal("You are the on-call assistant."))
	g.Expect(cat.Skills).To(HaveLen(2))
	g.Expect(cat.Skills[0].Name).To(Equal("health"))
	g.Expect(cat.Skills[0].ContentHash).To(Equal(a.Status.Skills[0].ContentHash))
	g.Expect(cat.Skills[1].Invocation).To(Equal("Explicit"))

	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, keyOf(ns, "agent-ops"), d)).To(Succeed())
	g.Expect(metav1.IsControlledBy(d, a)).To(BeTrue())
	pod := d.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal("agent-ops"))
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)))
	g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	c := pod.Containers[0]
	g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(Equal(ptr.To(true)))
	g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(Equal(ptr.To(false)))
	g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(c.Image).To(Equal("example.com/kubeskills:test"))
	g.Expect(c.Args).To(ContainElements("--agent=ops", "--token-file=/var/run/kubeskills/auth/token",
		"--api-key-file=/var/run/kubeskills/model/api-key", "--identity=system:serviceaccount:"+ns+":agent-ops"))
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		g.Expect(m.SubPath).To(BeEmpty(), "whole directories only, so kubelet updates reach the pod")
		mounts[m.MountPath] = m
	}
	for _, path := range []string{"/var/run/kubeskills/catalog/0", "/var/run/kubeskills/catalog/7",
		"/var/run/kubeskills/skills/health/0", "/var/run/kubeskills/skills/triage/0"} {
		g.Expect(mounts).To(HaveKey(path))
		g.Expect(mounts[path].ReadOnly).To(BeTrue(), path)
	}
	g.Expect(mounts).NotTo(HaveKey("/var/run/kubeskills/skills/disabled/0"))

	var secret corev1.Secret
	g.Expect(k8s.Get(ctx, keyOf(ns, "ops-token"), &secret)).To(Succeed())
	g.Expect(secret.Data["token"]).To(MatchRegexp("^[0-9a-f]{64}$"))
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &corev1.Service{}, &networkingv1.NetworkPolicy{}} {
		g.Expect(k8s.Get(ctx, keyOf(ns, "agent-ops"), obj)).To(Succeed())
		g.Expect(metav1.IsControlledBy(obj, a)).To(BeTrue())
	}

	makeAvailable(t, ns)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops"), a)).To(Succeed())
		g.Expect(condition(a.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(a.Status.ReadyReplicas).To(Equal(int32(1)))
	}, timeout, interval).Should(Succeed())
	g.Expect(c.Args).NotTo(ContainElement("--mcp=false"))

	// spec.mcp.enabled=false turns the endpoint off in the runtime and
	// takes it out of the status.
	a.Spec.MCP = &skillsv1.AgentMCP{Enabled: ptr.To(false)}
	g.Expect(k8s.Update(ctx, a)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, keyOf(ns, "agent-ops"), d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--mcp=false"))
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops"), a)).To(Succeed())
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		g.Expect(a.Status.MCPEndpoint).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
}

// TestAgentServiceAccountCanOnlyAskForCommands checks, as the identity the
// operator gives the agent, exactly what it may do.
func TestAgentServiceAccountCanOnlyAskForCommands(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := agentSetup(t)
	waitAgent(t, ns, "health", "triage")
	cfg, err := env.AddUser("system:serviceaccount:"+ns+":agent-ops", "system:serviceaccounts", "system:serviceaccounts:"+ns)
	g.Expect(err).NotTo(HaveOccurred())
	agent, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	run := newRun(ns, "from-agent", "kubectl get pods")
	run.Spec.RequestedBy = "system:serviceaccount:" + ns + ":agent-ops"
	g.Expect(agent.Create(ctx, run)).To(Succeed())
	var runs skillsv1.CommandRunList
	g.Expect(agent.List(ctx, &runs, client.InNamespace(ns))).To(Succeed())

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
	g.Expect(apierrors.IsForbidden(agent.Create(ctx, job))).To(BeTrue(), "create Jobs")
	g.Expect(apierrors.IsForbidden(agent.Get(ctx, keyOf(ns, "ops-token"), &corev1.Secret{}))).To(BeTrue(), "read Secrets")
	g.Expect(apierrors.IsForbidden(agent.Patch(ctx, run, client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"approval":{"decision":"Approved"}}}`))))).To(BeTrue(), "patch CommandRuns")
	g.Expect(apierrors.IsForbidden(agent.Get(ctx, keyOf(ns, "agent-ops-catalog"), &corev1.ConfigMap{}))).To(BeTrue(),
		"the catalog reaches the agent as a mount, not through the API")
}

// TestSkillEditsReachPodsWithoutARoll: editing a skill changes the catalog
// but not the pod template; adding a skill rolls the pods.
func TestSkillEditsReachPodsWithoutARoll(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := agentSetup(t)
	a := waitAgent(t, ns, "health", "triage")
	template := func() corev1.PodTemplateSpec {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "agent-ops"), d)).To(Succeed())
		return d.Spec.Template
	}
	before := template()

	update(t, ns, "health", func(s *skillsv1.Skill) { s.Spec.Instructions = "# Health\n\nA better method.\n" })
	g.Eventually(func(g Gomega) {
		g.Expect(loadCatalog(t, ns).Revision()).NotTo(Equal(a.Status.CatalogRevision))
	}, timeout, interval).Should(Succeed())
	g.Expect(template()).To(Equal(before), "a content edit must not roll the pods")

	extra := newSkill(ns, "cert-expiry")
	extra.Labels = map[string]string{"team": "ops"}
	g.Expect(k8s.Create(ctx, extra)).To(Succeed())
	waitAgent(t, ns, "cert-expiry", "health", "triage")
	after := template()
	g.Expect(after.Annotations[controller.AnnotationSkillsHash]).NotTo(Equal(before.Annotations[controller.AnnotationSkillsHash]))

	// A skill whose labels stop matching leaves the catalog.
	update(t, ns, "cert-expiry", func(s *skillsv1.Skill) { s.Labels = nil })
	waitAgent(t, ns, "health", "triage")
}

// TestAgentWithBadSelectorIsStalled: a selector the API server accepts but
// that cannot select (operator "in") is the author's to fix: Stalled, with
// the reason, not Progressing forever.
func TestAgentWithBadSelectorIsStalled(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	a := &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-selector"},
		Spec: skillsv1.AgentSpec{
			Skills: skillsv1.SkillSelection{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: "in", Values: []string{"ops"}},
			}}},
			Model: skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
		},
	}
	g.Expect(k8s.Create(context.Background(), a)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), keyOf(ns, a.Name), a)).To(Succeed())
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		stalled := condition(a.Status.Conditions, skillsv1.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Message).To(HavePrefix("Generation 1 cannot be applied: spec.skills.selector is invalid"))
		g.Expect(condition(a.Status.Conditions, skillsv1.ReconcilingCondition)).To(BeNil())
	}, timeout, interval).Should(Succeed())
}
