package admission

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// keepFinalizer stands for a finalizer the operator sets to keep a run.
const keepFinalizer = "kubeskills.io/keep-record"

// refusedEdit asserts that c may not apply edit to the run: the API server
// refuses it with a message holding every want, and the run keeps its
// metadata. It polls until the admission policies are in force, undoing,
// as the admin, an edit accepted before.
func refusedEdit(t *testing.T, c client.Client, ns, name string, edit func(*skillsv1.CommandRun), want ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		before := getRun(g, ns, name).ObjectMeta
		err := update(c, &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, edit)
		if err == nil {
			g.Expect(update(admin, &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, func(r *skillsv1.CommandRun) {
				r.Labels, r.OwnerReferences, r.Finalizers = before.Labels, before.OwnerReferences, before.Finalizers
			})).To(Succeed())
		}
		g.Expect(err).To(HaveOccurred(), "accepted")
		for _, w := range want {
			g.Expect(err.Error()).To(ContainSubstring(w))
		}
		after := getRun(g, ns, name).ObjectMeta
		g.Expect(after.Labels).To(Equal(before.Labels))
		g.Expect(after.OwnerReferences).To(Equal(before.OwnerReferences))
		g.Expect(after.Finalizers).To(Equal(before.Finalizers))
	}, timeout, interval).Should(Succeed())
}

// TestAdmission_RunRecordsKeptFromApproversAndAgents: the labels, owner
// references and finalizers of a run decide when it is deleted, so an
// approver (kubeskills-approver) and an agent (its own ServiceAccount, even
// when someone granted it update on runs) may change none of them, adding
// or removing; the refusal names who and what. Approving still works, and
// the operator, as its ServiceAccount, still judges and runs the command
// and may change the run's metadata where it is granted update on runs.
func TestAdmission_RunRecordsKeptFromApproversAndAgents(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, alice, _ := pinSetup(t)
	// Where OwnerReferencesPermissionEnforcement is on, an owner reference
	// from someone who may not delete the run is refused before admission
	// policies; the policy holds where it is off. So both may delete runs
	// here, and the agent may update them, as someone might grant.
	updateRuns := rbacv1.PolicyRule{APIGroups: []string{"kubeskills.io"}, Resources: []string{"commandruns"}, Verbs: []string{"get", "update", "delete"}}
	role(t, ns, "agent-update-runs", agentUser(ns, "ops"), updateRuns)
	bind(t, ns, "Role", "agent-update-runs", "alice")
	ops := asAgent(t, ns, "ops")
	owner := &skillsv1.Agent{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ops"}, owner)).To(Succeed())
	// The admin sets the scene: a label and a finalizer the run keeps.
	g.Expect(update(admin, &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restart"}}, func(r *skillsv1.CommandRun) {
		r.Labels = map[string]string{"team": "shop"}
		r.Finalizers = append(r.Finalizers, keepFinalizer)
	})).To(Succeed())

	for _, who := range []struct {
		user string
		c    client.Client
	}{{"alice", alice}, {agentUser(ns, "ops"), ops}} {
		prefix := who.user + " may not change the "
		refusedEdit(t, who.c, ns, "restart", func(r *skillsv1.CommandRun) { r.Labels["team"] = "other" },
			prefix+"labels of CommandRun restart", "only the operator changes them")
		refusedEdit(t, who.c, ns, "restart", func(r *skillsv1.CommandRun) { r.Labels = nil },
			prefix+"labels of CommandRun restart")
		refusedEdit(t, who.c, ns, "restart", func(r *skillsv1.CommandRun) {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: skillsv1.GroupVersion.String(), Kind: "Agent", Name: owner.Name, UID: owner.UID}}
		}, prefix+"owner references of CommandRun restart")
		refusedEdit(t, who.c, ns, "restart", func(r *skillsv1.CommandRun) { r.Finalizers = nil },
			prefix+"finalizers of CommandRun restart")
		refusedEdit(t, who.c, ns, "restart", func(r *skillsv1.CommandRun) {
			r.Finalizers = append(r.Finalizers, "example.com/hold")
			r.Labels["team"] = "other"
		}, prefix+"labels, finalizers of CommandRun restart")
	}

	// Approving is an update that leaves the metadata alone.
	approveCurrent(g, alice, ns, "restart", "alice")
	waitPhase(t, ns, "restart", skillsv1.PhaseRunning)

	op, err := client.New(operator.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	role(t, ns, "operator-update-runs", operatorUser(t, op), updateRuns)
	g.Eventually(func() error {
		return update(op, &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restart"}}, func(r *skillsv1.CommandRun) {
			r.Labels["kubeskills.io/kept"] = "true"
			r.Finalizers = nil
		})
	}, timeout, interval).Should(Succeed(), "the operator changes a run's labels and finalizers")
	run := getRun(g, ns, "restart")
	g.Expect(run.Labels).To(HaveKeyWithValue("kubeskills.io/kept", "true"))
	g.Expect(run.Finalizers).To(BeEmpty())
}

// operatorUser is the user name the operator's ServiceAccount
// authenticates as, as the API server tells it.
func operatorUser(t *testing.T, op client.Client) string {
	t.Helper()
	review := &authnv1.SelfSubjectReview{}
	if err := op.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.UserInfo.Username
}

// traceparent is a W3C traceparent a tool call's span would have.
const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestAdmission_RunTraceparentNeverChanges: the agent files a run with the
// traceparent of its tool call, and the run's status records its trace.
// Nobody may then change, remove or add it: not the approver, not the
// agent, not the operator. Approving still works.
func TestAdmission_RunTraceparentNeverChanges(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, alice, _ := pinSetup(t)
	updateRuns := rbacv1.PolicyRule{APIGroups: []string{"kubeskills.io"}, Resources: []string{"commandruns"}, Verbs: []string{"get", "update"}}
	role(t, ns, "agent-update-runs", agentUser(ns, "ops"), updateRuns)
	ops := asAgent(t, ns, "ops")
	op, err := client.New(operator.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	role(t, ns, "operator-update-runs", operatorUser(t, op), updateRuns)

	run := newRun(ns, "traced", "ops", askCommand, agentUser(ns, "ops"))
	run.Annotations = map[string]string{skillsv1.AnnotationTraceparent: traceparent}
	g.Expect(ops.Create(ctx, run)).To(Succeed())
	g.Expect(waitPhase(t, ns, "traced", skillsv1.PhaseAwaitingApproval).Status.TraceID).To(Equal("4bf92f3577b34da6a3ce929d0e0e4736"))

	other := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	edits := []struct {
		run  string
		edit func(*skillsv1.CommandRun)
	}{
		{"traced", func(r *skillsv1.CommandRun) { r.Annotations[skillsv1.AnnotationTraceparent] = other }},
		{"traced", func(r *skillsv1.CommandRun) { delete(r.Annotations, skillsv1.AnnotationTraceparent) }},
		{"restart", func(r *skillsv1.CommandRun) {
			metav1.SetMetaDataAnnotation(&r.ObjectMeta, skillsv1.AnnotationTraceparent, other)
		}},
	}
	for _, who := range []struct {
		user string
		c    client.Client
	}{{"alice", alice}, {agentUser(ns, "ops"), ops}, {operatorUser(t, op), op}} {
		for _, e := range edits {
			g.Eventually(func(g Gomega) {
				before := getRun(g, ns, e.run).Annotations
				err := update(who.c, &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: e.run}}, e.edit)
				if err == nil {
					// Accepted before the policy was in force: undone.
					g.Expect(update(admin, &skillsv1.CommandRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: e.run}}, func(r *skillsv1.CommandRun) {
						r.Annotations = before
					})).To(Succeed())
				}
				g.Expect(err).To(MatchError(ContainSubstring(who.user + " may not change the kubeskills.io/traceparent annotation of CommandRun " + e.run)))
				g.Expect(getRun(g, ns, e.run).Annotations).To(Equal(before))
			}, timeout, interval).Should(Succeed())
		}
	}

	// Approving is an update that leaves the annotation alone.
	approveCurrent(g, alice, ns, "traced", "alice")
	waitPhase(t, ns, "traced", skillsv1.PhaseRunning)
}
