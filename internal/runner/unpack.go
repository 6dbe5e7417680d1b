package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Modes of what WriteFolder writes: nothing it writes is writable, so a
// command cannot change the skill it runs even where the volume is mounted
// read-write.
const (
	// ReadOnlyFileMode is the mode of a file that is not executable.
	ReadOnlyFileMode os.FileMode = 0o444
	// ReadOnlyExecMode is the mode of an executable file.
	ReadOnlyExecMode os.FileMode = 0o555
	// ReadOnlyDirMode is the mode of a folder WriteFolder creates.
	ReadOnlyDirMode os.FileMode = 0o555
)

// FolderFile is one file for WriteFolder.
type FolderFile struct {
	// Path is where the file goes in the folder: a valid io/fs path, that
	// is relative, with forward slashes and no `.` or `..` segment.
	Path string
	// Content is the file's bytes.
	Content []byte
	// Executable gives the file ReadOnlyExecMode instead of
	// ReadOnlyFileMode.
	Executable bool
}

// WriteFolder writes files into dir, which must be absent or an empty
// folder, the way "runner unpack-skill" lays out a skill for a sandbox.
// Files get ReadOnlyExecMode or ReadOnlyFileMode, and the folders created
// for them ReadOnlyDirMode; dir itself gets ReadOnlyDirMode only when
// WriteFolder creates it, since an existing dir is usually a volume's mount
// point, owned by root.
//
// Every path is checked before anything is written: an invalid path, the
// same path twice, or a file whose path is a folder of another file is an
// error. Every write goes through an os.Root opened on dir and creates its
// file exclusively, so nothing is written outside dir or over what is there.
func WriteFolder(dir string, files []FolderFile) error {
	folders, err := checkFolderFiles(files)
	if err != nil {
		return err
	}
	created, err := prepareFolder(dir)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("failed to open folder %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()

	for _, folder := range folders {
		if err := root.Mkdir(folder, 0o700); err != nil {
			return fmt.Errorf("failed to create folder %s in %s: %w", folder, dir, err)
		}
	}
	for _, f := range files {
		if err := writeReadOnly(root, f); err != nil {
			return fmt.Errorf("failed to write file %s in %s: %w", f.Path, dir, err)
		}
	}
	// Deepest first, though a folder's mode does not stop the owner from
	// changing the modes of what is inside.
	for i := len(folders) - 1; i >= 0; i-- {
		if err := root.Chmod(folders[i], ReadOnlyDirMode); err != nil {
			return fmt.Errorf("failed to set mode of folder %s in %s: %w", folders[i], dir, err)
		}
	}
	if created {
		if err := os.Chmod(dir, ReadOnlyDirMode); err != nil {
			return fmt.Errorf("failed to set mode of folder %s: %w", dir, err)
		}
	}
	return nil
}

// checkFolderFiles checks the paths of files and returns the folders they
// need, parents before children.
func checkFolderFiles(files []FolderFile) ([]string, error) {
	isFile := make(map[string]bool, len(files))
	for _, f := range files {
		if !fs.ValidPath(f.Path) || f.Path == "." {
			return nil, fmt.Errorf("failed to check file path %q: it is not a relative path inside the folder", f.Path)
		}
		if isFile[f.Path] {
			return nil, fmt.Errorf("failed to check file path %q: it is given twice", f.Path)
		}
		isFile[f.Path] = true
	}
	needed := map[string]bool{}
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "."; dir = path.Dir(dir) {
			if isFile[dir] {
				return nil, fmt.Errorf("failed to check file path %q: %q is a file, not a folder", f.Path, dir)
			}
			needed[dir] = true
		}
	}
	folders := make([]string, 0, len(needed))
	for dir := range needed {
		folders = append(folders, dir)
	}
	// A parent sorts before its children: compare by depth, then by name.
	sort.Slice(folders, func(i, j int) bool {
		di, dj := strings.Count(folders[i], "/"), strings.Count(folders[j], "/")
		if di != dj {
			return di < dj
		}
		return folders[i] < folders[j]
	})
	return folders, nil
}

// prepareFolder creates dir when it is absent, or checks that it is an
// empty folder. It reports whether it created dir.
func prepareFolder(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return false, fmt.Errorf("failed to create folder %s: %w", dir, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("failed to read folder %s: %w", dir, err)
	case len(entries) > 0:
		return false, fmt.Errorf("failed to use folder %s: it is not empty (it holds %s)", dir, entries[0].Name())
	}
	return false, nil
}

// writeReadOnly creates one file under root, which must not exist yet, and
// gives it its read-only mode.
func writeReadOnly(root *os.Root, f FolderFile) error {
	out, err := root.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := out.Write(f.Content); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	mode := ReadOnlyFileMode
	if f.Executable {
		mode = ReadOnlyExecMode
	}
	return root.Chmod(f.Path, mode)
}
