package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// The operator serves a Skill's shards and an Agent's catalog, Deployment,
// ServiceAccount, Role, RoleBinding, Service and NetworkPolicy under names
// fixed by their owner's name. Such an object outlives its owner until the
// garbage collector deletes it, and forever where none runs (make
// run-local). An owner made again under the same name then finds it still
// controlled by the UID of the one deleted, and the API server refuses a
// second controller reference. Before writing such an object the
// reconcilers call takeOver, which replaces the reference to the deleted
// owner with one to the current owner. An object controlled by anything
// else is never taken over.

// ReasonTookOverLeftover is the reason of the Event on an owner whose
// object, left by an earlier owner of the same kind and name, it took over.
const ReasonTookOverLeftover = "TookOverLeftover"

// ForeignControllerError is why an object of a child's name is not
// written: something other than the owner, or an earlier owner of its kind
// and name, controls it.
type ForeignControllerError struct {
	// Kind and Object name the object.
	Kind   string
	Object types.NamespacedName
	// Controller is its controller reference.
	Controller metav1.OwnerReference
}

func (e *ForeignControllerError) Error() string {
	return fmt.Sprintf("%s %s is controlled by %s %s; refusing to take it over", e.Kind, e.Object, e.Controller.Kind, e.Controller.Name)
}

// takeOver makes owner the controller of current, the live object of the
// name of one of owner's children as the caller read it (nil when there is
// none), when it is a leftover: its controller is an owner of owner's kind
// and name with another UID. The API server must confirm that owner is the
// owner of that name now, so a pass that reads a deleted owner from a
// stale cache never takes the object back. The reference is replaced by a
// patch that holds current's resourceVersion, so it changes nothing that
// was changed since current was read; current becomes the object the API
// server answers with. It returns a *ForeignControllerError when anything
// else controls current.
func takeOver(ctx context.Context, c client.Client, live client.Reader, rec recorder.EventRecorder, owner, current client.Object) error {
	if current == nil {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(current)
	if ref == nil || ref.UID == owner.GetUID() {
		return nil
	}
	gvk, err := apiutil.GVKForObject(owner, c.Scheme())
	if err != nil {
		return fmt.Errorf("failed to find the kind of %T: %w", owner, err)
	}
	kind := kindOf(c, current)
	refGV, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || refGV.Group != gvk.Group || ref.Kind != gvk.Kind || ref.Name != owner.GetName() {
		return &ForeignControllerError{Kind: kind, Object: client.ObjectKeyFromObject(current), Controller: *ref}
	}
	now := &metav1.PartialObjectMetadata{}
	now.SetGroupVersionKind(gvk)
	if err := live.Get(ctx, client.ObjectKeyFromObject(owner), now); err != nil {
		return fmt.Errorf("failed to get %s %s: %w", gvk.Kind, klog.KObj(owner), err)
	}
	if now.UID != owner.GetUID() {
		return fmt.Errorf("%s %s was made again since this pass read it; %s %s is left to the newer one",
			gvk.Kind, klog.KObj(owner), kind, klog.KObj(current))
	}
	refs := slices.Clone(current.GetOwnerReferences())
	for i := range refs {
		if refs[i].UID == ref.UID {
			refs[i] = *metav1.NewControllerRef(owner, gvk)
		}
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/resourceVersion", "value": current.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/ownerReferences", "value": refs},
	})
	if err != nil {
		return fmt.Errorf("failed to encode the take-over of %s %s: %w", kind, klog.KObj(current), err)
	}
	if err := c.Patch(ctx, current, client.RawPatch(types.JSONPatchType, patch), FieldOwner); err != nil {
		return fmt.Errorf("failed to take over %s %s: %w", kind, klog.KObj(current), err)
	}
	ctrl.LoggerFrom(ctx).Info("Took over an object left by an earlier owner of this name",
		"object", klog.KObj(current), "kind", kind, "earlierUID", ref.UID)
	rec.Eventf(owner, current, corev1.EventTypeNormal, ReasonTookOverLeftover, "TakeOver",
		"Took over %s %s, left by an earlier %s of this name that no longer exists", kind, current.GetName(), gvk.Kind)
	return nil
}

// applyTakingOver applies obj, a child of owner the caller does not hold:
// only when the API server refuses the apply as invalid is the object of
// its name read, taken over when it is a leftover (see takeOver), and
// applied again. An apply that a leftover does not explain fails as it did.
func applyTakingOver(ctx context.Context, c client.Client, live client.Reader, rec recorder.EventRecorder, owner, obj client.Object) error {
	err := apply(ctx, c, obj)
	if !apierrors.IsInvalid(err) {
		return err
	}
	gvk, gvkErr := apiutil.GVKForObject(obj, c.Scheme())
	if gvkErr != nil {
		return err
	}
	current := &metav1.PartialObjectMetadata{}
	current.SetGroupVersionKind(gvk)
	if getErr := live.Get(ctx, client.ObjectKeyFromObject(obj), current); getErr != nil {
		return err
	}
	if ref := metav1.GetControllerOfNoCopy(current); ref == nil || ref.UID == owner.GetUID() {
		return err
	}
	if err := takeOver(ctx, c, live, rec, owner, current); err != nil {
		return err
	}
	return apply(ctx, c, obj)
}

// kindOf is the kind of obj, for messages.
func kindOf(c client.Client, obj client.Object) string {
	if gvk, err := apiutil.GVKForObject(obj, c.Scheme()); err == nil {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", obj)
}
