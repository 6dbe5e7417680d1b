package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// OperatorPodLabels select the operator's pods in its namespace: the
// warm sandboxes let them, and only them, in on runner.HandoffPort.
var OperatorPodLabels = map[string]string{
	"app.kubernetes.io/part-of":   "kubeskills",
	"app.kubernetes.io/component": "manager",
}

// WarmPoolReconciler keeps each Agent's warm sandboxes: spec.sandbox.warm
// pods of the shape its policy gives now, each waiting for one command.
// A pod of another shape that waits is deleted; one that ended is deleted
// once no running run names it; a pod a run took is replaced at once.
type WarmPoolReconciler struct {
	// Runs makes the sandboxes as it makes a run's Job.
	Runs *CommandRunReconciler
	// Pool is shared with Runs.
	Pool *WarmPool
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=create

// SetupWithManager registers the reconciler: Agents, their warm pods, and
// the refills asked by runs that took one. The CommandRun reconciler
// registers IndexRunWarmPod, the Agent reconciler IndexAgentPolicy.
func (r *WarmPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	warmPods := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[sandbox.LabelWarm] != "" })
	return ctrl.NewControllerManagedBy(mgr).
		Named("warmpool").
		For(&skillsv1.Agent{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Pod{}, builder.WithPredicates(warmPods)).
		Watches(&skillsv1.CommandPolicy{}, handler.EnqueueRequestsFromMapFunc(r.agentsOfPolicy)).
		WatchesRawSource(source.Channel(r.Pool.Refill, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// agentsOfPolicy maps a CommandPolicy to the Agents with warm sandboxes
// that name it: its edits change their shape.
func (r *WarmPoolReconciler) agentsOfPolicy(ctx context.Context, o client.Object) []ctrl.Request {
	var agents skillsv1.AgentList
	if err := r.Runs.List(ctx, &agents, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexAgentPolicy: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the Agents of a policy", "policy", klog.KObj(o))
		return nil
	}
	var reqs []ctrl.Request
	for i := range agents.Items {
		a := &agents.Items[i]
		if sandbox.WarmCount(a) > 0 {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(a)})
		}
	}
	return reqs
}

// Reconcile makes the agent's pool what its spec asks.
func (r *WarmPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	agent := &skillsv1.Agent{}
	if err := r.Runs.Get(ctx, req.NamespacedName, agent); err != nil {
		// A deleted Agent's pods go with it (they are its own).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !agent.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	want, shape, params, err := r.desired(ctx, agent)
	if err != nil {
		return ctrl.Result{}, err
	}
	var pods corev1.PodList
	if err := r.Runs.List(ctx, &pods, client.InNamespace(agent.Namespace), client.MatchingLabels{sandbox.LabelAgent: agent.Name},
		client.HasLabels{sandbox.LabelWarm}); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to list the warm pods of Agent %s: %w", klog.KObj(agent), err)
	}
	free := 0
	now := r.Runs.now()
	idle := sandbox.IdleTimeout(agent)
	var wait time.Duration
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !isControlledBy(pod, agent) || !pod.DeletionTimestamp.IsZero() {
			continue
		}
		taken, err := r.taken(ctx, pod)
		if err != nil {
			return ctrl.Result{}, err
		}
		switch {
		case taken:
			// Its run deletes it once it has the result.
		case podEnded(pod), pod.Labels[sandbox.LabelWarm] != shape, free >= want:
			if err := r.Runs.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return ctrl.Result{}, fmt.Errorf("failed to delete warm pod %s: %w", klog.KObj(pod), err)
			}
		default:
			free++
			if warmPodUsable(pod, idle, now) || pod.Status.Phase != corev1.PodRunning {
				continue
			}
			// Running, but too close to its idle timeout to be handed a
			// command: its runner ends it soon; look again then.
			wait = fencePoll
		}
	}
	if want == 0 {
		return ctrl.Result{}, nil
	}
	if err := r.ensureFenced(ctx, agent, params); err != nil {
		return ctrl.Result{}, err
	}
	for ; free < want; free++ {
		if err := r.create(ctx, params); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// desired returns how many warm pods the agent wants now, their shape and
// what makes one. An agent without a policy in force, or whose policy's
// sandbox cannot be made (its ServiceAccount is missing, the API server's
// addresses are unknown), wants none: its runs take the Job path, which
// says why they fail.
func (r *WarmPoolReconciler) desired(ctx context.Context, agent *skillsv1.Agent) (int, string, sandbox.WarmParams, error) {
	want := sandbox.WarmCount(agent)
	if want == 0 || agent.Spec.PolicyRef == nil {
		return 0, "", sandbox.WarmParams{}, nil
	}
	pol := &skillsv1.CommandPolicy{}
	err := r.Runs.Get(ctx, client.ObjectKey{Namespace: agent.Namespace, Name: agent.Spec.PolicyRef.Name}, pol)
	switch {
	case apierrors.IsNotFound(err):
		return 0, "", sandbox.WarmParams{}, nil
	case err != nil:
		return 0, "", sandbox.WarmParams{}, fmt.Errorf("failed to get CommandPolicy %s/%s: %w", agent.Namespace, agent.Spec.PolicyRef.Name, err)
	}
	if _, err := r.Runs.Policies.Compile(pol); err != nil {
		return 0, "", sandbox.WarmParams{}, nil
	}
	params, ok, err := r.Runs.warmParams(ctx, agent, pol)
	if err != nil || !ok {
		return 0, "", sandbox.WarmParams{}, err
	}
	return want, sandbox.WarmShape(params), params, nil
}

// taken tells whether a run names the pod, or took it in this process:
// it is that run's, to follow and then delete.
func (r *WarmPoolReconciler) taken(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if r.Pool.claimed(client.ObjectKeyFromObject(pod)) {
		return true, nil
	}
	var runs skillsv1.CommandRunList
	if err := r.Runs.List(ctx, &runs, client.InNamespace(pod.Namespace), client.MatchingFields{IndexRunWarmPod: pod.Name}); err != nil {
		return false, fmt.Errorf("failed to list the runs of warm pod %s: %w", klog.KObj(pod), err)
	}
	for i := range runs.Items {
		if !runs.Items[i].Status.Phase.Terminal() {
			return true, nil
		}
	}
	return false, nil
}

// create makes one warm pod of params, with a name and secret of its own.
func (r *WarmPoolReconciler) create(ctx context.Context, params sandbox.WarmParams) error {
	params.Name = warmPodName(params.Agent.Name)
	sum, err := r.Pool.secretSHA256(ctx, params.Agent.Namespace, params.Name)
	if err != nil {
		return err
	}
	params.SecretSHA256 = sum
	pod := sandbox.WarmPod(params)
	if err := r.Runs.Create(ctx, pod); err != nil {
		return fmt.Errorf("failed to create warm pod %s: %w", klog.KObj(pod), err)
	}
	return nil
}

// warmPodName is a new name for a warm pod of the agent.
func warmPodName(agent string) string {
	const suffix = 10 // "-warm-" and five random characters
	if len(agent) > 63-suffix-1 {
		agent = strings.TrimRight(agent[:63-suffix-1], "-.")
	}
	return agent + "-warm-" + rand.String(5)
}

// ensureFenced makes sure the agent's fences that its warm pods need are
// there before any is made, as a run's are before its Job: the base fence,
// the fence of the policy's egress, and the one opening, to the operator,
// of the handoff port.
func (r *WarmPoolReconciler) ensureFenced(ctx context.Context, agent *skillsv1.Agent, params sandbox.WarmParams) error {
	for _, np := range fencesOf(agent, sandbox.FenceOf(params.Params)) {
		problem, err := ensureFence(ctx, r.Runs.Client, r.Runs.APIReader, np)
		if err != nil {
			return err
		}
		if problem != "" {
			return errors.New(problem)
		}
	}
	return r.ensureIngress(ctx, agent)
}

// ensureIngress makes sure the NetworkPolicy that lets the operator reach
// the agent's warm pods, and nothing else reach them, is there as built.
func (r *WarmPoolReconciler) ensureIngress(ctx context.Context, agent *skillsv1.Agent) error {
	np := sandbox.WarmIngress(agent, []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: r.Pool.operatorNamespace()}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: OperatorPodLabels},
	}})
	existing := &networkingv1.NetworkPolicy{}
	err := r.Runs.Get(ctx, client.ObjectKeyFromObject(np), existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Runs.Create(ctx, np); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create NetworkPolicy %s: %w", klog.KObj(np), err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("failed to get NetworkPolicy %s: %w", klog.KObj(np), err)
	case !isControlledBy(existing, agent):
		return fmt.Errorf("a NetworkPolicy named %q exists that Agent %s does not own, so its warm sandboxes cannot be reached", np.Name, agent.Name)
	case equality.Semantic.DeepEqual(existing.Spec, np.Spec) && equality.Semantic.DeepEqual(existing.Labels, np.Labels):
		return nil
	}
	existing = existing.DeepCopy()
	existing.Spec, existing.Labels = np.Spec, np.Labels
	if err := r.Runs.Update(ctx, existing); err != nil {
		return fmt.Errorf("failed to update NetworkPolicy %s: %w", klog.KObj(np), err)
	}
	return nil
}
