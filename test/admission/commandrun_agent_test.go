package admission

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestAdmission_AgentCannotFileRunForAnotherAgent: an agent's own
// ServiceAccount files runs for its own Agent only. A run for another agent
// (whose policy may be more permissive) is refused with a message that
// names both, even when someone granted the ServiceAccount the run verb.
func TestAdmission_AgentCannotFileRunForAnotherAgent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	policyAndAgent(t, ns, "admin-ops")
	ops := asAgent(t, ns, "ops")
	user := agentUser(ns, "ops")

	refused(t, ops, newRun(ns, "borrow", "admin-ops", "echo hi", user),
		"ServiceAccount agent-ops is the identity of Agent ops",
		"may file CommandRuns only for its own agent (spec.agent: ops), not for admin-ops")
	g.Expect(ops.Create(ctx, newRun(ns, "own", "ops", "echo hi", user))).To(Succeed())
	waitPhase(t, ns, "own", skillsv1.PhaseRunning)

	// A grant does not make one agent another.
	bind(t, ns, "ClusterRole", "kubeskills-runner", user)
	err := ops.Create(ctx, newRun(ns, "borrow-granted", "admin-ops", "echo hi", user))
	g.Expect(err).To(MatchError(ContainSubstring("may file CommandRuns only for its own agent")))
}

// TestAdmission_PersonNeedsGrantToFileRunsForAnAgent: a person who may
// create CommandRuns still needs the verb run on the Agent. Without it the
// run is refused, with the ClusterRole to ask for; a Role narrowed to one
// agent allows that agent only; kubeskills-runner allows every agent of
// the namespace.
func TestAdmission_PersonNeedsGrantToFileRunsForAnAgent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	policyAndAgent(t, ns, "ops")
	policyAndAgent(t, ns, "admin-ops")
	bob := as(t, "bob")
	role(t, ns, "create-runs", "bob", rbacv1.PolicyRule{
		APIGroups: []string{"kubeskills.io"}, Resources: []string{"commandruns"}, Verbs: []string{"create", "get"},
	})

	refused(t, bob, newRun(ns, "try", "ops", "echo hi", "bob"),
		"bob may not file commands for Agent ops in namespace "+ns,
		"verb run on agents/ops", "--clusterrole=kubeskills-runner --user=bob")

	role(t, ns, "run-ops", "bob", rbacv1.PolicyRule{
		APIGroups: []string{"kubeskills.io"}, Resources: []string{"agents"}, ResourceNames: []string{"ops"}, Verbs: []string{"run"},
	})
	g.Eventually(func() error { return bob.Create(ctx, newRun(ns, "try", "ops", "echo hi", "bob")) }, timeout, interval).Should(Succeed())
	err := bob.Create(ctx, newRun(ns, "try-admin", "admin-ops", "echo hi", "bob"))
	g.Expect(err).To(MatchError(ContainSubstring("bob may not file commands for Agent admin-ops")))

	bind(t, ns, "ClusterRole", "kubeskills-runner", "bob")
	g.Eventually(func() error { return bob.Create(ctx, newRun(ns, "try-admin", "admin-ops", "echo hi", "bob")) }, timeout, interval).Should(Succeed())
	waitPhase(t, ns, "try-admin", skillsv1.PhaseRunning)
}
