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
// what the builder returns is exactly what the operator owns. obj gets the
// resourceVersion the API server answered with.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := applyContent(c, obj)
	if err != nil {
		return err
	}
	if err := applyUnstructured(ctx, c, u); err != nil {
		return err
	}
	obj.SetResourceVersion(u.GetResourceVersion())
	return nil
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

// appliedObjects remembers, for each object the operator applied, what it
// applied and the resourceVersion the API server answered with. An apply of
// the same content to an object still at that resourceVersion would change
// nothing, and is skipped. The zero value is ready to use.
type appliedObjects struct {
	mu   sync.Mutex
	last map[appliedKey]appliedObject
}

// appliedKey names one object: its kind, namespace and name.
type appliedKey struct {
	kind string
	types.NamespacedName
}

// appliedObject is one object as the operator last applied it.
type appliedObject struct {
	sum             [sha256.Size]byte
	resourceVersion string
}

// apply applies obj with do (apply, or a variant of it that leaves obj with
// the resourceVersion answered), unless the same content was applied before
// and the object is still at the resourceVersion that apply left (live, as
// the cache sees it; "" when the cache does not hold it). It tells whether
// it applied.
func (a *appliedObjects) apply(ctx context.Context, c client.Client, obj client.Object, live string,
	do func(context.Context, client.Object) error) (bool, error) {
	u, err := applyContent(c, obj)
	if err != nil {
		return false, err
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return false, fmt.Errorf("failed to encode %s %s: %w", u.GetKind(), klog.KObj(u), err)
	}
	key := appliedKey{kind: u.GetKind(), NamespacedName: client.ObjectKeyFromObject(obj)}
	want := appliedObject{sum: sha256.Sum256(data), resourceVersion: live}
	a.mu.Lock()
	last, ok := a.last[key]
	a.mu.Unlock()
	if ok && live != "" && last == want {
		return false, nil
	}
	if err := do(ctx, obj); err != nil {
		a.forget(key)
		return false, err
	}
	want.resourceVersion = obj.GetResourceVersion()
	a.mu.Lock()
	if a.last == nil {
		a.last = map[appliedKey]appliedObject{}
	}
	a.last[key] = want
	a.mu.Unlock()
	return true, nil
}

// forget drops what is remembered of an object.
func (a *appliedObjects) forget(key appliedKey) {
	a.mu.Lock()
	delete(a.last, key)
	a.mu.Unlock()
}

// forgetNamed drops what is remembered of the objects of every kind named
// key.
func (a *appliedObjects) forgetNamed(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.last {
		if k.NamespacedName == key {
			delete(a.last, k)
		}
	}
}
