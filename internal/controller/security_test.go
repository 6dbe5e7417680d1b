package controller_test

import (
	"context"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
)

var installSecurity sync.Once

// securitySetup installs the admission policy as the operator ships it
// (the approver role comes with config/rbac, which the operator runs
// under), and returns clients for an agent's ServiceAccount
// (bound to the agent's Role) and for two people, alice (an approver) and
// bob (an approver too), in a namespace of their own.
func securitySetup(t *testing.T) (ns string, agent, alice, bob client.Client) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	installSecurity.Do(func() {
		g.Expect(env.ApplyFiles(ctx, "config/admission/commandrun-identity.yaml")).To(Succeed())
	})
	ns = commandSetup(t, nil)
	g.Expect(k8s.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-ops"},
		Rules:      controller.AgentRoleRules(),
	})).To(Succeed())
	bind := func(name string, role rbacv1.RoleRef, subject rbacv1.Subject) {
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    role,
			Subjects:   []rbacv1.Subject{subject},
		})).To(Succeed())
	}
	bind("agent-ops", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "agent-ops"},
		rbacv1.Subject{Kind: "ServiceAccount", Name: "agent-ops", Namespace: ns})
	approver := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeskills-approver"}
	bind("alice", approver, rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"})
	bind("bob", approver, rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "bob"})
	// bob may also create runs, as `kubectl skills run` would.
	bind("bob-create", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "agent-ops"},
		rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "bob"})

	user := func(name string, groups ...string) client.Client {
		cfg, err := env.AddUser(name, groups...)
		g.Expect(err).NotTo(HaveOccurred())
		c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	agent = user("system:serviceaccount:"+ns+":agent-ops", "system:serviceaccounts", "system:serviceaccounts:"+ns)
	return ns, agent, user("alice"), user("bob")
}

func agentName(ns string) string { return "system:serviceaccount:" + ns + ":agent-ops" }

// TestAgentCannotRunOrApproveCommandsItself: the agent's ServiceAccount can
// ask for a command, and nothing more.
func TestAgentCannotRunOrApproveCommandsItself(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, agent, _, _ := securitySetup(t)

	run := newRun(ns, "asked", "kubectl rollout restart deploy/web")
	run.Spec.RequestedBy = agentName(ns)
	g.Eventually(func() error { return agent.Create(ctx, run) }, timeout, interval).Should(Succeed())

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "escape"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "sh", Image: "busybox", Command: []string{"sh", "-c", "rm -rf /"}}},
		}}},
	}
	g.Expect(apierrors.IsForbidden(agent.Create(ctx, job))).To(BeTrue(), "the agent must not create Jobs")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "escape"}, Spec: job.Spec.Template.Spec}
	g.Expect(apierrors.IsForbidden(agent.Create(ctx, pod))).To(BeTrue(), "the agent must not create pods")
	var secrets corev1.SecretList
	g.Expect(apierrors.IsForbidden(agent.List(ctx, &secrets, client.InNamespace(ns)))).To(BeTrue(), "the agent must not read Secrets")

	waitPhase(t, ns, run.Name, skillsv1.PhaseAwaitingApproval)
	approved := &skillsv1.CommandRun{}
	g.Expect(agent.Get(ctx, keyOf(ns, run.Name), approved)).To(Succeed())
	approved.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: agentName(ns)}
	g.Expect(apierrors.IsForbidden(agent.Update(ctx, approved))).To(BeTrue(), "the agent must not approve")
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"approval":{"decision":"Approved"}}}`))
	g.Expect(apierrors.IsForbidden(agent.Patch(ctx, approved, patch))).To(BeTrue(), "the agent must not patch runs")
	g.Expect(apierrors.IsForbidden(agent.Status().Patch(ctx, approved, client.RawPatch("application/merge-patch+json",
		[]byte(`{"status":{"phase":"Succeeded"}}`))))).To(BeTrue(), "the agent must not write status")
	g.Expect(apierrors.IsForbidden(agent.Delete(ctx, approved))).To(BeTrue(), "the agent must not delete runs")
}

// TestIdentitiesOnCommandRunsAreTruthful: the admission policy refuses a
// forged requester or approver, an approval at creation, and
// self-approval.
func TestIdentitiesOnCommandRunsAreTruthful(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, agent, alice, bob := securitySetup(t)

	forged := newRun(ns, "forged", "kubectl get pods")
	forged.Spec.RequestedBy = "alice"
	g.Eventually(func() error { return agent.Create(ctx, forged) }, timeout, interval).Should(
		MatchError(ContainSubstring("spec.requestedBy must be the user creating the CommandRun (" + agentName(ns) + ")")))
	forged.Spec.RequestedBy = ""
	g.Expect(agent.Create(ctx, forged)).To(MatchError(ContainSubstring("spec.requestedBy must be the user creating")))

	preApproved := newRun(ns, "pre-approved", "kubectl drain node-1")
	preApproved.Spec.RequestedBy = agentName(ns)
	preApproved.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: agentName(ns)}
	g.Expect(agent.Create(ctx, preApproved)).To(MatchError(ContainSubstring("cannot be created with an approval")))

	run := newRun(ns, "needs-approval", "kubectl drain node-1")
	run.Spec.RequestedBy = agentName(ns)
	g.Expect(agent.Create(ctx, run)).To(Succeed())
	waitPhase(t, ns, run.Name, skillsv1.PhaseAwaitingApproval)
	approve := func(c client.Client, name, approver string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			r := &skillsv1.CommandRun{}
			g.Expect(c.Get(ctx, keyOf(ns, name), r)).To(Succeed())
			r.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: approver, Reason: "maintenance window"}
			return c.Update(ctx, r)
		})
	}
	g.Expect(approve(alice, run.Name, "bob")).To(MatchError(ContainSubstring("spec.approval.approver must be the user setting the approval (alice)")))
	g.Expect(approve(alice, run.Name, "alice")).To(Succeed())
	waitPhase(t, ns, run.Name, skillsv1.PhaseRunning)

	own := newRun(ns, "own", "kubectl drain node-2")
	own.Spec.RequestedBy = "bob"
	g.Expect(bob.Create(ctx, own)).To(Succeed())
	waitPhase(t, ns, own.Name, skillsv1.PhaseAwaitingApproval)
	g.Expect(approve(bob, own.Name, "bob")).To(MatchError(ContainSubstring("the user who requested a command cannot approve or deny it")))
}
