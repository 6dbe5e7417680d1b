package charts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kubeskills/kubeskills/internal/testenv"
)

// TestSyncedFilesUpToDate runs hack/sync-chart-crds.sh into a scratch chart
// and compares what it writes with the operator chart, so a CRD, RBAC or
// admission change in config/ that did not reach the chart fails.
func TestSyncedFilesUpToDate(t *testing.T) {
	scratch := t.TempDir()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "sync-chart-crds.sh"), scratch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/sync-chart-crds.sh: %v\n%s", err, out)
	}
	chart := chartPath("kubeskills")
	for _, dir := range []string{"templates/crds", "templates/rbac", "templates/admission"} {
		generated, err := os.ReadDir(filepath.Join(scratch, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range generated {
			rel := filepath.Join(dir, e.Name())
			want, err := os.ReadFile(filepath.Join(scratch, rel))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(chart, rel))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("charts/kubeskills/%s is stale: run 'make helm-crds'", rel)
			}
		}
	}
	// Every CRD in the chart comes from config/crd/bases.
	crds, err := os.ReadDir(filepath.Join(chart, "templates", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range crds {
		if _, err := os.Stat(filepath.Join(scratch, "templates", "crds", e.Name())); err != nil {
			t.Errorf("charts/kubeskills/templates/crds/%s has no source in config/crd/bases: run 'make helm-crds'", e.Name())
		}
	}
}
