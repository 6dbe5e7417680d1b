// Package scheme builds the runtime.Scheme every kubeskills binary and test
// uses: the core Kubernetes kinds and the kubeskills.io kinds.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// New returns a scheme with the core and kubeskills kinds.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("failed to add core kinds to scheme: %w", err)
	}
	if err := skillsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("failed to add kubeskills kinds to scheme: %w", err)
	}
	return s, nil
}
