package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// The operator's metrics, served with controller-runtime's on the
// manager's metrics endpoint. Their labels are bounded by the cluster's
// objects (namespaces, CommandPolicies) and the API's enums (actions,
// phases): never a run's name or its command. docs/observability.md lists
// them.
var (
	decisionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubeskills_decisions_total",
		Help: "Policy decisions recorded on CommandRuns, by namespace, CommandPolicy and action (a run judged again counts again).",
	}, []string{"namespace", "policy", "action"})
	runsEndedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubeskills_command_runs_ended_total",
		Help: "CommandRuns that ended, by namespace and phase (Succeeded, Failed, TimedOut, Denied, Expired).",
	}, []string{"namespace", "phase"})
	approvalWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubeskills_approval_wait_seconds",
		Help:    "Time from a CommandRun's creation until it left AwaitingApproval, by namespace and outcome (approved, denied, expired, failed).",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600},
	}, []string{"namespace", "outcome"})
	sandboxOverhead = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kubeskills_sandbox_overhead_seconds",
		Help: "Time a sandbox added around its command, by namespace: from its Job's creation to the result's record, " +
			"less the command's own duration (pod start, the fence's wait, reading the result).",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 11),
	}, []string{"namespace"})
	commandDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubeskills_command_duration_seconds",
		Help:    "How long commands ran in their sandbox, as the runner measured, by namespace.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
	}, []string{"namespace"})
	sandboxBlocked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubeskills_sandbox_start_failures_total",
		Help: "Sandboxes that could not start their command, by namespace and the pod's reason (Unschedulable, ErrImagePull, ...): " +
			"each time a run's Stalled condition takes a new reason while it runs.",
	}, []string{"namespace", "reason"})
)

func init() {
	metrics.Registry.MustRegister(decisionsTotal, runsEndedTotal, approvalWait, sandboxOverhead, commandDuration, sandboxBlocked, stateCollector{})
}

// recordRunMetrics counts what a pass stored, from the run as it was read
// (before) and as stored (after), once the status is written: a new
// decision, a run leaving AwaitingApproval, a run that ended.
func recordRunMetrics(before, after *skillsv1.CommandRun, now time.Time) {
	ns := after.Namespace
	if d := after.Status.Decision; d != nil && !equality.Semantic.DeepEqual(before.Status.Decision, d) {
		decisionsTotal.WithLabelValues(ns, d.Policy, string(d.Action)).Inc()
	}
	if before.Status.Phase == skillsv1.PhaseAwaitingApproval && after.Status.Phase != skillsv1.PhaseAwaitingApproval {
		approvalWait.WithLabelValues(ns, approvalOutcome(after.Status.Phase)).Observe(now.Sub(after.CreationTimestamp.Time).Seconds())
	}
	if after.Status.Phase == skillsv1.PhaseRunning {
		was := apimeta.FindStatusCondition(before.Status.Conditions, skillsv1.StalledCondition)
		if now := apimeta.FindStatusCondition(after.Status.Conditions, skillsv1.StalledCondition); now != nil && now.Status == metav1.ConditionTrue &&
			(was == nil || was.Status != metav1.ConditionTrue || was.Reason != now.Reason) {
			sandboxBlocked.WithLabelValues(ns, now.Reason).Inc()
		}
	}
	if before.Status.Phase.Terminal() || !after.Status.Phase.Terminal() {
		return
	}
	runsEndedTotal.WithLabelValues(ns, string(after.Status.Phase)).Inc()
	s := after.Status
	if s.Result == nil || s.Result.Duration == nil || s.StartTime == nil || s.CompletionTime == nil {
		return
	}
	ran := s.Result.Duration.Duration
	commandDuration.WithLabelValues(ns).Observe(ran.Seconds())
	sandboxOverhead.WithLabelValues(ns).Observe(max(s.CompletionTime.Sub(s.StartTime.Time)-ran, 0).Seconds())
}

// approvalOutcome names how a wait for people ended, from the phase after.
func approvalOutcome(phase skillsv1.RunPhase) string {
	switch phase {
	case skillsv1.PhaseDenied:
		return "denied"
	case skillsv1.PhaseExpired:
		return "expired"
	case skillsv1.PhaseFailed, skillsv1.PhaseTimedOut:
		return "failed"
	}
	return "approved"
}

// stateCollector reports, at each scrape, the state of the objects in the
// cache of the manager that leads (StateMetrics): gauges, counted afresh,
// so they never drift from it.
type stateCollector struct{}

// stateSources are the caches of the leading managers of this process,
// the latest last; the gauges read the latest. A process runs one manager;
// tests run several, nested or one after another.
var stateSources struct {
	sync.Mutex
	caches []client.Reader
}

// StateMetrics is a manager Runnable: while its manager leads, the gauges
// read the manager's cache. A replica that does not lead serves none, as
// it counts nothing either, so a scrape of every replica counts each
// object once.
func StateMetrics(cache client.Reader) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		stateSources.Lock()
		stateSources.caches = append(stateSources.caches, cache)
		stateSources.Unlock()
		<-ctx.Done()
		stateSources.Lock()
		defer stateSources.Unlock()
		if i := slices.Index(stateSources.caches, cache); i >= 0 {
			stateSources.caches = slices.Delete(stateSources.caches, i, i+1)
		}
		return nil
	})
}

// stateSource is the cache the gauges read now, nil when no manager leads.
func stateSource() client.Reader {
	stateSources.Lock()
	defer stateSources.Unlock()
	if n := len(stateSources.caches); n > 0 {
		return stateSources.caches[n-1]
	}
	return nil
}

var (
	runsDesc = prometheus.NewDesc("kubeskills_command_runs",
		"CommandRuns in the cluster, by namespace and phase (finished runs are kept as the policy's history says).",
		[]string{"namespace", "phase"}, nil)
	oldestApprovalDesc = prometheus.NewDesc("kubeskills_approval_oldest_wait_seconds",
		"Age of the oldest CommandRun awaiting approval, by namespace; absent where none waits.",
		[]string{"namespace"}, nil)
	skillsDesc = prometheus.NewDesc("kubeskills_skills",
		"Skills, by namespace and the status of their Ready condition (True, False, Unknown).",
		[]string{"namespace", "ready"}, nil)
	agentsDesc = prometheus.NewDesc("kubeskills_agents",
		"Agents, by namespace and the status of their Ready condition (True, False, Unknown).",
		[]string{"namespace", "ready"}, nil)
)

// stateScrapeTimeout bounds the cache reads of one scrape.
const stateScrapeTimeout = 5 * time.Second

func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{runsDesc, oldestApprovalDesc, skillsDesc, agentsDesc} {
		ch <- d
	}
}

func (stateCollector) Collect(ch chan<- prometheus.Metric) {
	cache := stateSource()
	if cache == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateScrapeTimeout)
	defer cancel()
	now := time.Now()
	var runs skillsv1.CommandRunList
	if err := cache.List(ctx, &runs); err == nil {
		phases := map[[2]string]int{}
		oldest := map[string]time.Time{}
		for i := range runs.Items {
			run := &runs.Items[i]
			phase := string(run.Status.Phase)
			if phase == "" {
				phase = string(skillsv1.PhasePending)
			}
			phases[[2]string{run.Namespace, phase}]++
			if t, ok := oldest[run.Namespace]; run.Status.Phase == skillsv1.PhaseAwaitingApproval && (!ok || run.CreationTimestamp.Time.Before(t)) {
				oldest[run.Namespace] = run.CreationTimestamp.Time
			}
		}
		for k, n := range phases {
			ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
		for ns, t := range oldest {
			ch <- prometheus.MustNewConstMetric(oldestApprovalDesc, prometheus.GaugeValue, now.Sub(t).Seconds(), ns)
		}
	}
	var skills skillsv1.SkillList
	if err := cache.List(ctx, &skills); err == nil {
		for k, n := range countReady(len(skills.Items), func(i int) (string, []metav1.Condition) {
			return skills.Items[i].Namespace, skills.Items[i].Status.Conditions
		}) {
			ch <- prometheus.MustNewConstMetric(skillsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
	var agents skillsv1.AgentList
	if err := cache.List(ctx, &agents); err == nil {
		for k, n := range countReady(len(agents.Items), func(i int) (string, []metav1.Condition) {
			return agents.Items[i].Namespace, agents.Items[i].Status.Conditions
		}) {
			ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(n), k[0], k[1])
		}
	}
}

// countReady counts n objects by namespace and the status of their Ready
// condition; item returns an object's namespace and conditions.
func countReady(n int, item func(int) (string, []metav1.Condition)) map[[2]string]int {
	counts := map[[2]string]int{}
	for i := range n {
		ns, conds := item(i)
		ready := string(metav1.ConditionUnknown)
		if c := apimeta.FindStatusCondition(conds, skillsv1.ReadyCondition); c != nil {
			ready = string(c.Status)
		}
		counts[[2]string{ns, ready}]++
	}
	return counts
}
