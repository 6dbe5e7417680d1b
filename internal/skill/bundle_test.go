package skill

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kubeskills/kubeskills/internal/kubeletfs"
)

// mountShards writes shards the way the kubelet mounts ConfigMap volumes:
// the keys live in a timestamped folder reached through `..data`, and each
// key at the top is a link into `..data`.
func mountShards(t *testing.T, shards []Shard) []string {
	t.Helper()
	base := t.TempDir()
	dirs := make([]string, len(shards))
	for i, shard := range shards {
		dirs[i] = filepath.Join(base, fmt.Sprintf("shard-%d", i))
		kubeletfs.MountConfigMap(t, dirs[i], kubeletfs.Keys(shard.Data, shard.BinaryData))
	}
	return dirs
}

func TestOpenShardDirs(t *testing.T) {
	s, err := ParseDir(filepath.Join("testdata", "skills", "brand-assets"))
	if err != nil {
		t.Fatal(err)
	}
	s.Files = append(s.Files, File{Path: "references/guide.md", Content: []byte(strings.Repeat("Use the logo.\n", 250))})
	shards, err := Pack(s, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) < 2 {
		t.Fatalf("%d shards, want several", len(shards))
	}
	b, err := OpenShardDirs(mountShards(t, shards))
	if err != nil {
		t.Fatalf("OpenShardDirs() error = %v", err)
	}
	got, err := b.Skill()
	if err != nil {
		t.Fatalf("Skill() error = %v", err)
	}
	if !sameSkill(got, s) {
		t.Errorf("Skill() = %s\nwant %s", summary(got), summary(s))
	}
	expected := []string{SkillFileName}
	for _, f := range s.Files {
		expected = append(expected, f.Path)
	}
	if err := fstest.TestFS(b, expected...); err != nil {
		t.Errorf("the bundle is not a correct fs.FS: %v", err)
	}
	logo, err := fs.ReadFile(b, "assets/logo.png")
	if err != nil || string(logo) != string(s.Files[2].Content) {
		t.Errorf("ReadFile(assets/logo.png) = %d bytes, %v", len(logo), err)
	}
	info, err := fs.Stat(b, "scripts/preview.sh")
	if err != nil || info.Mode().Perm() != 0o555 {
		t.Errorf("Stat(scripts/preview.sh) = %v, %v, want mode 0555", info, err)
	}
}

func TestBundleConfined(t *testing.T) {
	s := &Skill{Name: "c", Description: "d", Invocation: InvocationAuto, Body: "x\n",
		Files: []File{{Path: "docs/a.md", Content: []byte("a")}}}
	shards, err := Pack(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadShards(shards)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../docs/a.md", "/docs/a.md", "docs/../docs/a.md", "./docs/a.md", `docs\a.md`, "manifest.json", "docs_a.md", "docs"} {
		if _, err := b.ReadFile(name); err == nil {
			t.Errorf("ReadFile(%q) succeeded", name)
		}
	}
	if _, err := b.ReadFile("../x"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ReadFile(../x) error = %v, want fs.ErrInvalid", err)
	}
	if _, err := b.ReadFile("missing.md"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing.md) error = %v, want fs.ErrNotExist", err)
	}
	m := b.Manifest()
	if _, ok := m.Lookup("docs/../docs/a.md"); ok {
		t.Error("Lookup() matched an unclean path")
	}
	if f, ok := m.Lookup("docs/a.md"); !ok || f.Key != "docs_a.md" || f.Shard != 0 {
		t.Errorf("Lookup(docs/a.md) = %+v, %v", f, ok)
	}
	if string(b.SkillMD()) != string(Render(s)) {
		t.Error("SkillMD() is not Render()")
	}
}

func TestUnpackErrors(t *testing.T) {
	base := func() *Skill {
		return &Skill{Name: "u", Description: "d", Invocation: InvocationAuto, Body: "x\n", Files: []File{
			{Path: "a.txt", Content: []byte(strings.Repeat("a", 3000))},
			{Path: "b.bin", Content: []byte(strings.Repeat("\xff\x00", 2000))},
			{Path: "c.txt", Content: []byte(strings.Repeat("c", 3000))},
		}}
	}
	pack := func(t *testing.T, s *Skill) []Shard {
		shards, err := Pack(s, 5000)
		if err != nil {
			t.Fatal(err)
		}
		return shards
	}
	setManifest := func(shards []Shard, edit func(string) string) {
		shards[0].Data[ManifestKey] = edit(shards[0].Data[ManifestKey])
	}
	tests := []struct {
		name   string
		breaks func(t *testing.T, shards []Shard) []Shard
		want   string
	}{
		{"no shards", func(*testing.T, []Shard) []Shard { return nil }, "no shards"},
		{"a shard is missing", func(_ *testing.T, s []Shard) []Shard { return s[:1] }, "names 2 shards but 1 were given"},
		{"no manifest", func(_ *testing.T, s []Shard) []Shard { delete(s[0].Data, ManifestKey); return s }, "shard 0 does not hold it"},
		{"no SKILL.md", func(_ *testing.T, s []Shard) []Shard { delete(s[0].Data, SkillFileName); return s }, "key SKILL.md"},
		{"manifest not JSON", func(_ *testing.T, s []Shard) []Shard { s[0].Data[ManifestKey] = "{"; return s }, "failed to parse skill manifest"},
		{"manifest version", func(_ *testing.T, s []Shard) []Shard {
			setManifest(s, func(m string) string { return strings.Replace(m, `"version":1`, `"version":2`, 1) })
			return s
		}, "version 2 is not 1"},
		{"path leaving the skill", func(_ *testing.T, s []Shard) []Shard {
			setManifest(s, func(m string) string { return strings.Replace(m, `"path":"a.txt"`, `"path":"../a.txt"`, 1) })
			return s
		}, "'..' segment"},
		{"key naming the volume's internals", func(_ *testing.T, s []Shard) []Shard {
			setManifest(s, func(m string) string { return strings.Replace(m, `"key":"a.txt"`, `"key":"..data"`, 1) })
			return s
		}, `key "..data" is not a ConfigMap key`},
		{"shard out of range", func(_ *testing.T, s []Shard) []Shard {
			setManifest(s, func(m string) string { return strings.Replace(m, `"shard":1`, `"shard":7`, 1) })
			return s
		}, "shard 7 is not between 0 and 1"},
		{"unknown encoding", func(_ *testing.T, s []Shard) []Shard {
			setManifest(s, func(m string) string { return strings.Replace(m, `"encoding":"text"`, `"encoding":"rot13"`, 1) })
			return s
		}, `encoding "rot13"`},
		{"file missing from its shard", func(_ *testing.T, s []Shard) []Shard { s[1].Data = nil; s[1].BinaryData = nil; return s }, "shard 1 does not hold it"},
		{"size differs", func(_ *testing.T, s []Shard) []Shard {
			setManifest(s, func(m string) string { return strings.Replace(m, `"size":3000`, `"size":2999`, 1) })
			return s
		}, "holds 3000 bytes, the manifest says 2999"},
		{"corrupt gzip", func(_ *testing.T, s []Shard) []Shard {
			for i := range s {
				for k := range s[i].BinaryData {
					s[i].BinaryData[k] = []byte("not gzip")
				}
			}
			return s
		}, "failed to decompress file b.bin"},
		{"shards of two versions", func(t *testing.T, s []Shard) []Shard {
			newer := base()
			newer.Files[2].Content = []byte(strings.Repeat("C", 3000))
			return []Shard{s[0], pack(t, newer)[1]}
		}, "the shards are out of step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shards := pack(t, base())
			if len(shards) != 2 {
				t.Fatalf("%d shards, want 2", len(shards))
			}
			_, err := Unpack(tt.breaks(t, shards))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Unpack() error = %v, want %q", err, tt.want)
			}
		})
	}
}
