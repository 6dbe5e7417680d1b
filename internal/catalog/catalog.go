package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"strings"

	"github.com/kubeskills/kubeskills/internal/skill"
)

// Where the agent runtime finds what the Agent controller mounts.
const (
	// MountRoot holds everything the runtime reads.
	MountRoot = "/var/run/kubeskills"
	// CatalogDir holds the catalog: shard i is mounted at CatalogDir/<i>,
	// for i in [0, MaxShards).
	CatalogDir = MountRoot + "/catalog"
	// SkillsDir holds the skills: shard i of skill NAME is mounted at
	// SkillsDir/NAME/<i>, and the image of a bundled skill at
	// SkillsDir/NAME/BundleDir.
	SkillsDir = MountRoot + "/skills"
	// BundleDir is the folder, beside a skill's shard folders, where the
	// image of its spec.bundle is mounted.
	BundleDir = "bundle"
	// MaxShards is the number of catalog shard volumes always mounted, as
	// optional ConfigMaps, so that a new shard never rolls the pods. It is
	// also the most shards a catalog may have.
	MaxShards = 8
	// CatalogKey is the key of every catalog shard ConfigMap.
	CatalogKey = "catalog.json"
	// InstructionsKey is the key in shard 0 that holds the Agent's system
	// prompt (spec.instructions).
	InstructionsKey = "instructions.md"
	// FormatVersion is the version of catalog.json that Encode writes and
	// Load reads.
	FormatVersion = 1
)

// Invocation modes a catalog entry may have, as in package skill.
const (
	// InvocationAuto lists the skill in the model's context.
	InvocationAuto = skill.InvocationAuto
	// InvocationExplicit serves the skill only when the user names it.
	InvocationExplicit = skill.InvocationExplicit
)

// Entry is one skill in a catalog.
type Entry struct {
	// Name is the skill's name, also the folder its shards are mounted in.
	Name string `json:"name"`
	// Description says what the skill does and when to use it.
	Description string `json:"description"`
	// Invocation is InvocationAuto or InvocationExplicit. Disabled skills are
	// never in a catalog.
	Invocation string `json:"invocation"`
	// ContentHash is the Skill's status.contentHash: the hash in its
	// manifest.json, or for a bundled skill skill.BundledHash of it with
	// BundleImage and BundlePullPolicy.
	ContentHash string `json:"contentHash"`
	// Shards is the number of ConfigMaps the skill is spread over, mounted
	// at SkillsDir/Name/0 to SkillsDir/Name/Shards-1.
	Shards int `json:"shards"`
	// AllowedTools are the tools the skill expects to use.
	AllowedTools []string `json:"allowedTools,omitempty"`
	// BundleImage is the Skill's spec.bundle.image: the OCI image whose
	// root holds the skill's files, mounted at SkillsDir/Name/BundleDir.
	// Empty when the files are in the skill's ConfigMaps.
	BundleImage string `json:"bundleImage,omitempty"`
	// BundlePullPolicy is the Skill's spec.bundle.pullPolicy, Always,
	// IfNotPresent or Never; empty lets Kubernetes choose from the image's
	// tag. Set only with BundleImage.
	BundlePullPolicy string `json:"bundlePullPolicy,omitempty"`
}

// MaxBundleImageLength bounds Entry.BundleImage, as the Skill API does.
const MaxBundleImageLength = 1024

// Bundled tells whether the skill's files come from an image.
func (e *Entry) Bundled() bool { return e.BundleImage != "" }

// Catalog is what an agent knows: its system prompt and its skills.
type Catalog struct {
	// Agent is the Agent's name.
	Agent string
	// Instructions is the Agent's system prompt (spec.instructions).
	Instructions string
	// Skills are the skills, sorted by name.
	Skills []Entry
}

// revisionVersion names the layout Revision hashes; changing it changes
// every revision.
const revisionVersion = "kubeskills.io/catalog-revision/v1"

// Revision returns a stable digest of the whole catalog, "sha256:" and 64
// hex digits: the agent, the instructions and every field of every entry,
// taken in name order. Two catalogs that differ only in the order of their
// entries, or in nil against empty AllowedTools, share a revision. The
// bundles of bundled entries are hashed after every entry, so a catalog
// without bundles keeps the revision it had before bundles existed.
func (c *Catalog) Revision() string {
	w := itemWriter{h: sha256.New(), buf: make([]byte, 0, 32<<10)}
	w.item(revisionVersion)
	w.item(c.Agent)
	w.item(c.Instructions)
	w.item(strconv.Itoa(len(c.Skills)))
	order := nameOrder(c.Skills)
	for _, i := range order {
		e := &c.Skills[i]
		w.item(e.Name)
		w.item(e.Description)
		w.item(e.Invocation)
		w.item(e.ContentHash)
		w.item(strconv.Itoa(e.Shards))
		w.item(strconv.Itoa(len(e.AllowedTools)))
		for _, tool := range e.AllowedTools {
			w.item(tool)
		}
	}
	// Three items per bundled entry: the entries above have a known count
	// and each is self-delimiting, so these cannot be mistaken for them.
	for _, i := range order {
		e := &c.Skills[i]
		if e.BundleImage == "" && e.BundlePullPolicy == "" {
			continue
		}
		w.item(e.Name)
		w.item(e.BundleImage)
		w.item(e.BundlePullPolicy)
	}
	w.flush()
	return "sha256:" + hex.EncodeToString(w.h.Sum(nil))
}

// itemWriter hashes length-prefixed items, so that no two sequences of
// items hash alike, through a buffer that spares a copy of each item.
type itemWriter struct {
	h   hash.Hash
	buf []byte
}

// item writes one item.
func (w *itemWriter) item(s string) {
	if cap(w.buf)-len(w.buf) < 8 {
		w.flush()
	}
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(len(s)))
	for len(s) > 0 {
		if len(w.buf) == cap(w.buf) {
			w.flush()
		}
		n := min(len(s), cap(w.buf)-len(w.buf))
		w.buf = append(w.buf, s[:n]...)
		s = s[n:]
	}
}

// flush hashes what the buffer holds.
func (w *itemWriter) flush() {
	_, _ = w.h.Write(w.buf)
	w.buf = w.buf[:0]
}

// nameOrder returns the indices of entries sorted by name.
func nameOrder(entries []Entry) []int {
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(entries[a].Name, entries[b].Name) })
	return order
}

// checkEntry reports what is wrong with a catalog entry, or nil.
func checkEntry(e *Entry) error {
	if !validSkillName(e.Name) {
		return fmt.Errorf("skill name %q is not 1 to %d lowercase letters, digits and single hyphens", e.Name, skill.MaxNameLength)
	}
	if e.Invocation != InvocationAuto && e.Invocation != InvocationExplicit {
		return fmt.Errorf("skill %s: invocation %q is not %s or %s", e.Name, e.Invocation, InvocationAuto, InvocationExplicit)
	}
	if e.ContentHash == "" {
		return fmt.Errorf("skill %s: the content hash is empty", e.Name)
	}
	if e.Shards < 1 || e.Shards > skill.MaxShards {
		return fmt.Errorf("skill %s: %d shards is not between 1 and %d", e.Name, e.Shards, skill.MaxShards)
	}
	return checkBundle(e)
}

// checkBundle reports what is wrong with an entry's bundle, or nil.
func checkBundle(e *Entry) error {
	if len(e.BundleImage) > MaxBundleImageLength {
		return fmt.Errorf("skill %s: the bundle image is %d bytes, more than %d", e.Name, len(e.BundleImage), MaxBundleImageLength)
	}
	switch e.BundlePullPolicy {
	case "":
	case "Always", "IfNotPresent", "Never":
		if e.BundleImage == "" {
			return fmt.Errorf("skill %s: a bundle pull policy is set without a bundle image", e.Name)
		}
	default:
		return fmt.Errorf("skill %s: bundle pull policy %q is not Always, IfNotPresent or Never", e.Name, e.BundlePullPolicy)
	}
	return nil
}

// validSkillName tells whether name is a skill name, and so a safe folder
// name: `^[a-z0-9]+(-[a-z0-9]+)*$`, at most skill.MaxNameLength long.
func validSkillName(name string) bool {
	if name == "" || len(name) > skill.MaxNameLength || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && name[i-1] != '-':
		default:
			return false
		}
	}
	return true
}

// TooLargeError reports a catalog that needs more than MaxShards ConfigMaps.
type TooLargeError struct {
	// Agent is the Agent's name.
	Agent string
	// Skills is the number of skills in the catalog.
	Skills int
	// Fit is how many skills, taken in name order, fit in MaxShards shards.
	Fit int
	// ShardBytes is the size of a shard.
	ShardBytes int
}

// Error says how many skills fit and what to do about it.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("failed to encode the catalog of agent %s: its %d skills need more than %d ConfigMaps of %d bytes "+
		"and only %d of them fit; select fewer skills or shorten their descriptions",
		e.Agent, e.Skills, MaxShards, e.ShardBytes, e.Fit)
}

// shardHeader is the head of catalog.json, before the skills.
type shardHeader struct {
	Version  int    `json:"version"`
	Agent    string `json:"agent"`
	Revision string `json:"revision"`
	Shard    int    `json:"shard"`
	Shards   int    `json:"shards"`
}

// shardFile is catalog.json as read.
type shardFile struct {
	shardHeader
	Skills []Entry `json:"skills"`
}

// Encode lays a catalog out as the Data of one or more ConfigMaps of at most
// maxShardBytes each (zero or less means skill.DefaultShardBytes; more than
// skill.MaxConfigMapBytes is an error). Entries are written in name order;
// the catalog itself is not changed. Every shard carries the revision, its
// index and the shard count. A catalog that needs more than MaxShards shards
// gives a *TooLargeError saying how many skills fit.
func Encode(c *Catalog, maxShardBytes int) ([]map[string]string, error) {
	if maxShardBytes <= 0 {
		maxShardBytes = skill.DefaultShardBytes
	}
	if maxShardBytes > skill.MaxConfigMapBytes {
		return nil, fmt.Errorf("failed to encode the catalog of agent %s: a shard of %d bytes exceeds the ConfigMap limit of %d",
			c.Agent, maxShardBytes, skill.MaxConfigMapBytes)
	}
	if c.Agent == "" {
		return nil, errors.New("failed to encode the catalog: the agent name is empty")
	}
	names, lines, err := encodeEntries(c)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the catalog of agent %s: %w", c.Agent, err)
	}
	revision := c.Revision()
	widest := encodeHeader(shardHeader{Version: FormatVersion, Agent: c.Agent, Revision: revision, Shard: MaxShards - 1, Shards: MaxShards})
	frame := len(CatalogKey) + len(widest) + len(skillsClose)
	first := frame + len(InstructionsKey) + len(c.Instructions)
	if first > maxShardBytes {
		return nil, fmt.Errorf("failed to encode the catalog of agent %s: the instructions (%d bytes) do not fit in a shard of %d bytes",
			c.Agent, len(c.Instructions), maxShardBytes)
	}
	starts, err := splitLines(names, lines, first, frame, maxShardBytes)
	if err != nil {
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			tooLarge.Agent = c.Agent
			return nil, tooLarge
		}
		return nil, fmt.Errorf("failed to encode the catalog of agent %s: %w", c.Agent, err)
	}
	shards := make([]map[string]string, len(starts))
	for i, start := range starts {
		end := len(lines)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		header := shardHeader{Version: FormatVersion, Agent: c.Agent, Revision: revision, Shard: i, Shards: len(starts)}
		shards[i] = map[string]string{CatalogKey: joinShard(header, lines[start:end])}
	}
	shards[0][InstructionsKey] = c.Instructions
	return shards, nil
}

// encodeEntries checks the entries and encodes each as one JSON line. It
// returns the names and the lines, in name order.
func encodeEntries(c *Catalog) ([]string, [][]byte, error) {
	order := nameOrder(c.Skills)
	names := make([]string, len(order))
	lines := make([][]byte, len(order))
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for n, i := range order {
		e := &c.Skills[i]
		if err := checkEntry(e); err != nil {
			return nil, nil, err
		}
		if n > 0 && names[n-1] == e.Name {
			return nil, nil, fmt.Errorf("skill %s is listed twice", e.Name)
		}
		b.Reset()
		if err := enc.Encode(e); err != nil {
			return nil, nil, fmt.Errorf("failed to encode skill %s: %w", e.Name, err)
		}
		names[n] = e.Name
		lines[n] = bytes.Clone(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	}
	return names, lines, nil
}

// skillsOpen and skillsClose surround the skills in catalog.json.
const (
	skillsOpen  = `,"skills":[`
	skillsClose = "\n]}\n"
)

// encodeHeader writes the head of catalog.json up to the first skill.
func encodeHeader(h shardHeader) []byte {
	head, _ := json.Marshal(h)
	return append(head[:len(head)-1], skillsOpen...)
}

// joinShard writes catalog.json: the header, then one line per skill.
func joinShard(h shardHeader, lines [][]byte) string {
	head := encodeHeader(h)
	size := len(head) + len(skillsClose)
	for _, line := range lines {
		size += len(line) + 2
	}
	var b strings.Builder
	b.Grow(size)
	b.Write(head)
	for i, line := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		b.Write(line)
	}
	if len(lines) == 0 {
		return b.String() + "]}\n"
	}
	b.WriteString(skillsClose)
	return b.String()
}

// splitLines puts the entry lines, in order, into consecutive shards: shard
// 0 starts with first bytes used, the others with frame bytes. It returns
// the index of the first line of each shard.
func splitLines(names []string, lines [][]byte, first, frame, maxShardBytes int) ([]int, error) {
	starts := []int{0}
	used := first
	for i, line := range lines {
		need := len(line) + 2
		if frame+need > maxShardBytes {
			return nil, fmt.Errorf("the entry of skill %s takes %d bytes, more than a shard of %d bytes holds",
				names[i], need, maxShardBytes)
		}
		if used+need <= maxShardBytes {
			used += need
			continue
		}
		if len(starts) == MaxShards {
			return nil, &TooLargeError{Skills: len(lines), Fit: i, ShardBytes: maxShardBytes}
		}
		starts = append(starts, i)
		used = frame + need
	}
	return starts, nil
}
