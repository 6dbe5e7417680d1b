package testenv

import (
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// KustomizeBuild runs kustomize on a directory, as `kubectl apply -k`,
// Argo CD and Flux do, and returns the YAML it writes.
func KustomizeBuild(dir string) ([]byte, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return res.AsYaml()
}
