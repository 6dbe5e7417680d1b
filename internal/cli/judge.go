package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
)

// MaxObjectBytes is the largest Skill object, measured as its JSON, that the
// plugin writes or accepts (see skillapi.MaxObjectBytes).
const MaxObjectBytes = skillapi.MaxObjectBytes

// bundleNamePlaceholder in --bundle-image is replaced by the skill's name.
const bundleNamePlaceholder = "{name}"

// Fields of problems that concern the input rather than a Skill field.
const (
	fieldSkillMD  = "SKILL.md"
	fieldManifest = "manifest"
	fieldFiles    = "spec.files"
	fieldBundle   = "spec.bundle.image"
)

// verdict is what the plugin made of one input: a skill folder, or one Skill
// of a manifest file.
type verdict struct {
	// source names the input in messages: a folder, FILE or FILE#N.
	source string
	// object is the Skill object, nil when the input could not be read.
	object *skillsv1.Skill
	// errors stop the input from being imported or exported.
	errors []skill.Problem
	// warnings are shown but stop nothing.
	warnings []skill.Problem
	// bundled tells that spec.bundle.image replaced spec.files because the
	// files did not fit in the object.
	bundled bool
}

// ok tells whether the input has no errors.
func (v *verdict) ok() bool { return len(v.errors) == 0 }

func (v *verdict) fail(field, message, hint string) {
	v.errors = append(v.errors, skill.Problem{Field: field, Message: message, Hint: hint})
}

func (v *verdict) warn(field, message, hint string) {
	v.warnings = append(v.warnings, skill.Problem{Field: field, Message: message, Hint: hint})
}

// report prints every error and warning of a verdict, one per line:
// `SOURCE: FIELD: PROBLEM (HINT)`, with `warning: ` before the field of a
// warning.
func (v *verdict) report(w io.Writer) {
	for _, p := range v.errors {
		_, _ = fmt.Fprintf(w, "%s: %s\n", v.source, p)
	}
	for _, p := range v.warnings {
		_, _ = fmt.Fprintf(w, "%s: warning: %s\n", v.source, p)
	}
}

// judge applies the operator's rules to folders and objects.
type judge struct {
	// namespace is written into imported objects; empty leaves it unset.
	namespace string
	// labels are added to imported objects.
	labels map[string]string
	// bundleImage, when set, is the OCI image that serves the files of a
	// folder too large for the API server; {name} becomes the skill's name.
	bundleImage string
	// maxBodyBytes bounds the instructions, as the operator's flag does.
	maxBodyBytes int
	// unique refuses a second skill of a name already judged, as import
	// does: both would be one object.
	unique bool
	// strict adds the rules of the Agent Skills reference validator
	// (skills-ref), as errors.
	strict bool
	// seen maps each skill name judged so far to its source.
	seen map[string]string
}

// folder judges a skill folder: it parses the folder, validates the skill
// with the folder's name as the expected name, converts it to a Skill object
// and checks that the object fits in the API server. With strict, it also
// applies the reference validator's rules to the folder.
func (j *judge) folder(dir string) *verdict {
	v := &verdict{source: dir}
	if j.strict {
		// Also when SKILL.md cannot be parsed: the reference validator
		// reads the file its own way.
		defer strictFolder(v, dir)
	}
	s, skipped, problems := parseFolder(dir)
	v.errors = append(v.errors, problems...)
	v.warnings = append(v.warnings, gitSkipWarnings(skipped)...)
	if s == nil {
		return v
	}
	expected := filepath.Base(dir)
	if abs, err := filepath.Abs(dir); err == nil {
		expected = filepath.Base(abs)
	}
	report := skill.Validate(s, skill.Options{ExpectedName: expected, MaxBodyBytes: j.maxBodyBytes})
	v.errors = append(v.errors, report.Errors...)
	v.warnings = append(v.warnings, report.Warnings...)
	obj := skillapi.ToObject(s, j.namespace)
	if len(j.labels) > 0 {
		obj.Labels = make(map[string]string, len(j.labels))
		for k, val := range j.labels {
			obj.Labels[k] = val
		}
	}
	v.object = obj
	keepApplicable(v)
	j.checkObject(v, true)
	j.checkUnique(v)
	return v
}

// keepApplicable stores text files holding characters that server-side
// apply cannot carry as binaryContent, which carries any byte, and warns
// about such characters in the SKILL.md fields, which must stay text.
func keepApplicable(v *verdict) {
	spec := &v.object.Spec
	for i, f := range spec.Files {
		if f.Content != nil && strings.ContainsFunc(*f.Content, skill.NotApplySafe) {
			spec.Files[i].BinaryContent, spec.Files[i].Content = []byte(*f.Content), nil
		}
	}
	fields := map[string]string{
		"spec.description": spec.Description, "spec.instructions": spec.Instructions,
		"spec.frontMatter": spec.FrontMatter, "spec.license": spec.License, "spec.compatibility": spec.Compatibility,
	}
	for _, field := range slices.Sorted(maps.Keys(fields)) {
		if i := strings.IndexFunc(fields[field], skill.NotApplySafe); i >= 0 {
			r, _ := utf8.DecodeRuneInString(fields[field][i:])
			v.warn(field, fmt.Sprintf("the text holds the character %U, which `kubectl apply --server-side` refuses or turns into a space", r),
				"remove it from SKILL.md, or apply with `kubectl create`")
		}
	}
}

// object judges a Skill read from a manifest: the conversion, every rule of
// Validate with the object's name as the expected name, and its size.
func (j *judge) object(source string, obj *skillsv1.Skill) *verdict {
	v := &verdict{source: source, object: obj}
	s, problems := skillapi.FromObject(obj)
	v.errors = append(v.errors, problems...)
	report := skill.Validate(s, skill.Options{ExpectedName: obj.Name, MaxBodyBytes: j.maxBodyBytes})
	v.errors = append(v.errors, report.Errors...)
	v.warnings = append(v.warnings, report.Warnings...)
	if j.strict {
		strictObject(v, s, obj.Name)
	}
	if obj.Spec.Bundle != nil {
		if len(obj.Spec.Files) > 0 {
			v.fail(fieldFiles, "spec.files and spec.bundle are both set",
				"put every bundled file in one place: spec.files, or the image of spec.bundle.image")
		}
		if strings.TrimSpace(obj.Spec.Bundle.Image) == "" {
			v.fail(fieldBundle, "the bundle names no image", "set spec.bundle.image to an OCI reference, ideally pinned by digest")
		}
	}
	j.checkObject(v, false)
	j.checkUnique(v)
	return v
}

// parseFolder reads a skill folder. When a bundled file cannot be read (a
// link leaving the folder, a special file), it still parses SKILL.md alone,
// so that its problems are reported too; the returned skill then lacks its
// files. It returns nil when SKILL.md itself cannot be read or parsed, and
// the `.git` entries it left out.
func parseFolder(dir string) (*skill.Skill, []string, []skill.Problem) {
	skillMD := filepath.Join(dir, skill.SkillFileName)
	info, err := os.Lstat(skillMD)
	if err != nil {
		return nil, nil, []skill.Problem{{
			Field:   fieldSkillMD,
			Message: "the folder holds no SKILL.md",
			Hint:    "a skill folder holds a file named exactly SKILL.md; add --recursive to take every skill folder below this one",
		}}
	}
	s, skipped, err := skill.ParseFolder(dir)
	if err == nil {
		return s, skipped, nil
	}
	var syntaxErr *skill.SyntaxError
	if errors.As(err, &syntaxErr) {
		return nil, nil, []skill.Problem{syntaxProblem(syntaxErr)}
	}
	problems := []skill.Problem{{Field: fieldFiles, Message: err.Error()}}
	if !info.Mode().IsRegular() {
		return nil, nil, problems
	}
	data, readErr := os.ReadFile(skillMD)
	if readErr != nil {
		return nil, nil, problems
	}
	s, parseErr := skill.ParseSkillMD(data)
	if parseErr != nil {
		if errors.As(parseErr, &syntaxErr) {
			problems = append(problems, syntaxProblem(syntaxErr))
		}
		return nil, nil, problems
	}
	return s, nil, problems
}

// syntaxProblem turns a SKILL.md syntax error into a problem naming its line.
func syntaxProblem(err *skill.SyntaxError) skill.Problem {
	p := err.Problem
	if err.Line > 0 {
		p.Message = fmt.Sprintf("line %d of SKILL.md: %s", err.Line, p.Message)
	}
	return p
}

// checkObject checks what Validate cannot see: that the conversion back
// from the object loses nothing, and that the object fits in the API server
// and its content in ConfigMaps. For an imported folder whose files do not
// fit, it moves them to spec.bundle.image when --bundle-image is set.
func (j *judge) checkObject(v *verdict, imported bool) {
	obj := v.object
	if imported {
		if _, problems := skillapi.FromObject(obj); len(problems) > 0 {
			v.errors = append(v.errors, problems...)
		}
	}
	size := objectSize(obj)
	if size > MaxObjectBytes && imported && j.compress(v) {
		obj, size = v.object, objectSize(v.object)
	}
	if size > MaxObjectBytes {
		j.tooLarge(v, size, imported)
		return
	}
	if obj.Spec.Bundle != nil || !v.ok() {
		return
	}
	s, _ := skillapi.FromObject(obj)
	if _, err := skill.Pack(s, 0); err != nil {
		var tooLarge *skill.TooLargeError
		if !errors.As(err, &tooLarge) {
			v.fail(fieldFiles, err.Error(), "")
			return
		}
		if imported && j.bundleImage != "" {
			j.useBundle(v)
			return
		}
		p := tooLarge.Problem()
		p.Hint += bundleFlagHint(imported)
		v.errors = append(v.errors, p)
	}
}

// compress gzip-compresses the largest files of an imported object until it
// fits, and reports whether it does; the operator serves the original bytes.
func (j *judge) compress(v *verdict) bool {
	before := objectSize(v.object)
	trial := v.object.DeepCopy()
	fits, err := skillapi.Fit(trial, MaxObjectBytes)
	if err != nil || !fits {
		return false
	}
	compressed := 0
	for _, f := range trial.Spec.Files {
		if f.Compression != "" {
			compressed++
		}
	}
	v.object = trial
	v.warn(fieldFiles, fmt.Sprintf("%s compressed with gzip so the Skill fits in the API server (%d bytes as JSON, down from %d)",
		pluralize(compressed, "bundled file"), objectSize(trial), before),
		"the operator serves the original bytes; export gives them back")
	return true
}

// tooLarge handles an object larger than MaxObjectBytes.
func (j *judge) tooLarge(v *verdict, size int, imported bool) {
	obj := v.object
	bare := obj.DeepCopy()
	bare.Spec.Files = nil
	bare.Spec.Bundle = &skillsv1.SkillBundle{Image: j.bundleImage}
	if bareSize := objectSize(bare); bareSize > MaxObjectBytes {
		v.fail("spec.instructions", fmt.Sprintf(
			"the Skill object would be %d bytes as JSON even without its bundled files, more than the %d bytes the API server stores",
			bareSize, MaxObjectBytes),
			"move reference material out of SKILL.md into bundled files, and serve those from an OCI image with spec.bundle.image")
		return
	}
	if imported && j.bundleImage != "" {
		j.useBundle(v)
		return
	}
	v.fail(fieldFiles, fmt.Sprintf(
		"the Skill object would be %d bytes as JSON (%d of them for %s%s), more than the %d bytes the API server stores",
		size, size-objectSize(withoutFiles(obj)), pluralize(len(obj.Spec.Files), "bundled file"), escapeNote(obj), MaxObjectBytes),
		"serve the files from an OCI image instead of spec.files: build an image whose root holds the skill folder's files, "+
			"push it, and set spec.bundle.image to its reference"+bundleFlagHint(imported))
}

// bundleFlagHint adds to a hint how import writes spec.bundle.image.
func bundleFlagHint(imported bool) string {
	if !imported {
		return ""
	}
	return "; `kubectl skills import --bundle-image REF` writes it for you"
}

// useBundle replaces the object's files with spec.bundle.image.
func (j *judge) useBundle(v *verdict) {
	obj := v.object
	image := strings.ReplaceAll(j.bundleImage, bundleNamePlaceholder, obj.Name)
	files, bytes := len(obj.Spec.Files), 0
	for _, f := range obj.Spec.Files {
		bytes += len(f.BinaryContent)
		if f.Content != nil {
			bytes += len(*f.Content)
		}
	}
	obj.Spec.Files = nil
	obj.Spec.Bundle = &skillsv1.SkillBundle{Image: image}
	v.bundled = true
	v.warn(fieldBundle, fmt.Sprintf(
		"the %s (%d bytes) are too large for the Skill object and are left out of it: the image %s must hold them at its root",
		pluralize(files, "bundled file"), bytes, image),
		"build and push that image from the skill folder, for example with a Containerfile `FROM scratch` + `COPY . /`")
}

// checkUnique refuses a second skill of the same name when j.unique is set.
func (j *judge) checkUnique(v *verdict) {
	if !j.unique || v.object == nil || v.object.Name == "" {
		return
	}
	if j.seen == nil {
		j.seen = map[string]string{}
	}
	if first, dup := j.seen[v.object.Name]; dup {
		v.fail("metadata.name", fmt.Sprintf("the skill %q is also read from %s", v.object.Name, first),
			"give each skill its own name")
		return
	}
	j.seen[v.object.Name] = v.source
}

// objectSize is the size of an object as JSON, as the API server stores it.
func objectSize(obj *skillsv1.Skill) int {
	data, err := json.Marshal(obj)
	if err != nil {
		return 0
	}
	return len(data)
}

// escapeNote explains, when it matters, that JSON writes each '<', '>' and
// '&' of the text files as six bytes.
func escapeNote(obj *skillsv1.Skill) string {
	escaped, size := 0, 0
	for _, f := range obj.Spec.Files {
		if f.Content != nil {
			escaped += strings.Count(*f.Content, "<") + strings.Count(*f.Content, ">") + strings.Count(*f.Content, "&")
			size += len(*f.Content)
		}
	}
	if escaped*5 < size/20 {
		return ""
	}
	return fmt.Sprintf(", where each of the %d '<', '>' and '&' of their text takes 6 bytes", escaped)
}

func withoutFiles(obj *skillsv1.Skill) *skillsv1.Skill {
	bare := obj.DeepCopy()
	bare.Spec.Files = nil
	return bare
}
