package admission

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// authorSetup gives carol, in a namespace of her own, the right to write
// Agents and to read the Secrets carol-key and carol-agent-token, and no
// other Secret; it returns the namespace.
func authorSetup(t *testing.T) string {
	t.Helper()
	ns := env.Namespace(t)
	role(t, ns, "agent-author", "carol",
		rbacv1.PolicyRule{APIGroups: []string{"kubeskills.io"}, Resources: []string{"agents"}, Verbs: []string{"create", "update", "get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"carol-key", "carol-agent-token"}, Verbs: []string{"get"}},
	)
	return ns
}

// authoredAgent is an Agent carol may write: its key and token Secrets are
// hers.
func authoredAgent(ns, name string) *skillsv1.Agent {
	return &skillsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: skillsv1.AgentSpec{
			Skills: skillsv1.SkillSelection{Names: []string{"triage"}},
			Model: skillsv1.Model{BaseURL: "https://model.example/v1", Name: "m",
				APIKeySecretRef: &skillsv1.SecretKeyRef{Name: "carol-key", Key: "apiKey"}},
		},
	}
}

// TestAdmission_AgentNamesSecretItsAuthorCannotRead: an Agent whose model
// API key or API token would come from a Secret its author may not get is
// refused, at creation and when an update points it there, with a message
// that names the Secret, the field and what to do.
func TestAdmission_AgentNamesSecretItsAuthorCannotRead(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := authorSetup(t)
	carol := as(t, "carol")

	stolenKey := authoredAgent(ns, "carol-agent")
	stolenKey.Spec.Model.APIKeySecretRef.Name = "db-password"
	refused(t, carol, stolenKey,
		"spec.model.apiKeySecretRef names Secret db-password, which carol may not get in namespace "+ns,
		"ask for get on secrets/db-password")

	stolenToken := authoredAgent(ns, "carol-agent")
	stolenToken.Spec.Access = &skillsv1.AgentAccess{TokenSecretName: "db-password"}
	g.Expect(carol.Create(ctx, stolenToken)).To(MatchError(And(
		ContainSubstring("the agent API token Secret db-password (spec.access.tokenSecretName) is one carol may not get"),
		ContainSubstring("Name a Secret you may read"))))

	// The default token Secret, NAME-token, is checked too.
	g.Expect(carol.Create(ctx, authoredAgent(ns, "other"))).To(MatchError(
		ContainSubstring("the agent API token Secret other-token (the default of spec.access.tokenSecretName, AGENT-token)")))

	// Her own Secrets are fine; so is an agent without a token.
	own := authoredAgent(ns, "carol-agent")
	g.Expect(carol.Create(ctx, own)).To(Succeed())
	open := authoredAgent(ns, "open")
	open.Spec.Access = &skillsv1.AgentAccess{DisableAuth: true}
	g.Expect(carol.Create(ctx, open)).To(Succeed())

	// An update that points the key elsewhere is refused; one that leaves
	// the references alone is not.
	g.Expect(carol.Get(ctx, client.ObjectKeyFromObject(own), own)).To(Succeed())
	own.Spec.Model.APIKeySecretRef.Name = "db-password"
	g.Expect(carol.Update(ctx, own)).To(MatchError(ContainSubstring("names Secret db-password, which carol may not get")))
	g.Expect(update(carol, own, func(a *skillsv1.Agent) { a.Spec.Instructions = "Be brief." })).To(Succeed())
}

// TestAdmission_AgentImageNeedsUseGrant: the runtime image override runs
// with the agent's identity and Secrets, so its author needs the verb use
// on images/REFERENCE (kubeskills.io) for exactly that reference.
func TestAdmission_AgentImageNeedsUseGrant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := authorSetup(t)
	carol := as(t, "carol")
	role(t, ns, "agent-images", "carol", rbacv1.PolicyRule{
		APIGroups: []string{"kubeskills.io"}, Resources: []string{"images"},
		ResourceNames: []string{"registry.example/agent:1.2"}, Verbs: []string{"use"},
	})

	evil := authoredAgent(ns, "carol-agent")
	evil.Spec.Runtime = &skillsv1.AgentRuntime{Image: "registry.example/evil:1"}
	refused(t, carol, evil,
		"spec.runtime.image registry.example/evil:1 is not an image carol may use in namespace "+ns,
		"the verb use on images/registry.example/evil:1")

	allowed := authoredAgent(ns, "carol-agent")
	allowed.Spec.Runtime = &skillsv1.AgentRuntime{Image: "registry.example/agent:1.2"}
	g.Expect(carol.Create(ctx, allowed)).To(Succeed())
}
