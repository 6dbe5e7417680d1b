package skillapi

import (
	"bytes"
	"strings"
	"testing"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
)

func sample() *skill.Skill {
	return &skill.Skill{
		Name:         "pvc-resize",
		Description:  "Grows a PersistentVolumeClaim safely.",
		AllowedTools: []string{"Bash(kubectl get *)"},
		Metadata:     map[string]string{"owner": "storage"},
		Invocation:   skill.InvocationExplicit,
		Body:         "# Resize\n\nCheck the StorageClass allows expansion.\n",
		Files: []skill.File{
			{Path: "assets/diagram.png", Content: []byte{0x89, 'P', 'N', 'G', 0xff, 0}},
			{Path: "scripts/resize.sh", Content: []byte("#!/bin/sh\nkubectl patch pvc \"$1\"\n"), Executable: true},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	want := sample()
	obj := ToObject(want, "storage")
	if obj.Spec.Files[0].BinaryContent == nil || obj.Spec.Files[1].Content == nil {
		t.Fatalf("binary files must go to binaryContent, text to content: %+v", obj.Spec.Files)
	}
	got, problems := FromObject(obj)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if skill.Hash(got) != skill.Hash(want) {
		t.Fatalf("round trip changed the skill:\n got %+v\nwant %+v", got, want)
	}
}

// TestFit compresses a skill too large for one API object until it fits,
// and FromObject gives the original bytes back.
func TestFit(t *testing.T) {
	want := sample()
	for i := range 40 {
		want.Files = append(want.Files, skill.File{
			Path:    "references/schema-" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + ".xsd",
			Content: []byte(strings.Repeat("<element name=\"field\" type=\"string\"/>\n", 1000)),
		})
	}
	obj := ToObject(want, "default")
	if size, _ := ObjectBytes(obj); size <= MaxObjectBytes {
		t.Fatalf("test skill is %d bytes, want it larger than %d", size, MaxObjectBytes)
	}
	fits, err := Fit(obj, MaxObjectBytes)
	if err != nil || !fits {
		t.Fatalf("Fit = %t, %v", fits, err)
	}
	if size, _ := ObjectBytes(obj); size > MaxObjectBytes {
		t.Fatalf("object is %d bytes after Fit", size)
	}
	got, problems := FromObject(obj)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if skill.Hash(got) != skill.Hash(want) {
		t.Fatal("compressed files do not decompress to the originals")
	}
}

// TestFitIncompressible: bytes that do not compress cannot be made to fit.
func TestFitIncompressible(t *testing.T) {
	s := sample()
	noise := make([]byte, 2<<20)
	x := uint32(1)
	for i := range noise {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		noise[i] = byte(x)
	}
	s.Files = append(s.Files, skill.File{Path: "assets/font.ttf", Content: noise})
	fits, err := Fit(ToObject(s, "default"), MaxObjectBytes)
	if err != nil || fits {
		t.Fatalf("Fit = %t, %v; want false, nil", fits, err)
	}
}

func TestDecompressionProblems(t *testing.T) {
	bomb, err := gzipBytes(bytes.Repeat([]byte{0}, MaxDecompressedBytes+1))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		file skillsv1.SkillFile
		want string
	}{
		{"not gzip", skillsv1.SkillFile{Path: "a", BinaryContent: []byte("plain"), Compression: skillsv1.CompressionGzip}, "cannot be decompressed as gzip"},
		{"bomb", skillsv1.SkillFile{Path: "a", BinaryContent: bomb, Compression: skillsv1.CompressionGzip}, "expands to more than"},
		{"compressed text", skillsv1.SkillFile{Path: "a", Content: new(string), Compression: skillsv1.CompressionGzip}, "not in binaryContent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := ToObject(sample(), "default")
			obj.Spec.Files = []skillsv1.SkillFile{tc.file}
			_, problems := FromObject(obj)
			if len(problems) != 1 || !strings.Contains(problems[0].Message, tc.want) || problems[0].Field == "" {
				t.Fatalf("problems = %+v, want one containing %q", problems, tc.want)
			}
		})
	}
}
