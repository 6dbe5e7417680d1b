// Package v1alpha1 contains the kubeskills.io/v1alpha1 API: Skill, Agent,
// CommandPolicy and CommandRun.
//
// +kubebuilder:object:generate=true
// +groupName=kubeskills.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "kubeskills.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme. The
	// package needs only apimachinery, so any client can import it.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// kinds are the objects each type file registers in its init.
	kinds []runtime.Object
)

// register adds kinds of this package, each object and its list.
func register(objects ...runtime.Object) { kinds = append(kinds, objects...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, kinds...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
