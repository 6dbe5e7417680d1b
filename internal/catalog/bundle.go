package catalog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/kubeskills/kubeskills/internal/skill"
)

// Bounds on what the store reads from a skill's bundle image.
const (
	// MaxBundleFiles bounds the paths Use lists for a bundled skill;
	// ReadFile still reads the files left out.
	MaxBundleFiles = 1000
	// MaxBundleFileBytes bounds a file ReadFile reads from a bundle when the
	// caller sets no smaller limit: as much as a skill's ConfigMaps can hold.
	MaxBundleFileBytes = skill.MaxShards * skill.MaxConfigMapBytes
	// maxBundleEntries bounds the folder entries, files or not, that Use
	// looks at while listing a bundle.
	maxBundleEntries = 20 * MaxBundleFiles
)

// openBundle opens the folder where the skill's bundle image is mounted,
// SkillsDir/NAME/BundleDir, without leaving the skills folder. A folder
// that is not there gives ErrUnavailable: the pod started before the skill
// had a bundle.
func (s *Store) openBundle(e *Entry) (*os.Root, error) {
	skills, err := os.OpenRoot(s.skillsDir)
	if err != nil {
		return nil, fmt.Errorf("%w: failed to open %s: %w", ErrUnavailable, s.skillsDir, err)
	}
	defer func() { _ = skills.Close() }()
	rel := filepath.Join(e.Name, BundleDir)
	root, err := skills.OpenRoot(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: the bundle image %s is not mounted at %s; a new pod may be rolling out",
			ErrUnavailable, e.BundleImage, filepath.Join(s.skillsDir, rel))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: failed to open %s: %w", ErrUnavailable, filepath.Join(s.skillsDir, rel), err)
	}
	return root, nil
}

// listBundle returns the paths of the files of a mounted bundle, sorted:
// regular files, and links to regular files that stay inside the bundle.
// A SKILL.md at the top is left out, since SKILL.md is served from the
// skill's ConfigMaps. truncated tells that the bundle holds more than
// MaxBundleFiles files, or more entries than the walk looks at. Folders
// that cannot be read are skipped.
func listBundle(root *os.Root) (files []string, truncated bool, err error) {
	seen := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil
		}
		if seen++; seen > maxBundleEntries {
			truncated = true
			return fs.SkipAll
		}
		if p == skill.SkillFileName || !isBundleFile(root, p, d) {
			return nil
		}
		if len(files) == MaxBundleFiles {
			truncated = true
			return fs.SkipAll
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("failed to list the bundle: %w", err)
	}
	slices.Sort(files)
	return files, truncated, nil
}

// isBundleFile tells whether an entry of a bundle is a file ReadFile
// serves: a regular file, or a link that resolves, inside the bundle, to
// one.
func isBundleFile(root *os.Root, p string, d fs.DirEntry) bool {
	switch {
	case d.Type().IsRegular():
		return true
	case d.Type()&fs.ModeSymlink != 0:
		info, err := root.Stat(p)
		return err == nil && info.Mode().IsRegular()
	default:
		return false
	}
}

// readBundleFile reads one file of the skill's mounted bundle. name is a
// valid fs path; os.Root refuses `..` and links that lead out of the
// bundle. Only regular files are read, at most maxBytes of them
// (MaxBundleFileBytes when zero, less or more).
func (s *Store) readBundleFile(e *Entry, cs *checkedSkill, name string, maxBytes int) ([]byte, error) {
	root, err := s.openBundle(e)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	info, err := root.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, cs.notFound()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: it cannot be opened inside the skill's bundle: %w", ErrFileNotFound, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: it is not a regular file", ErrFileNotFound)
	}
	limit := maxBytes
	if limit <= 0 || limit > MaxBundleFileBytes {
		limit = MaxBundleFileBytes
	}
	if info.Size() > int64(limit) {
		return nil, fmt.Errorf("%w: it is %d bytes, more than the %d allowed", ErrFileTooLarge, info.Size(), limit)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%w: it cannot be opened inside the skill's bundle: %w", ErrFileNotFound, err)
	}
	defer func() { _ = f.Close() }()
	// The file opened may not be the one looked at: look again.
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: it is not a regular file", ErrFileNotFound)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read the file: %w", err)
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%w: it is more than the %d bytes allowed", ErrFileTooLarge, limit)
	}
	return data, nil
}

// bundleFiles lists the files of the skill's mounted bundle.
func (s *Store) bundleFiles(e *Entry) ([]string, bool, error) {
	root, err := s.openBundle(e)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = root.Close() }()
	files, truncated, err := listBundle(root)
	if err != nil {
		return nil, false, fmt.Errorf("%w: skill %s: %w", ErrUnavailable, e.Name, err)
	}
	return files, truncated, nil
}
