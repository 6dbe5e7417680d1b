package skillapi

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/skill"
)

const sourceSkillMD = `---
name: dns-debug
description: Finds why a pod cannot resolve a name. Use it for NXDOMAIN and timeouts.
allowed-tools: Bash(kubectl get:*) Bash(kubectl exec:*)
x-team: networking
---

# DNS debugging

Run scripts/resolve.sh POD NAME.
`

// TestFromSource reads a source as kustomize writes it: SKILL.md, text
// files in data under keys with "--" for '/', binary files in binaryData.
func TestFromSource(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G', 0xff, 0}
	obj, err := FromSource("dns-debug", "team-a", map[string]string{
		"SKILL.md":                         sourceSkillMD,
		"scripts--resolve.sh":              "kubectl exec \"$1\" -- nslookup \"$2\"\n",
		"references--runbooks--coredns.md": "# CoreDNS\n",
		"check.py":                         "#!/usr/bin/env python3\nprint('ok')\n",
		"notes.md":                         "plain\n",
	}, map[string][]byte{"assets--flow.png": png})
	if err != nil {
		t.Fatal(err)
	}
	if obj.Name != "dns-debug" || obj.Namespace != "team-a" || obj.Kind != "Skill" {
		t.Errorf("object %s %s/%s", obj.Kind, obj.Namespace, obj.Name)
	}
	if !strings.Contains(obj.Spec.FrontMatter, "x-team: networking") || obj.Spec.Instructions != "\n# DNS debugging\n\nRun scripts/resolve.sh POD NAME.\n" {
		t.Errorf("front matter %q, instructions %q", obj.Spec.FrontMatter, obj.Spec.Instructions)
	}
	want := []struct {
		path       string
		executable bool
		binary     bool
	}{
		{"assets/flow.png", false, true},
		{"check.py", true, false},
		{"notes.md", false, false},
		{"references/runbooks/coredns.md", false, false},
		{"scripts/resolve.sh", true, false},
	}
	if len(obj.Spec.Files) != len(want) {
		t.Fatalf("files %+v", obj.Spec.Files)
	}
	for i, w := range want {
		f := obj.Spec.Files[i]
		if f.Path != w.path || f.Executable != w.executable || (f.BinaryContent != nil) != w.binary {
			t.Errorf("files[%d] = %s (executable %t, binary %t), want %+v", i, f.Path, f.Executable, f.BinaryContent != nil, w)
		}
	}
	s, problems := FromObject(obj)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if report := skill.Validate(s, skill.Options{ExpectedName: "dns-debug"}); !report.OK() {
		t.Errorf("the source's skill is invalid: %v", report.Err())
	}
	if !bytes.Equal(skill.Render(s), []byte(sourceSkillMD)) {
		t.Errorf("SKILL.md changed:\n%s", skill.Render(s))
	}
}

// TestFromSourceErrors: a source with no SKILL.md, or one that cannot be
// parsed, holds no Skill, and the error says why.
func TestFromSourceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]string
		want string
	}{
		{name: "no SKILL.md", data: map[string]string{"README.md": "# x\n"}, want: "it has no SKILL.md key"},
		{name: "no front matter", data: map[string]string{"SKILL.md": "# Just a title\n"}, want: "SKILL.md: line 1"},
		{name: "broken front matter", data: map[string]string{"SKILL.md": "---\nname: [x\n---\nBody.\n"}, want: "SKILL.md: line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromSource("x", "default", tc.data, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestSourceKeys: SourcePath undoes SourceKey, and the keys are valid
// ConfigMap keys for the paths of a skill folder.
func TestSourceKeys(t *testing.T) {
	for _, p := range []string{"SKILL.md", "scripts/check.sh", "references/runbooks/dns_v2.md", "assets/a.b.c", "_x/__init__.py"} {
		key := SourceKey(p)
		if SourcePath(key) != p {
			t.Errorf("SourcePath(SourceKey(%q)) = %q", p, SourcePath(key))
		}
		if strings.Contains(key, "/") {
			t.Errorf("key %q holds a slash", key)
		}
	}
}

// TestFromSource_GitMetadataIsRefused: a source ConfigMap whose keys make
// .git/config (".git--config") or a bare repository yields a Skill that
// the operator's checks refuse, naming the file: the Skill controller
// serves no such skill.
func TestFromSource_GitMetadataIsRefused(t *testing.T) {
	for name, data := range map[string]map[string]string{
		"git config": {"SKILL.md": sourceSkillMD, ".git--config": "[core]\n\tfsmonitor = touch /tmp/pwned\n"},
		"nested git": {"SKILL.md": sourceSkillMD, "repo--.git--hooks--post-checkout": "#!/bin/sh\n"},
		"bare repository": {"SKILL.md": sourceSkillMD, "repo--HEAD": "ref: refs/heads/main\n",
			"repo--config": "[core]\n\tfsmonitor = touch /tmp/pwned\n", "repo--objects--x": "", "repo--refs--heads--main": ""},
	} {
		obj, err := FromSource("dns-debug", "team-a", data, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, problems := FromObject(obj)
		if len(problems) > 0 {
			t.Fatalf("%s: %v", name, problems)
		}
		report := skill.Validate(s, skill.Options{ExpectedName: "dns-debug"})
		if report.OK() || !strings.Contains(report.Err().Error(), "git") {
			t.Errorf("%s: want the skill refused for its git metadata, got %v", name, report.Err())
		}
	}
}
