package controller

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// What every reconciler of the package uses: ownership, Event notes and
// predicates.

// isControlledBy tells whether owner is obj's controller.
func isControlledBy(obj metav1.Object, owner metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == owner.GetUID()
}

// eventNote fits a message in an Event's note (at most 1 KiB).
func eventNote(msg string) string { return clip(msg, 1024) }

// clip cuts s to at most n bytes, ending in "…" when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// A rune cut in two is invalid UTF-8, which ToValidUTF8 drops.
	return strings.ToValidUTF8(s[:n-len("…")], "") + "…"
}

// annotationChanged passes updates that change the value of one annotation.
func annotationChanged(key string) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld != nil && e.ObjectNew != nil &&
				e.ObjectOld.GetAnnotations()[key] != e.ObjectNew.GetAnnotations()[key]
		},
	}
}
