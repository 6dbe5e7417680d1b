package admission

import (
	"context"
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// policyAuthorSetup creates, in a namespace of its own, the ServiceAccounts
// reader and deployer, and gives user the right to write CommandPolicies
// and nothing about ServiceAccounts; it returns the namespace.
func policyAuthorSetup(t *testing.T, users ...string) string {
	t.Helper()
	ns := env.Namespace(t)
	for _, sa := range []string{"reader", "deployer"} {
		NewWithT(t).Expect(admin.Create(context.Background(), &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
	}
	for _, user := range users {
		role(t, ns, "policy-author-"+user, user, rbacv1.PolicyRule{
			APIGroups: []string{"kubeskills.io"}, Resources: []string{"commandpolicies"},
			Verbs: []string{"create", "update", "patch", "get"},
		})
	}
	return ns
}

// identityPolicy is a policy allowing `kubectl get` whose commands run as
// the ServiceAccount sa ("" for none).
func identityPolicy(ns, name, sa string) *skillsv1.CommandPolicy {
	p := &skillsv1.CommandPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: skillsv1.CommandPolicySpec{Rules: []skillsv1.PolicyRule{
			{Pattern: "kubectl get *", Action: skillsv1.ActionAlways},
			{Pattern: "echo *", Action: skillsv1.ActionAlways},
		}},
	}
	if sa != "" {
		p.Spec.Sandbox = &skillsv1.Sandbox{ServiceAccountName: sa}
	}
	return p
}

// identityRefusal is the start of the refusal of a policy naming sa that
// user may not act as.
func identityRefusal(ns, sa, user string) string {
	return "spec.sandbox.serviceAccountName names ServiceAccount " + sa + ", which " + user +
		" may not act as in namespace " + ns + ": commands judged under this policy run with its token"
}

// TestAdmission_PolicyIdentityNeedsTheRightToActAsIt: a person who may
// write CommandPolicies still cannot name a ServiceAccount they may not act
// as, neither at creation nor by an update, and the refused update changes
// nothing. create on serviceaccounts/token, or impersonate, for that
// ServiceAccount is enough; a policy without one needs nothing new.
func TestAdmission_PolicyIdentityNeedsTheRightToActAsIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := policyAuthorSetup(t, "dave", "erin")
	dave, erin := as(t, "dave"), as(t, "erin")

	refused(t, dave, identityPolicy(ns, "readers", "reader"), identityRefusal(ns, "reader", "dave"),
		"Ask for create on serviceaccounts/token or impersonate on serviceaccounts, resourceNames reader")

	// Without an identity, RBAC on commandpolicies is all it takes.
	plain := identityPolicy(ns, "plain", "")
	g.Expect(dave.Create(ctx, plain)).To(Succeed())
	err := update(dave, plain, func(p *skillsv1.CommandPolicy) {
		p.Spec.Sandbox = &skillsv1.Sandbox{ServiceAccountName: "reader"}
		p.Spec.DefaultAction = skillsv1.ActionAlways
	})
	g.Expect(err).To(MatchError(ContainSubstring(identityRefusal(ns, "reader", "dave"))))
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	kept := &skillsv1.CommandPolicy{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(plain), kept)).To(Succeed())
	g.Expect(kept.Spec.Sandbox).To(BeNil(), "a refused update changed the policy")
	g.Expect(kept.Spec.DefaultAction).To(Equal(skillsv1.ActionAsk))

	// The right to mint the ServiceAccount's tokens is the right to name it,
	// for that ServiceAccount only.
	role(t, ns, "mint-reader", "dave", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"reader"}, Verbs: []string{"create"},
	})
	g.Eventually(func() error { return dave.Create(ctx, identityPolicy(ns, "readers", "reader")) }, timeout, interval).Should(Succeed())
	g.Expect(dave.Create(ctx, identityPolicy(ns, "deployers", "deployer"))).To(MatchError(ContainSubstring(
		identityRefusal(ns, "deployer", "dave"))))

	// So is the right to impersonate it.
	role(t, ns, "impersonate-deployer", "erin", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{"deployer"}, Verbs: []string{"impersonate"},
	})
	g.Eventually(func() error { return erin.Create(ctx, identityPolicy(ns, "deployers", "deployer")) }, timeout, interval).Should(Succeed())

	// Every write of a policy with an identity is checked, not only one that
	// changes the name: editing its rules chooses what runs as it.
	deployers := &skillsv1.CommandPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployers"}}
	err = update(dave, deployers, func(p *skillsv1.CommandPolicy) {
		p.Spec.Rules = append(p.Spec.Rules, skillsv1.PolicyRule{Pattern: "kubectl *", Action: skillsv1.ActionAlways})
	})
	g.Expect(err).To(MatchError(ContainSubstring(identityRefusal(ns, "deployer", "dave"))))
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(deployers), deployers)).To(Succeed())
	g.Expect(deployers.Spec.Rules).To(HaveLen(2), "a refused update changed the rules")
	// Taking the identity away needs no right to it.
	g.Expect(update(dave, deployers, func(p *skillsv1.CommandPolicy) { p.Spec.Sandbox = nil })).To(Succeed())
}

// TestAdmission_AgentCannotChooseReadOrMintTheSandboxIdentity: the agent's
// own ServiceAccount, under a policy with an identity, cannot mint that
// identity's token, read Secrets, write a policy that names an identity,
// or carry an identity on a CommandRun.
func TestAdmission_AgentCannotChooseReadOrMintTheSandboxIdentity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := policyAuthorSetup(t)
	g.Expect(admin.Create(ctx, identityPolicy(ns, "ops-policy", "reader"))).To(Succeed())
	g.Expect(admin.Create(ctx, &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"},
		Spec: skillsv1.AgentSpec{
			Skills:    skillsv1.SkillSelection{Names: []string{"absent"}},
			Model:     skillsv1.Model{BaseURL: "http://127.0.0.1:1/v1", Name: "test"},
			PolicyRef: &skillsv1.LocalRef{Name: "ops-policy"},
		},
	})).To(Succeed())
	agent := asAgent(t, ns, "ops")
	user := agentUser(ns, "ops")

	for _, sa := range []string{"reader", "agent-ops"} {
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
		err := agent.SubResource("token").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}, tr)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the agent minted a token of %s: %v", sa, err)
		g.Expect(tr.Status.Token).To(BeEmpty())
	}
	g.Expect(apierrors.IsForbidden(agent.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reader"}, &corev1.ServiceAccount{}))).To(BeTrue())
	var secrets corev1.SecretList
	g.Expect(apierrors.IsForbidden(agent.List(ctx, &secrets, client.InNamespace(ns)))).To(BeTrue(), "the agent must not list Secrets")
	g.Expect(apierrors.IsForbidden(agent.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ops-token"}, &corev1.Secret{}))).To(BeTrue(),
		"the agent must not get Secrets")

	g.Expect(apierrors.IsForbidden(agent.Create(ctx, identityPolicy(ns, "own", "reader")))).To(BeTrue(), "the agent must not create policies")
	pol := &skillsv1.CommandPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-policy"}}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"sandbox":{"serviceAccountName":"deployer"}}}`))
	g.Expect(apierrors.IsForbidden(agent.Patch(ctx, pol, patch))).To(BeTrue(), "the agent must not patch its policy")

	// A CommandRun has no identity field: a strict client is refused, any
	// other has the field dropped, and the run runs as its policy says.
	forged := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": skillsv1.GroupVersion.String(), "kind": "CommandRun",
		"metadata": map[string]any{"namespace": ns, "name": "forged"},
		"spec": map[string]any{"agent": "ops", "command": "echo hi", "requestedBy": user,
			"serviceAccountName": "deployer", "sandbox": map[string]any{"serviceAccountName": "deployer"}},
	}}
	err := agent.Create(ctx, forged.DeepCopy(), client.FieldValidation("Strict"))
	g.Expect(err).To(MatchError(And(ContainSubstring(`unknown field "spec.serviceAccountName"`), ContainSubstring(`unknown field "spec.sandbox"`))))
	g.Expect(agent.Create(ctx, forged)).To(Succeed())
	spec := forged.Object["spec"].(map[string]any)
	g.Expect(spec).NotTo(HaveKey("serviceAccountName"))
	g.Expect(spec).NotTo(HaveKey("sandbox"))
	run := waitPhase(t, ns, "forged", skillsv1.PhaseRunning)
	g.Expect(run.Status.ServiceAccountName).To(Equal("reader"))
	g.Expect(jobOf(g, ns, "forged").Spec.Template.Spec.ServiceAccountName).To(Equal("reader"))

	// Nor can the agent write the status that shows the identity.
	g.Expect(apierrors.IsForbidden(agent.Status().Patch(ctx, run, client.RawPatch("application/merge-patch+json",
		[]byte(`{"status":{"serviceAccountName":"deployer"}}`))))).To(BeTrue())
}

// TestAdmission_OperatorRunsCommandsAsThePolicysIdentity: the operator,
// under its own RBAC, finds the policy's ServiceAccount and the API
// server's addresses, and builds the Job and the fence for them; the
// policy and the run report the identity.
func TestAdmission_OperatorRunsCommandsAsThePolicysIdentity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	g.Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"}})).To(Succeed())
	policyAndAgent(t, ns, "ops")
	g.Expect(update(admin, &skillsv1.CommandPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops-policy"}},
		func(p *skillsv1.CommandPolicy) { p.Spec.Sandbox = &skillsv1.Sandbox{ServiceAccountName: "reader"} })).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := &skillsv1.CommandPolicy{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ops-policy"}, p)).To(Succeed())
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		g.Expect(p.Status.Conditions).To(ContainElement(And(
			HaveField("Type", skillsv1.ReadyCondition), HaveField("Status", metav1.ConditionTrue),
			HaveField("Message", ContainSubstring("commands run as ServiceAccount reader")))))
	}, timeout, interval).Should(Succeed())

	ops := asAgent(t, ns, "ops")
	g.Expect(ops.Create(ctx, newRun(ns, "pods", "ops", "echo hi", agentUser(ns, "ops")))).To(Succeed())
	run := waitPhase(t, ns, "pods", skillsv1.PhaseRunning)
	g.Expect(run.Status.ServiceAccountName).To(Equal("reader"))
	job := jobOf(g, ns, "pods")
	g.Expect(job.Spec.Template.Spec.ServiceAccountName).To(Equal("reader"))
	g.Expect(job.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(
		HaveField("MountPath", sandbox.ServiceAccountDir)))
}

// jobOf reads the Job of a run as the admin.
func jobOf(g Gomega, ns, name string) *batchv1.Job {
	job := &batchv1.Job{}
	g.Expect(admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job)).To(Succeed())
	return job
}

// secretsPolicy is a policy allowing `env` whose commands get the keys of
// the Secrets in their environment.
func secretsPolicy(ns, name string, secrets ...string) *skillsv1.CommandPolicy {
	p := identityPolicy(ns, name, "")
	p.Spec.Rules = append(p.Spec.Rules, skillsv1.PolicyRule{Pattern: "env", Action: skillsv1.ActionAlways})
	p.Spec.Sandbox = &skillsv1.Sandbox{}
	for _, s := range secrets {
		p.Spec.Sandbox.EnvFromSecrets = append(p.Spec.Sandbox.EnvFromSecrets, skillsv1.SecretEnv{SecretName: s})
	}
	return p
}

// TestAdmission_PolicySecretsNeedTheRightToReadThem: a person who may write
// CommandPolicies but may not read a Secret cannot put it in the
// environment of the policy's commands (which `env` would print), at any
// index of the list the CRD allows, at creation or by an update, and a
// refused update changes nothing. get on each Secret named is enough.
func TestAdmission_PolicySecretsNeedTheRightToReadThem(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := policyAuthorSetup(t, "frank")
	frank := as(t, "frank")
	var readable []string
	for i := range 15 {
		readable = append(readable, fmt.Sprintf("config-%d", i))
	}
	role(t, ns, "read-config", "frank", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: readable, Verbs: []string{"get"},
	})
	refusal := func(i int) string {
		return fmt.Sprintf("spec.sandbox.envFromSecrets[%d] names Secret db-admin, which frank may not get in namespace %s: "+
			"commands judged under this policy have its keys in their environment", i, ns)
	}

	// The last of the 16 the CRD allows is checked as the first is.
	refused(t, frank, secretsPolicy(ns, "last", append(slices.Clone(readable), "db-admin")...), refusal(15),
		"Ask for get on secrets, resourceNames db-admin")
	refused(t, frank, secretsPolicy(ns, "first", "db-admin"), refusal(0))
	all := secretsPolicy(ns, "all", readable...)
	g.Eventually(func() error { return frank.Create(ctx, all) }, timeout, interval).Should(Succeed())

	err := update(frank, all, func(p *skillsv1.CommandPolicy) {
		p.Spec.Sandbox.EnvFromSecrets[3].SecretName = "db-admin"
	})
	g.Expect(err).To(MatchError(ContainSubstring(refusal(3))))
	kept := &skillsv1.CommandPolicy{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(all), kept)).To(Succeed())
	g.Expect(kept.Spec.Sandbox.EnvFromSecrets[3].SecretName).To(Equal("config-3"), "a refused update changed the policy")

	// Every write of a policy with Secrets is checked: editing its rules
	// chooses which commands read them.
	role(t, ns, "read-db-admin", "frank", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"db-admin"}, Verbs: []string{"get"},
	})
	g.Eventually(func() error { return frank.Create(ctx, secretsPolicy(ns, "first", "db-admin")) }, timeout, interval).Should(Succeed())
	withAdmin := &skillsv1.CommandPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}}
	g.Expect(admin.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-db-admin"}})).To(Succeed())
	g.Eventually(func() error {
		return update(frank, withAdmin, func(p *skillsv1.CommandPolicy) {
			p.Spec.Rules = append(p.Spec.Rules, skillsv1.PolicyRule{Pattern: "cat *", Action: skillsv1.ActionAlways})
		})
	}, timeout, interval).Should(MatchError(ContainSubstring(refusal(0))))
}
