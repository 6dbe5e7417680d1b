package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/kubeletfs"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// testSkill is a skill with every kind of bundled file: an executable
// script, an executable binary, a compressible binary that Pack gzips, text
// large enough to need three shards of 4 KiB, a hidden file and an empty
// file.
func testSkill() *skill.Skill {
	table := bytes.Repeat([]byte{0xff, 0x00, 0xfe, 0x01}, 2000)
	s := &skill.Skill{
		Name:        "pdf-tools",
		Description: "Fill and check PDF forms. Use when a user gives a PDF form.",
		Body:        "# PDF tools\n\nRun `scripts/check.sh FILE` first.\n",
		Files: []skill.File{
			{Path: ".hidden/notes.txt", Content: []byte("hidden\n")},
			{Path: "assets/table.bin", Content: table},
			{Path: "bin/tool", Content: []byte{0x7f, 'E', 'L', 'F', 0xff, 0xfe, 0x00, 0x01}, Executable: true},
			{Path: "references/checklist.md", Content: []byte(strings.Repeat("- [ ] signature present\n", 150))},
			{Path: "references/empty.txt", Content: []byte{}},
			{Path: "references/guide.md", Content: []byte(strings.Repeat("Check every field.\n", 200))},
			{Path: "scripts/check.sh", Content: []byte("#!/bin/sh\necho \"checking $1\"\n"), Executable: true},
		},
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	return s
}

// mountShards writes shards as the kubelet mounts ConfigMap volumes: the
// keys live in a timestamped folder reached through the `..data` link, and
// each key at the top is a link into `..data`.
func mountShards(t *testing.T, shards []skill.Shard) []string {
	t.Helper()
	base := t.TempDir()
	dirs := make([]string, len(shards))
	for i, shard := range shards {
		dirs[i] = filepath.Join(base, fmt.Sprintf("shard-%d", i))
		kubeletfs.MountConfigMap(t, dirs[i], kubeletfs.Keys(shard.Data, shard.BinaryData))
	}
	return dirs
}

// packAndMount packs the skill into shards of 4 KiB and mounts them.
func packAndMount(t *testing.T, s *skill.Skill) ([]skill.Shard, []string) {
	t.Helper()
	shards, err := skill.Pack(s, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return shards, mountShards(t, shards)
}

// readTree returns every file and folder under dir by slash path: its mode,
// and for a file its content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		entry := info.Mode().String()
		if info.Mode().IsRegular() {
			content, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			entry += " " + string(content)
		}
		rel, _ := filepath.Rel(dir, p)
		tree[filepath.ToSlash(rel)] = entry
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// makeWritableAtCleanup lets the test's temporary folder be removed when
// unpack made folders under it read-only and the tests do not run as root.
func makeWritableAtCleanup(t *testing.T, dir string) {
	t.Cleanup(func() {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
	})
}

func TestUnpackSkill(t *testing.T) {
	s := testSkill()
	shards, dirs := packAndMount(t, s)
	manifest, err := skill.ParseManifest([]byte(shards[0].Data[skill.ManifestKey]))
	if err != nil {
		t.Fatal(err)
	}
	encodings := map[string]string{}
	for _, f := range manifest.Files {
		encodings[f.Path] = f.Encoding
	}
	if len(shards) < 3 || encodings["assets/table.bin"] != skill.EncodingGzip || encodings["bin/tool"] != skill.EncodingBinary {
		t.Fatalf("the test skill packs into %d shards with encodings %v; want several shards, gzip and binary", len(shards), encodings)
	}

	dest := filepath.Join(t.TempDir(), "skill")
	makeWritableAtCleanup(t, filepath.Dir(dest))
	var stdout, stderr bytes.Buffer
	args := append([]string{"unpack-skill", "--to", dest}, dirs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("unpack-skill exit code = %d: %s", code, stderr.String())
	}

	want := map[string]string{
		".":                 "dr-xr-xr-x",
		skill.SkillFileName: "-r--r--r-- " + string(skill.Render(s)),
	}
	for _, f := range s.Files {
		mode := "-r--r--r-- "
		if f.Executable {
			mode = "-r-xr-xr-x "
		}
		want[f.Path] = mode + string(f.Content)
		for dir := filepath.Dir(f.Path); dir != "."; dir = filepath.Dir(dir) {
			want[dir] = "dr-xr-xr-x"
		}
	}
	got := readTree(t, dest)
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: got %.60q, want %.60q", p, got[p], w)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected %s in the unpacked skill", p)
		}
	}
	if !strings.Contains(stdout.String(), "pdf-tools") {
		t.Errorf("stdout = %q, want it to name the skill", stdout.String())
	}

	// The unpacked folder reads back as the same skill.
	back, err := skill.ParseDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	if skill.Hash(back) != skill.Hash(s) {
		t.Error("the unpacked folder does not parse back to the packed skill")
	}
}

func TestUnpackSkillRefuses(t *testing.T) {
	cases := []struct {
		name    string
		args    func(t *testing.T, dest string, dirs []string) []string
		errHas  string
		written bool
	}{
		{name: "no destination", errHas: "--to DIR",
			args: func(_ *testing.T, _ string, dirs []string) []string { return dirs }},
		{name: "no shards", errHas: "at least one shard",
			args: func(_ *testing.T, dest string, _ []string) []string { return []string{"--to", dest} }},
		{name: "a shard missing", errHas: "shards but",
			args: func(_ *testing.T, dest string, dirs []string) []string { return []string{"--to", dest, dirs[0]} }},
		{name: "shards out of order", errHas: "failed",
			args: func(_ *testing.T, dest string, dirs []string) []string {
				return append([]string{"--to", dest, dirs[1], dirs[0]}, dirs[2:]...)
			}},
		{name: "shard folder absent", errHas: "no such file",
			args: func(_ *testing.T, dest string, dirs []string) []string {
				return append([]string{"--to", dest, dirs[0], "/nonexistent/shard"}, dirs[2:]...)
			}},
		{name: "shards out of step", errHas: "out of step",
			args: func(t *testing.T, dest string, dirs []string) []string {
				tamper(t, dirs)
				return append([]string{"--to", dest}, dirs...)
			}},
		{name: "destination not empty", errHas: "not empty", written: true,
			args: func(t *testing.T, dest string, dirs []string) []string {
				if err := os.MkdirAll(dest, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dest, "SKILL.md"), []byte("planted"), 0o644); err != nil {
					t.Fatal(err)
				}
				return append([]string{"--to", dest}, dirs...)
			}},
		{name: "unknown flag", errHas: "flag provided but not defined",
			args: func(_ *testing.T, dest string, dirs []string) []string {
				return append([]string{"--to", dest, "--force"}, dirs...)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, dirs := packAndMount(t, testSkill())
			dest := filepath.Join(t.TempDir(), "skill")
			var stdout, stderr bytes.Buffer
			args := append([]string{"unpack-skill"}, tc.args(t, dest, dirs)...)
			if code := run(args, &stdout, &stderr); code != runner.ExitRunnerFailure {
				t.Errorf("exit code = %d, want %d", code, runner.ExitRunnerFailure)
			}
			if !strings.Contains(stderr.String(), tc.errHas) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.errHas)
			}
			if _, err := os.Stat(dest); !tc.written && err == nil {
				t.Errorf("%s was created although unpack failed", dest)
			}
		})
	}
}

// tamper changes one byte of the guide in its mounted shard, keeping its
// size, as a shard from another version of the skill would.
func tamper(t *testing.T, dirs []string) {
	t.Helper()
	for _, dir := range dirs {
		p := filepath.Join(dir, "references_guide.md")
		content, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		content[0] ^= 0x20
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(target, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, content, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no shard holds references_guide.md")
}

// TestUnpackSkillRefusesContentNotApproved: with --expect-hash, only the
// content the run was judged and approved with is laid out. A skill edited
// after the decision exits 125, says which content it found and which was
// approved, and writes nothing.
func TestUnpackSkillRefusesContentNotApproved(t *testing.T) {
	approved := testSkill()
	edited := testSkill()
	edited.Files[0].Content = []byte("changed after the approval\n")
	_, dirs := packAndMount(t, edited)
	dest := filepath.Join(t.TempDir(), "skill")
	var stdout, stderr bytes.Buffer
	args := append([]string{"unpack-skill", "--to", dest, "--expect-hash", skill.Hash(approved)}, dirs...)
	if code := run(args, &stdout, &stderr); code != runner.ExitRunnerFailure {
		t.Fatalf("exit code = %d, want %d", code, runner.ExitRunnerFailure)
	}
	for _, want := range []string{"refusing to unpack skill pdf-tools", skill.Hash(edited), skill.Hash(approved), "judged again"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr = %q, want it to contain %q", stderr.String(), want)
		}
	}
	if _, err := os.Stat(dest); err == nil {
		t.Errorf("%s was created although the content was refused", dest)
	}

	// The approved content itself unpacks.
	_, dirs = packAndMount(t, approved)
	makeWritableAtCleanup(t, filepath.Dir(dest))
	stderr.Reset()
	args = append([]string{"unpack-skill", "--to", dest, "--expect-hash", skill.Hash(approved)}, dirs...)
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code = %d for the approved content: %s", code, stderr.String())
	}
}
