package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kubeskills/kubeskills/internal/skill"
)

// dataLink is the link the kubelet swaps to update a mounted ConfigMap.
const dataLink = "..data"

// errAbsent marks a shard folder that holds no catalog.json: an optional
// ConfigMap that does not exist, or a volume not mounted.
var errAbsent = errors.New("no catalog.json")

// Load reads the catalog mounted under catalogDir: shard i from
// catalogDir/<i>. Shard 0 gives the shard count; shards 1 to count-1 must
// all be there with the same revision, and the content read must hash to
// it. Shards at or above the count are ignored. A folder that is missing or
// holds no catalog.json is an absent optional shard.
func Load(catalogDir string) (*Catalog, error) {
	c, _, err := load(catalogDir)
	return c, err
}

// load reads the catalog as Load does and returns its revision too.
func load(catalogDir string) (*Catalog, string, error) {
	first, instructions, err := readShard(catalogDir, 0)
	if errors.Is(err, errAbsent) {
		return nil, "", fmt.Errorf("failed to load catalog from %s: shard 0 has no %s; the catalog ConfigMap is not written or not mounted yet",
			catalogDir, CatalogKey)
	}
	if err != nil {
		return nil, "", fmt.Errorf("failed to load catalog from %s: %w", catalogDir, err)
	}
	c := &Catalog{Agent: first.Agent, Instructions: instructions, Skills: first.Skills}
	for i := 1; i < first.Shards; i++ {
		shard, _, err := readShard(catalogDir, i)
		if errors.Is(err, errAbsent) {
			return nil, "", fmt.Errorf("failed to load catalog from %s: shard %d of %d is missing; "+
				"its ConfigMap is not written or not mounted yet", catalogDir, i, first.Shards)
		}
		if err != nil {
			return nil, "", fmt.Errorf("failed to load catalog from %s: %w", catalogDir, err)
		}
		if err := sameCatalog(first, shard); err != nil {
			return nil, "", fmt.Errorf("failed to load catalog from %s: %w", catalogDir, err)
		}
		c.Skills = append(c.Skills, shard.Skills...)
	}
	if len(c.Skills) == 0 {
		c.Skills = nil
	}
	if err := checkSkills(c.Skills); err != nil {
		return nil, "", fmt.Errorf("failed to load catalog from %s: %w", catalogDir, err)
	}
	if got := c.Revision(); got != first.Revision {
		return nil, "", fmt.Errorf("failed to load catalog from %s: its content hashes to %s but its shards say %s; "+
			"the shards are out of step or were edited", catalogDir, got, first.Revision)
	}
	return c, first.Revision, nil
}

// sameCatalog checks that a shard belongs to the same catalog as shard 0.
func sameCatalog(first, shard *shardFile) error {
	if shard.Revision != first.Revision {
		return fmt.Errorf("shard %d has revision %s but shard 0 has %s; the catalog ConfigMaps are mid-update",
			shard.Shard, shard.Revision, first.Revision)
	}
	if shard.Shards != first.Shards || shard.Agent != first.Agent {
		return fmt.Errorf("shard %d says %d shards of agent %q but shard 0 says %d of agent %q",
			shard.Shard, shard.Shards, shard.Agent, first.Shards, first.Agent)
	}
	return nil
}

// checkSkills checks every entry and that names strictly ascend.
func checkSkills(entries []Entry) error {
	for i := range entries {
		if err := checkEntry(&entries[i]); err != nil {
			return err
		}
		if i > 0 && entries[i-1].Name >= entries[i].Name {
			return fmt.Errorf("skill %s comes after %s: the skills are not sorted by name or are listed twice",
				entries[i].Name, entries[i-1].Name)
		}
	}
	return nil
}

// readShard reads and decodes shard i under catalogDir; for shard 0 it also
// returns the instructions. It gives errAbsent for a shard that is not
// there.
func readShard(catalogDir string, i int) (*shardFile, string, error) {
	dir := filepath.Join(catalogDir, strconv.Itoa(i))
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", errAbsent
	}
	if err != nil {
		return nil, "", fmt.Errorf("failed to open catalog shard folder %s: %w", dir, err)
	}
	defer func() { _ = root.Close() }()
	base, err := currentData(root)
	if err != nil {
		return nil, "", fmt.Errorf("failed to read catalog shard %d: %w", i, err)
	}
	data, err := readLimited(root, filepath.Join(base, CatalogKey))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", errAbsent
	}
	if err != nil {
		return nil, "", fmt.Errorf("failed to read catalog shard %d: %w", i, err)
	}
	shard, err := decodeShard(data, i)
	if err != nil {
		return nil, "", err
	}
	if i != 0 {
		return shard, "", nil
	}
	instructions, err := readLimited(root, filepath.Join(base, InstructionsKey))
	if err != nil {
		return nil, "", fmt.Errorf("failed to read the instructions in catalog shard 0: %w", err)
	}
	return shard, string(instructions), nil
}

// decodeShard parses catalog.json of shard i and checks its header.
func decodeShard(data []byte, i int) (*shardFile, error) {
	var shard shardFile
	if err := json.Unmarshal(data, &shard); err != nil {
		return nil, fmt.Errorf("failed to parse %s of catalog shard %d: %w", CatalogKey, i, err)
	}
	if shard.Version != FormatVersion {
		return nil, fmt.Errorf("failed to parse %s of catalog shard %d: format version %d is not %d; "+
			"the agent image and the operator are of different releases", CatalogKey, i, shard.Version, FormatVersion)
	}
	if shard.Shard != i {
		return nil, fmt.Errorf("failed to parse %s of catalog shard %d: it says it is shard %d", CatalogKey, i, shard.Shard)
	}
	if shard.Shards < 1 || shard.Shards > MaxShards {
		return nil, fmt.Errorf("failed to parse %s of catalog shard %d: %d shards is not between 1 and %d",
			CatalogKey, i, shard.Shards, MaxShards)
	}
	if shard.Shard >= shard.Shards {
		return nil, fmt.Errorf("failed to parse %s of catalog shard %d: it is not one of the %d shards it names",
			CatalogKey, i, shard.Shards)
	}
	if shard.Agent == "" || !strings.HasPrefix(shard.Revision, "sha256:") {
		return nil, fmt.Errorf("failed to parse %s of catalog shard %d: the agent or the revision is missing", CatalogKey, i)
	}
	return &shard, nil
}

// currentData returns the folder, relative to root, that holds the keys of
// a mounted ConfigMap: the target of `..data` when the kubelet made one, so
// that every key is read from the same version, else the root itself.
func currentData(root *os.Root) (string, error) {
	target, err := root.Readlink(dataLink)
	if errors.Is(err, fs.ErrNotExist) {
		return ".", nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to read the %s link: %w", dataLink, err)
	}
	if !filepath.IsLocal(target) || filepath.Base(target) != target || target == dataLink {
		return "", fmt.Errorf("failed to follow the %s link: its target %q is not a folder beside it", dataLink, target)
	}
	info, err := root.Lstat(target)
	if err != nil {
		return "", fmt.Errorf("failed to follow the %s link: %w", dataLink, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("failed to follow the %s link: its target %s is not a folder", dataLink, target)
	}
	return target, nil
}

// readLimited reads a file under root that is at most a ConfigMap in size.
func readLimited(root *os.Root, name string) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, skill.MaxConfigMapBytes+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", name, err)
	}
	if len(data) > skill.MaxConfigMapBytes {
		return nil, fmt.Errorf("failed to read %s: it is larger than a ConfigMap (%d bytes)", name, skill.MaxConfigMapBytes)
	}
	return data, nil
}

// fingerprint describes the state of the mounted catalog cheaply: for each
// shard folder, the target of its `..data` link, or the size and
// modification time of its keys when there is no link, or that it is
// missing. It changes whenever the kubelet updates a shard.
func fingerprint(catalogDir string) string {
	var b strings.Builder
	for i := range MaxShards {
		dir := filepath.Join(catalogDir, strconv.Itoa(i))
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('=')
		if target, err := os.Readlink(filepath.Join(dir, dataLink)); err == nil {
			b.WriteString(target)
		} else {
			statKey(&b, filepath.Join(dir, CatalogKey))
			if i == 0 {
				statKey(&b, filepath.Join(dir, InstructionsKey))
			}
		}
		b.WriteByte(';')
	}
	return b.String()
}

// statKey writes the size and modification time of a file, or "-".
func statKey(b *strings.Builder, name string) {
	info, err := os.Stat(name)
	if err != nil {
		b.WriteString("-")
		return
	}
	fmt.Fprintf(b, "%d@%d,", info.Size(), info.ModTime().UnixNano())
}
