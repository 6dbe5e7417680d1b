package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// epoch is the time of every file and of every image: fixed, so the same
// inputs make the same layers and the same image digests.
var epoch = time.Unix(0, 0).UTC()

// entry is one file of a layer.
type entry struct {
	// path is the file's path in the image, without a leading slash.
	path string
	// typ is tar.TypeDir, tar.TypeReg or tar.TypeSymlink.
	typ      byte
	mode     int64
	uid, gid int
	// src is the host file a regular file is copied from, when data is nil.
	src string
	// data is the content of a regular file made here.
	data []byte
	// link is a symlink's target.
	link string
}

// layer is a filesystem layer built from host files and generated content.
type layer struct {
	entries map[string]entry
}

func newLayer() *layer { return &layer{entries: map[string]entry{}} }

// add adds e and the directories above it (root-owned, 0755, unless added
// explicitly).
func (l *layer) add(e entry) {
	e.path = strings.TrimPrefix(path.Clean("/"+e.path), "/")
	for dir := path.Dir(e.path); dir != "."; dir = path.Dir(dir) {
		if _, ok := l.entries[dir]; !ok {
			l.entries[dir] = entry{path: dir, typ: tar.TypeDir, mode: 0o755}
		}
	}
	l.entries[e.path] = e
}

// dir adds a directory.
func (l *layer) dir(p string, mode int64, uid, gid int) {
	l.add(entry{path: p, typ: tar.TypeDir, mode: mode, uid: uid, gid: gid})
}

// copy adds a root-owned regular file copied from the host file src.
func (l *layer) copy(p string, mode int64, src string) {
	l.add(entry{path: p, typ: tar.TypeReg, mode: mode, src: src})
}

// data adds a root-owned regular file holding data.
func (l *layer) data(p string, mode int64, data string) {
	l.add(entry{path: p, typ: tar.TypeReg, mode: mode, data: []byte(data)})
}

// symlink adds a symbolic link to target.
func (l *layer) symlink(p, target string) {
	l.add(entry{path: p, typ: tar.TypeSymlink, mode: 0o777, link: target})
}

// sorted returns the entries by path, so parents come before children.
func (l *layer) sorted() []entry {
	out := make([]entry, 0, len(l.entries))
	for _, e := range l.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// check fails when a host file of the layer is missing or not a regular
// file, before any work is done.
func (l *layer) check() error {
	for _, e := range l.sorted() {
		if e.typ != tar.TypeReg || e.data != nil {
			continue
		}
		fi, err := os.Stat(e.src)
		if err != nil {
			return fmt.Errorf("failed to find /%s: %w", e.path, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("failed to add /%s: %s is not a regular file", e.path, e.src)
		}
	}
	return nil
}

// write writes the layer as an uncompressed tar stream with fixed times and
// owners.
func (l *layer) write(w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, e := range l.sorted() {
		if err := writeEntry(tw, e); err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, e entry) error {
	hdr := &tar.Header{
		Typeflag: e.typ,
		Name:     e.path,
		Mode:     e.mode,
		Uid:      e.uid,
		Gid:      e.gid,
		ModTime:  epoch,
		Linkname: e.link,
	}
	if e.typ == tar.TypeDir {
		hdr.Name += "/"
	}
	if e.typ != tar.TypeReg {
		return tw.WriteHeader(hdr)
	}
	content := io.Reader(bytes.NewReader(e.data))
	hdr.Size = int64(len(e.data))
	if e.data == nil {
		f, err := os.Open(e.src)
		if err != nil {
			return fmt.Errorf("failed to open %s: %w", e.src, err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("failed to stat %s: %w", e.src, err)
		}
		content, hdr.Size = f, fi.Size()
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("failed to write /%s: %w", e.path, err)
	}
	// A file that changes while it is read fails here rather than making a
	// layer that contradicts its header.
	if _, err := io.Copy(tw, content); err != nil {
		return fmt.Errorf("failed to write /%s: %w", e.path, err)
	}
	return nil
}

// open streams the layer's tar; it is a tarball.Opener.
func (l *layer) open() (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(l.write(pw)) }()
	return pr, nil
}

// diffID is the digest of the uncompressed layer, as the image config
// lists it; computing it reads the files but compresses nothing.
func (l *layer) diffID() (v1.Hash, error) {
	h := sha256.New()
	if err := l.write(h); err != nil {
		return v1.Hash{}, err
	}
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", h.Sum(nil))}, nil
}

// v1Layer is the layer, gzip-compressed once and kept in memory while the
// image is written.
func (l *layer) v1Layer() (v1.Layer, error) {
	return tarball.LayerFromOpener(l.open, tarball.WithCompressedCaching)
}
