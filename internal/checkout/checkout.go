// Package checkout finds the kubeskills checkout that tests and the
// programs of hack/ and test/ read files from (CRDs, charts, samples,
// testdata).
package checkout

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/modfile"
)

// Module is the module path of the checkout's root go.mod.
const Module = "github.com/kubeskills/kubeskills"

// Root returns the root of the checkout: the nearest folder, from the
// working directory up, whose go.mod declares Module. Tests run in their
// package's folder, and `go run` of hack/ and test/ in the root, so both
// find it; it does not depend on the source paths a build records, which
// -trimpath removes. It panics outside a checkout, as nothing that calls
// it can go on without one.
func Root() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("failed to find the kubeskills checkout: %v", err))
	}
	root, err := find(wd)
	if err != nil {
		panic(err.Error())
	}
	return root
}

// find returns the nearest folder from dir up whose go.mod declares
// Module.
func find(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modfile.ModulePath(data) == Module {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("failed to find the kubeskills checkout: no go.mod of module %s in %s or a folder above it", Module, dir)
		}
	}
}
