package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policyapi"
)

// CommandPolicyReconciler checks that each CommandPolicy compiles and that
// its examples get the actions they expect.
type CommandPolicyReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
}

// +kubebuilder:rbac:groups=kubeskills.io,resources=commandpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeskills.io,resources=commandpolicies/status,verbs=get;update;patch

// SetupWithManager registers the reconciler for spec changes of policies.
func (r *CommandPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&skillsv1.CommandPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile judges a policy's rules and examples and writes its status.
func (r *CommandPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &skillsv1.CommandPolicy{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := obj.DeepCopy()
	st := &obj.Status
	st.ObservedGeneration = obj.Generation
	st.RuleCount = int32(len(obj.Spec.Rules))
	if _, err := policyapi.Compile(obj); err != nil {
		// A bad rule or a failing example is the author's to fix.
		markStalled(&st.Conditions, obj.Generation, skillsv1.ValidationFailedReason, policyMessage(err))
	} else {
		markReady(&st.Conditions, obj.Generation, fmt.Sprintf("%d %s, default %s; %d %s pass",
			len(obj.Spec.Rules), plural(len(obj.Spec.Rules), "rule", "rules"), defaultAction(obj),
			len(obj.Spec.Examples), plural(len(obj.Spec.Examples), "example", "examples")))
	}
	if stalled, changed := becameStalled(before.Status.Conditions, st.Conditions); changed {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, stalled.Reason, "Validate", "%s", eventNote(stalled.Message))
	}
	return ctrl.Result{}, patchStatus(ctx, r.Client, before, obj, before.Status, obj.Status)
}

// policyMessage lists the problems of a policy, one per line.
func policyMessage(err error) string {
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		msg := "The policy is not in force:"
		for _, e := range joined.Unwrap() {
			msg += "\n- " + e.Error()
		}
		return msg
	}
	return "The policy is not in force: " + err.Error()
}

func defaultAction(obj *skillsv1.CommandPolicy) skillsv1.PolicyAction {
	if obj.Spec.DefaultAction == "" {
		return skillsv1.ActionAsk
	}
	return obj.Spec.DefaultAction
}
