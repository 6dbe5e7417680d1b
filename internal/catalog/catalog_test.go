package catalog

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/skill"
)

// sorted returns a copy of c with entries in name order and empty
// AllowedTools as nil, as Load gives it back.
func sorted(c *Catalog) *Catalog {
	out := &Catalog{Agent: c.Agent, Instructions: c.Instructions}
	for _, i := range nameOrder(c.Skills) {
		e := c.Skills[i]
		if len(e.AllowedTools) == 0 {
			e.AllowedTools = nil
		}
		out.Skills = append(out.Skills, e)
	}
	return out
}

func TestEncodeLoadRoundTrip(t *testing.T) {
	small := &Catalog{Agent: "support", Instructions: "Be <brief> & kind.\nÜberall.\n", Skills: []Entry{
		{Name: "zeta", Description: "Last <b>&</b> \"quoted\".", Invocation: InvocationExplicit, ContentHash: "sha256:02", Shards: 2,
			AllowedTools: []string{"Bash(git add:*)", "Read"}},
		{Name: "alpha", Description: "Première.", Invocation: InvocationAuto, ContentHash: "sha256:01", Shards: 1, AllowedTools: []string{}},
	}}
	tests := []struct {
		name          string
		catalog       *Catalog
		maxShardBytes int
		minShards     int
		maxShards     int
	}{
		{name: "no skills", catalog: &Catalog{Agent: "empty"}, minShards: 1, maxShards: 1},
		{name: "one shard", catalog: small, minShards: 1, maxShards: 1},
		{name: "1000 skills of 1 KiB", catalog: bigCatalog(1000, 1024), minShards: 2, maxShards: 2},
		{name: "1000 skills in small shards", catalog: bigCatalog(1000, 1024), maxShardBytes: 160_000, minShards: 8, maxShards: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shards, err := Encode(tt.catalog, tt.maxShardBytes)
			if err != nil {
				t.Fatalf("Encode() error = %v", err)
			}
			if len(shards) < tt.minShards || len(shards) > tt.maxShards {
				t.Errorf("%d shards, want %d to %d", len(shards), tt.minShards, tt.maxShards)
			}
			checkShards(t, tt.catalog, shards, tt.maxShardBytes)
			want := sorted(tt.catalog)
			for _, layout := range []string{"kubelet", "plain"} {
				dir := t.TempDir()
				for i, data := range shards {
					shardDir := filepath.Join(dir, strconv.Itoa(i))
					if layout == "kubelet" {
						mountVolume(t, shardDir, textKeys(data))
					} else {
						writePlain(t, shardDir, data)
					}
				}
				got, err := Load(dir)
				if err != nil {
					t.Fatalf("Load(%s) error = %v", layout, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Load(%s) did not give the encoded catalog back", layout)
				}
				if got.Revision() != tt.catalog.Revision() {
					t.Errorf("Load(%s).Revision() = %s, want %s", layout, got.Revision(), tt.catalog.Revision())
				}
			}
		})
	}
}

// checkShards checks the size, header and keys of each encoded shard.
func checkShards(t *testing.T, c *Catalog, shards []map[string]string, maxShardBytes int) {
	t.Helper()
	if maxShardBytes <= 0 {
		maxShardBytes = skill.DefaultShardBytes
	}
	total := 0
	for i, data := range shards {
		size := 0
		for k, v := range data {
			size += len(k) + len(v)
		}
		if size > maxShardBytes {
			t.Errorf("shard %d is %d bytes, more than %d", i, size, maxShardBytes)
		}
		wantKeys := []string{CatalogKey}
		if i == 0 {
			wantKeys = []string{CatalogKey, InstructionsKey}
			if data[InstructionsKey] != c.Instructions {
				t.Errorf("shard 0 instructions = %q, want %q", data[InstructionsKey], c.Instructions)
			}
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range data {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(keys, wantKeys) {
			t.Errorf("shard %d keys = %v, want %v", i, keys, wantKeys)
		}
		shard, err := decodeShard([]byte(data[CatalogKey]), i)
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		if shard.Revision != c.Revision() || shard.Shard != i || shard.Shards != len(shards) || shard.Agent != c.Agent {
			t.Errorf("shard %d header = %+v, want revision %s, shard %d of %d", i, shard.shardHeader, c.Revision(), i, len(shards))
		}
		if lines := strings.Count(data[CatalogKey], "\n"); len(shard.Skills) > 0 && lines != len(shard.Skills)+2 {
			t.Errorf("shard %d has %d lines for %d skills, want one line per skill", i, lines, len(shard.Skills))
		}
		total += len(shard.Skills)
	}
	if total != len(c.Skills) {
		t.Errorf("the shards hold %d skills, want %d", total, len(c.Skills))
	}
}

// writePlain writes keys as plain files, as a local run does.
func writePlain(t testing.TB, dir string, data map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEncodeTooLarge(t *testing.T) {
	c := bigCatalog(1000, 1024)
	const shardBytes = 100_000
	_, err := Encode(c, shardBytes)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("Encode() error = %v, want a *TooLargeError", err)
	}
	if tooLarge.Skills != 1000 || tooLarge.Fit <= 0 || tooLarge.Fit >= 1000 || tooLarge.Agent != "support" {
		t.Fatalf("TooLargeError = %+v", tooLarge)
	}
	for _, want := range []string{"1000 skills", "only " + strconv.Itoa(tooLarge.Fit) + " of them fit", "8 ConfigMaps"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	fit := &Catalog{Agent: c.Agent, Instructions: c.Instructions, Skills: c.Skills[:tooLarge.Fit]}
	if shards, err := Encode(fit, shardBytes); err != nil || len(shards) != MaxShards {
		t.Errorf("Encode(first %d skills) = %d shards, %v; want %d shards", tooLarge.Fit, len(shards), err, MaxShards)
	}
	fit.Skills = c.Skills[:tooLarge.Fit+1]
	if _, err := Encode(fit, shardBytes); !errors.As(err, &tooLarge) {
		t.Errorf("Encode(first %d skills) error = %v, want a *TooLargeError", len(fit.Skills), err)
	}
}

func TestEncodeRefuses(t *testing.T) {
	good := Entry{Name: "good", Description: "Good.", Invocation: InvocationAuto, ContentHash: "sha256:01", Shards: 1}
	with := func(change func(e *Entry)) *Catalog {
		e := good
		change(&e)
		return &Catalog{Agent: "a", Skills: []Entry{good, e}}
	}
	tests := []struct {
		name          string
		catalog       *Catalog
		maxShardBytes int
		want          string
	}{
		{"no agent", &Catalog{}, 0, "agent name is empty"},
		{"shard over the ConfigMap limit", &Catalog{Agent: "a"}, skill.MaxConfigMapBytes + 1, "exceeds the ConfigMap limit"},
		{"traversal in a name", with(func(e *Entry) { e.Name = "../etc" }), 0, "is not 1 to 64"},
		{"uppercase name", with(func(e *Entry) { e.Name = "Good" }), 0, "is not 1 to 64"},
		{"double hyphen", with(func(e *Entry) { e.Name = "a--b" }), 0, "is not 1 to 64"},
		{"trailing hyphen", with(func(e *Entry) { e.Name = "a-" }), 0, "is not 1 to 64"},
		{"long name", with(func(e *Entry) { e.Name = strings.Repeat("a", 65) }), 0, "is not 1 to 64"},
		{"empty name", with(func(e *Entry) { e.Name = "" }), 0, "is not 1 to 64"},
		{"disabled", with(func(e *Entry) { e.Name, e.Invocation = "off", skill.InvocationDisabled }), 0, `invocation "Disabled"`},
		{"no hash", with(func(e *Entry) { e.Name, e.ContentHash = "nohash", "" }), 0, "content hash is empty"},
		{"no shards", with(func(e *Entry) { e.Name, e.Shards = "none", 0 }), 0, "0 shards"},
		{"too many skill shards", with(func(e *Entry) { e.Name, e.Shards = "many", skill.MaxShards+1 }), 0, "65 shards"},
		{"listed twice", with(func(*Entry) {}), 0, "skill good is listed twice"},
		{"instructions too large", &Catalog{Agent: "a", Instructions: strings.Repeat("x", 5000)}, 4096, "instructions (5000 bytes) do not fit"},
		{"entry too large", with(func(e *Entry) { e.Name, e.Description = "huge", strings.Repeat("d", 5000) }), 4096, "entry of skill huge"},
		{"bundle image too long", with(func(e *Entry) { e.Name, e.BundleImage = "long", strings.Repeat("r", 1025) }), 0,
			"bundle image is 1025 bytes"},
		{"unknown pull policy", with(func(e *Entry) { e.Name, e.BundleImage, e.BundlePullPolicy = "pp", "r/i:1", "Sometimes" }), 0,
			`bundle pull policy "Sometimes"`},
		{"pull policy without image", with(func(e *Entry) { e.Name, e.BundlePullPolicy = "pp", "Always" }), 0,
			"pull policy is set without a bundle image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Encode(tt.catalog, tt.maxShardBytes)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Encode() error = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestRevision(t *testing.T) {
	base := func() *Catalog {
		return &Catalog{Agent: "support", Instructions: "Be brief.", Skills: []Entry{
			{Name: "a", Description: "A.", Invocation: InvocationAuto, ContentHash: "sha256:01", Shards: 1, AllowedTools: []string{"x"}},
			{Name: "b", Description: "B.", Invocation: InvocationExplicit, ContentHash: "sha256:02", Shards: 1},
		}}
	}
	rev := base().Revision()
	if !strings.HasPrefix(rev, "sha256:") || len(rev) != len("sha256:")+64 {
		t.Fatalf("Revision() = %q, want sha256: and 64 hex digits", rev)
	}
	same := []func(c *Catalog){
		func(c *Catalog) { c.Skills[0], c.Skills[1] = c.Skills[1], c.Skills[0] },
		func(c *Catalog) { c.Skills[1].AllowedTools = []string{} },
	}
	for i, change := range same {
		c := base()
		change(c)
		if got := c.Revision(); got != rev {
			t.Errorf("same change %d: Revision() = %s, want %s", i, got, rev)
		}
	}
	different := map[string]func(c *Catalog){
		"agent":        func(c *Catalog) { c.Agent = "other" },
		"instructions": func(c *Catalog) { c.Instructions = "Be long." },
		"name":         func(c *Catalog) { c.Skills[0].Name = "c" },
		"description":  func(c *Catalog) { c.Skills[0].Description = "A!" },
		"invocation":   func(c *Catalog) { c.Skills[0].Invocation = InvocationExplicit },
		"hash":         func(c *Catalog) { c.Skills[0].ContentHash = "sha256:03" },
		"shards":       func(c *Catalog) { c.Skills[0].Shards = 2 },
		"tools":        func(c *Catalog) { c.Skills[0].AllowedTools = []string{"y"} },
		"tool split":   func(c *Catalog) { c.Skills[0].AllowedTools = []string{"", "x"} },
		"boundary":     func(c *Catalog) { c.Agent, c.Instructions = "supportBe", " brief." },
		"one skill":    func(c *Catalog) { c.Skills = c.Skills[:1] },
		"bundle image": func(c *Catalog) { c.Skills[0].BundleImage = "registry.example/a:1" },
		"bundle pull policy": func(c *Catalog) {
			c.Skills[0].BundleImage, c.Skills[0].BundlePullPolicy = "registry.example/a:1", "Always"
		},
	}
	for name, change := range different {
		c := base()
		change(c)
		if c.Revision() == rev {
			t.Errorf("changing the %s does not change the revision", name)
		}
	}
}

func TestRevisionWithoutBundlesIsUnchanged(t *testing.T) {
	// Revisions computed before bundles existed: an upgrade must not rewrite
	// the catalogs of agents that use no bundle.
	c := &Catalog{Agent: "support", Instructions: "Be brief.", Skills: []Entry{
		{Name: "a", Description: "A.", Invocation: InvocationAuto, ContentHash: "sha256:01", Shards: 1, AllowedTools: []string{"x"}},
		{Name: "b", Description: "B.", Invocation: InvocationExplicit, ContentHash: "sha256:02", Shards: 1},
	}}
	if got, want := c.Revision(), "sha256:51a386690c873633dba65143ebf67ce030517c4437c3a24d2d7e2bfcc28c2880"; got != want {
		t.Errorf("Revision() = %s, want %s", got, want)
	}
	if got, want := (&Catalog{Agent: "empty"}).Revision(), "sha256:00cde93a0083430d2fbda8135e6fff5b96b129b6ec45f149aa35cb25827b22cf"; got != want {
		t.Errorf("Revision() of an empty catalog = %s, want %s", got, want)
	}
	// A bundle on either skill gives a revision of its own.
	onA, onB := *c, *c
	onA.Skills = slices.Clone(c.Skills)
	onB.Skills = slices.Clone(c.Skills)
	onA.Skills[0].BundleImage = "registry.example/x:1"
	onB.Skills[1].BundleImage = "registry.example/x:1"
	if onA.Revision() == onB.Revision() || onA.Revision() == c.Revision() {
		t.Error("moving a bundle from one skill to another keeps the revision")
	}
}

func TestLoadRefuses(t *testing.T) {
	a := bigCatalog(300, 1024)
	b := bigCatalog(300, 1024)
	b.Skills[299].Description = "Changed."
	const shardBytes = 200_000
	encode := func(c *Catalog) []map[string]string {
		shards, err := Encode(c, shardBytes)
		if err != nil || len(shards) < 2 {
			t.Fatalf("Encode() = %d shards, %v; want several", len(shards), err)
		}
		return shards
	}
	sa, sb := encode(a), encode(b)
	if len(sa) != 2 || len(sb) != 2 {
		t.Fatalf("the two catalogs have %d and %d shards, want 2", len(sa), len(sb))
	}
	edit := func(data map[string]string, key, old, new string) map[string]string {
		out := map[string]string{}
		for k, v := range data {
			out[k] = v
		}
		out[key] = strings.Replace(out[key], old, new, 1)
		return out
	}
	bad := []Entry{{Name: "../etc", Description: "x", Invocation: InvocationAuto, ContentHash: "sha256:01", Shards: 1}}
	badRevision := (&Catalog{Agent: "a", Skills: bad}).Revision()
	handMade, _ := json.Marshal(shardFile{shardHeader: shardHeader{Version: 1, Agent: "a", Revision: badRevision, Shard: 0, Shards: 1}, Skills: bad})
	type shards = map[int]map[string]string
	tests := []struct {
		name   string
		shards shards
		want   string
	}{
		{"nothing mounted", nil, "shard 0 has no catalog.json"},
		{"missing shard", shards{0: sa[0]}, "shard 1 of 2 is missing"},
		{"mix of revisions", shards{0: sa[0], 1: sb[1]}, "the catalog ConfigMaps are mid-update"},
		{"shard in the wrong folder", shards{0: sa[1], 1: sa[1]}, "it says it is shard 1"},
		{"content edited", shards{0: edit(sa[0], CatalogKey, "skill-0000 to", "skill-0000 TO"), 1: sa[1]}, "its content hashes to"},
		{"instructions edited", shards{0: edit(sa[0], InstructionsKey, "helpful", "unhelpful"), 1: sa[1]}, "its content hashes to"},
		{"no instructions", shards{0: {CatalogKey: sa[0][CatalogKey]}, 1: sa[1]}, "failed to read the instructions"},
		{"newer format", shards{0: edit(sa[0], CatalogKey, `"version":1`, `"version":2`), 1: sa[1]}, "format version 2 is not 1"},
		{"not JSON", shards{0: {CatalogKey: "{", InstructionsKey: ""}}, "failed to parse catalog.json"},
		{"unsafe name", shards{0: {CatalogKey: string(handMade), InstructionsKey: ""}}, `skill name "../etc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, data := range tt.shards {
				mountVolume(t, filepath.Join(dir, strconv.Itoa(i)), textKeys(data))
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load() error = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestLoadIgnoresAbsentAndStaleShards(t *testing.T) {
	old := bigCatalog(300, 1024)
	oldShards, err := Encode(old, 200_000)
	if err != nil {
		t.Fatal(err)
	}
	c := &Catalog{Agent: "support", Skills: old.Skills[:2]}
	dir := t.TempDir()
	mountCatalog(t, dir, c, 0)
	// A leftover shard of a larger catalog, then empty optional volumes.
	mountVolume(t, filepath.Join(dir, "1"), textKeys(oldShards[1]))
	for i := 2; i < MaxShards; i++ {
		mountVolume(t, filepath.Join(dir, strconv.Itoa(i)), nil)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	if got.Revision() != c.Revision() {
		t.Errorf("Load() gave revision %s, want %s", got.Revision(), c.Revision())
	}
}

func TestLoadRefusesDataLinkOutside(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	writePlain(t, outside, map[string]string{CatalogKey: "{}", InstructionsKey: ""})
	dir := filepath.Join(base, "catalog")
	if err := os.MkdirAll(filepath.Join(dir, "0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../outside", filepath.Join(dir, "0", dataLink)); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not a folder beside it") {
		t.Errorf("Load() error = %v, want one about the ..data link", err)
	}
}

func FuzzDecodeShard(f *testing.F) {
	shards, err := Encode(bigCatalog(3, 40), 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(shards[0][CatalogKey]))
	f.Add([]byte(`{"version":1,"agent":"a","revision":"sha256:","shard":0,"shards":1,"skills":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		shard, err := decodeShard(data, 0)
		if err != nil {
			return
		}
		c := &Catalog{Agent: shard.Agent, Skills: shard.Skills}
		if checkSkills(c.Skills) != nil {
			return
		}
		again, err := Encode(c, 0)
		if err != nil {
			t.Fatalf("Encode() of a decoded catalog error = %v", err)
		}
		back, err := decodeShard([]byte(again[0][CatalogKey]), 0)
		if err != nil || !reflect.DeepEqual(sorted(&Catalog{Skills: back.Skills}).Skills, sorted(c).Skills) {
			t.Fatalf("decode(Encode(decode(x))) differs: %v", err)
		}
	})
}
