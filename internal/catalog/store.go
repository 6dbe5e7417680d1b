package catalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubeskills/kubeskills/internal/skill"
)

// DefaultPollInterval is how often Watch looks at the mounted catalog when
// it is given no interval.
const DefaultPollInterval = 2 * time.Second

// Store serves a mounted catalog and the skills it lists to the agent
// runtime, and reloads the catalog when the kubelet updates it. It is safe
// for concurrent use; readers never wait for a reload.
type Store struct {
	catalogDir string
	skillsDir  string
	log        func(msg string, kv ...any)

	// current is the snapshot being served, never nil after Open.
	current atomic.Pointer[snapshot]
	// reloadMu serializes reloads and guards lastSeen.
	reloadMu sync.Mutex
	// lastSeen is the fingerprint of the mounted catalog at the last load,
	// whether it succeeded or not.
	lastSeen string

	reloadsOK     atomic.Int64
	reloadsFailed atomic.Int64

	// bundles holds the skills whose shards were checked, by name.
	bundles bundleCache
}

// snapshot is one loaded catalog with what serving it needs.
type snapshot struct {
	catalog  *Catalog
	revision string
	// index gives the position of each skill in catalog.Skills.
	index map[string]int
	// block is the `<available_skills>` block listing every Auto skill, in
	// name order, and blockTokens its estimated tokens.
	block       string
	blockTokens int
	// ends holds, for each Auto skill, the offset in block where its item
	// ends.
	ends []int
}

// Open loads the catalog mounted under catalogDir (see Load) and serves the
// skills mounted under skillsDir. The first load must succeed. log receives
// messages about reloads made by Watch; nil discards them.
func Open(catalogDir, skillsDir string, log func(msg string, kv ...any)) (*Store, error) {
	if log == nil {
		log = func(string, ...any) {}
	}
	s := &Store{catalogDir: catalogDir, skillsDir: skillsDir, log: log}
	s.lastSeen = fingerprint(catalogDir)
	c, revision, err := load(catalogDir)
	if err != nil {
		return nil, fmt.Errorf("failed to open the catalog store: %w", err)
	}
	s.current.Store(newSnapshot(c, revision))
	return s, nil
}

// newSnapshot indexes a loaded catalog and renders its prompt block.
func newSnapshot(c *Catalog, revision string) *snapshot {
	snap := &snapshot{catalog: c, revision: revision, index: make(map[string]int, len(c.Skills))}
	var b strings.Builder
	b.WriteString(promptOpen)
	for i := range c.Skills {
		e := &c.Skills[i]
		snap.index[e.Name] = i
		if e.Invocation == InvocationAuto {
			writePromptEntry(&b, e)
			snap.ends = append(snap.ends, b.Len())
		}
	}
	if len(snap.ends) > 0 {
		b.WriteString(promptClose)
		snap.block = b.String()
		snap.blockTokens = skill.EstimateTokens(snap.block)
	}
	return snap
}

// Reload reads the mounted catalog again. On any error the catalog being
// served stays, and the error says why the new one was refused.
func (s *Store) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	_, err := s.reloadLocked(fingerprint(s.catalogDir))
	return err
}

// reloadIfChanged reloads when the fingerprint of the mounted catalog
// differs from the one of the last load. It tells whether it loaded.
func (s *Store) reloadIfChanged() (bool, *snapshot, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	seen := fingerprint(s.catalogDir)
	if seen == s.lastSeen {
		return false, nil, nil
	}
	snap, err := s.reloadLocked(seen)
	return true, snap, err
}

// reloadLocked loads the catalog seen with the given fingerprint and serves
// it; s.reloadMu is held.
func (s *Store) reloadLocked(seen string) (*snapshot, error) {
	s.lastSeen = seen
	c, revision, err := load(s.catalogDir)
	if err != nil {
		s.reloadsFailed.Add(1)
		return nil, fmt.Errorf("failed to reload the catalog, still serving revision %s: %w", s.Revision(), err)
	}
	snap := newSnapshot(c, revision)
	s.current.Store(snap)
	s.bundles.prune(c)
	s.reloadsOK.Add(1)
	return snap, nil
}

// Watch looks at the mounted catalog every interval (DefaultPollInterval
// when zero or less) until ctx ends, and reloads it when a `..data` link, or
// a key of a folder without one, changes. It logs each reload and why a
// reload failed; a failed reload is tried again at the next change.
func (s *Store) Watch(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultPollInterval
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		loaded, snap, err := s.reloadIfChanged()
		switch {
		case !loaded:
		case err != nil:
			s.log("Catalog reload failed", "error", err.Error())
		default:
			s.log("Catalog reloaded", "revision", snap.revision, "skills", len(snap.catalog.Skills))
		}
	}
}

// Catalog returns the catalog being served. It is shared: callers must not
// change it.
func (s *Store) Catalog() *Catalog {
	return s.current.Load().catalog
}

// Revision returns the revision of the catalog being served.
func (s *Store) Revision() string {
	return s.current.Load().revision
}

// Reloads returns how many reloads succeeded and failed since Open; the
// first load, by Open, is not counted.
func (s *Store) Reloads() (ok, failed int) {
	return int(s.reloadsOK.Load()), int(s.reloadsFailed.Load())
}

// Parts of the `<available_skills>` block.
const (
	promptOpen  = "<available_skills>\n"
	promptClose = "</available_skills>\n"
)

// Prompt writes the `<available_skills>` block for the system prompt: each
// Auto skill's name and description, in name order, within budgetTokens as
// skill.EstimateTokens counts them (zero or less: no budget). It stops at
// the first skill that does not fit; those left are counted as omitted and
// a last line inside the block says how many. Explicit skills are neither
// listed nor counted. The block is empty when there are no Auto skills; it
// is larger than the budget only when the budget cannot hold even the
// opening, closing and omitted lines.
func (s *Store) Prompt(budgetTokens int) (block string, listed, omitted int) {
	snap := s.current.Load()
	n := len(snap.ends)
	if n == 0 || budgetTokens <= 0 || snap.blockTokens <= budgetTokens {
		return snap.block, n, 0
	}
	// The note for every skill is the longest the block can end with.
	reserve := skill.EstimateTokens(omittedLine(n) + promptClose)
	end := func(k int) int {
		if k == 0 {
			return len(promptOpen)
		}
		return snap.ends[k-1]
	}
	listed = sort.Search(n+1, func(k int) bool {
		return skill.EstimateTokens(snap.block[:end(k)])+reserve > budgetTokens
	}) - 1
	listed = max(listed, 0)
	omitted = n - listed
	return snap.block[:end(listed)] + omittedLine(omitted) + promptClose, listed, omitted
}

// writePromptEntry writes one skill of the `<available_skills>` block, with
// its description escaped so that it cannot close the block.
func writePromptEntry(b *strings.Builder, e *Entry) {
	b.WriteString("<skill>\n<name>")
	b.WriteString(e.Name)
	b.WriteString("</name>\n<description>")
	writeEscaped(b, e.Description)
	b.WriteString("</description>\n</skill>\n")
}

// omittedLine says how many skills the block leaves out. The plural form is
// never shorter than the singular one, so the line for the most skills
// bounds every other.
func omittedLine(n int) string {
	if n == 1 {
		return "1 more skill is not listed: ask for it by name\n"
	}
	return strconv.Itoa(n) + " more skills are not listed: ask for them by name\n"
}

// writeEscaped writes text with &, < and > escaped.
func writeEscaped(b *strings.Builder, text string) {
	for {
		i := strings.IndexAny(text, "&<>")
		if i < 0 {
			b.WriteString(text)
			return
		}
		b.WriteString(text[:i])
		switch text[i] {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		default:
			b.WriteString("&gt;")
		}
		text = text[i+1:]
	}
}

// Errors Use and ReadFile wrap, for the runtime to tell the model what
// happened.
var (
	// ErrNotFound: the catalog has no skill of that name.
	ErrNotFound = errors.New("skill not found in the catalog")
	// ErrExplicitOnly: the skill is Explicit and the user did not name it.
	ErrExplicitOnly = errors.New("skill is used only when the user names it")
	// ErrUnavailable: the skill is in the catalog but its shards are not
	// mounted in this pod, as while a new pod rolls out.
	ErrUnavailable = errors.New("skill is not mounted in this pod")
	// ErrOutOfStep: the mounted skill cannot be read whole or does not hash
	// to the catalog's contentHash, even when read twice; the skill and the
	// catalog are mid-update.
	ErrOutOfStep = errors.New("skill content and catalog are out of step")
	// ErrInvalidPath: the path is not a clean relative path.
	ErrInvalidPath = errors.New("invalid path")
	// ErrFileNotFound: the skill bundles no file at that path.
	ErrFileNotFound = errors.New("file not found in the skill")
	// ErrFileTooLarge: the file is larger than the caller allows.
	ErrFileTooLarge = errors.New("file too large")
)

// maxListedFiles bounds the paths an ErrFileNotFound error lists.
const maxListedFiles = 20

// Loaded is a skill loaded for the model.
type Loaded struct {
	// Name is the skill's name.
	Name string
	// Instructions is the body of SKILL.md, after the front matter.
	Instructions string
	// Files are the paths of the bundled files, for ReadFile, sorted. For a
	// bundled skill they are the files of its image, at most
	// MaxBundleFiles of them.
	Files []string
	// FilesTruncated tells that the skill's image holds more files than
	// Files lists; ReadFile reads those too.
	FilesTruncated bool
	// ContentHash is the hash of the content served.
	ContentHash string
}

// checkedSkill is a mounted skill whose shards hash to the catalog's
// contentHash.
type checkedSkill struct {
	hash     string
	dirs     []string
	bundle   *skill.Bundle
	manifest skill.Manifest
	body     string
	files    []string
	mdSize   int
	// image is the entry's BundleImage; truncated tells that files lists
	// only part of the image.
	image     string
	truncated bool
}

// bundleCache keeps checked skills whose shards are all mounted through
// `..data`: their timestamped folders never change, so the check holds as
// long as the links point at them.
type bundleCache struct {
	mu     sync.Mutex
	byName map[string]*checkedSkill
}

// get returns the checked skill of that entry's name, hash and bundle image
// read from those folders, or nil.
func (c *bundleCache) get(e *Entry, dirs []string) *checkedSkill {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.byName[e.Name]
	if cs == nil || cs.hash != e.ContentHash || cs.image != e.BundleImage || !slices.Equal(cs.dirs, dirs) {
		return nil
	}
	return cs
}

// put keeps a checked skill.
func (c *bundleCache) put(name string, cs *checkedSkill) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName == nil {
		c.byName = map[string]*checkedSkill{}
	}
	c.byName[name] = cs
}

// drop forgets a skill.
func (c *bundleCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byName, name)
}

// prune forgets the skills that are no longer in the catalog with the same
// hash and bundle image.
func (c *bundleCache) prune(cat *Catalog) {
	entries := make(map[string]*Entry, len(cat.Skills))
	for i := range cat.Skills {
		entries[cat.Skills[i].Name] = &cat.Skills[i]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, cs := range c.byName {
		if e := entries[name]; e == nil || e.ContentHash != cs.hash || e.BundleImage != cs.image {
			delete(c.byName, name)
		}
	}
}

// Use loads a skill's body for the model. Auto skills are always served;
// Explicit ones only when explicit is true, that is when the user named the
// skill. The mounted shards must hash to the catalog's contentHash: a
// mismatch is read again once, then reported as ErrOutOfStep.
func (s *Store) Use(name string, explicit bool) (*Loaded, error) {
	e, err := s.entry(name)
	if err != nil {
		return nil, fmt.Errorf("failed to use skill %s: %w", name, err)
	}
	if e.Invocation == InvocationExplicit && !explicit {
		return nil, fmt.Errorf("failed to use skill %s: %w; the user can ask for it as /%s", name, ErrExplicitOnly, name)
	}
	cs, err := s.checked(e)
	if err != nil {
		return nil, fmt.Errorf("failed to use skill %s: %w", name, err)
	}
	return &Loaded{Name: e.Name, Instructions: cs.body, Files: slices.Clone(cs.files), FilesTruncated: cs.truncated, ContentHash: cs.hash}, nil
}

// ReadFile reads a file bundled with a skill in the catalog: path must be a
// clean relative path (fs.ValidPath) naming SKILL.md or a file of the
// skill's manifest. The file is found through the manifest, never through
// the path on disk, so nothing outside the skill's mounted keys can be read.
// A file over maxBytes (zero or less: no limit) is refused before it is
// read. Explicit skills are not gated here: the caller serves their files
// only in a conversation where the user named them.
//
// A bundled skill's files, all but SKILL.md, are read from its mounted
// image instead, through os.Root: no `..`, no absolute path, no link out of
// the image; regular files only, and none over MaxBundleFileBytes even
// without a limit.
func (s *Store) ReadFile(name, path string, maxBytes int) ([]byte, error) {
	e, err := s.entry(name)
	if err != nil {
		return nil, fmt.Errorf("failed to read file %s of skill %s: %w", path, name, err)
	}
	if !fs.ValidPath(path) || path == "." {
		return nil, fmt.Errorf("failed to read file %q of skill %s: %w: use a relative path such as scripts/run.sh, without . or .. parts",
			path, name, ErrInvalidPath)
	}
	var lastErr error
	for range 2 {
		cs, err := s.checked(e)
		if err != nil {
			return nil, fmt.Errorf("failed to read file %s of skill %s: %w", path, name, err)
		}
		if e.Bundled() && path != skill.SkillFileName {
			data, err := s.readBundleFile(&e, cs, path, maxBytes)
			if err != nil {
				return nil, fmt.Errorf("failed to read file %s of skill %s: %w", path, name, err)
			}
			return data, nil
		}
		size, err := cs.size(path)
		if err != nil {
			return nil, fmt.Errorf("failed to read file %s of skill %s: %w", path, name, err)
		}
		if maxBytes > 0 && size > maxBytes {
			return nil, fmt.Errorf("failed to read file %s of skill %s: %w: it is %d bytes, more than the %d allowed",
				path, name, ErrFileTooLarge, size, maxBytes)
		}
		data, err := cs.bundle.ReadFile(path)
		if err == nil {
			return data, nil
		}
		// The folders may have been replaced since the check: check again.
		s.bundles.drop(name)
		lastErr = err
	}
	return nil, fmt.Errorf("failed to read file %s of skill %s: %w", path, name, lastErr)
}

// size returns the size of SKILL.md or of a bundled file.
func (cs *checkedSkill) size(path string) (int, error) {
	if path == skill.SkillFileName {
		return cs.mdSize, nil
	}
	f, ok := cs.manifest.Lookup(path)
	if !ok {
		return 0, cs.notFound()
	}
	return f.Size, nil
}

// notFound says that the skill has no such file, and which it has.
func (cs *checkedSkill) notFound() error {
	listed := cs.files
	more := ""
	over := ""
	if cs.truncated {
		over = "over "
	}
	switch {
	case len(listed) > maxListedFiles:
		listed, more = listed[:maxListedFiles], " and "+over+strconv.Itoa(len(cs.files)-maxListedFiles)+" more"
	case cs.truncated:
		more = " and more"
	}
	if len(listed) == 0 {
		return fmt.Errorf("%w: the skill bundles no files besides %s", ErrFileNotFound, skill.SkillFileName)
	}
	return fmt.Errorf("%w: the skill bundles %s%s", ErrFileNotFound, strings.Join(listed, ", "), more)
}

// entry finds a skill in the catalog being served.
func (s *Store) entry(name string) (Entry, error) {
	snap := s.current.Load()
	i, ok := snap.index[name]
	if !ok {
		return Entry{}, ErrNotFound
	}
	return snap.catalog.Skills[i], nil
}

// checked returns the skill's mounted bundle once it hashes to the
// catalog's contentHash, reading it a second time when the first read
// fails, as when the kubelet swapped a folder in the middle of it.
func (s *Store) checked(e Entry) (*checkedSkill, error) {
	cs, err := s.check(e)
	if err == nil {
		return cs, nil
	}
	s.bundles.drop(e.Name)
	return s.check(e)
}

// check opens the skill's mounted shards and checks their content against
// the catalog, or returns the cached result of an earlier check of the same
// folders. For a bundled skill it also lists the files of its mounted image.
func (s *Store) check(e Entry) (*checkedSkill, error) {
	dirs, stable, err := s.shardDirs(e)
	if err != nil {
		return nil, err
	}
	if stable {
		if cs := s.bundles.get(&e, dirs); cs != nil {
			return cs, nil
		}
	}
	b, err := skill.OpenShardDirs(dirs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOutOfStep, err)
	}
	m := b.Manifest()
	// A bundled skill's contentHash covers its image too.
	served := m.Hash
	if e.Bundled() {
		served = skill.BundledHash(m.Hash, e.BundleImage, e.BundlePullPolicy)
	}
	if m.Name != e.Name || served != e.ContentHash {
		return nil, fmt.Errorf("%w: the mounted skill %s has content hash %s but the catalog says %s; try again shortly",
			ErrOutOfStep, m.Name, served, e.ContentHash)
	}
	sk, err := b.Skill()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOutOfStep, err)
	}
	cs := &checkedSkill{hash: served, dirs: dirs, bundle: b, manifest: m, body: sk.Body, mdSize: len(b.SkillMD()), image: e.BundleImage}
	if e.Bundled() {
		if cs.files, cs.truncated, err = s.bundleFiles(&e); err != nil {
			return nil, err
		}
	} else {
		cs.files = make([]string, len(m.Files))
		for i, f := range m.Files {
			cs.files[i] = f.Path
		}
	}
	if stable {
		s.bundles.put(e.Name, cs)
	}
	return cs, nil
}

// shardDirs returns the folders that hold the skill's shards now: the
// target of each shard's `..data` link, or the mounted folder itself when
// it has none. stable tells whether every shard has a link.
func (s *Store) shardDirs(e Entry) (dirs []string, stable bool, err error) {
	root, err := os.OpenRoot(s.skillsDir)
	if err != nil {
		return nil, false, fmt.Errorf("%w: failed to open %s: %w", ErrUnavailable, s.skillsDir, err)
	}
	defer func() { _ = root.Close() }()
	dirs = make([]string, e.Shards)
	stable = true
	for i := range dirs {
		rel := filepath.Join(e.Name, strconv.Itoa(i))
		shard, err := root.OpenRoot(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, fmt.Errorf("%w: shard %d of %d is not mounted at %s; a new pod may be rolling out",
				ErrUnavailable, i, e.Shards, filepath.Join(s.skillsDir, rel))
		}
		if err != nil {
			return nil, false, fmt.Errorf("%w: failed to open %s: %w", ErrUnavailable, filepath.Join(s.skillsDir, rel), err)
		}
		target, err := currentData(shard)
		_ = shard.Close()
		if err != nil {
			return nil, false, fmt.Errorf("failed to read shard %d of skill %s: %w", i, e.Name, err)
		}
		stable = stable && target != "."
		dirs[i] = filepath.Join(s.skillsDir, rel, target)
	}
	return dirs, stable, nil
}
