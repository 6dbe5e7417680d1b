package runner

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// InstalledMode is the file mode of an installed runner: executable and
// readable by anyone, writable by no one.
const InstalledMode os.FileMode = 0o555

// Install copies the running executable to dst, for an init container that
// puts the runner in a volume shared with the container that runs the
// command.
func Install(dst string) error {
	src, err := os.Executable()
	if err != nil {
		return fmt.Errorf("failed to find own executable: %w", err)
	}
	return CopyExecutable(src, dst)
}

// CopyExecutable copies src to dst with InstalledMode. It writes a temporary
// file in dst's directory and renames it, so dst is never seen half written;
// the directory is created if needed.
func CopyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("failed to open executable %s: %w", src, err)
	}
	defer func() { _ = in.Close() }()

	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".*")
	if err != nil {
		return fmt.Errorf("failed to create temporary file in %s: %w", dir, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, in); err != nil {
		return fmt.Errorf("failed to copy %s to %s: %w", src, tmp.Name(), err)
	}
	if err := tmp.Chmod(InstalledMode); err != nil {
		return fmt.Errorf("failed to set mode of %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("failed to sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("failed to rename %s to %s: %w", tmp.Name(), dst, err)
	}
	done = true
	return nil
}
