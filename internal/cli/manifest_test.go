package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// trickyTexts are strings whose YAML form needs care: indentation
// indicators, chomping, quoting, document markers, line endings.
var trickyTexts = []string{
	"",
	"plain",
	"\n",
	"\n\n\n",
	"no final newline",
	"two final newlines\n\n",
	"  leading spaces\nthen text\n",
	"\tleading tab\n",
	"trailing space \nnext\n",
	"crlf\r\nlines\r\n",
	"lone\rcarriage return",
	"---\nlooks like a document marker\n---\n",
	"...\nend marker\n",
	"# comment-like\n",
	"key: value\n- item\n",
	"yes", "no", "on", "true", "null", "~", "123", "0x1F", "1e3", "2026-11-30",
	"\"quoted\"", "'single'", "@at", "`tick`", "%percent", "&anchor", "*alias", "!tag", "|pipe", ">fold",
	"unicode: é ü 中文 🚀\n",
	"\u00a0non-breaking\u2028line separator\u0085next line\n",
	"\x00nul\x01\x7f control\n",
	"\ufeffbyte order mark\n",
	strings.Repeat("a very long line ", 500) + "\n",
}

func TestEncodeObjectRoundTrip(t *testing.T) {
	for i, text := range trickyTexts {
		obj := &skillsv1.Skill{
			TypeMeta:   metav1.TypeMeta{APIVersion: skillsv1.GroupVersion.String(), Kind: "Skill"},
			ObjectMeta: metav1.ObjectMeta{Name: "tricky", Namespace: "ns", Labels: map[string]string{"a": "yes"}},
			Spec: skillsv1.SkillSpec{
				Description:  "d " + text,
				Instructions: text,
				FrontMatter:  text,
				Metadata:     map[string]string{"k": text},
				AllowedTools: []string{text, "Bash(git:*)"},
				Files: []skillsv1.SkillFile{
					{Path: "a.txt", Content: ptr.To(text)},
					{Path: "b.bin", BinaryContent: append([]byte{0xff}, text...)},
				},
			},
		}
		roundTrip(t, i, obj)
	}
}

// roundTrip encodes obj, reads it back as a manifest and compares.
func roundTrip(t *testing.T, i int, obj *skillsv1.Skill) {
	t.Helper()
	data, err := encodeObject(obj)
	if err != nil {
		t.Fatalf("text %d: %v", i, err)
	}
	docs := splitAndRead(t, data)
	if len(docs) != 1 || docs[0].object == nil {
		t.Fatalf("text %d: read back %+v from:\n%s", i, docs, data)
	}
	want, _ := json.Marshal(obj)
	got, _ := json.Marshal(docs[0].object)
	if !bytes.Equal(want, got) {
		t.Errorf("text %d: round trip changed the object:\nwant %s\ngot  %s\nyaml:\n%s", i, want, got, data)
	}
}

// splitAndRead reads a manifest the way export and validate do.
func splitAndRead(t *testing.T, data []byte) []manifestSkill {
	t.Helper()
	path := filepath.Join(t.TempDir(), "skill.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	skills, err := readManifestFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return skills
}

func FuzzEncodeObject(f *testing.F) {
	for _, text := range trickyTexts {
		f.Add(text, text)
	}
	f.Fuzz(func(t *testing.T, body, content string) {
		if !utf8.ValidString(body) || !utf8.ValidString(content) {
			return // JSON holds only UTF-8 text; other bytes are binaryContent
		}
		obj := &skillsv1.Skill{
			TypeMeta:   metav1.TypeMeta{APIVersion: skillsv1.GroupVersion.String(), Kind: "Skill"},
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz"},
			Spec: skillsv1.SkillSpec{
				Description:  content,
				Instructions: body,
				Files:        []skillsv1.SkillFile{{Path: "f", Content: ptr.To(content)}},
			},
		}
		roundTrip(t, 0, obj)
	})
}

func TestReadManifestFile(t *testing.T) {
	const skill = "apiVersion: kubeskills.io/v1alpha1\nkind: Skill\nmetadata:\n  name: %s\nspec:\n  description: d\n  instructions: b\n"
	stream := strings.Join([]string{
		"# a comment only\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: skipped\n",
		strings.ReplaceAll(skill, "%s", "first"),
		"apiVersion: kubeskills.io/v1alpha1\nkind: Skill\nmetadata:\n  name: typo\nspec:\n  instruction: b\n",
		"apiVersion: kubeskills.io/v2\nkind: Skill\nmetadata:\n  name: future\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: kubeskills.io/v1alpha1\n  kind: Skill\n  metadata:\n    name: in-list\n  spec:\n    description: d\n",
		"kind: Skill\napiVersion: example.com/v1\n",
		": not yaml : [\n",
	}, "---\n")
	skills := splitAndRead(t, []byte(stream))
	var got []string
	for _, s := range skills {
		if s.object != nil {
			got = append(got, "ok "+s.object.Name)
		} else {
			got = append(got, "problem "+s.problem)
		}
		if !strings.Contains(s.source, "skill.yaml#") {
			t.Errorf("source %q does not name the document", s.source)
		}
	}
	want := []string{
		"ok first",
		`problem the Skill does not match the API: unknown field "spec.instruction"`,
		"problem apiVersion kubeskills.io/v2 is not kubeskills.io/v1alpha1, the version this plugin reads",
		"ok in-list",
		"problem the document is not valid YAML",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %d entries", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("entry %d: got %q, want it to start with %q", i, got[i], want[i])
		}
	}
}
