package admission

import (
	"context"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestRoles_ViewerReadsTheKindsButWritesNone binds kubeskills-viewer in a
// namespace: its holder lists the four kinds there and can create none.
func TestRoles_ViewerReadsTheKindsButWritesNone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	bind(t, ns, "ClusterRole", "kubeskills-viewer", "vera")
	vera := as(t, "vera")

	for _, list := range []client.ObjectList{&skillsv1.SkillList{}, &skillsv1.AgentList{}, &skillsv1.CommandPolicyList{}, &skillsv1.CommandRunList{}} {
		g.Expect(vera.List(ctx, list, client.InNamespace(ns))).To(Succeed(), "viewer cannot list %T", list)
	}
	g.Expect(apierrors.IsForbidden(vera.Create(ctx, skill(ns, "notes")))).To(BeTrue(), "viewer created a Skill")
	pol := &skillsv1.CommandPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "open"},
		Spec: skillsv1.CommandPolicySpec{Rules: []skillsv1.PolicyRule{{Pattern: "*", Action: skillsv1.ActionAlways}}}}
	g.Expect(apierrors.IsForbidden(vera.Create(ctx, pol))).To(BeTrue(), "viewer created a CommandPolicy")
	g.Expect(apierrors.IsForbidden(vera.Create(ctx, newRun(ns, "r1", "ops", "echo hi", "vera")))).To(BeTrue(), "viewer filed a CommandRun")
	g.Expect(apierrors.IsForbidden(vera.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))).To(BeTrue(), "viewer reads Secrets")
}

// TestRoles_EditorWritesSkillsButNeverApproves binds kubeskills-editor in a
// namespace: its holder creates and edits Skills, and can neither file a
// CommandRun nor approve one that awaits approval.
func TestRoles_EditorWritesSkillsButNeverApproves(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	bind(t, ns, "ClusterRole", "kubeskills-editor", "eddie")
	eddie := as(t, "eddie")

	skl := skill(ns, "notes")
	g.Expect(eddie.Create(ctx, skl)).To(Succeed(), "editor cannot create a Skill")
	g.Expect(update(eddie, skl, func(s *skillsv1.Skill) { s.Spec.Description = "Edited notes." })).To(Succeed(), "editor cannot edit a Skill")
	g.Expect(apierrors.IsForbidden(eddie.Create(ctx, newRun(ns, "by-eddie", "ops", "ls /", "eddie")))).To(BeTrue(), "editor filed a CommandRun")

	g.Expect(admin.Create(ctx, newRun(ns, "asked", "ops", "ls /", "admin"))).To(Succeed())
	run := waitPhase(t, ns, "asked", skillsv1.PhaseAwaitingApproval)
	run.Spec.Approval = run.ApproveDecision(skillsv1.Approved, "eddie", "looks fine")
	g.Expect(apierrors.IsForbidden(eddie.Update(ctx, run))).To(BeTrue(), "editor approved a run")
	patch := client.MergeFrom(&skillsv1.CommandRun{})
	g.Expect(apierrors.IsForbidden(eddie.Patch(ctx, run, patch))).To(BeTrue(), "editor approved a run by patch")
	g.Expect(apierrors.IsForbidden(eddie.Status().Update(ctx, run))).To(BeTrue(), "editor wrote a run's status")
	g.Expect(apierrors.IsForbidden(eddie.Delete(ctx, run))).To(BeTrue(), "editor deleted a run's record")
	g.Expect(getRun(g, ns, "asked").Spec.Approval).To(BeNil())
}

// TestRoles_AggregateIntoTheBuiltInRoles checks the labels that add the
// viewer to `view` and the editor to `edit` (kube-controller-manager
// aggregates them; the test API server runs none), and that no kubeskills
// role aggregated into `view`, `edit` or `admin` writes CommandRuns: holding
// a built-in role never lets anyone file, approve or rewrite a run.
func TestRoles_AggregateIntoTheBuiltInRoles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	viewer, editor := &rbacv1.ClusterRole{}, &rbacv1.ClusterRole{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "kubeskills-viewer"}, viewer)).To(Succeed())
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "kubeskills-editor"}, editor)).To(Succeed())
	g.Expect(viewer.Labels).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-view", "true"))
	g.Expect(editor.Labels).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-edit", "true"))

	var roles rbacv1.ClusterRoleList
	g.Expect(admin.List(ctx, &roles)).To(Succeed())
	for _, r := range roles.Items {
		if !strings.HasPrefix(r.Name, "kubeskills-") || !aggregatesToBuiltIn(r.Labels) {
			continue
		}
		for _, rule := range r.Rules {
			if !slices.Contains(rule.APIGroups, skillsv1.GroupVersion.Group) && !slices.Contains(rule.APIGroups, "*") {
				continue
			}
			for _, res := range rule.Resources {
				if res != "commandruns" && !strings.HasPrefix(res, "commandruns/") && res != "*" {
					continue
				}
				for _, verb := range rule.Verbs {
					g.Expect([]string{"get", "list", "watch"}).To(ContainElement(verb),
						"ClusterRole %s, aggregated into a built-in role, grants %s on %s", r.Name, verb, res)
				}
			}
		}
	}
}

// aggregatesToBuiltIn tells whether labels add a ClusterRole to view, edit
// or admin.
func aggregatesToBuiltIn(labels map[string]string) bool {
	for _, to := range []string{"view", "edit", "admin"} {
		if labels["rbac.authorization.k8s.io/aggregate-to-"+to] == "true" {
			return true
		}
	}
	return false
}
