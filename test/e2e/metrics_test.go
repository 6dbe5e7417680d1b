//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent"
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

// agentMetricsCountWhatHappened: the agent ops serves its metrics only to
// a token the API server lets get /metrics. Scraped as the same
// ServiceAccount bound to kubeskills-metrics-reader as the manager, they
// count at least what the CommandRuns its pod filed record: a command
// reported for each run, and a chat for each trace the runs of chats
// belong to. No token, a token that is not the cluster's, and a
// ServiceAccount without the grant are refused.
func agentMetricsCountWhatHappened(t *testing.T, _ *state) {
	ctx := context.Background()
	pod := runningAgentPod(t, agentName)
	url, fwd := c.forward(t, ns, "pod/"+pod.Name, 8080)
	defer func() { _ = fwd.Process.Kill(); _ = fwd.Wait() }()
	url += "/metrics"
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	g := NewWithT(t)
	stranger, err := c.command(c.kubectl, "create", "token", "default", "-n", ns, "--duration", "10m")
	g.Expect(err).NotTo(HaveOccurred())
	for _, refused := range []struct {
		token string
		code  int
		why   string
	}{
		{"", http.StatusUnauthorized, "no token"},
		{"not-a-token", http.StatusUnauthorized, "a token the API server does not know"},
		{strings.TrimSpace(stranger), http.StatusForbidden, "a ServiceAccount not bound to kubeskills-metrics-reader"},
	} {
		code, _, err := scrape(hc, url, refused.token)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(refused.code), refused.why)
	}

	// The counters start with the process: only runs filed since count.
	var started time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "agent" && cs.State.Running != nil {
			started = cs.State.Running.StartedAt.Time
		}
	}
	g.Expect(started).NotTo(BeZero(), "the agent container of %s is not running", pod.Name)
	identity := serviceAccountUser(agentRequester(t))
	g.Eventually(func(g Gomega) {
		families, err := scrapeOK(hc, url, metricsReaderToken(t), "agent pod "+pod.Name)
		g.Expect(err).NotTo(HaveOccurred())

		var runs skillsv1.CommandRunList
		g.Expect(c.client.List(ctx, &runs, client.InNamespace(ns))).To(Succeed())
		filed, traces, untraced := 0, map[string]bool{}, false
		for _, r := range runs.Items {
			if r.Spec.Agent != agentName || r.Spec.RequestedBy != identity || !r.CreationTimestamp.After(started) {
				continue
			}
			filed++
			if _, ok := r.Annotations[agent.AnnotationRequestKey]; !ok {
				continue // not filed by a chat
			}
			// A chat's runs share its trace: 00-TRACEID-SPANID-FLAGS.
			if parts := strings.Split(r.Annotations[skillsv1.AnnotationTraceparent], "-"); len(parts) == 4 {
				traces[parts[1]] = true
			} else {
				untraced = true
			}
		}
		chats := len(traces)
		if chats == 0 && untraced {
			chats = 1
		}
		g.Expect(filed).NotTo(BeZero(), "no CommandRun filed by %s since %s", identity, started)
		g.Expect(total(families[agent.MetricCommands])).To(BeNumerically(">=", filed), agent.MetricCommands)
		g.Expect(total(families[agent.MetricChats])).To(BeNumerically(">=", chats), agent.MetricChats)
		if chats > 0 {
			g.Expect(byLabel(families[agent.MetricChats], "outcome")).To(HaveKeyWithValue("answered", BeNumerically(">=", 1)))
		}
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

// total sums a family's counters and gauges.
func total(f *dto.MetricFamily) float64 {
	var sum float64
	for _, m := range f.GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum
}

// byLabel sums a family's counters and gauges by the value of label.
func byLabel(f *dto.MetricFamily, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return out
}
