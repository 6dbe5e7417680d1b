package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// An agent's commands run at most sandbox.MaxRunning at once. A run allowed
// past that bound waits in line, Pending with its Queued condition, and
// the runs in line start in the order they were filed (creation time, then
// name) as slots free. The line is read from the cache: a run holds a slot
// once its status names its Job or warm pod, and until it ends. Between
// the pass that lets a run start and the cache showing that, the slot is
// held by a claim in this process, so two workers never give out the same
// slot; the claims of a process that stopped die with it, and the statuses
// they led to are in the cache of the next.
const (
	// queueRefresh is how often a run in line reads its place again, should
	// no run of its agent end meanwhile (a run deleted while it ran).
	queueRefresh = 10 * time.Second
	// claimLife bounds how long a claim holds a slot that the cache does
	// not show taken: a pass that claimed it and failed before its status
	// named a sandbox.
	claimLife = time.Minute
)

// runSlots are the slots this process gave out that the cache may not show
// yet: for each agent, the names of its runs let start, and when.
type runSlots struct {
	mu     sync.Mutex
	claims map[types.NamespacedName]map[string]time.Time
}

// holdsSandbox tells whether a run holds one of its agent's slots: it has
// not ended and its status names its sandbox.
func holdsSandbox(run *skillsv1.CommandRun) bool {
	return !run.Status.Phase.Terminal() && (run.Status.JobName != "" || run.Status.WarmPod != "")
}

// inLine tells whether a run waits in its agent's line.
func inLine(run *skillsv1.CommandRun) bool {
	return !run.Status.Phase.Terminal() && !holdsSandbox(run) &&
		apimeta.IsStatusConditionTrue(run.Status.Conditions, skillsv1.QueuedCondition)
}

// filedBefore orders runs as they were filed: creation time, then name.
func filedBefore(a, b *skillsv1.CommandRun) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	if a.Name < b.Name {
		return -1
	}
	if a.Name > b.Name {
		return 1
	}
	return 0
}

// awaitSlot lets a run that may run start when its agent has a slot free
// for it: the runs in line before it go first. Otherwise the run waits in
// line, Pending with its place in the Queued condition, and is reconciled
// again when a run of its agent ends (watchSlots) or after queueRefresh. It
// reports whether the run waits. agent is the run's, nil when there is
// none: the default bound holds then.
func (r *CommandRunReconciler) awaitSlot(ctx context.Context, run *skillsv1.CommandRun, agent *skillsv1.Agent) (time.Duration, bool, error) {
	agentKey := types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Agent}
	bound := sandbox.MaxRunning(agent)
	var runs skillsv1.CommandRunList
	if err := r.List(ctx, &runs, client.InNamespace(run.Namespace), client.MatchingFields{IndexRunAgent: run.Spec.Agent},
		client.UnsafeDisableDeepCopy); err != nil {
		return 0, false, fmt.Errorf("failed to list the CommandRuns of Agent %s: %w", agentKey, err)
	}
	running, line := r.slotsTaken(agentKey, run, runs.Items)
	place := slices.IndexFunc(line, func(o *skillsv1.CommandRun) bool { return o.Name == run.Name })
	if place >= 0 && place < bound-running {
		r.slots.claim(agentKey, run.Name, r.now())
		apimeta.RemoveStatusCondition(&run.Status.Conditions, skillsv1.QueuedCondition)
		return 0, false, nil
	}
	ahead := place - max(bound-running, 0)
	noun := "commands"
	if bound == 1 {
		noun = "command"
	}
	msg := fmt.Sprintf("%s in line: Agent %s runs at most %d %s at once (spec.sandbox.maxRunning) and runs %d now",
		ordinal(ahead+1), run.Spec.Agent, bound, noun, running)
	setRunPhase(run, skillsv1.PhasePending, "Queued, "+msg, r.now())
	setCondition(&run.Status.Conditions, run.Generation, skillsv1.QueuedCondition, metav1.ConditionTrue, "AgentAtBound", msg, r.now())
	return queueRefresh, true, nil
}

// slotsTaken counts the slots of the agent that runs other than run hold,
// by the cache and by this process's claims, and returns the line: the
// runs waiting in it, with run, in the order they start. A run this
// process claimed a slot for is at the head of the line.
func (r *CommandRunReconciler) slotsTaken(agent types.NamespacedName, run *skillsv1.CommandRun, runs []skillsv1.CommandRun) (int, []*skillsv1.CommandRun) {
	held := map[string]bool{}
	seen := map[string]*skillsv1.CommandRun{}
	line := []*skillsv1.CommandRun{run}
	for i := range runs {
		o := &runs[i]
		seen[o.Name] = o
		switch {
		case o.Name == run.Name:
		case holdsSandbox(o):
			held[o.Name] = true
		case inLine(o):
			line = append(line, o)
		}
	}
	claimed := r.slots.held(agent, r.now(), func(name string) bool {
		o, ok := seen[name]
		return ok && !o.Status.Phase.Terminal() && !holdsSandbox(o)
	})
	for _, name := range claimed {
		if name != run.Name {
			held[name] = true
		}
	}
	slices.SortFunc(line, filedBefore)
	if slices.Contains(claimed, run.Name) {
		// Let start already: only the status saying so is still to come.
		line = []*skillsv1.CommandRun{run}
	}
	return len(held), line
}

// claim holds a slot of the agent for the run named name.
func (s *runSlots) claim(agent types.NamespacedName, name string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims == nil {
		s.claims = map[types.NamespacedName]map[string]time.Time{}
	}
	if s.claims[agent] == nil {
		s.claims[agent] = map[string]time.Time{}
	}
	s.claims[agent][name] = now
}

// held returns the runs of the agent whose claims still hold a slot: those
// younger than claimLife whose run, pending tells, the cache does not yet
// show holding its sandbox or ended. It drops the others.
func (s *runSlots) held(agent types.NamespacedName, now time.Time, pending func(name string) bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for name, at := range s.claims[agent] {
		if now.Sub(at) < claimLife && pending(name) {
			names = append(names, name)
			continue
		}
		delete(s.claims[agent], name)
	}
	if len(s.claims[agent]) == 0 {
		delete(s.claims, agent)
	}
	return names
}

// ordinal spells n as a place in line: 1st, 2nd, 3rd, 4th, 11th, 21st.
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// watchSlots has the head of an agent's line reconciled when one of the
// agent's runs gives up its slot: it ends, or is deleted while it holds
// one.
func (r *CommandRunReconciler) watchSlots(b *builder.Builder) *builder.Builder {
	freed := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc: func(e event.DeleteEvent) bool {
			run, ok := e.Object.(*skillsv1.CommandRun)
			return ok && holdsSandbox(run)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, ok1 := e.ObjectOld.(*skillsv1.CommandRun)
			after, ok2 := e.ObjectNew.(*skillsv1.CommandRun)
			return ok1 && ok2 && holdsSandbox(before) && !holdsSandbox(after)
		},
	}
	return b.Watches(&skillsv1.CommandRun{}, handler.EnqueueRequestsFromMapFunc(r.headOfLine), builder.WithPredicates(freed))
}

// headOfLine maps a run that gave up its slot to the runs of its agent that
// may take a slot now: as many of the first in line as the agent has slots.
func (r *CommandRunReconciler) headOfLine(ctx context.Context, o client.Object) []reconcile.Request {
	run := o.(*skillsv1.CommandRun)
	var runs skillsv1.CommandRunList
	if err := r.List(ctx, &runs, client.InNamespace(run.Namespace), client.MatchingFields{IndexRunAgent: run.Spec.Agent},
		client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the CommandRuns of an Agent", "commandRun", klog.KObj(run))
		return nil
	}
	agent := &skillsv1.Agent{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: run.Namespace, Name: run.Spec.Agent}, agent); client.IgnoreNotFound(err) != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to read the Agent of a CommandRun", "commandRun", klog.KObj(run))
		return nil
	}
	line := slices.DeleteFunc(runs.Items, func(o skillsv1.CommandRun) bool { return !inLine(&o) })
	slices.SortFunc(line, func(a, b skillsv1.CommandRun) int { return filedBefore(&a, &b) })
	return runRequests(line[:min(len(line), sandbox.MaxRunning(agent))])
}
