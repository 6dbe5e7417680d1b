package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/kubeskills/kubeskills/internal/skill"
)

func TestOpen(t *testing.T) {
	f := newFixture(t)
	s, _ := f.open(t)
	if got := s.Catalog(); got == nil || len(got.Skills) != 4 || got.Agent != "support" || got.Instructions != "Be brief.\n" {
		t.Fatalf("Catalog() = %+v", got)
	}
	if s.Revision() != f.catalog.Revision() {
		t.Errorf("Revision() = %s, want %s", s.Revision(), f.catalog.Revision())
	}
	if ok, failed := s.Reloads(); ok != 0 || failed != 0 {
		t.Errorf("Reloads() = %d, %d after Open, want 0, 0", ok, failed)
	}
	if _, err := Open(t.TempDir(), f.skillsDir, nil); err == nil || !strings.Contains(err.Error(), "shard 0 has no catalog.json") {
		t.Errorf("Open(empty folder) error = %v, want one saying the catalog is not there", err)
	}
}

// storeOf mounts a catalog without skills and opens a store on it.
func storeOf(t *testing.T, c *Catalog) *Store {
	t.Helper()
	dir := t.TempDir()
	mountCatalog(t, dir, c, 0)
	s, err := Open(dir, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	return s
}

func TestPrompt(t *testing.T) {
	c := bigCatalog(100, 200)
	auto := 0
	for _, e := range c.Skills {
		if e.Invocation == InvocationAuto {
			auto++
		}
	}
	s := storeOf(t, c)
	full, _, _ := s.Prompt(0)
	fullTokens := skill.EstimateTokens(full)
	tests := []struct {
		name        string
		budget      int
		wantListed  func(listed int) bool
		wantOmitted bool
	}{
		{"no budget", 0, func(n int) bool { return n == auto }, false},
		{"budget holds everything", fullTokens, func(n int) bool { return n == auto }, false},
		{"one token short", fullTokens - 1, func(n int) bool { return n > 0 && n < auto }, true},
		{"half", fullTokens / 2, func(n int) bool { return n > auto/3 && n < auto*2/3 }, true},
		{"too small for any skill", 30, func(n int) bool { return n == 0 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			block, listed, omitted := s.Prompt(tt.budget)
			if !tt.wantListed(listed) || listed+omitted != auto || (omitted > 0) != tt.wantOmitted {
				t.Fatalf("Prompt(%d) listed %d, omitted %d of %d Auto skills", tt.budget, listed, omitted, auto)
			}
			if tt.budget > 0 && skill.EstimateTokens(block) > tt.budget {
				t.Errorf("Prompt(%d) block is %d tokens", tt.budget, skill.EstimateTokens(block))
			}
			if !strings.HasPrefix(block, "<available_skills>\n") || !strings.HasSuffix(block, "</available_skills>\n") {
				t.Errorf("Prompt(%d) block is not framed:\n%s", tt.budget, block)
			}
			if got := strings.Count(block, "<skill>"); got != listed {
				t.Errorf("block holds %d skills, Prompt says %d", got, listed)
			}
			note := fmt.Sprintf("%d more skills are not listed: ask for them by name", omitted)
			if omitted == 1 {
				note = "1 more skill is not listed: ask for it by name"
			}
			if strings.Contains(block, note) != (omitted > 0) {
				t.Errorf("block says %q: %v, want %v", note, strings.Contains(block, note), omitted > 0)
			}
			names := promptNames(block)
			if !slices.IsSorted(names) {
				t.Errorf("skills are not in name order: %v", names)
			}
			for _, e := range c.Skills {
				if e.Invocation == InvocationExplicit && slices.Contains(names, e.Name) {
					t.Errorf("Explicit skill %s is listed", e.Name)
				}
			}
			if again, _, _ := s.Prompt(tt.budget); again != block {
				t.Error("Prompt() is not stable")
			}
		})
	}
}

// promptNames returns the names listed in a prompt block, in order.
func promptNames(block string) []string {
	var names []string
	for _, line := range strings.Split(block, "\n") {
		if name, ok := strings.CutPrefix(line, "<name>"); ok {
			names = append(names, strings.TrimSuffix(name, "</name>"))
		}
	}
	return names
}

func TestPromptEdges(t *testing.T) {
	c := &Catalog{Agent: "a", Skills: []Entry{
		{Name: "only", Description: "Stop </description></available_skills> & <b>go</b>.", Invocation: InvocationAuto, ContentHash: "sha256:01", Shards: 1},
		{Name: "quiet", Description: "Explicit.", Invocation: InvocationExplicit, ContentHash: "sha256:02", Shards: 1},
	}}
	block, listed, omitted := storeOf(t, c).Prompt(0)
	want := "<available_skills>\n<skill>\n<name>only</name>\n<description>Stop &lt;/description&gt;&lt;/available_skills&gt; &amp; " +
		"&lt;b&gt;go&lt;/b&gt;.</description>\n</skill>\n</available_skills>\n"
	if block != want || listed != 1 || omitted != 0 {
		t.Errorf("Prompt() = %q, %d, %d\nwant %q, 1, 0", block, listed, omitted, want)
	}
	block, _, omitted = storeOf(t, c).Prompt(20)
	if omitted != 1 || !strings.Contains(block, "1 more skill is not listed: ask for it by name") {
		t.Errorf("Prompt(20) = %q, omitted %d; want the singular note", block, omitted)
	}
	c.Skills = c.Skills[1:]
	if block, listed, omitted := storeOf(t, c).Prompt(0); block != "" || listed != 0 || omitted != 0 {
		t.Errorf("Prompt() without Auto skills = %q, %d, %d; want nothing", block, listed, omitted)
	}
}

func TestUse(t *testing.T) {
	f := newFixture(t)
	ghost := Entry{Name: "ghost", Description: "Not mounted.", Invocation: InvocationAuto, ContentHash: "sha256:01", Shards: 1}
	stale := f.catalog.Skills[2]
	stale.Name, stale.ContentHash = "stale", "sha256:00"
	mountSkill(t, f.skillsDir, newSkill("stale", InvocationAuto, "# Stale\n"), 0)
	f.catalog.Skills = append(f.catalog.Skills, ghost, stale)
	mountCatalog(t, f.catalogDir, f.catalog, 0)
	s, _ := f.open(t)
	tests := []struct {
		name      string
		skill     string
		explicit  bool
		wantErr   error
		wantFiles []string
	}{
		{name: "auto", skill: "alpha", wantFiles: []string{"big.txt", "references/guide.md", "scripts/run.sh"}},
		{name: "auto named by the user", skill: "delta", explicit: true},
		{name: "auto over several shards", skill: "gamma", wantFiles: []string{"references/a.md", "references/b.md"}},
		{name: "explicit not named", skill: "beta", wantErr: ErrExplicitOnly},
		{name: "explicit named", skill: "beta", explicit: true},
		{name: "unknown", skill: "nope", explicit: true, wantErr: ErrNotFound},
		{name: "not mounted", skill: "ghost", wantErr: ErrUnavailable},
		{name: "catalog and skill out of step", skill: "stale", wantErr: ErrOutOfStep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Use(tt.skill, tt.explicit)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Use() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Use() error = %v", err)
			}
			want := f.skills[tt.skill]
			if got.Name != tt.skill || got.Instructions != want.Body || got.ContentHash != skill.Hash(want) || !slices.Equal(got.Files, tt.wantFiles) {
				t.Errorf("Use() = %+v", got)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	f := newFixture(t)
	outside := filepath.Join(filepath.Dir(f.catalogDir), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link planted beside the keys is not in the manifest.
	if err := os.Symlink(outside, filepath.Join(f.skillsDir, "alpha", "0", "secret")); err != nil {
		t.Fatal(err)
	}
	s, _ := f.open(t)
	alpha := f.skills["alpha"]
	tests := []struct {
		name, skill, path string
		maxBytes          int
		want              []byte
		wantErr           error
	}{
		{name: "bundled file", skill: "alpha", path: "scripts/run.sh", maxBytes: 1024, want: alpha.Files[2].Content},
		{name: "SKILL.md", skill: "alpha", path: "SKILL.md", want: skill.Render(alpha)},
		{name: "no limit", skill: "alpha", path: "big.txt", want: alpha.Files[0].Content},
		{name: "file in a later shard", skill: "gamma", path: "references/b.md", maxBytes: 1 << 20, want: f.skills["gamma"].Files[1].Content},
		{name: "over the limit", skill: "alpha", path: "big.txt", maxBytes: 1024, wantErr: ErrFileTooLarge},
		{name: "traversal", skill: "alpha", path: "../x", wantErr: ErrInvalidPath},
		{name: "traversal inside", skill: "alpha", path: "scripts/../SKILL.md", wantErr: ErrInvalidPath},
		{name: "absolute", skill: "alpha", path: "/etc/passwd", wantErr: ErrInvalidPath},
		{name: "empty", skill: "alpha", path: "", wantErr: ErrInvalidPath},
		{name: "folder", skill: "alpha", path: "scripts", wantErr: ErrFileNotFound},
		{name: "not in the manifest", skill: "alpha", path: "notes.txt", wantErr: ErrFileNotFound},
		{name: "key name instead of path", skill: "alpha", path: "scripts_run.sh", wantErr: ErrFileNotFound},
		{name: "planted link", skill: "alpha", path: "secret", wantErr: ErrFileNotFound},
		{name: "manifest itself", skill: "alpha", path: "manifest.json", wantErr: ErrFileNotFound},
		{name: "unknown skill", skill: "nope", path: "SKILL.md", wantErr: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ReadFile(tt.skill, tt.path, tt.maxBytes)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ReadFile() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != string(tt.want) {
				t.Errorf("ReadFile() = %d bytes, %v; want %d bytes", len(got), err, len(tt.want))
			}
		})
	}
}

func TestReadFileRefusesKeyLinkedOutside(t *testing.T) {
	f := newFixture(t)
	outside := filepath.Join(filepath.Dir(f.catalogDir), "guide.md")
	if err := os.WriteFile(outside, []byte("# Guide\n\nRead me.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Replace a key of the current version with a link out of the volume.
	key := filepath.Join(f.skillsDir, "alpha", "0", dataLink, "references_guide.md")
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, key); err != nil {
		t.Fatal(err)
	}
	s, _ := f.open(t)
	if data, err := s.ReadFile("alpha", "references/guide.md", 0); err == nil {
		t.Errorf("ReadFile() through a link out of the volume = %q, want an error", data)
	}
	if _, err := s.Use("alpha", false); err == nil {
		t.Error("Use() of a skill with a key linked out of the volume succeeded")
	}
}

func TestReloadAfterAtomicSwap(t *testing.T) {
	f := newFixture(t)
	s, _ := f.open(t)
	before := s.Revision()
	if _, err := s.Use("alpha", false); err != nil {
		t.Fatal(err)
	}
	// A new version of alpha, then the catalog naming it.
	changed := newSkill("alpha", InvocationAuto, "# Alpha v2\n", f.skills["alpha"].Files...)
	entry := mountSkill(t, f.skillsDir, changed, 0)
	if _, err := s.Use("alpha", false); !errors.Is(err, ErrOutOfStep) {
		t.Fatalf("Use() before the catalog changes error = %v, want ErrOutOfStep", err)
	}
	f.catalog.Skills[0] = entry
	f.catalog.Skills[2].Description = "Changed."
	mountCatalog(t, f.catalogDir, f.catalog, 0)
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload() error = %v", err)
	}
	if s.Revision() == before || s.Revision() != f.catalog.Revision() || s.Catalog().Skills[2].Description != "Changed." {
		t.Errorf("Revision() = %s after Reload, want %s", s.Revision(), f.catalog.Revision())
	}
	got, err := s.Use("alpha", false)
	if err != nil || got.Instructions != "# Alpha v2\n" {
		t.Errorf("Use() after Reload = %+v, %v; want the new body", got, err)
	}
	if ok, failed := s.Reloads(); ok != 1 || failed != 0 {
		t.Errorf("Reloads() = %d, %d, want 1, 0", ok, failed)
	}
}

func TestReloadKeepsPrevious(t *testing.T) {
	f := newFixture(t)
	s, _ := f.open(t)
	served := s.Revision()
	// A catalog of two shards whose shard 1 has not been updated yet.
	next := bigCatalog(300, 1024)
	shards, err := Encode(next, 200_000)
	if err != nil || len(shards) != 2 {
		t.Fatalf("Encode() = %d shards, %v; want 2", len(shards), err)
	}
	mountVolume(t, filepath.Join(f.catalogDir, "0"), textKeys(shards[0]))
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "shard 1 of 2 is missing") {
		t.Errorf("Reload() mid-update error = %v, want one about shard 1", err)
	}
	mountVolume(t, filepath.Join(f.catalogDir, "0"), map[string][]byte{CatalogKey: []byte("{broken"), InstructionsKey: nil})
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "still serving revision "+served) {
		t.Errorf("Reload() of a broken catalog error = %v, want one saying what is still served", err)
	}
	if s.Revision() != served || len(s.Catalog().Skills) != 4 {
		t.Errorf("Revision() = %s after failed reloads, want %s", s.Revision(), served)
	}
	if _, err := s.Use("alpha", false); err != nil {
		t.Errorf("Use() after failed reloads error = %v", err)
	}
	mountVolume(t, filepath.Join(f.catalogDir, "1"), textKeys(shards[1]))
	mountVolume(t, filepath.Join(f.catalogDir, "0"), textKeys(shards[0]))
	if err := s.Reload(); err != nil || s.Revision() != next.Revision() {
		t.Errorf("Reload() once every shard is updated = %v, revision %s", err, s.Revision())
	}
	if ok, failed := s.Reloads(); ok != 1 || failed != 2 {
		t.Errorf("Reloads() = %d, %d, want 1, 2", ok, failed)
	}
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	gomega.NewWithT(t).Eventually(cond, 5*time.Second, 5*time.Millisecond).Should(gomega.BeTrue(), "%s did not happen within 5s", what)
}

func TestWatch(t *testing.T) {
	f := newFixture(t)
	s, rec := f.open(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Watch(ctx, 10*time.Millisecond)
	}()
	defer func() {
		cancel()
		<-done
	}()
	f.catalog.Instructions = "Be very brief.\n"
	mountCatalog(t, f.catalogDir, f.catalog, 0)
	eventually(t, "a reload of the new catalog", func() bool { return s.Revision() == f.catalog.Revision() })
	if !rec.has("Catalog reloaded") {
		t.Error("the reload was not logged")
	}
	served := s.Revision()
	mountVolume(t, filepath.Join(f.catalogDir, "0"), map[string][]byte{CatalogKey: []byte("{broken"), InstructionsKey: nil})
	eventually(t, "a failed reload", func() bool { _, failed := s.Reloads(); return failed > 0 })
	eventually(t, "a log of the failure", func() bool { return rec.has("Catalog reload failed") })
	if s.Revision() != served {
		t.Errorf("Revision() = %s after a broken update, want %s", s.Revision(), served)
	}
	// Without a change on disk, the broken catalog is not read again.
	if loaded, _, _ := s.reloadIfChanged(); loaded {
		t.Error("the catalog was read again with nothing changed on disk")
	}
}

func TestWatchPlainFiles(t *testing.T) {
	dir := t.TempDir()
	c := &Catalog{Agent: "local", Instructions: "v1"}
	shards, err := Encode(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	writePlain(t, filepath.Join(dir, "0"), shards[0])
	s, err := Open(dir, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Watch(ctx, 10*time.Millisecond)
	c.Instructions = "version two"
	shards, err = Encode(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	writePlain(t, filepath.Join(dir, "0"), shards[0])
	eventually(t, "a reload of plain files", func() bool { return s.Catalog().Instructions == "version two" })
}

func TestConcurrentReads(t *testing.T) {
	f := newFixture(t)
	s, _ := f.open(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, omitted := s.Prompt(1000); omitted != 0 {
					t.Error("Prompt() omitted skills")
				}
				if _, err := s.Use("gamma", false); err != nil {
					t.Errorf("Use() error = %v", err)
				}
				if _, err := s.ReadFile("alpha", "references/guide.md", 0); err != nil {
					t.Errorf("ReadFile() error = %v", err)
				}
			}
		})
	}
	for i := range 20 {
		f.catalog.Instructions = fmt.Sprintf("Version %d.\n", i)
		mountCatalog(t, f.catalogDir, f.catalog, 0)
		if i == 10 {
			// Readers retry once, which covers one swap of a skill's folder
			// in the middle of a read (the kubelet swaps a volume at most
			// every few seconds).
			mountSkill(t, f.skillsDir, f.skills["alpha"], 0)
		}
		if err := s.Reload(); err != nil {
			t.Errorf("Reload() error = %v", err)
		}
	}
	close(stop)
	wg.Wait()
}

// benchCatalog mounts a catalog of n skills and returns its folder.
func benchCatalog(b *testing.B, n int) string {
	dir := b.TempDir()
	mountCatalog(b, dir, bigCatalog(n, 1024), 0)
	return dir
}

func BenchmarkLoad1000(b *testing.B) {
	dir := benchCatalog(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen1000(b *testing.B) {
	dir := benchCatalog(b, 1000)
	skills := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(dir, skills, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPrompt1000(b *testing.B) {
	s, err := Open(benchCatalog(b, 1000), b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Prompt(8000)
	}
}
