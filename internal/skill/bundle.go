package skill

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// ManifestKey is the key of the manifest in shard 0 of a packed skill.
const ManifestKey = "manifest.json"

// ManifestVersion is the version of the manifest format Pack writes.
const ManifestVersion = 1

// Encodings of bundled files in a packed skill.
const (
	// EncodingText is UTF-8 text stored verbatim in Data.
	EncodingText = "text"
	// EncodingBinary is bytes stored verbatim in BinaryData.
	EncodingBinary = "binary"
	// EncodingGzip is gzip-compressed bytes in BinaryData.
	EncodingGzip = "gzip"
)

// Manifest is manifest.json: where each file of a packed skill is. In a
// mounted volume, SKILL.md and manifest.json are files of shard 0's folder
// and each bundled file is the file named by its key in its shard's folder.
type Manifest struct {
	// Version is ManifestVersion.
	Version int `json:"version"`
	// Name is the skill's name.
	Name string `json:"name"`
	// Hash is the skill's Hash; readers check it to notice shards caught in
	// the middle of an update.
	Hash string `json:"hash"`
	// Invocation is the skill's invocation mode.
	Invocation string `json:"invocation"`
	// GeneratedFrontMatter tells that SKILL.md's front matter was generated
	// from the fields rather than written by a person.
	GeneratedFrontMatter bool `json:"generatedFrontMatter,omitempty"`
	// AddedFrontMatterLineBreak tells that the skill's front matter lacked a
	// final line break, which Render added to SKILL.md.
	AddedFrontMatterLineBreak bool `json:"addedFrontMatterLineBreak,omitempty"`
	// Shards is the number of shards.
	Shards int `json:"shards"`
	// Files are the bundled files, in the skill's order.
	Files []ManifestFile `json:"files"`
}

// ManifestFile locates one bundled file.
type ManifestFile struct {
	// Path is the file's path in the skill folder.
	Path string `json:"path"`
	// Key is the file's ConfigMap key, unique across all shards.
	Key string `json:"key"`
	// Shard is the index of the shard holding the file.
	Shard int `json:"shard"`
	// Encoding is EncodingText, EncodingBinary or EncodingGzip.
	Encoding string `json:"encoding"`
	// Size is the file's size once decoded.
	Size int `json:"size"`
	// Executable marks a file to run with mode 0755.
	Executable bool `json:"executable,omitempty"`
}

// encode writes the manifest as JSON with one line per file, readable in
// `kubectl get configmap -o yaml`.
func (m Manifest) encode() []byte {
	header := m
	header.Files = nil
	head, _ := json.Marshal(header)
	var b bytes.Buffer
	b.Write(head[:len(head)-len(`"files":null}`)])
	b.WriteString(`"files":[`)
	for i, f := range m.Files {
		line, _ := json.Marshal(f)
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		b.Write(line)
	}
	if len(m.Files) > 0 {
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.Bytes()
}

// restore undoes on a skill parsed from SKILL.md what Render did to the
// packed skill, and sets what SKILL.md does not hold.
func (m Manifest) restore(s *Skill) {
	switch {
	case m.GeneratedFrontMatter:
		s.FrontMatter = ""
	case m.AddedFrontMatterLineBreak:
		s.FrontMatter = strings.TrimSuffix(s.FrontMatter, firstLineEOL(s.FrontMatter))
	}
	s.Invocation = m.Invocation
}

// ParseManifest reads and checks manifest.json: a known version, safe paths,
// valid keys and shard numbers, no path or key twice.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("failed to parse skill manifest: %w", err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("failed to parse skill manifest: version %d is not %d", m.Version, ManifestVersion)
	}
	if m.Shards < 1 || m.Shards > MaxShards {
		return nil, fmt.Errorf("failed to parse skill manifest: %d shards is not between 1 and %d", m.Shards, MaxShards)
	}
	paths := make(map[string]bool, len(m.Files))
	keys := map[string]bool{SkillFileName: true, ManifestKey: true}
	for i, f := range m.Files {
		if err := checkManifestFile(f, m.Shards); err != nil {
			return nil, fmt.Errorf("failed to parse skill manifest: files[%d]: %w", i, err)
		}
		if paths[f.Path] || keys[f.Key] {
			return nil, fmt.Errorf("failed to parse skill manifest: files[%d]: path %q or key %q is used twice", i, f.Path, f.Key)
		}
		paths[f.Path], keys[f.Key] = true, true
	}
	return &m, nil
}

func checkManifestFile(f ManifestFile, shards int) error {
	if message := checkFilePath(f.Path); message != "" {
		return fmt.Errorf("path %q %s", f.Path, message)
	}
	if !isConfigMapKey(f.Key) {
		return fmt.Errorf("key %q is not a ConfigMap key", f.Key)
	}
	if f.Shard < 0 || f.Shard >= shards {
		return fmt.Errorf("shard %d is not between 0 and %d", f.Shard, shards-1)
	}
	switch f.Encoding {
	case EncodingText, EncodingBinary, EncodingGzip:
	default:
		return fmt.Errorf("encoding %q is not text, binary or gzip", f.Encoding)
	}
	if f.Size < 0 {
		return fmt.Errorf("size %d is negative", f.Size)
	}
	return nil
}

// Lookup finds a bundled file by its path in the skill folder. Only exact,
// valid paths match: there is no way to name anything outside the skill.
func (m *Manifest) Lookup(name string) (ManifestFile, bool) {
	if !fs.ValidPath(name) {
		return ManifestFile{}, false
	}
	for _, f := range m.Files {
		if f.Path == name {
			return f, true
		}
	}
	return ManifestFile{}, false
}

// Bundle is a packed skill opened for reading, from Shard payloads or from
// the folders where its ConfigMaps are mounted. It is an fs.FS holding the
// skill folder: SKILL.md and the bundled files at their paths, decoded.
type Bundle struct {
	manifest Manifest
	skillMD  []byte
	read     func(shard int, key string) ([]byte, error)
}

// Unpack rebuilds a skill from the shards Pack made: Unpack(Pack(s)) equals
// s, except that an empty Invocation reads back as InvocationAuto and empty
// lists and maps as nil. It fails when the shards do not hold the skill the
// manifest describes.
func Unpack(shards []Shard) (*Skill, error) {
	b, err := ReadShards(shards)
	if err != nil {
		return nil, err
	}
	return b.Skill()
}

// ReadShards opens a packed skill from its shard payloads, shard 0 first.
func ReadShards(shards []Shard) (*Bundle, error) {
	read := func(shard int, key string) ([]byte, error) {
		if shard < 0 || shard >= len(shards) {
			return nil, fmt.Errorf("failed to read key %s: shard %d is missing", key, shard)
		}
		if text, ok := shards[shard].Data[key]; ok {
			return []byte(text), nil
		}
		if data, ok := shards[shard].BinaryData[key]; ok {
			return data, nil
		}
		return nil, fmt.Errorf("failed to read key %s: shard %d does not hold it", key, shard)
	}
	return openBundle(len(shards), read)
}

// OpenShardDirs opens a packed skill from the folders where its ConfigMaps
// are mounted, shard 0 first. Every read stays inside those folders.
func OpenShardDirs(dirs []string) (*Bundle, error) {
	read := func(shard int, key string) ([]byte, error) {
		if shard < 0 || shard >= len(dirs) {
			return nil, fmt.Errorf("failed to read key %s: shard %d is missing", key, shard)
		}
		root, err := os.OpenRoot(dirs[shard])
		if err != nil {
			return nil, fmt.Errorf("failed to open shard folder %s: %w", dirs[shard], err)
		}
		defer func() { _ = root.Close() }()
		data, err := root.ReadFile(key)
		if err != nil {
			return nil, fmt.Errorf("failed to read key %s in %s: %w", key, dirs[shard], err)
		}
		return data, nil
	}
	return openBundle(len(dirs), read)
}

// openBundle reads the manifest and SKILL.md of shard 0.
func openBundle(shards int, read func(shard int, key string) ([]byte, error)) (*Bundle, error) {
	if shards == 0 {
		return nil, errors.New("failed to open skill bundle: no shards")
	}
	data, err := read(0, ManifestKey)
	if err != nil {
		return nil, fmt.Errorf("failed to open skill bundle: %w", err)
	}
	manifest, err := ParseManifest(data)
	if err != nil {
		return nil, err
	}
	if manifest.Shards != shards {
		return nil, fmt.Errorf("failed to open skill bundle %s: the manifest names %d shards but %d were given",
			manifest.Name, manifest.Shards, shards)
	}
	skillMD, err := read(0, SkillFileName)
	if err != nil {
		return nil, fmt.Errorf("failed to open skill bundle %s: %w", manifest.Name, err)
	}
	return &Bundle{manifest: *manifest, skillMD: skillMD, read: read}, nil
}

// Manifest returns a copy of the bundle's manifest.
func (b *Bundle) Manifest() Manifest {
	m := b.manifest
	m.Files = append([]ManifestFile(nil), b.manifest.Files...)
	return m
}

// SkillMD returns the bundle's SKILL.md.
func (b *Bundle) SkillMD() []byte {
	return bytes.Clone(b.skillMD)
}

// ReadFile returns the decoded content of SKILL.md or of a bundled file,
// named by its path in the skill folder. A name that is not a valid fs.FS
// path gives fs.ErrInvalid; one that names no file gives fs.ErrNotExist.
func (b *Bundle) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrInvalid}
	}
	if name == SkillFileName {
		return b.SkillMD(), nil
	}
	entry, ok := b.manifest.Lookup(name)
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return b.readEntry(entry)
}

// readEntry reads and decodes one bundled file, checking its size.
func (b *Bundle) readEntry(entry ManifestFile) ([]byte, error) {
	data, err := b.read(entry.Shard, entry.Key)
	if err != nil {
		return nil, fmt.Errorf("failed to read file %s: %w", entry.Path, err)
	}
	if entry.Encoding == EncodingGzip {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("failed to decompress file %s: %w", entry.Path, err)
		}
		data, err = io.ReadAll(io.LimitReader(zr, int64(entry.Size)+1))
		if err != nil {
			return nil, fmt.Errorf("failed to decompress file %s: %w", entry.Path, err)
		}
	}
	if len(data) != entry.Size {
		return nil, fmt.Errorf("failed to read file %s: it holds %d bytes, the manifest says %d", entry.Path, len(data), entry.Size)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// Skill rebuilds the skill and checks it against the manifest's hash, which
// fails when the shards were read in the middle of an update.
func (b *Bundle) Skill() (*Skill, error) {
	s, err := ParseSkillMD(b.skillMD)
	if err != nil {
		return nil, fmt.Errorf("failed to parse SKILL.md of skill bundle %s: %w", b.manifest.Name, err)
	}
	b.manifest.restore(s)
	for _, entry := range b.manifest.Files {
		content, err := b.readEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("failed to unpack skill %s: %w", b.manifest.Name, err)
		}
		s.Files = append(s.Files, File{Path: entry.Path, Content: content, Executable: entry.Executable})
	}
	if got := Hash(s); got != b.manifest.Hash {
		return nil, fmt.Errorf("failed to unpack skill %s: its content hashes to %s but the manifest says %s; "+
			"the shards are out of step, read them again", b.manifest.Name, got, b.manifest.Hash)
	}
	return s, nil
}

// Open opens SKILL.md, a bundled file or a folder of the skill, as fs.FS.
func (b *Bundle) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == SkillFileName {
		return &bundleFile{info: fileInfo{name: name, size: int64(len(b.skillMD)), mode: 0o444},
			Reader: bytes.NewReader(b.skillMD)}, nil
	}
	if entry, ok := b.manifest.Lookup(name); ok {
		content, err := b.readEntry(entry)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		mode := fs.FileMode(0o444)
		if entry.Executable {
			mode = 0o555
		}
		return &bundleFile{info: fileInfo{name: path.Base(name), size: int64(len(content)), mode: mode},
			Reader: bytes.NewReader(content)}, nil
	}
	entries, ok := b.dirEntries(name)
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &bundleDir{info: fileInfo{name: path.Base(name), mode: fs.ModeDir | 0o555}, entries: entries}, nil
}

// dirEntries lists a folder of the skill, false when there is no such folder.
func (b *Bundle) dirEntries(dir string) ([]fs.DirEntry, bool) {
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	children := map[string]fs.DirEntry{}
	if dir == "." {
		children[SkillFileName] = fs.FileInfoToDirEntry(fileInfo{name: SkillFileName, size: int64(len(b.skillMD)), mode: 0o444})
	}
	for _, f := range b.manifest.Files {
		rest, ok := strings.CutPrefix(f.Path, prefix)
		if !ok {
			continue
		}
		if child, _, isDir := strings.Cut(rest, "/"); isDir {
			children[child] = fs.FileInfoToDirEntry(fileInfo{name: child, mode: fs.ModeDir | 0o555})
		} else {
			mode := fs.FileMode(0o444)
			if f.Executable {
				mode = 0o555
			}
			children[child] = fs.FileInfoToDirEntry(fileInfo{name: child, size: int64(f.Size), mode: mode})
		}
	}
	if len(children) == 0 && dir != "." {
		return nil, false
	}
	entries := make([]fs.DirEntry, 0, len(children))
	for _, e := range children {
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return entries, true
}

// fileInfo describes a file or folder of a Bundle.
type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return i.mode }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fileInfo) Sys() any           { return nil }

// bundleFile is an open file of a Bundle.
type bundleFile struct {
	info fileInfo
	*bytes.Reader
}

func (f *bundleFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *bundleFile) Close() error               { return nil }

// bundleDir is an open folder of a Bundle.
type bundleDir struct {
	info    fileInfo
	entries []fs.DirEntry
	offset  int
}

func (d *bundleDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *bundleDir) Close() error               { return nil }
func (d *bundleDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}

// ReadDir lists the folder's entries, n at a time when n > 0.
func (d *bundleDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.offset:]
	if n <= 0 {
		d.offset = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.offset += n
	return rest[:n], nil
}
