package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
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

// indexRunPins indexes the CommandRuns that wait with a decision and no
// Job yet by what the decision was taken on: "CommandPolicy/NAME" and
// "Skill/NAME". An edit to either has those runs judged again at once, so
// a person is asked about the content as it is, not as it was.
const indexRunPins = "kubeskills.io/run-pins"

// runPins is the value of indexRunPins for a run.
func runPins(o client.Object) []string {
	run := o.(*skillsv1.CommandRun)
	d := run.Status.Decision
	if d == nil || d.Policy == "" || run.Status.Phase.Terminal() || run.Status.JobName != "" {
		return nil
	}
	pins := []string{"CommandPolicy/" + d.Policy}
	if run.Spec.Skill != "" {
		pins = append(pins, "Skill/"+run.Spec.Skill)
	}
	return pins
}

// watchPins has the runs that wait on a policy or a skill reconciled when
// its generation or its served content changes.
func (r *CommandRunReconciler) watchPins(b *builder.Builder) *builder.Builder {
	servedChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*skillsv1.Skill)
		after, ok2 := e.ObjectNew.(*skillsv1.Skill)
		return !ok1 || !ok2 || before.Status.ContentHash != after.Status.ContentHash
	}}
	return b.
		Watches(&skillsv1.CommandPolicy{}, handler.EnqueueRequestsFromMapFunc(r.runsPinnedTo("CommandPolicy")),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&skillsv1.Skill{}, handler.EnqueueRequestsFromMapFunc(r.runsPinnedTo("Skill")),
			builder.WithPredicates(servedChanged))
}

// watchPods has a run reconciled when its sandbox pod ends: its result is
// there, and the Job controller marks the Job finished only up to a second
// later. It is reconciled too when what keeps the pod from starting its
// command changes (podStartBlock), or the Job controller could not create
// the pod (a FailedCreate Event), so the run says why at once.
func watchPods(b *builder.Builder) *builder.Builder {
	endedOrBlocked := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, ok1 := e.ObjectOld.(*corev1.Pod)
			after, ok2 := e.ObjectNew.(*corev1.Pod)
			return ok1 && ok2 && (!podEnded(before) && podEnded(after) || !sameStartBlock(before, after))
		},
	}
	runOf := func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[sandbox.LabelCommandRun]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
	return b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(runOf), builder.WithPredicates(endedOrBlocked)).
		Watches(&corev1.Event{}, handler.EnqueueRequestsFromMapFunc(jobRunOf))
}

// jobRunOf maps an Event the cache holds (FailedCreateEvents) to the run of
// the Job it is about: a sandbox Job is named after its run. An Event on
// another Job maps to a run that does not exist, which costs a cache read.
func jobRunOf(_ context.Context, o client.Object) []reconcile.Request {
	ev, ok := o.(*corev1.Event)
	if !ok || ev.InvolvedObject.Kind != "Job" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ev.InvolvedObject.Namespace, Name: ev.InvolvedObject.Name}}}
}

// runsPinnedTo maps an object of a kind to the waiting runs pinned to it.
func (r *CommandRunReconciler) runsPinnedTo(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var runs skillsv1.CommandRunList
		if err := r.List(ctx, &runs, client.InNamespace(o.GetNamespace()),
			client.MatchingFields{indexRunPins: kind + "/" + o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to list the CommandRuns waiting on "+kind, "object", klog.KObj(o))
			return nil
		}
		return runRequests(runs.Items)
	}
}

// runRequests are the requests that reconcile runs.
func runRequests(runs []skillsv1.CommandRun) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(runs))
	for i := range runs {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&runs[i])})
	}
	return reqs
}
