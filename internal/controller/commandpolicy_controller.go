package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policyapi"
)

// ServiceAccountNotFoundReason: the ServiceAccount a CommandPolicy names
// (spec.sandbox.serviceAccountName) does not exist, so commands judged
// under it cannot run.
const ServiceAccountNotFoundReason = "ServiceAccountNotFound"

// serviceAccountRecheck is how often a policy whose ServiceAccount is
// missing looks for it again: ServiceAccounts are not watched.
const serviceAccountRecheck = 15 * time.Second

// CommandPolicyReconciler checks that each CommandPolicy compiles, that
// its examples get the actions they expect, and that the ServiceAccount it
// names exists.
type CommandPolicyReconciler struct {
	client.Client
	// APIReader reads ServiceAccounts without a cache, so the operator
	// needs only get on them, not list and watch.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
}

// +kubebuilder:rbac:groups=kubeskills.io,resources=commandpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=kubeskills.io,resources=commandpolicies/status,verbs=get;update;patch

// SetupWithManager registers the reconciler for spec changes of policies.
func (r *CommandPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&skillsv1.CommandPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile judges a policy's rules and examples, looks for the
// ServiceAccount it names, and writes its status: Ready, or Stalled with
// ValidationFailed (a rule or an example is wrong) or
// ServiceAccountNotFound (looked for again every serviceAccountRecheck).
func (r *CommandPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &skillsv1.CommandPolicy{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := obj.DeepCopy()
	st := &obj.Status
	st.ObservedGeneration = obj.Generation
	st.RuleCount = int32(len(obj.Spec.Rules))
	var result ctrl.Result
	setPolicyWarnings(obj)
	missing, err := r.missingServiceAccount(ctx, obj)
	switch _, compileErr := policyapi.Compile(obj); {
	case err != nil:
		return ctrl.Result{}, err
	case compileErr != nil:
		// A bad rule or a failing example is the author's to fix.
		markStalled(&st.Conditions, obj.Generation, skillsv1.ValidationFailedReason, policyMessage(compileErr), time.Now())
	case missing != "":
		markStalled(&st.Conditions, obj.Generation, ServiceAccountNotFoundReason, missing, time.Now())
		result.RequeueAfter = serviceAccountRecheck
	default:
		markReady(&st.Conditions, obj.Generation, fmt.Sprintf("%d %s, default %s; %d %s pass%s",
			len(obj.Spec.Rules), plural(len(obj.Spec.Rules), "rule", "rules"), defaultAction(obj),
			len(obj.Spec.Examples), plural(len(obj.Spec.Examples), "example", "examples"), identityNote(obj)), time.Now())
	}
	if stalled, changed := becameStalled(before.Status.Conditions, st.Conditions); changed {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, stalled.Reason, "Validate", "%s", eventNote(stalled.Message))
	}
	return result, patchStatus(ctx, r.Client, before, obj, before.Status, obj.Status)
}

// maxPolicyWarnings is the most warnings status.warnings holds; the last
// one then counts the rest.
const maxPolicyWarnings = 32

// setPolicyWarnings lists what the policy allows that its author may not
// expect in status.warnings, with the Warnings condition: True with a
// count, or False. A policy whose rules do not compile has neither; its
// Ready condition says why.
func setPolicyWarnings(obj *skillsv1.CommandPolicy) {
	st := &obj.Status
	st.Warnings = nil
	p, _ := policyapi.FromObject(obj)
	m, err := policy.Compile(p)
	if err != nil {
		apimeta.RemoveStatusCondition(&st.Conditions, skillsv1.WarningsCondition)
		return
	}
	ws := m.Warnings()
	for i, w := range ws {
		if i == maxPolicyWarnings-1 && len(ws) > maxPolicyWarnings {
			st.Warnings = append(st.Warnings, fmt.Sprintf("... and %d more warnings: run kubectl skills policy check", len(ws)-i))
			break
		}
		st.Warnings = append(st.Warnings, clip(w.String(), 1024))
	}
	if len(ws) == 0 {
		setCondition(&st.Conditions, obj.Generation, skillsv1.WarningsCondition, metav1.ConditionFalse, skillsv1.NoWarningsReason,
			"The policy has no warnings", time.Now())
		return
	}
	setCondition(&st.Conditions, obj.Generation, skillsv1.WarningsCondition, metav1.ConditionTrue, skillsv1.WarningsFoundReason,
		fmt.Sprintf("%d %s: the policy allows more than it may seem to; see status.warnings", len(ws), plural(len(ws), "warning", "warnings")), time.Now())
}

// missingServiceAccount says why the ServiceAccount the policy names cannot
// be used, "" when it names none or it exists.
func (r *CommandPolicyReconciler) missingServiceAccount(ctx context.Context, obj *skillsv1.CommandPolicy) (string, error) {
	name := policyServiceAccount(obj)
	if name == "" {
		return "", nil
	}
	sa := &corev1.ServiceAccount{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: name}, sa)
	switch {
	case apierrors.IsNotFound(err):
		return serviceAccountNotFound(obj), nil
	case err != nil:
		return "", fmt.Errorf("failed to get ServiceAccount %s/%s: %w", obj.Namespace, name, err)
	}
	return "", nil
}

// serviceAccountNotFound is the message of a policy, and of a run, whose
// ServiceAccount does not exist.
func serviceAccountNotFound(obj *skillsv1.CommandPolicy) string {
	return fmt.Sprintf("ServiceAccount %q, named by CommandPolicy %q in spec.sandbox.serviceAccountName, does not exist "+
		"in namespace %s: commands judged under this policy cannot run until it is created", policyServiceAccount(obj), obj.Name, obj.Namespace)
}

// policyServiceAccount is the identity a policy gives commands, "" for
// none.
func policyServiceAccount(obj *skillsv1.CommandPolicy) string {
	if obj == nil || obj.Spec.Sandbox == nil {
		return ""
	}
	return obj.Spec.Sandbox.ServiceAccountName
}

// agentIdentity is the ServiceAccount an Agent's commands run with: its
// policy's, "" when it names no policy, its policy is not found, or the
// policy names no ServiceAccount.
func agentIdentity(ctx context.Context, c client.Reader, a *skillsv1.Agent) string {
	if a.Spec.PolicyRef == nil {
		return ""
	}
	pol := &skillsv1.CommandPolicy{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.PolicyRef.Name}, pol); err != nil {
		return ""
	}
	return policyServiceAccount(pol)
}

// identityNote ends a Ready message with the identity commands run as.
func identityNote(obj *skillsv1.CommandPolicy) string {
	if sa := policyServiceAccount(obj); sa != "" {
		return fmt.Sprintf("; commands run as ServiceAccount %s", sa)
	}
	return ""
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
