package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/controller"
)

// TestAgentPastProgressDeadlineIsStalled: a Deployment the deployment
// controller gave up on (Progressing=False, ProgressDeadlineExceeded) is
// the Agent's Stalled state, with the Deployment's message and a Warning
// Event, not Reconciling forever.
func TestAgentPastProgressDeadlineIsStalled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := agentSetup(t)
	waitAgent(t, ns, "health", "triage")
	const msg = `ReplicaSet "agent-ops-5d8f7c9b4" has timed out progressing.`
	g.Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, keyOf(ns, "agent-ops"), d); err != nil {
			return err
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, UnavailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable",
					Message: "Deployment does not have minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: controller.ProgressDeadlineExceededReason,
					Message: msg},
			},
		}
		return k8s.Status().Update(ctx, d)
	}, timeout, interval).Should(Succeed())

	a := &skillsv1.Agent{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops"), a)).To(Succeed())
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
		stalled := condition(a.Status.Conditions, skillsv1.StalledCondition)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(controller.ProgressDeadlineExceededReason))
		g.Expect(stalled.Message).To(ContainSubstring(msg))
		g.Expect(stalled.ObservedGeneration).To(Equal(a.Generation))
		ready := condition(a.Status.Conditions, skillsv1.ReadyCondition)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(controller.ProgressDeadlineExceededReason))
		g.Expect(condition(a.Status.Conditions, skillsv1.ReconcilingCondition)).To(BeNil())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		var warnings []string
		for _, e := range events(g, a) {
			if e.Type == corev1.EventTypeWarning && e.Reason == controller.ProgressDeadlineExceededReason {
				warnings = append(warnings, e.Note)
			}
		}
		// A second pass that reads the Agent from a cache not yet holding
		// the first pass's status may say it again; never anything else.
		g.Expect(warnings).NotTo(BeEmpty())
		g.Expect(warnings).To(HaveEach(ContainSubstring(msg)))
	}, timeout, interval).Should(Succeed())

	// Once the pods come up, the Agent is Ready and no longer Stalled.
	makeAvailable(t, ns)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops"), a)).To(Succeed())
		g.Expect(condition(a.Status.Conditions, skillsv1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(a.Status.Conditions, skillsv1.StalledCondition)).To(BeNil())
	}, timeout, interval).Should(Succeed())
}

// TestAgentKeepsForeignConfigMapNamedLikeAStaleShard: a ConfigMap the
// Agent does not control survives, though its name is that of a catalog
// shard the Agent no longer needs.
func TestAgentKeepsForeignConfigMapNamedLikeAStaleShard(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := agentSetup(t)
	a := waitAgent(t, ns, "health", "triage")
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: catalogShard(3)},
		Data:       map[string]string{"owner": "someone else"},
	}
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())

	// A new catalog revision makes the Agent look for stale shards again.
	g.Eventually(func() error {
		cur := &skillsv1.Agent{}
		if err := k8s.Get(ctx, keyOf(ns, "ops"), cur); err != nil {
			return err
		}
		cur.Spec.Instructions = "You are the on-call assistant, now for two teams."
		return k8s.Update(ctx, cur)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cur := &skillsv1.Agent{}
		g.Expect(k8s.Get(ctx, keyOf(ns, "ops"), cur)).To(Succeed())
		g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		g.Expect(cur.Status.CatalogRevision).NotTo(Equal(a.Status.CatalogRevision))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, keyOf(ns, foreign.Name), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(foreign.UID))
		g.Expect(got.Data).To(Equal(foreign.Data))
	}, "2s", interval).Should(Succeed())
}
