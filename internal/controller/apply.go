package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// apply server-side applies a whole object built by a pure function, under
// the operator's field owner. Fields the builder leaves out are released, so
// what the builder returns is exactly what the operator owns.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := applyContent(c, obj)
	if err != nil {
		return err
	}
	return applyUnstructured(ctx, c, u)
}

// applyContent is what apply sends for obj.
func applyContent(c client.Client, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return nil, fmt.Errorf("failed to find the kind of %T: %w", obj, err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("failed to convert %s %s: %w", gvk.Kind, klog.KObj(obj), err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	// Never apply status, or timestamps the builder cannot know.
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return u, nil
}

// applyUnstructured applies u; u becomes the object the API server answers
// with.
func applyUnstructured(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), FieldOwner, client.ForceOwnership); err != nil {
		return fmt.Errorf("failed to apply %s %s: %w", u.GetKind(), klog.KObj(u), err)
	}
	return nil
}

// appliedObjects remembers, for each object of one kind the operator
// applied, what it applied and the resourceVersion the API server answered
// with. An apply of the same content to an object still at that
// resourceVersion would change nothing, and is skipped. The zero value is
// ready to use.
type appliedObjects struct {
	mu   sync.Mutex
	last map[types.NamespacedName]appliedObject
}

// appliedObject is one object as the operator last applied it.
type appliedObject struct {
	sum             [sha256.Size]byte
	resourceVersion string
}

// apply applies obj, as apply does, unless the same content was applied
// before and the object is still at the resourceVersion that apply left
// (live, as the cache sees it; "" when the cache does not hold it). It
// tells whether it applied.
func (a *appliedObjects) apply(ctx context.Context, c client.Client, obj client.Object, live string) (bool, error) {
	u, err := applyContent(c, obj)
	if err != nil {
		return false, err
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return false, fmt.Errorf("failed to encode %s %s: %w", u.GetKind(), klog.KObj(u), err)
	}
	key := client.ObjectKeyFromObject(obj)
	want := appliedObject{sum: sha256.Sum256(data), resourceVersion: live}
	a.mu.Lock()
	last, ok := a.last[key]
	a.mu.Unlock()
	if ok && live != "" && last == want {
		return false, nil
	}
	if err := applyUnstructured(ctx, c, u); err != nil {
		a.forget(key)
		return false, err
	}
	want.resourceVersion = u.GetResourceVersion()
	a.mu.Lock()
	if a.last == nil {
		a.last = map[types.NamespacedName]appliedObject{}
	}
	a.last[key] = want
	a.mu.Unlock()
	return true, nil
}

// forget drops what is remembered of an object.
func (a *appliedObjects) forget(key types.NamespacedName) {
	a.mu.Lock()
	delete(a.last, key)
	a.mu.Unlock()
}
