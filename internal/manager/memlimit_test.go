package manager_test

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/kubeskills/kubeskills/internal/manager"
)

// TestSetMemoryLimit: the Go runtime is asked to keep under 90% of the
// container's limit; GOMEMLIMIT, set by whoever runs the manager, wins;
// no limit sets none.
func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Cleanup(func() { _ = os.Setenv("GOMEMLIMIT", v) })
	}
	if err := os.Unsetenv("GOMEMLIMIT"); err != nil {
		t.Fatal(err)
	}

	if got := manager.SetMemoryLimit(512 << 20); got != 483183820 || debug.SetMemoryLimit(-1) != got {
		t.Errorf("with a limit of 512 MiB, the runtime's limit is %d (reported %d), want 483183820 (90%%)", debug.SetMemoryLimit(-1), got)
	}
	if got := manager.SetMemoryLimit(0); got != 483183820 {
		t.Errorf("no container limit changed the runtime's to %d", got)
	}
	t.Setenv("GOMEMLIMIT", "100MiB")
	if got := manager.SetMemoryLimit(1 << 30); got != 483183820 || debug.SetMemoryLimit(-1) != got {
		t.Errorf("GOMEMLIMIT set: the container's limit changed the runtime's to %d", got)
	}
}
