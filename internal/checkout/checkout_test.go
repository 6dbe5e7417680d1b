package checkout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindSkipsOtherModules(t *testing.T) {
	root := t.TempDir()
	nested := filepath.Join(root, "hack", "flux", "sub")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(dir, module string) {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+module+"\n\ngo 1.26.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(root, Module)
	write(filepath.Join(root, "hack", "flux"), Module+"/hack/flux")
	got, err := find(nested)
	if err != nil || got != root {
		t.Fatalf("find(%s) = %q, %v; want %q", nested, got, err, root)
	}
}

func TestFindOutsideACheckout(t *testing.T) {
	dir := t.TempDir()
	_, err := find(dir)
	if err == nil || !strings.Contains(err.Error(), "no go.mod of module "+Module) {
		t.Fatalf("find outside a checkout: %v", err)
	}
}

func TestRootIsThisCheckout(t *testing.T) {
	if _, err := os.Stat(filepath.Join(Root(), "PROJECT")); err != nil {
		t.Fatalf("Root() = %s, which holds no PROJECT: %v", Root(), err)
	}
}
