package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// An agent's sandboxes are fenced by NetworkPolicies of the agent (package
// sandbox: BaseFence, and one Fence per egress its policy allowed), shared
// by its runs. The Agent reconciler makes them with the agent and when its
// policy's egress changes; a run makes sure both are there before its Job,
// from the cache, and creates them only when they are not. A fence whose
// egress is no longer the policy's is deleted once no pod it selects runs,
// and FenceFinalizer holds a deleted fence, the agent's own deletion
// included, until then.

// fencePoll is how often the operator looks again for the end of the pods
// that keep a fence: pods are not watched.
const fencePoll = 2 * time.Second

// ensureFence makes sure np, a fence built by package sandbox for its
// agent, exists with its rules. The cache is enough when it holds the
// fence, owned by the agent and not being deleted; otherwise the fence is
// created, or its rules, edited by someone, are put back. It returns why
// the fence cannot be had, "" when it is there: a NetworkPolicy of its
// name that the agent does not own is never taken over. One being deleted
// cannot be made again until it is gone: that is an error, to try again.
func ensureFence(ctx context.Context, c client.Client, live client.Reader, np *networkingv1.NetworkPolicy) (string, error) {
	existing := &networkingv1.NetworkPolicy{}
	err := c.Get(ctx, client.ObjectKeyFromObject(np), existing)
	if apierrors.IsNotFound(err) {
		err = c.Create(ctx, np)
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return "", fmt.Errorf("failed to create NetworkPolicy %s: %w", klog.KObj(np), err)
			}
			return "", nil
		}
		err = live.Get(ctx, client.ObjectKeyFromObject(np), existing)
	}
	if err != nil {
		return "", fmt.Errorf("failed to get NetworkPolicy %s: %w", klog.KObj(np), err)
	}
	owner := np.OwnerReferences[0]
	ref := metav1.GetControllerOfNoCopy(existing)
	switch {
	case ref == nil || ref.Kind != owner.Kind || ref.Name != owner.Name:
		return fmt.Sprintf("a NetworkPolicy named %q exists that Agent %s does not own, so its sandboxes could not be fenced by their own", np.Name, owner.Name), nil
	case ref.UID != owner.UID || !existing.DeletionTimestamp.IsZero():
		// A fence of an Agent of the same name deleted before, or one
		// being deleted: it goes once the pods it fences end (see
		// releaseFences). Try again then.
		return "", fmt.Errorf("NetworkPolicy %s, a fence of Agent %s, is being released: it is made again once it is gone", klog.KObj(np), owner.Name)
	}
	if equality.Semantic.DeepEqual(existing.Spec, np.Spec) && equality.Semantic.DeepEqual(existing.Labels, np.Labels) &&
		slices.Contains(existing.Finalizers, sandbox.FenceFinalizer) {
		return "", nil
	}
	existing = existing.DeepCopy()
	existing.Spec, existing.Labels = np.Spec, np.Labels
	controllerutil.AddFinalizer(existing, sandbox.FenceFinalizer)
	if err := c.Update(ctx, existing); err != nil {
		return "", fmt.Errorf("failed to update NetworkPolicy %s: %w", klog.KObj(np), err)
	}
	return "", nil
}

// fencesOf returns the fences of agent a: the base one and f's.
func fencesOf(a *skillsv1.Agent, f sandbox.Fence) []*networkingv1.NetworkPolicy {
	return []*networkingv1.NetworkPolicy{sandbox.BaseFence(a), f.NetworkPolicy(a)}
}

// releaseFences lets go of the fences of the agents named name but those
// of the Agent uid whose hash is in keep: of an Agent deleted, or of one of
// the same name deleted before, or of an egress the policy no longer
// allows. Each is deleted, and its finalizer removed, once no pod it
// selects still runs. It returns how long until it looks again for a pod
// that keeps one, 0 when none does.
func releaseFences(ctx context.Context, c client.Client, namespace, name string, uid types.UID, keep ...string) (time.Duration, error) {
	var fences networkingv1.NetworkPolicyList
	if err := c.List(ctx, &fences, client.InNamespace(namespace), client.MatchingLabels{sandbox.LabelAgent: name, sandbox.LabelManagedBy: sandbox.ManagedBy},
		client.HasLabels{sandbox.LabelFence}); err != nil {
		return 0, fmt.Errorf("failed to list the sandbox fences of Agent %s/%s: %w", namespace, name, err)
	}
	var wait time.Duration
	for i := range fences.Items {
		np := &fences.Items[i]
		hash := np.Labels[sandbox.LabelFence]
		ref := metav1.GetControllerOfNoCopy(np)
		if ref == nil || ref.Kind != "Agent" || ref.Name != name {
			continue
		}
		kept := ref.UID == uid && slices.Contains(keep, hash) && np.DeletionTimestamp.IsZero()
		if kept || !slices.Contains(np.Finalizers, sandbox.FenceFinalizer) && !np.DeletionTimestamp.IsZero() {
			continue
		}
		running, err := fencedPodsRun(ctx, c, namespace, name, hash)
		if err != nil {
			return 0, err
		}
		if running {
			wait = fencePoll
			continue
		}
		if np.DeletionTimestamp.IsZero() {
			if err := c.Delete(ctx, np, client.Preconditions{UID: &np.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return 0, fmt.Errorf("failed to delete NetworkPolicy %s, a fence no sandbox uses: %w", klog.KObj(np), err)
			}
		}
		np = np.DeepCopy()
		if controllerutil.RemoveFinalizer(np, sandbox.FenceFinalizer) {
			if err := c.Update(ctx, np); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("failed to release NetworkPolicy %s, a fence no sandbox uses: %w", klog.KObj(np), err)
			}
		}
	}
	return wait, nil
}

// fencedPodsRun reports whether a sandbox pod of the agent that the fence
// of that hash selects has not ended; for the base fence, any sandbox pod
// of the agent.
func fencedPodsRun(ctx context.Context, c client.Client, namespace, agent, hash string) (bool, error) {
	match := client.MatchingLabels{sandbox.LabelAgent: agent}
	if hash != sandbox.BaseFenceHash {
		match[sandbox.LabelFence] = hash
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), match, client.HasLabels{sandbox.LabelCommandRun}); err != nil {
		return false, fmt.Errorf("failed to list the sandbox pods of Agent %s/%s: %w", namespace, agent, err)
	}
	for i := range pods.Items {
		if !podEnded(&pods.Items[i]) {
			return true, nil
		}
	}
	return false, nil
}

// apiServerEndpoints reads the API server's addresses, which the fence of
// a sandbox with an identity opens, from the EndpointSlice of the
// kubernetes Service; none when it is missing.
func apiServerEndpoints(ctx context.Context, live client.Reader) ([]sandbox.APIEndpoint, error) {
	slice := &discoveryv1.EndpointSlice{}
	err := live.Get(ctx, types.NamespacedName{Namespace: sandbox.KubernetesServiceNamespace, Name: sandbox.KubernetesServiceName}, slice)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get EndpointSlice %s/%s: %w", sandbox.KubernetesServiceNamespace, sandbox.KubernetesServiceName, err)
	}
	return sandbox.APIServerEndpoints([]discoveryv1.EndpointSlice{*slice}), nil
}

// clusterTargetsTTL is how long the cluster's Services read for fence
// checks are kept before they are read again: they rarely change, and a
// run must not wait for them.
const clusterTargetsTTL = 10 * time.Minute

// clusterTargets are the cluster's Services a fence may deny, as read at.
type clusterTargets struct {
	targets sandbox.FenceTargets
	at      time.Time
}

// fenceTargets returns the Services of the cluster that a sandbox's fence
// may deny (sandbox.FenceCheck): the kubernetes Service and the cluster
// DNS, read from the API server now and then.
func (r *CommandRunReconciler) fenceTargets(ctx context.Context) (sandbox.FenceTargets, error) {
	cached := r.clusterTargets.Load()
	if cached == nil || r.now().Sub(cached.at) > clusterTargetsTTL {
		api, err := clusterService(ctx, r.APIReader, sandbox.KubernetesServiceNamespace, sandbox.KubernetesServiceName)
		if err != nil {
			return sandbox.FenceTargets{}, err
		}
		dns, err := clusterService(ctx, r.APIReader, sandbox.DNSNamespace, sandbox.DNSServiceName)
		if err != nil {
			return sandbox.FenceTargets{}, err
		}
		endpoints, err := apiServerEndpoints(ctx, r.APIReader)
		if err != nil {
			return sandbox.FenceTargets{}, err
		}
		t := sandbox.ClusterFenceTargets(api, endpoints, dns)
		cached = &clusterTargets{targets: t, at: r.now()}
		r.clusterTargets.Store(cached)
	}
	return cached.targets, nil
}

// clusterService reads Service ns/name; nil when there is none, or it has
// no cluster address.
func clusterService(ctx context.Context, r client.Reader, ns, name string) (*corev1.Service, error) {
	svc := &corev1.Service{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get Service %s/%s: %w", ns, name, err)
	}
	if ip := svc.Spec.ClusterIP; ip == "" || ip == corev1.ClusterIPNone {
		return nil, nil
	}
	return svc, nil
}
