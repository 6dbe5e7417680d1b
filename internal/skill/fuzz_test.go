package skill

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParseSkillMD checks that ParseSkillMD never panics, that whatever it
// accepts Render writes back byte for byte, that reading that again gives the
// same skill, that Validate finds it agrees with its own front matter, and
// that Unpack(Pack()) gives it back.
func FuzzParseSkillMD(f *testing.F) {
	seeds := []string{
		"",
		"---\nname: a\ndescription: b\n---\nbody\n",
		"---\r\nname: a\r\ndescription: b\r\n---\r\nbody\r\n",
		"\ufeff---\nname: a\ndescription: b\n---\n",
		"---\nname: a\n---",
		"---\n- a\n---\nx\n",
		"---\nname: &a x\ndescription: *a\nmetadata: {k: [1, 2], v: 1.0}\n---\n---\n",
		"---\nname: a\nname: b\n---\nx\n",
		"---\n\tname: a\n---\nx\n",
		"---\nallowed-tools: Bash(git add:*), Read\ndisable-model-invocation: true\n---\nx",
		"---\ndescription: |\n  multi\n  line\n---\n\xff\xfe",
		"---\nname: a\r---\nx\n",
		"---\nname: a\n--- \nb: c\n---\nx\n",
	}
	for _, seed := range seeds {
		f.Add([]byte(seed))
	}
	if matches, err := filepath.Glob(filepath.Join("testdata", "skills", "*", SkillFileName)); err == nil {
		for _, m := range matches {
			if data, err := os.ReadFile(m); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSkillMD(data)
		if err != nil {
			return
		}
		out := Render(s)
		if string(out) != string(data) {
			t.Fatalf("Render(ParseSkillMD(x)) = %q, want x = %q", out, data)
		}
		again, err := ParseSkillMD(out)
		if err != nil {
			t.Fatalf("ParseSkillMD(Render()) error = %v", err)
		}
		if !reflect.DeepEqual(again, s) {
			t.Fatalf("ParseSkillMD(Render()) = %+v, want %+v", again, s)
		}
		if r := Validate(s, Options{}); !hasNoFrontMatterDisagreement(r) {
			t.Fatalf("a parsed skill disagrees with its own front matter: %v", r.Errors)
		}
		_ = Hash(s)
		shards, err := Pack(s, 0)
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			return
		}
		if err != nil {
			t.Fatalf("Pack() of a parsed skill error = %v", err)
		}
		unpacked, err := Unpack(shards)
		if err != nil || !sameSkill(unpacked, s) {
			t.Fatalf("Unpack(Pack()) = %+v, %v, want %+v", unpacked, err, s)
		}
	})
}

// hasNoFrontMatterDisagreement tells whether Validate found no difference
// between the front matter and the fields read from it.
func hasNoFrontMatterDisagreement(r Report) bool {
	for _, p := range r.Errors {
		if p.Field == fieldFM && p.Hint == agreeHint {
			return false
		}
	}
	return true
}
