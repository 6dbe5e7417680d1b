package skill

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SkillFileName is the name of the file that holds a skill's front matter and
// instructions, at the root of its folder.
const SkillFileName = "SKILL.md"

// GitDir is the name under which git keeps a repository's metadata. No
// bundled file has a segment of that name: git reads its config and hooks
// from there and runs the commands they name.
const GitDir = ".git"

// Invocation modes: when a model may use a skill.
const (
	// InvocationAuto lets the model pick the skill on its own (the default).
	InvocationAuto = "Auto"
	// InvocationExplicit uses the skill only when a user names it. In SKILL.md
	// it is written `disable-model-invocation: true`.
	InvocationExplicit = "Explicit"
	// InvocationDisabled keeps the skill out of every catalog. It exists only
	// in the cluster and is never written to SKILL.md.
	InvocationDisabled = "Disabled"
)

// Skill is an Agent Skill: the front matter and body of its SKILL.md and the
// files bundled with it.
type Skill struct {
	// Name is the skill's name, the `name` front-matter key.
	Name string
	// Description says what the skill does and when to use it.
	Description string
	// License names the skill's license or a bundled file holding it.
	License string
	// Compatibility says which environments the skill needs.
	Compatibility string
	// AllowedTools is the `allowed-tools` key split into tools. Separators are
	// spaces and commas outside parentheses, so `Bash(git add:*)` is one tool.
	AllowedTools []string
	// Metadata holds the scalar entries of the `metadata` map as strings.
	// Nested objects other products put there stay in FrontMatter only.
	Metadata map[string]string
	// Invocation is InvocationAuto, InvocationExplicit or InvocationDisabled;
	// empty means InvocationAuto.
	Invocation string
	// FrontMatter is the front matter exactly as written, without the `---`
	// lines. It is authoritative for Render; empty means Render generates it
	// from the fields above.
	FrontMatter string
	// Body is the Markdown after the front matter: the instructions.
	Body string
	// BOM records a UTF-8 byte order mark before the opening `---` line.
	BOM bool
	// Files are the bundled files, sorted by path.
	Files []File
}

// File is a file bundled with a skill.
type File struct {
	// Path is the file's place in the skill folder: relative, clean, with
	// forward slashes.
	Path string
	// Content is the file's bytes.
	Content []byte
	// Executable marks a file with an executable bit, written with mode 0755.
	Executable bool
}

// Problem is one thing wrong with a skill.
type Problem struct {
	// Field is the Kubernetes field path the problem concerns, such as
	// `spec.description` or `spec.files[3].path`.
	Field string
	// Message says what is wrong.
	Message string
	// Hint says how to fix it.
	Hint string
	// Portability marks a warning about a rule of the Agent Skills
	// specification that kubeskills relaxes and other hosts enforce (a long
	// description, keys outside the specification). `kubectl skills validate
	// --strict` reports such a rule as an error of its own.
	Portability bool
}

// String renders the problem as "field: message (hint)".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Field)
	b.WriteString(": ")
	b.WriteString(p.Message)
	if p.Hint != "" {
		b.WriteString(" (")
		b.WriteString(p.Hint)
		b.WriteString(")")
	}
	return b.String()
}

// Report lists every problem Validate found.
type Report struct {
	// Errors stop a skill from being served.
	Errors []Problem
	// Warnings do not stop a skill from being served.
	Warnings []Problem
}

// OK tells whether the report holds no errors.
func (r Report) OK() bool {
	return len(r.Errors) == 0
}

// Err returns nil when the report holds no errors, else an error whose text
// lists every error, one per line.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	errs := make([]error, 0, len(r.Errors))
	for _, p := range r.Errors {
		errs = append(errs, errors.New(p.String()))
	}
	return errors.Join(errs...)
}

func (r *Report) errorf(field, message, hint string) {
	r.Errors = append(r.Errors, Problem{Field: field, Message: message, Hint: hint})
}

func (r *Report) warnf(field, message, hint string) {
	r.Warnings = append(r.Warnings, Problem{Field: field, Message: message, Hint: hint})
}

// portabilityf adds a warning about a rule other hosts enforce.
func (r *Report) portabilityf(field, message, hint string) {
	r.Warnings = append(r.Warnings, Problem{Field: field, Message: message, Hint: hint, Portability: true})
}

// SyntaxError reports a SKILL.md that cannot be split into front matter and
// body, or whose front matter is not a YAML mapping.
type SyntaxError struct {
	// Line is the 1-based line of SKILL.md the problem is on, 0 when unknown.
	Line int
	// Problem says what is wrong and how to fix it.
	Problem Problem
}

// Error renders the problem, with its line when known.
func (e *SyntaxError) Error() string {
	if e.Line > 0 {
		return "line " + strconv.Itoa(e.Line) + ": " + e.Problem.String()
	}
	return e.Problem.String()
}

// invocationOrDefault returns the skill's invocation mode, InvocationAuto
// when unset.
func invocationOrDefault(mode string) string {
	if mode == "" {
		return InvocationAuto
	}
	return mode
}

// sameSkill tells whether two skills hold the same content, treating nil and
// empty lists, maps and file contents alike.
func sameSkill(a, b *Skill) bool {
	if a.Name != b.Name || a.Description != b.Description || a.License != b.License ||
		a.Compatibility != b.Compatibility || a.FrontMatter != b.FrontMatter ||
		a.Body != b.Body || a.BOM != b.BOM ||
		invocationOrDefault(a.Invocation) != invocationOrDefault(b.Invocation) {
		return false
	}
	if !slices.Equal(a.AllowedTools, b.AllowedTools) || !maps.Equal(a.Metadata, b.Metadata) {
		return false
	}
	if len(a.Files) != len(b.Files) {
		return false
	}
	for i := range a.Files {
		fa, fb := a.Files[i], b.Files[i]
		if fa.Path != fb.Path || fa.Executable != fb.Executable || !bytes.Equal(fa.Content, fb.Content) {
			return false
		}
	}
	return true
}

// hashVersion names the layout hashed by Hash; changing the layout changes it.
const hashVersion = "kubeskills.io/skill-hash/v1"

// Hash returns a stable digest of what a skill serves, "sha256:" followed by
// 64 hex digits. It covers the rendered SKILL.md, the invocation mode (empty
// counts as Auto) and every bundled file's path, executable bit and content,
// taken in path order. Two skills that render the same folder and share an
// invocation mode hash the same, whether their front matter was written or
// generated.
func Hash(s *Skill) string {
	h := sha256.New()
	writeItem(h, []byte(hashVersion))
	writeItem(h, []byte(invocationOrDefault(s.Invocation)))
	writeItem(h, Render(s))
	order := make([]int, len(s.Files))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return s.Files[order[a]].Path < s.Files[order[b]].Path })
	for _, i := range order {
		f := s.Files[i]
		writeItem(h, []byte(f.Path))
		if f.Executable {
			writeItem(h, []byte{1})
		} else {
			writeItem(h, []byte{0})
		}
		writeItem(h, f.Content)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// BundledHash is the content hash of a skill whose files come from an OCI
// image (a Skill's spec.bundle): hash, the Hash of its SKILL.md and files,
// which its manifest.json holds, with the image's reference and pull
// policy, so that a new image is new content. A bundled Skill's
// status.contentHash is this, and agents check its mounted shards against
// it.
func BundledHash(hash, image, pullPolicy string) string {
	sum := sha256.Sum256([]byte(hash + "\x00" + image + "\x00" + pullPolicy))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeItem writes one length-prefixed item, so that no two sequences of
// items produce the same stream.
func writeItem(h hash.Hash, item []byte) {
	var size [8]byte
	binary.BigEndian.PutUint64(size[:], uint64(len(item)))
	_, _ = h.Write(size[:])
	_, _ = h.Write(item)
}
