// Package skillrepo reads the skill folders of a source artifact: a gzipped
// tarball, as Flux's source-controller serves a GitRepository,
// OCIRepository or Bucket, fetched from its URL with its digest verified,
// unpacked with no link, no path out of the tarball and no more bytes than a
// bound, and every folder holding a SKILL.md below a path read as a skill.
// It does not import Kubernetes.
package skillrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/fluxcd/pkg/http/fetch"
	"github.com/fluxcd/pkg/tar"

	"github.com/kubeskills/kubeskills/internal/skill"
)

// Limits bound what an artifact may cost; a zero field takes DefaultLimits'.
type Limits struct {
	// MaxArtifactBytes bounds the tarball as downloaded.
	MaxArtifactBytes int
	// MaxUnpackedBytes bounds the files it unpacks to.
	MaxUnpackedBytes int
}

// DefaultLimits are the operator's unless its flags say otherwise: a
// repository of skills is text, far below these.
var DefaultLimits = Limits{MaxArtifactBytes: 50 << 20, MaxUnpackedBytes: 100 << 20}

// artifactFile is the name the tarball is downloaded to.
const artifactFile = "artifact.tar.gz"

// Fetch downloads the artifact at url into a new folder under tmp, checks
// that its digest ("sha256:…", as the source's status.artifact.digest
// says) matches, and unpacks it. It returns the folder of the unpacked
// files, and a func that removes all it wrote, to call on error too.
func Fetch(ctx context.Context, url, digest, tmp string, lim Limits) (files string, cleanup func(), err error) {
	if lim.MaxArtifactBytes <= 0 {
		lim.MaxArtifactBytes = DefaultLimits.MaxArtifactBytes
	}
	if lim.MaxUnpackedBytes <= 0 {
		lim.MaxUnpackedBytes = DefaultLimits.MaxUnpackedBytes
	}
	dir, err := os.MkdirTemp(tmp, "artifact-")
	if err != nil {
		return "", func() {}, fmt.Errorf("failed to make a folder for the artifact: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	// The tarball is unpacked here by tar.Untar, not by the fetcher, which
	// skips links: a link in a skill repository is refused, not dropped.
	f := fetch.New(fetch.WithMaxDownloadSize(lim.MaxArtifactBytes), fetch.WithFileName(artifactFile))
	if err := f.FetchWithContext(ctx, url, digest, dir); err != nil {
		if errors.Is(err, fetch.ErrFileNotFound) {
			err = fmt.Errorf("the source serves no artifact at %s (404): it may have moved on to a newer revision", url)
		}
		return "", cleanup, err
	}
	r, err := os.Open(filepath.Join(dir, artifactFile))
	if err != nil {
		return "", cleanup, fmt.Errorf("failed to open the artifact: %w", err)
	}
	defer func() { _ = r.Close() }()
	files = filepath.Join(dir, "files")
	if err := tar.Untar(r, files, tar.WithMaxUntarSize(lim.MaxUnpackedBytes)); err != nil {
		return "", cleanup, fmt.Errorf("failed to unpack the artifact (links and paths out of it are refused, and at most %d bytes are unpacked): %w",
			lim.MaxUnpackedBytes, err)
	}
	return files, cleanup, nil
}

// Folder is one skill folder of an artifact.
type Folder struct {
	// Path of the folder, relative to the path the folders were read under;
	// "." for that folder itself.
	Path string
	// Skill is the folder's skill, nil when it cannot be read.
	Skill *skill.Skill
	// Err says why it cannot be read.
	Err error
}

// Read reads every skill folder below root/path (FindFolders). A folder
// that cannot be read is returned with its error; an error is returned only
// when path itself cannot be read.
func Read(root, path string) ([]Folder, error) {
	base, err := securejoin.SecureJoin(root, path)
	if err != nil {
		return nil, fmt.Errorf("failed to find path %q in the artifact: %w", path, err)
	}
	if info, err := os.Stat(base); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("the artifact has no folder %q", displayPath(path))
	}
	dirs, err := skill.FindFolders(base)
	if err != nil {
		return nil, err
	}
	folders := make([]Folder, 0, len(dirs))
	for _, d := range dirs {
		rel, err := filepath.Rel(base, d)
		if err != nil {
			return nil, err
		}
		s, _, err := skill.ParseFolder(d)
		if err != nil {
			// Name files as the repository does, not where it was unpacked.
			err = errors.New(strings.ReplaceAll(err.Error(), base+string(filepath.Separator), ""))
		}
		folders = append(folders, Folder{Path: filepath.ToSlash(rel), Skill: s, Err: err})
	}
	return folders, nil
}

// displayPath names path as the spec writes it, the root as ".".
func displayPath(path string) string {
	if path == "" {
		return "."
	}
	return path
}
