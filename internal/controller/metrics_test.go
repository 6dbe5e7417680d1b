package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// metric reads one series from the manager's metrics registry, as a scrape
// would: a counter's or a gauge's value, a histogram's count of samples;
// -1 when there is no such series.
func metric(g Gomega, name string, labels map[string]string) float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
	}
	return -1
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}

// TestRunMetricsCountWhatHappened: a run allowed and run, a run that
// waited for people until it expired, and a denied one show in the
// operator's metrics, labelled by namespace, policy, action and phase, and
// the gauges count the runs as they are now.
func TestRunMetricsCountWhatHappened(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := commandSetup(t, func(p *skillsv1.CommandPolicy) {
		p.Spec.ApprovalTimeout = &metav1.Duration{Duration: 2 * time.Second}
	})
	startedRun(t, ns, "ran", "echo hi")
	g.Expect(operator.EndPod(ctx, k8s, ns, "ran", &runner.Result{Stdout: "hi\n", DurationMillis: 20})).To(Succeed())
	waitPhase(t, ns, "ran", skillsv1.PhaseSucceeded)
	g.Expect(k8s.Create(ctx, newRun(ns, "asked", "ls"))).To(Succeed())
	waitPhase(t, ns, "asked", skillsv1.PhaseAwaitingApproval)
	g.Eventually(func(g Gomega) {
		g.Expect(metric(g, "kubeskills_command_runs", map[string]string{"namespace": ns, "phase": "AwaitingApproval"})).To(Equal(1.0))
		g.Expect(metric(g, "kubeskills_approval_oldest_wait_seconds", map[string]string{"namespace": ns})).To(BeNumerically(">=", 0))
	}, timeout, interval).Should(Succeed())
	waitPhase(t, ns, "asked", skillsv1.PhaseExpired)
	g.Expect(k8s.Create(ctx, newRun(ns, "refused", "rm -rf /tmp/x"))).To(Succeed())
	waitPhase(t, ns, "refused", skillsv1.PhaseDenied)

	policy := map[string]string{"namespace": ns, "policy": "ops-policy"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for key, val := range m {
			out[key] = val
		}
		return out
	}
	g.Eventually(func(g Gomega) {
		g.Expect(metric(g, "kubeskills_decisions_total", with(policy, "action", "Always"))).To(Equal(1.0))
		g.Expect(metric(g, "kubeskills_decisions_total", with(policy, "action", "Ask"))).To(Equal(1.0))
		g.Expect(metric(g, "kubeskills_decisions_total", with(policy, "action", "Never"))).To(Equal(1.0))
		for _, phase := range []string{"Succeeded", "Expired", "Denied"} {
			g.Expect(metric(g, "kubeskills_command_runs_ended_total", map[string]string{"namespace": ns, "phase": phase})).To(Equal(1.0), phase)
			g.Expect(metric(g, "kubeskills_command_runs", map[string]string{"namespace": ns, "phase": phase})).To(Equal(1.0), phase)
		}
		g.Expect(metric(g, "kubeskills_command_runs", map[string]string{"namespace": ns, "phase": "AwaitingApproval"})).To(Equal(-1.0))
		g.Expect(metric(g, "kubeskills_approval_oldest_wait_seconds", map[string]string{"namespace": ns})).To(Equal(-1.0))
		g.Expect(metric(g, "kubeskills_approval_wait_seconds", map[string]string{"namespace": ns, "outcome": "expired"})).To(Equal(1.0))
		g.Expect(metric(g, "kubeskills_command_duration_seconds", map[string]string{"namespace": ns})).To(Equal(1.0))
		g.Expect(metric(g, "kubeskills_sandbox_overhead_seconds", map[string]string{"namespace": ns})).To(Equal(1.0))
		g.Expect(metric(g, "kubeskills_agents", map[string]string{"namespace": ns})).To(Equal(1.0))
	}, timeout, interval).Should(Succeed())

	// Every metric of the operator's is in the docs.
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	g.Expect(err).NotTo(HaveOccurred())
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "kubeskills_") {
			g.Expect(string(docs)).To(ContainSubstring("| `"+f.GetName()+"` | "), "docs/observability.md does not list %s", f.GetName())
		}
	}
}
