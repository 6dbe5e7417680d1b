package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ExtraShardsOf and ConfigMapMetadata expose the Skill controller's index
// to the package's external tests, which run a SkillReconciler on a cache
// of their own.
var ExtraShardsOf func(client.Object) []string = extraShardsOf

// ConfigMapMetadata is an empty ConfigMap of the metadata cache.
func ConfigMapMetadata() *metav1.PartialObjectMetadata { return configMapMetadata() }
