package catalog

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kubeskills/kubeskills/internal/kubeletfs"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// textKeys turns ConfigMap Data into volume keys.
func textKeys(data map[string]string) map[string][]byte { return kubeletfs.Keys(data, nil) }

// mountVolume mounts keys in dir as the kubelet does.
func mountVolume(t testing.TB, dir string, keys map[string][]byte) {
	kubeletfs.MountConfigMap(t, dir, keys)
}

// mountCatalog encodes a catalog and mounts shard i at catalogDir/<i>. It
// returns the number of shards.
func mountCatalog(t testing.TB, catalogDir string, c *Catalog, maxShardBytes int) int {
	t.Helper()
	shards, err := Encode(c, maxShardBytes)
	if err != nil {
		t.Fatalf("Encode() error = %v", err)
	}
	for i, data := range shards {
		mountVolume(t, filepath.Join(catalogDir, strconv.Itoa(i)), textKeys(data))
	}
	return len(shards)
}

// newSkill returns a small valid skill.
func newSkill(name, invocation, body string, files ...skill.File) *skill.Skill {
	return &skill.Skill{
		Name:        name,
		Description: "Use " + name + " when the task is about " + name + ".",
		Invocation:  invocation,
		Body:        body,
		Files:       files,
	}
}

// mountSkill packs a skill into shards of at most maxShardBytes, mounts
// shard i at skillsDir/NAME/<i> and returns its catalog entry.
func mountSkill(t testing.TB, skillsDir string, s *skill.Skill, maxShardBytes int) Entry {
	t.Helper()
	shards, err := skill.Pack(s, maxShardBytes)
	if err != nil {
		t.Fatalf("Pack(%s) error = %v", s.Name, err)
	}
	for i, shard := range shards {
		keys := textKeys(shard.Data)
		for k, v := range shard.BinaryData {
			keys[k] = v
		}
		mountVolume(t, filepath.Join(skillsDir, s.Name, strconv.Itoa(i)), keys)
	}
	invocation := s.Invocation
	if invocation == "" {
		invocation = InvocationAuto
	}
	return Entry{
		Name:         s.Name,
		Description:  s.Description,
		Invocation:   invocation,
		ContentHash:  skill.Hash(s),
		Shards:       len(shards),
		AllowedTools: s.AllowedTools,
	}
}

// bigCatalog returns a catalog of n skills whose descriptions are
// descBytes long, one in every seven Explicit.
func bigCatalog(n, descBytes int) *Catalog {
	c := &Catalog{Agent: "support", Instructions: "You are a helpful support agent.\n"}
	for i := range n {
		name := fmt.Sprintf("skill-%04d", i)
		desc := "Use " + name + " to " + strings.Repeat("handle one kind of support request ", descBytes/35+1)
		e := Entry{
			Name:        name,
			Description: desc[:descBytes],
			Invocation:  InvocationAuto,
			ContentHash: fmt.Sprintf("sha256:%064x", i),
			Shards:      1,
		}
		if i%7 == 3 {
			e.Invocation = InvocationExplicit
			e.AllowedTools = []string{"Bash(kubectl get:*)", "Read"}
		}
		c.Skills = append(c.Skills, e)
	}
	return c
}

// fixture is a mounted catalog and its skills.
type fixture struct {
	catalogDir string
	skillsDir  string
	catalog    *Catalog
	skills     map[string]*skill.Skill
}

// newFixture mounts four skills and a catalog of them:
//   - alpha: Auto, with a script, a guide and a 10 KiB file;
//   - beta: Explicit;
//   - delta: Auto, no files;
//   - gamma: Auto, spread over several shards.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{
		catalogDir: filepath.Join(base, "catalog"),
		skillsDir:  filepath.Join(base, "skills"),
		skills:     map[string]*skill.Skill{},
	}
	big := []byte(strings.Repeat("0123456789abcdef\n", 600))
	f.skills["alpha"] = newSkill("alpha", InvocationAuto, "# Alpha\n\nRun scripts/run.sh.\n",
		skill.File{Path: "big.txt", Content: big},
		skill.File{Path: "references/guide.md", Content: []byte("# Guide\n\nRead me.\n")},
		skill.File{Path: "scripts/run.sh", Content: []byte("#!/bin/sh\necho alpha\n"), Executable: true})
	f.skills["alpha"].AllowedTools = []string{"Bash(sh:*)"}
	f.skills["beta"] = newSkill("beta", InvocationExplicit, "# Beta\n\nOnly when asked.\n")
	f.skills["delta"] = newSkill("delta", InvocationAuto, "# Delta\n\nNo files.\n")
	f.skills["gamma"] = newSkill("gamma", InvocationAuto, "# Gamma\n\nSee the references.\n",
		skill.File{Path: "references/a.md", Content: []byte(strings.Repeat("part a\n", 400))},
		skill.File{Path: "references/b.md", Content: []byte(strings.Repeat("part b\n", 400))})
	f.catalog = &Catalog{Agent: "support", Instructions: "Be brief.\n"}
	for _, name := range []string{"alpha", "beta", "delta", "gamma"} {
		size := 0
		if name == "gamma" {
			size = 3500
		}
		f.catalog.Skills = append(f.catalog.Skills, mountSkill(t, f.skillsDir, f.skills[name], size))
	}
	mountCatalog(t, f.catalogDir, f.catalog, 0)
	return f
}

// open opens a store on the fixture, with a log that records messages.
func (f *fixture) open(t testing.TB) (*Store, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	s, err := Open(f.catalogDir, f.skillsDir, rec.log)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	return s, rec
}

// logRecorder keeps log messages, safe for concurrent use.
type logRecorder struct {
	mu       sync.Mutex
	messages []string
}

func (r *logRecorder) log(msg string, kv ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages = append(r.messages, fmt.Sprintln(append([]any{msg}, kv...)...))
}

// has tells whether a message starting with prefix was logged.
func (r *logRecorder) has(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.messages {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}
