package admission

import (
	"context"
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestFinding_AgentCannotBorrowAPolicy: an Agent's spec.policyRef decides
// the rules, Secrets and ServiceAccount its commands run with, so its
// author needs the verb use on that CommandPolicy (kubeskills.io). An
// author who may write Agents, but was granted no policy, cannot point one
// at a policy an admin wrote for a powerful ServiceAccount, at creation or
// by an update; a Role with resourceNames allows exactly the policies it
// lists, an update that leaves the reference alone needs no grant, and
// kubeskills-policy-user allows every policy of the namespace.
func TestFinding_AgentCannotBorrowAPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := authorSetup(t)
	carol := as(t, "carol")
	for _, p := range []*skillsv1.CommandPolicy{identityPolicy(ns, "cluster-admin-commands", "deployer"), identityPolicy(ns, "team", "")} {
		g.Expect(admin.Create(ctx, p)).To(Succeed())
	}

	borrowing := authoredAgent(ns, "carol-agent")
	borrowing.Spec.PolicyRef = &skillsv1.LocalRef{Name: "cluster-admin-commands"}
	refused(t, carol, borrowing,
		"spec.policyRef names CommandPolicy cluster-admin-commands, which carol may not use in namespace "+ns,
		"ask for the verb use on commandpolicies/cluster-admin-commands (kubeskills.io",
		"kubeskills-policy-user")

	role(t, ns, "team-policy", "carol", rbacv1.PolicyRule{
		APIGroups: []string{"kubeskills.io"}, Resources: []string{"commandpolicies"},
		ResourceNames: []string{"team"}, Verbs: []string{"use"},
	})
	g.Expect(carol.Create(ctx, borrowing)).To(MatchError(ContainSubstring(
		"spec.policyRef names CommandPolicy cluster-admin-commands, which carol may not use")), "a grant on another policy allowed this one")
	own := authoredAgent(ns, "carol-agent")
	own.Spec.PolicyRef = &skillsv1.LocalRef{Name: "team"}
	// The API server's RBAC cache learns of a new binding a moment later.
	g.Eventually(func() error { return carol.Create(ctx, own) }, timeout, interval).Should(Succeed())

	// Pointing it elsewhere later is refused; other edits are not checked.
	g.Expect(update(carol, own, func(a *skillsv1.Agent) {
		a.Spec.PolicyRef.Name = "cluster-admin-commands"
	})).To(MatchError(ContainSubstring("spec.policyRef names CommandPolicy cluster-admin-commands, which carol may not use")))
	g.Expect(update(carol, own, func(a *skillsv1.Agent) { a.Spec.Instructions = "Be brief." })).To(Succeed())
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(own), own)).To(Succeed())
	g.Expect(own.Spec.PolicyRef.Name).To(Equal("team"))

	// An Agent that names no policy runs no commands and needs no grant.
	g.Expect(update(carol, own, func(a *skillsv1.Agent) { a.Spec.PolicyRef = nil })).To(Succeed())

	bind(t, ns, "ClusterRole", "kubeskills-policy-user", "carol")
	g.Eventually(func() error {
		return update(carol, own, func(a *skillsv1.Agent) {
			a.Spec.PolicyRef = &skillsv1.LocalRef{Name: "cluster-admin-commands"}
		})
	}, timeout, interval).Should(Succeed(), "kubeskills-policy-user does not allow every policy of the namespace")
}

// TestRoles_PolicyUseGoesOnlyWhereItGivesNothingNew: kubeskills-policy-user
// is aggregated into `edit`, because `edit` already reads every Secret of a
// namespace and may impersonate every ServiceAccount there, all that
// naming a policy hands over; and kubeskills-editor, which bound on its own
// grants neither, does not hold use on CommandPolicies.
func TestRoles_PolicyUseGoesOnlyWhereItGivesNothingNew(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	user := &rbacv1.ClusterRole{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "kubeskills-policy-user"}, user)).To(Succeed())
	g.Expect(user.Labels).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-edit", "true"))

	edit := &rbacv1.ClusterRole{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "system:aggregate-to-edit"}, edit)).To(Succeed())
	g.Expect(grants(edit.Rules, "", "serviceaccounts", "impersonate")).To(BeTrue(), "edit no longer impersonates ServiceAccounts")
	g.Expect(grants(edit.Rules, "", "secrets", "get")).To(BeTrue(), "edit no longer reads Secrets")

	editor := &rbacv1.ClusterRole{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "kubeskills-editor"}, editor)).To(Succeed())
	g.Expect(grants(editor.Rules, skillsv1.GroupVersion.Group, "commandpolicies", "use")).To(BeFalse())
}

// grants tells whether a rule grants verb on every object of resource in
// group.
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if len(r.ResourceNames) == 0 && slices.Contains(r.APIGroups, group) &&
			slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// TestFinding_RunCreatedWithOwnerReferenceRefused: an owner reference on a
// new run lets the garbage collector delete the record of the command, and
// its Job, with the owner. Only the operator sets one: an agent (even one
// granted delete on runs, which OwnerReferencesPermissionEnforcement asks
// for) and a person with kubeskills-runner are refused, with a message that
// names the field.
func TestFinding_RunCreatedWithOwnerReferenceRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	owner := &skillsv1.Agent{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ops"}, owner)).To(Succeed())
	deleteRuns := rbacv1.PolicyRule{APIGroups: []string{"kubeskills.io"}, Resources: []string{"commandruns"}, Verbs: []string{"delete"}}
	role(t, ns, "delete-runs", agentUser(ns, "ops"), deleteRuns)
	bind(t, ns, "Role", "delete-runs", "rita")
	bind(t, ns, "ClusterRole", "kubeskills-runner", "rita")

	for i, who := range []struct {
		user string
		c    client.Client
	}{{agentUser(ns, "ops"), asAgent(t, ns, "ops")}, {"rita", as(t, "rita")}} {
		run := newRun(ns, "owned", "ops", "echo hi", who.user)
		run.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: skillsv1.GroupVersion.String(), Kind: "Agent", Name: owner.Name, UID: owner.UID,
		}}
		refused(t, who.c, run,
			who.user+" may not create CommandRun owned with metadata.ownerReferences: an owner reference lets the garbage collector delete",
			"Create the run without metadata.ownerReferences")
		g.Expect(who.c.Create(ctx, newRun(ns, fmt.Sprintf("plain-%d", i), "ops", "echo hi", who.user))).To(Succeed(),
			"a run without owner references is refused")
	}
}

// TestFinding_RunCreatedWithFinalizerRefused: a finalizer on a new run
// keeps it past its policy's history, so etcd grows without bound. Only
// the operator sets one: an agent is refused, with a message that names
// the field, and both fields at once are named together.
func TestFinding_RunCreatedWithFinalizerRefused(t *testing.T) {
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	ops := asAgent(t, ns, "ops")
	user := agentUser(ns, "ops")

	run := newRun(ns, "kept", "ops", "echo hi", user)
	run.Finalizers = []string{"example.com/keep-forever"}
	refused(t, ops, run,
		user+" may not create CommandRun kept with metadata.finalizers: ",
		"a finalizer keeps it past its history",
		"Create the run without metadata.finalizers")

	role(t, ns, "delete-runs", user, rbacv1.PolicyRule{APIGroups: []string{"kubeskills.io"}, Resources: []string{"commandruns"}, Verbs: []string{"delete"}})
	owner := &skillsv1.Agent{}
	NewWithT(t).Expect(admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ops"}, owner)).To(Succeed())
	run.OwnerReferences = []metav1.OwnerReference{{APIVersion: skillsv1.GroupVersion.String(), Kind: "Agent", Name: owner.Name, UID: owner.UID}}
	refused(t, ops, run,
		"with metadata.ownerReferences or metadata.finalizers",
		"Create the run without metadata.ownerReferences and metadata.finalizers")
}

// TestAdmission_SkillSourceNeedsTheRightToWriteTheSkill: a ConfigMap
// labelled as a skill source becomes the Skill of its name, written by the
// operator. Someone who may write ConfigMaps but not Skills cannot label
// one so, at creation or by an update, and a refused update changes
// nothing; a ConfigMap without the label needs nothing new, removing the
// label needs nothing, and the right to write Skills is enough.
func TestAdmission_SkillSourceNeedsTheRightToWriteTheSkill(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	role(t, ns, "configmap-writer", "gina", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch", "get"},
	})
	gina := as(t, "gina")
	source := func(name string, labelled bool) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data:       map[string]string{"SKILL.md": "---\nname: " + name + "\ndescription: d\n---\nBody.\n"},
		}
		if labelled {
			cm.Labels = map[string]string{skillsv1.LabelSkillSource: "true"}
		}
		return cm
	}
	refusal := "ConfigMap dns-debug is labelled kubeskills.io/skill-source=true, so the operator makes Skill dns-debug from it, " +
		"which gina may not create or update in namespace " + ns

	refused(t, gina, source("dns-debug", true), refusal, "Ask for create or update on skills (kubeskills.io)")
	plain := source("dns-debug", false)
	g.Expect(gina.Create(ctx, plain)).To(Succeed())
	err := update(gina, plain, func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{skillsv1.LabelSkillSource: "true"} })
	g.Expect(err).To(MatchError(ContainSubstring(refusal)))
	kept := &corev1.ConfigMap{}
	g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(plain), kept)).To(Succeed())
	g.Expect(kept.Labels).To(BeEmpty(), "a refused update changed the ConfigMap")

	role(t, ns, "skill-writer", "gina", rbacv1.PolicyRule{
		APIGroups: []string{"kubeskills.io"}, Resources: []string{"skills"}, Verbs: []string{"create", "update", "patch"},
	})
	g.Eventually(func() error {
		return update(gina, plain, func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{skillsv1.LabelSkillSource: "true"} })
	}, timeout, interval).Should(Succeed())

	// Taking the label off, even without the right to Skills, is allowed.
	g.Expect(admin.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "skill-writer"}})).To(Succeed())
	g.Eventually(func() error {
		return update(gina, plain, func(cm *corev1.ConfigMap) { cm.Data["SKILL.md"] += "More.\n" })
	}, timeout, interval).Should(MatchError(ContainSubstring(refusal)))
	g.Expect(update(gina, plain, func(cm *corev1.ConfigMap) { cm.Labels = nil })).To(Succeed())
}

func TestAdmission_SkillRepositoryNeedsItsSourceAndTheRightToWriteSkills(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	role(t, ns, "repository-writer", "hugo", rbacv1.PolicyRule{
		APIGroups: []string{"kubeskills.io"}, Resources: []string{"skillrepositories"}, Verbs: []string{"create", "update", "get"},
	})
	hugo := as(t, "hugo")
	repo := &skillsv1.SkillRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-skills"},
		Spec: skillsv1.SkillRepositorySpec{
			SourceRef: skillsv1.SourceRef{Kind: skillsv1.SourceGitRepository, Name: "skills"}, Path: "skills",
		},
	}
	refused(t, hugo, repo, "spec.sourceRef names GitRepository skills, which hugo may not get in namespace "+ns,
		"ask for get on gitrepositories.source.toolkit.fluxcd.io/skills")

	role(t, ns, "source-reader", "hugo", rbacv1.PolicyRule{
		APIGroups: []string{skillsv1.FluxSourceGroup}, Resources: []string{"gitrepositories"}, Verbs: []string{"get"},
		ResourceNames: []string{"skills"},
	})
	refused(t, hugo, repo, "SkillRepository team-skills makes Skills in namespace "+ns+", which hugo may not create",
		"Ask for create and delete on skills (kubeskills.io)")
	role(t, ns, "skill-creator", "hugo", rbacv1.PolicyRule{
		APIGroups: []string{"kubeskills.io"}, Resources: []string{"skills"}, Verbs: []string{"create"},
	})
	refused(t, hugo, repo, "SkillRepository team-skills deletes the Skills of folders removed in namespace "+ns+
		", which hugo may not delete")
	other := repo.DeepCopy()
	other.Spec.SourceRef.Name = "someone-elses"
	role(t, ns, "skill-deleter", "hugo", rbacv1.PolicyRule{
		APIGroups: []string{"kubeskills.io"}, Resources: []string{"skills"}, Verbs: []string{"delete"},
	})
	refused(t, hugo, other, "spec.sourceRef names GitRepository someone-elses")
	g.Eventually(func() error { return hugo.Create(ctx, repo.DeepCopy()) }, timeout, interval).Should(Succeed())
	err := update(hugo, repo, func(r *skillsv1.SkillRepository) { r.Spec.SourceRef.Name = "someone-elses" })
	g.Expect(err).To(MatchError(ContainSubstring("spec.sourceRef names GitRepository someone-elses")))
}
