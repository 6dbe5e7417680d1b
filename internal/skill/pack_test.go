package skill

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestPackUnpackGolden(t *testing.T) {
	for _, g := range goldenSkills {
		t.Run(g.dir, func(t *testing.T) {
			s, err := ParseDir(filepath.Join("testdata", "skills", g.dir))
			if err != nil {
				t.Fatal(err)
			}
			shards := packChecked(t, s, 0)
			if got, err := Unpack(shards); err != nil || !reflect.DeepEqual(got, s) {
				t.Errorf("Unpack(Pack()) is not exactly the parsed folder: %v", err)
			}
			if len(shards) != 1 {
				t.Errorf("%d shards, want 1", len(shards))
			}
			if got := shards[0].Data[SkillFileName]; got != string(Render(s)) {
				t.Errorf("SKILL.md in shard 0 = %q, want Render()", got)
			}
		})
	}
}

func TestPackEncodings(t *testing.T) {
	s, err := ParseDir(filepath.Join("testdata", "skills", "brand-assets"))
	if err != nil {
		t.Fatal(err)
	}
	shards := packChecked(t, s, 0)
	manifest, err := ParseManifest([]byte(shards[0].Data[ManifestKey]))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		".hidden/notes.txt":   {"_.hidden_notes.txt", EncodingText},
		"assets/glyphs.bin":   {"assets_glyphs.bin", EncodingGzip},
		"assets/logo.png":     {"assets_logo.png", EncodingBinary},
		"assets/palette.json": {"assets_palette.json", EncodingText},
		"scripts/preview.sh":  {"scripts_preview.sh", EncodingText},
	}
	for _, f := range manifest.Files {
		if w := want[f.Path]; f.Key != w[0] || f.Encoding != w[1] {
			t.Errorf("%s: key %q encoding %q, want %q %q", f.Path, f.Key, f.Encoding, w[0], w[1])
		}
	}
	if f, _ := manifest.Lookup("scripts/preview.sh"); !f.Executable {
		t.Error("scripts/preview.sh is not executable in the manifest")
	}
	if manifest.Name != "brand-assets" || manifest.Hash != Hash(s) || manifest.Invocation != InvocationAuto || manifest.Shards != 1 {
		t.Errorf("manifest = %+v", manifest)
	}
	if got := strings.Count(shards[0].Data[ManifestKey], "\n"); got != len(manifest.Files)+2 {
		t.Errorf("manifest has %d lines, want one per file and two more:\n%s", got, shards[0].Data[ManifestKey])
	}
}

// largeSkill is a skill of a 70 KB body and 60 text files of 20 KB.
func largeSkill() *Skill {
	s := &Skill{Name: "office-docs", Description: "Edit office documents.", Invocation: InvocationAuto,
		Body: strings.Repeat("Follow the schema for each part of the document.\n", 70<<10/49)}
	for i := range 60 {
		element := fmt.Sprintf("  <xsd:element name=\"part%02d\" type=\"xsd:string\"/>\n", i)
		s.Files = append(s.Files, File{Path: fmt.Sprintf("references/schemas/part%02d.xsd", i),
			Content: []byte(strings.Repeat(element, 20<<10/len(element)))})
	}
	return s
}

func TestPackLargeBundle(t *testing.T) {
	s := largeSkill()
	total := 0
	for _, f := range s.Files {
		total += len(f.Content)
	}
	if total < 1_150_000 {
		t.Fatalf("bundle is %d bytes, want about 1.2 MB", total)
	}
	if shards := packChecked(t, s, 0); len(shards) != 2 {
		t.Errorf("%d shards of %d bytes, want 2", len(shards), DefaultShardBytes)
	}
	if shards := packChecked(t, s, 300<<10); len(shards) != 5 {
		t.Errorf("%d shards of %d bytes, want 5", len(shards), 300<<10)
	}
}

func TestPackLargeBinaryAssets(t *testing.T) {
	random := make([]byte, 5<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	s := &Skill{Name: "fonts", Description: "Fonts.", Invocation: InvocationAuto, Body: "Use the fonts.\n",
		Files: []File{{Path: "assets/small.bin", Content: random[:1000]}, {Path: "assets/Big Font.ttf", Content: random}}}
	_, err := Pack(s, 0)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("Pack() error = %v, want a *TooLargeError", err)
	}
	for _, want := range []string{"spec.files[1].content", "assets/Big Font.ttf is 5242880 bytes", "spec.bundle.image"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if p := tooLarge.Problem(); p.Field != "spec.files[1].content" || p.Hint == "" {
		t.Errorf("Problem() = %+v", p)
	}

	// A binary asset that compresses well is stored gzip-compressed.
	table := make([]byte, 5<<20)
	for i := range table {
		table[i] = byte(i % 251 % 17)
	}
	s.Files[1].Content = table
	shards := packChecked(t, s, 0)
	manifest, err := ParseManifest([]byte(shards[0].Data[ManifestKey]))
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := manifest.Lookup("assets/Big Font.ttf"); f.Encoding != EncodingGzip || f.Key != "assets_Big-Font.ttf" || f.Size != 5<<20 {
		t.Errorf("manifest entry = %+v, want gzip", f)
	}
}

func TestPackOversizedTextIsCompressed(t *testing.T) {
	text := strings.Repeat("<xsd:element name=\"x\"/>\n", 60<<10)
	s := &Skill{Name: "schemas", Description: "Schemas.", Invocation: InvocationAuto, Body: "x\n",
		Files: []File{{Path: "schema.xsd", Content: []byte(text)}}}
	shards := packChecked(t, s, 0)
	if _, ok := shards[0].BinaryData["schema.xsd"]; !ok {
		t.Errorf("a text file larger than a shard is not compressed: %d shards", len(shards))
	}
	s.Files[0].Executable = true
	if _, err := Pack(s, 0); err == nil || !strings.Contains(err.Error(), "spec.bundle.image") {
		t.Errorf("Pack() of an oversized executable error = %v", err)
	}
}

func TestPackKeys(t *testing.T) {
	long := strings.Repeat("d/", 150) + "file.txt"
	paths := []string{"a/b.md", "a_b.md", "a/b_md", "manifest.json", ".env", "..foo", "x/..bar",
		"résumé.md", "with space.txt", "noext", "no/ext", long, strings.Repeat("d/", 150) + "other.txt"}
	s := &Skill{Name: "k", Description: "d", Invocation: InvocationAuto, Body: "x\n"}
	for _, p := range paths {
		s.Files = append(s.Files, File{Path: p, Content: []byte(p)})
	}
	keys := fileKeys(s.Files)
	want := []string{"a_b.md", "a_b-2.md", "a_b_md", "manifest-2.json", "_.env", "_..foo", "x_..bar",
		"r-sum-.md", "with-space.txt", "noext", "no_ext"}
	if !reflect.DeepEqual(keys[:len(want)], want) {
		t.Errorf("keys = %q, want %q", keys[:len(want)], want)
	}
	seen := map[string]bool{}
	for i, k := range keys {
		if !isConfigMapKey(k) || seen[k] {
			t.Errorf("key %q of %q is invalid or repeated", k, paths[i])
		}
		seen[k] = true
	}
	packChecked(t, s, 0)
}

func TestPackRefuses(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Skill)
		max    int
		want   string
	}{
		{"fields disagree with front matter", func(s *Skill) { s.FrontMatter = "name: other\ndescription: d\n" }, 0, "disagree with its front matter"},
		{"unsafe path", func(s *Skill) { s.Files = []File{{Path: "../x"}} }, 0, `spec.files[0].path "../x"`},
		{"duplicate path", func(s *Skill) { s.Files = []File{{Path: "x"}, {Path: "x"}} }, 0, "spec.files[1].path"},
		{"tool that splits", func(s *Skill) { s.AllowedTools = []string{"a b"} }, 0, "disagree"},
		{"shard over the ConfigMap limit", func(*Skill) {}, MaxConfigMapBytes + 1, "exceeds the ConfigMap limit"},
		{"SKILL.md larger than a shard", func(s *Skill) { s.Body = strings.Repeat("x", 5000) }, 4096, "SKILL.md"},
		{"more than 64 shards", func(s *Skill) {
			for i := range 65 {
				s.Files = append(s.Files, File{Path: fmt.Sprintf("f%02d", i), Content: []byte(strings.Repeat("x", 5000))})
			}
		}, 8192, "more than 64 ConfigMaps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Skill{Name: "p", Description: "d", Invocation: InvocationAuto, Body: "x\n"}
			tt.mutate(s)
			if _, err := Pack(s, tt.max); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Pack() error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPackKeepsWhatSkillMDDoesNotHold(t *testing.T) {
	for _, mode := range []string{InvocationAuto, InvocationExplicit, InvocationDisabled} {
		s := &Skill{Name: "m", Description: "d", Invocation: mode, Body: "x\n", Metadata: map[string]string{"a": "b"},
			AllowedTools: []string{"Read"}}
		packChecked(t, s, 0)
	}
	for _, fm := range []string{"name: m\ndescription: d", "name: m\r\ndescription: d", "name: m"} {
		s := &Skill{Name: "m", Description: "d", Invocation: InvocationAuto, FrontMatter: fm, Body: "x\n"}
		if fm == "name: m" {
			s.Description = ""
		}
		packChecked(t, s, 0)
	}
	s := largeSkill()
	first, err := Pack(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Pack(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Error("Pack() is not deterministic")
	}
}

// packChecked packs s, checks every shard against the ConfigMap rules and
// checks that Unpack gives s back.
func packChecked(t *testing.T, s *Skill, maxShardBytes int) []Shard {
	t.Helper()
	shards, err := Pack(s, maxShardBytes)
	if err != nil {
		t.Fatalf("Pack() error = %v", err)
	}
	limit := maxShardBytes
	if limit <= 0 {
		limit = DefaultShardBytes
	}
	keys := map[string]bool{}
	for i, shard := range shards {
		if shard.Size() > limit {
			t.Errorf("shard %d is %d bytes, more than %d", i, shard.Size(), limit)
		}
		for k := range shard.Data {
			checkKey(t, keys, k)
		}
		for k := range shard.BinaryData {
			checkKey(t, keys, k)
		}
	}
	got, err := Unpack(shards)
	if err != nil {
		t.Fatalf("Unpack() error = %v", err)
	}
	if !sameSkill(got, s) {
		t.Errorf("Unpack(Pack()) differs from the skill:\n%+v\nwant\n%+v", summary(got), summary(s))
	}
	return shards
}

func checkKey(t *testing.T, seen map[string]bool, key string) {
	t.Helper()
	if !isConfigMapKey(key) || seen[key] {
		t.Errorf("key %q is invalid or used twice", key)
	}
	seen[key] = true
}

// summary describes a skill without its file contents, for messages.
func summary(s *Skill) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name %q invocation %q front matter %d bytes body %d bytes tools %q metadata %v",
		s.Name, s.Invocation, len(s.FrontMatter), len(s.Body), s.AllowedTools, s.Metadata)
	for _, f := range s.Files {
		fmt.Fprintf(&b, "\n  %s %d bytes executable %v", f.Path, len(f.Content), f.Executable)
	}
	return b.String()
}
