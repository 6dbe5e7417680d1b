// Package skillsref judges a skill by the rules of the Agent Skills
// reference validator, as the npm package skills-ref (Version) applies
// them: `skills-ref validate DIR`. Hosts that check skills that way refuse
// what it refuses, so `kubectl skills validate --strict` reports these
// rules as errors.
//
// The rules, each a Rule:
//
//   - the folder holds SKILL.md, or else skill.md;
//   - the file starts with "---", and the front matter is the text up to the
//     next "---" anywhere in the file, even inside a line;
//   - the front matter is YAML as js-yaml 4 reads it (see jsyaml.go), and a
//     mapping (an empty one counts as a mapping without keys);
//   - its keys are among the six of the specification: name, description,
//     license, compatibility, metadata, allowed-tools;
//   - name is present; its value, written as text the way JavaScript's
//     String() writes any value (an empty value is "null", a list is its
//     items joined by commas), trimmed and NFKC-normalised, is not empty, at
//     most 64 UTF-16 code units, lowercase, neither starts nor ends with a
//     hyphen, has no two hyphens in a row, holds only letters of a few
//     scripts (Latin, Cyrillic, CJK, combining marks), digits and hyphens,
//     and equals the NFKC-normalised name of the folder;
//   - description is present, not blank, and at most 1024 UTF-16 code units;
//   - compatibility, when present, is text of at most 500 UTF-16 code units.
//
// Nothing else is checked: license, metadata and allowed-tools may hold
// anything, and the body may be empty.
//
// The file is decoded as Node.js decodes UTF-8 (a byte order mark stays, so
// the file does not start with "---"). The YAML syntax is read by
// go.yaml.in/yaml/v3, with the differences from js-yaml that matter to
// front matter bridged (yaml12.go). Three remain, on YAML no skill should
// hold: yaml/v3 refuses implicit keys longer than 1024 characters, reads an
// anchor name only up to the first character other than a letter, digit,
// '-' or '_', and accepts a flow collection continued on a line indented
// less than its mapping. Dates are written as Node.js writes them in the
// UTC time zone.
//
// The package is pure: it reads a folder and knows nothing of Kubernetes.
package skillsref

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/kubeskills/kubeskills/internal/skill"
)

// Version is the version of the npm package skills-ref whose rules this
// package applies.
const Version = "0.1.5"

// Limits of the reference validator, in UTF-16 code units.
const (
	MaxNameLength          = 64
	MaxDescriptionLength   = 1024
	MaxCompatibilityLength = 500
)

// Rule names one rule of the reference validator.
type Rule string

// The rules, in the order the reference validator checks them.
const (
	RuleFolderMissing          Rule = "folder-missing"
	RuleSkillMDMissing         Rule = "skill-md-missing"
	RuleSkillMDUnreadable      Rule = "skill-md-unreadable"
	RuleFrontMatterMissing     Rule = "frontmatter-missing"
	RuleFrontMatterNotClosed   Rule = "frontmatter-not-closed"
	RuleFrontMatterYAML        Rule = "frontmatter-yaml"
	RuleFrontMatterNotMapping  Rule = "frontmatter-not-mapping"
	RuleFieldsUnexpected       Rule = "fields-unexpected"
	RuleNameMissing            Rule = "name-missing"
	RuleNameEmpty              Rule = "name-empty"
	RuleNameTooLong            Rule = "name-too-long"
	RuleNameLowercase          Rule = "name-lowercase"
	RuleNameHyphenEdge         Rule = "name-hyphen-edge"
	RuleNameConsecutiveHyphens Rule = "name-consecutive-hyphens"
	RuleNameCharacters         Rule = "name-characters"
	RuleNameFolder             Rule = "name-folder"
	RuleDescriptionMissing     Rule = "description-missing"
	RuleDescriptionEmpty       Rule = "description-empty"
	RuleDescriptionTooLong     Rule = "description-too-long"
	RuleCompatibilityType      Rule = "compatibility-type"
	RuleCompatibilityTooLong   Rule = "compatibility-too-long"
)

// Rules lists every rule.
var Rules = []Rule{
	RuleFolderMissing, RuleSkillMDMissing, RuleSkillMDUnreadable,
	RuleFrontMatterMissing, RuleFrontMatterNotClosed, RuleFrontMatterYAML, RuleFrontMatterNotMapping,
	RuleFieldsUnexpected,
	RuleNameMissing, RuleNameEmpty, RuleNameTooLong, RuleNameLowercase, RuleNameHyphenEdge,
	RuleNameConsecutiveHyphens, RuleNameCharacters, RuleNameFolder,
	RuleDescriptionMissing, RuleDescriptionEmpty, RuleDescriptionTooLong,
	RuleCompatibilityType, RuleCompatibilityTooLong,
}

// Violation is one rule a skill breaks.
type Violation struct {
	// Rule is the rule broken.
	Rule Rule
	// Field is the Skill field concerned, as in skill.Problem.
	Field string
	// Message says what is wrong.
	Message string
	// Hint says how to fix it.
	Hint string
}

// Problem is the violation as a skill.Problem, its message starting with
// "skills-ref RULE: " so that a reader sees which rule it is.
func (v Violation) Problem() skill.Problem {
	return skill.Problem{Field: v.Field, Message: "skills-ref " + string(v.Rule) + ": " + v.Message, Hint: v.Hint}
}

// Fields of violations.
const (
	fieldSkillMD       = "SKILL.md"
	fieldFrontMatter   = "spec.frontMatter"
	fieldName          = "metadata.name"
	fieldDescription   = "spec.description"
	fieldCompatibility = "spec.compatibility"
)

// specFields are the six front-matter keys the reference validator allows.
var specFields = []string{"allowed-tools", "compatibility", "description", "license", "metadata", "name"}

// CheckFolder judges the skill folder dir as `skills-ref validate dir`
// does, and returns every rule it breaks, none for a valid skill.
func CheckFolder(dir string) []Violation {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return []Violation{{Rule: RuleSkillMDUnreadable, Field: fieldSkillMD, Message: err.Error()}}
	}
	if info, err := os.Stat(abs); err != nil || !info.IsDir() {
		return []Violation{{Rule: RuleFolderMissing, Field: fieldSkillMD,
			Message: fmt.Sprintf("%s is not a folder", abs), Hint: "name a skill folder"}}
	}
	var path string
	for _, name := range []string{skill.SkillFileName, "skill.md"} {
		if _, err := os.Stat(filepath.Join(abs, name)); err == nil {
			path = filepath.Join(abs, name)
			break
		}
	}
	if path == "" {
		return []Violation{{Rule: RuleSkillMDMissing, Field: fieldSkillMD,
			Message: "the folder holds no SKILL.md", Hint: "write the skill's SKILL.md at the root of its folder"}}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return []Violation{{Rule: RuleSkillMDUnreadable, Field: fieldSkillMD,
			Message: fmt.Sprintf("%s cannot be read: %v", filepath.Base(path), errors.Unwrap(err))}}
	}
	return Check(data, filepath.Base(abs))
}

// Check judges the content of a SKILL.md whose folder is named folder, and
// returns every rule it breaks, none for a valid skill.
func Check(content []byte, folder string) []Violation {
	fields, v := parse(decodeUTF8(content))
	if v != nil {
		return []Violation{*v}
	}
	var out []Violation
	if extra := unexpectedFields(fields); len(extra) > 0 {
		out = append(out, Violation{Rule: RuleFieldsUnexpected, Field: fieldFrontMatter,
			Message: fmt.Sprintf("the front matter has keys outside the six of the Agent Skills specification: %s", quoteList(extra)),
			Hint:    "remove them, or put them under `metadata:`; only " + strings.Join(specFields, ", ") + " are allowed"})
	}
	if name, ok := field(fields, "name"); ok {
		out = append(out, checkName(name.String(), folder)...)
	} else {
		out = append(out, Violation{Rule: RuleNameMissing, Field: fieldName,
			Message: "the front matter has no name", Hint: "set `name:` to the folder's name"})
	}
	if description, ok := field(fields, "description"); ok {
		out = append(out, checkDescription(description.String())...)
	} else {
		out = append(out, Violation{Rule: RuleDescriptionMissing, Field: fieldDescription,
			Message: "the front matter has no description", Hint: "set `description:` to what the skill does and when to use it"})
	}
	if compatibility, ok := field(fields, "compatibility"); ok {
		out = append(out, checkCompatibility(compatibility)...)
	}
	return out
}

// parse cuts the front matter out of SKILL.md as the reference validator
// does and loads it. It returns the front matter's value, or the violation
// that stops the check.
func parse(content string) (*value, *Violation) {
	if !strings.HasPrefix(content, "---") {
		hint := "start SKILL.md with a '---' line, the front matter, and another '---' line"
		if strings.HasPrefix(content, "\uFEFF") {
			hint = "save SKILL.md without its UTF-8 byte order mark"
		}
		return nil, &Violation{Rule: RuleFrontMatterMissing, Field: fieldFrontMatter,
			Message: "SKILL.md does not start with '---'", Hint: hint}
	}
	parts := strings.SplitN(content, "---", 3)
	if len(parts) < 3 {
		return nil, &Violation{Rule: RuleFrontMatterNotClosed, Field: fieldFrontMatter,
			Message: "the front matter is never closed: SKILL.md holds no second '---'",
			Hint:    "end the front matter with a '---' line"}
	}
	fields, err := loadYAML(parts[1])
	if err != nil {
		return nil, &Violation{Rule: RuleFrontMatterYAML, Field: fieldFrontMatter,
			Message: "the front matter is not valid YAML to js-yaml: " + strings.TrimPrefix(err.Error(), "yaml: "),
			Hint:    "the reference validator ends the front matter at the first '---' after the opening one, even inside a line; fix the YAML, or reword text holding '---'"}
	}
	switch {
	case fields == nil || fields.kind == kindNull:
		return newObject(), nil
	case fields.kind == kindArray || !fields.isObject():
		return nil, &Violation{Rule: RuleFrontMatterNotMapping, Field: fieldFrontMatter,
			Message: fmt.Sprintf("the front matter is %s, not a mapping", fields.typeName()),
			Hint:    "write `key: value` lines such as `name: my-skill` and `description: ...`"}
	}
	return fields, nil
}

// field is fields[key], and whether the key is present.
func field(fields *value, key string) (*value, bool) {
	for _, k := range fields.ownKeys() {
		if k == key {
			return fields.property(k), true
		}
	}
	return nil, false
}

// unexpectedFields lists the keys outside the specification, sorted.
func unexpectedFields(fields *value) []string {
	var extra []string
	for _, k := range fields.ownKeys() {
		if !slices.Contains(specFields, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	return extra
}

// checkName applies the name rules to the name as text.
func checkName(name, folder string) []Violation {
	if jsTrim(name) == "" {
		return []Violation{{Rule: RuleNameEmpty, Field: fieldName,
			Message: "the name is empty", Hint: "set `name:` to the folder's name"}}
	}
	normalized := norm.NFKC.String(jsTrim(name))
	quoted := quoteShort(normalized)
	var out []Violation
	add := func(rule Rule, message, hint string) {
		out = append(out, Violation{Rule: rule, Field: fieldName, Message: message, Hint: hint})
	}
	if n := utf16Len(normalized); n > MaxNameLength {
		add(RuleNameTooLong, fmt.Sprintf("the name is %d characters long (in UTF-16 code units), more than %d", n, MaxNameLength),
			"use a shorter name, and rename the folder to match")
	}
	if strings.ToLower(normalized) != normalized {
		add(RuleNameLowercase, fmt.Sprintf("the name %s is not lowercase", quoted), "write the name in lowercase")
	}
	if strings.HasPrefix(normalized, "-") || strings.HasSuffix(normalized, "-") {
		add(RuleNameHyphenEdge, fmt.Sprintf("the name %s starts or ends with a hyphen", quoted), "remove the hyphen")
	}
	if strings.Contains(normalized, "--") {
		add(RuleNameConsecutiveHyphens, fmt.Sprintf("the name %s holds two hyphens in a row", quoted), "use single hyphens")
	}
	if strings.ContainsFunc(normalized, func(r rune) bool { return !isNameRune(r) }) {
		add(RuleNameCharacters, fmt.Sprintf("the name %s holds characters other than letters, digits and hyphens", quoted),
			"use lowercase letters, digits and single hyphens")
	}
	if dir := norm.NFKC.String(folder); dir != normalized {
		add(RuleNameFolder, fmt.Sprintf("the name %s is not the folder's name %s", quoted, quoteShort(folder)),
			"name the folder after the skill, or the skill after its folder")
	}
	return out
}

// isNameRune is the reference validator's test for a name's characters:
// ASCII letters and digits, the hyphen, and the code points of its letter
// ranges (Latin-1 and Latin Extended, combining marks, Cyrillic, CJK).
func isNameRune(r rune) bool {
	switch {
	case r == '-',
		r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9',
		r >= 0x0400 && r <= 0x04FF,
		r >= 0x4E00 && r <= 0x9FFF,
		r >= 0x3400 && r <= 0x4DBF,
		r >= 0x0300 && r <= 0x036F,
		r >= 0x00C0 && r <= 0x024F:
		return true
	}
	return false
}

// checkDescription applies the description rules to the description as
// text.
func checkDescription(description string) []Violation {
	if jsTrim(description) == "" {
		return []Violation{{Rule: RuleDescriptionEmpty, Field: fieldDescription,
			Message: "the description is empty", Hint: "set `description:` to what the skill does and when to use it"}}
	}
	if n := utf16Len(description); n > MaxDescriptionLength {
		return []Violation{{Rule: RuleDescriptionTooLong, Field: fieldDescription,
			Message: fmt.Sprintf("the description is %d characters long (in UTF-16 code units), more than %d", n, MaxDescriptionLength),
			Hint:    "shorten it to what the skill does and when to use it; move details into the instructions"}}
	}
	return nil
}

// checkCompatibility applies the compatibility rules.
func checkCompatibility(compatibility *value) []Violation {
	if compatibility.kind != kindString {
		return []Violation{{Rule: RuleCompatibilityType, Field: fieldCompatibility,
			Message: fmt.Sprintf("compatibility is %s, not text", compatibility.typeName()),
			Hint:    "write `compatibility: some text`, quoting it if YAML would read it otherwise"}}
	}
	if n := utf16Len(compatibility.text); n > MaxCompatibilityLength {
		return []Violation{{Rule: RuleCompatibilityTooLong, Field: fieldCompatibility,
			Message: fmt.Sprintf("compatibility is %d characters long (in UTF-16 code units), more than %d", n, MaxCompatibilityLength),
			Hint:    "shorten it"}}
	}
	return nil
}

// quoteShort quotes text for a message, cut to 60 characters.
func quoteShort(text string) string {
	const limit = 60
	runes := []rune(text)
	if len(runes) <= limit {
		return fmt.Sprintf("%q", text)
	}
	return fmt.Sprintf("%q...", string(runes[:limit-3]))
}

// quoteList quotes the first keys of a list for a message.
func quoteList(keys []string) string {
	const limit = 10
	quoted := make([]string, 0, limit+1)
	for i, k := range keys {
		if i == limit {
			quoted = append(quoted, fmt.Sprintf("and %d more", len(keys)-limit))
			break
		}
		quoted = append(quoted, quoteShort(k))
	}
	return strings.Join(quoted, ", ")
}
