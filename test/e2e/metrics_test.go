//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// metricsCountWhatHappened: after the chats and approvals of the steps
// before, the manager's metrics, scraped as a ServiceAccount bound to
// kubeskills-metrics-reader, count the agent namespace's runs as they are:
// the gauge of runs by phase equals the runs there are, and the decisions
// counted by action are at least the decisions the runs record (a run
// judged again counts again).
func metricsCountWhatHappened(t *testing.T, _ *state) {
	ctx := context.Background()
	NewWithT(t).Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.client.List(ctx, &pods, client.InNamespace(operatorNS),
			client.MatchingLabels{"app.kubernetes.io/name": "kubeskills"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		families, err := scrapeManager(t, pods.Items[0].Name)
		g.Expect(err).NotTo(HaveOccurred())

		var runs skillsv1.CommandRunList
		g.Expect(c.client.List(ctx, &runs, client.InNamespace(ns))).To(Succeed())
		g.Expect(runs.Items).NotTo(BeEmpty())
		phases, decisions := map[string]float64{}, map[string]float64{}
		for _, r := range runs.Items {
			phase := r.Status.Phase
			if phase == "" {
				// Not judged yet: the gauge counts it Pending.
				phase = skillsv1.PhasePending
			}
			phases[string(phase)]++
			if d := r.Status.Decision; d != nil {
				decisions[string(d.Action)]++
			}
		}
		g.Expect(series(families["kubeskills_command_runs"], "phase", ns)).To(Equal(phases), "kubeskills_command_runs by phase")
		counted := series(families["kubeskills_decisions_total"], "action", ns)
		for action, n := range decisions {
			g.Expect(counted[action]).To(BeNumerically(">=", n), "kubeskills_decisions_total{action=%q}", action)
		}
		g.Expect(series(families["kubeskills_agents"], "ready", ns)).To(HaveKeyWithValue("True", BeNumerically(">=", 1)))
	}, time.Minute, 2*time.Second).Should(Succeed())
}

// series reads a family's values in namespace by the value of label,
// leaving out zeros.
func series(f *dto.MetricFamily, label, namespace string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["namespace"] != namespace {
			continue
		}
		v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
		if v != 0 {
			out[labels[label]] += v
		}
	}
	return out
}
