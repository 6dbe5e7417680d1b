package skill

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Limits that Validate enforces. The lengths of text fields are counted in
// characters (Unicode code points); sizes are counted in bytes.
const (
	// DefaultMaxBodyBytes is the default limit on the size of the body.
	DefaultMaxBodyBytes = 256 << 10
	// MaxNameLength is the longest skill name.
	MaxNameLength = 64
	// MaxDescriptionLength is the longest description.
	MaxDescriptionLength = 4096
	// SpecDescriptionLength is the Agent Skills limit on the description;
	// longer ones are accepted with a warning.
	SpecDescriptionLength = 1024
	// ShortDescriptionLength is the description length past which a warning
	// says the description is long for a catalog.
	ShortDescriptionLength = 300
	// MaxCompatibilityLength is the longest compatibility text.
	MaxCompatibilityLength = 500
	// MaxLicenseLength is the longest license text.
	MaxLicenseLength = 1024
	// MaxFrontMatterBytes is the largest front matter.
	MaxFrontMatterBytes = 64 << 10
	// BodyTokensWarning is the estimated token count of the body past which a
	// warning says it is costly to load.
	BodyTokensWarning = 5000
	// MaxAllowedTools is the largest number of allowed tools.
	MaxAllowedTools = 128
	// MaxToolLength is the longest allowed tool.
	MaxToolLength = 256
	// MaxMetadataEntries is the largest number of metadata entries.
	MaxMetadataEntries = 64
	// MaxMetadataKeyLength is the longest metadata key.
	MaxMetadataKeyLength = 253
	// MaxFiles is the largest number of bundled files.
	MaxFiles = 512
)

// Field paths of problems, as in the Skill API.
const (
	fieldName          = "metadata.name"
	fieldDescription   = "spec.description"
	fieldLicense       = "spec.license"
	fieldCompatibility = "spec.compatibility"
	fieldAllowedTools  = "spec.allowedTools"
	fieldMetadata      = "spec.metadata"
	fieldInvocation    = "spec.invocation"
	fieldFiles         = "spec.files"
)

// namePattern is what a skill name looks like.
var namePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Options tune Validate.
type Options struct {
	// ExpectedName is the name the skill must have: its folder's name on
	// import, the object's metadata.name in the cluster. Empty skips the check.
	ExpectedName string
	// MaxBodyBytes bounds the size of the body; zero or less means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int
}

// Validate checks a skill against every rule and returns all the problems it
// finds at once: errors, which stop a skill from being served, and warnings.
func Validate(s *Skill, o Options) Report {
	var r Report
	validateName(&r, s.Name, o.ExpectedName)
	validateDescription(&r, s.Description)
	validateText(&r, fieldLicense, s.License, MaxLicenseLength)
	validateText(&r, fieldCompatibility, s.Compatibility, MaxCompatibilityLength)
	maxBody := o.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	validateBody(&r, s.Body, maxBody)
	validateTools(&r, s.AllowedTools, s.FrontMatter == "")
	validateMetadata(&r, s.Metadata)
	switch s.Invocation {
	case "", InvocationAuto, InvocationExplicit, InvocationDisabled:
	default:
		r.errorf(fieldInvocation, fmt.Sprintf("%q is not an invocation mode", s.Invocation),
			"use Auto, Explicit or Disabled")
	}
	validateFrontMatter(&r, s)
	validateFiles(&r, s.Files)
	if s.BOM {
		r.warnf(fieldFM, "SKILL.md starts with a UTF-8 byte order mark",
			"save SKILL.md without it: some agents miss front matter after one, and the cluster form of a skill drops it")
	}
	return r
}

func validateName(r *Report, name, expected string) {
	switch {
	case name == "":
		r.errorf(fieldName, "the skill has no name", "set `name:` in the front matter, for example `name: pdf-tools`")
		return
	case utf8.RuneCountInString(name) > MaxNameLength:
		r.errorf(fieldName, fmt.Sprintf("the name is %d characters long, more than %d", utf8.RuneCountInString(name), MaxNameLength),
			"use a shorter name")
	case !namePattern.MatchString(name):
		hint := "use lowercase letters, digits and single hyphens, not starting or ending with a hyphen"
		if suggestion := suggestName(name); suggestion != "" {
			hint += fmt.Sprintf(", for example %q", suggestion)
		}
		r.errorf(fieldName, fmt.Sprintf("%q is not a valid skill name", name), hint)
	}
	if expected != "" && name != expected {
		r.errorf(fieldName, fmt.Sprintf("the skill is named %q in its front matter but %q where it is stored", name, expected),
			"rename the folder or object, or the `name:` in the front matter, so that they match")
	}
}

// suggestName turns an invalid name into a valid one when it can.
func suggestName(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	out := b.String()
	if len(out) > MaxNameLength {
		out = strings.TrimRight(out[:MaxNameLength], "-")
	}
	return out
}

func validateDescription(r *Report, description string) {
	if strings.TrimSpace(description) == "" {
		r.errorf(fieldDescription, "the skill has no description",
			"set `description:` to what the skill does and when to use it")
		return
	}
	if !utf8.ValidString(description) {
		r.errorf(fieldDescription, "the description is not valid UTF-8 text", "save SKILL.md as UTF-8")
	}
	length := utf8.RuneCountInString(description)
	switch {
	case length > MaxDescriptionLength:
		r.errorf(fieldDescription, fmt.Sprintf("the description is %d characters long, more than %d", length, MaxDescriptionLength),
			"shorten it; move details into the instructions")
	case length > SpecDescriptionLength:
		r.portabilityf(fieldDescription, fmt.Sprintf("the description is %d characters long, more than the %d of the Agent Skills specification", length, SpecDescriptionLength),
			"shorten it to what the skill does and when to use it; other agents may refuse it")
	case length > ShortDescriptionLength:
		r.warnf(fieldDescription, fmt.Sprintf("the description is %d characters long, more than %d", length, ShortDescriptionLength),
			"every agent pays for the description in its context; keep it to what the skill does and when to use it")
	}
	if strings.ContainsAny(description, "<>") {
		r.errorf(fieldDescription, "the description contains '<' or '>'",
			"remove angle brackets: the description goes into the model's context, where they read as markup")
	}
}

// validateText checks an optional text field: UTF-8 and a length limit.
func validateText(r *Report, field, text string, limit int) {
	if !utf8.ValidString(text) {
		r.errorf(field, "the text is not valid UTF-8", "save SKILL.md as UTF-8")
	}
	if n := utf8.RuneCountInString(text); n > limit {
		r.errorf(field, fmt.Sprintf("the text is %d characters long, more than %d", n, limit), "shorten it")
	}
}

func validateBody(r *Report, body string, limit int) {
	if !utf8.ValidString(body) {
		r.errorf(fieldBody, "the instructions are not valid UTF-8 text",
			"save SKILL.md as UTF-8; put binary content in bundled files")
	}
	if strings.TrimSpace(body) == "" {
		r.errorf(fieldBody, "the instructions are empty", "write the instructions after the closing '---' line of SKILL.md")
		return
	}
	if len(body) > limit {
		r.errorf(fieldBody, fmt.Sprintf("the instructions are %d bytes, more than the limit of %d", len(body), limit),
			"move reference material into bundled files (references/...) and point to them from the instructions")
		return
	}
	if tokens := EstimateTokens(body); tokens > BodyTokensWarning {
		r.warnf(fieldBody, fmt.Sprintf("the instructions are about %d tokens, more than %d", tokens, BodyTokensWarning),
			"a model pays for them each time it uses the skill; move details into bundled files it reads when needed")
	}
}

// validateTools checks the allowed tools; generated tells that they will be
// written into generated front matter, joined by spaces.
func validateTools(r *Report, tools []string, generated bool) {
	if len(tools) > MaxAllowedTools {
		r.errorf(fieldAllowedTools, fmt.Sprintf("%d tools are listed, more than %d", len(tools), MaxAllowedTools), "list fewer tools")
	}
	for i, tool := range tools {
		field := fmt.Sprintf("%s[%d]", fieldAllowedTools, i)
		switch split := splitTools(tool); {
		case tool == "":
			r.errorf(field, "the tool is empty", "remove the empty entry")
		case !utf8.ValidString(tool):
			r.errorf(field, "the tool is not valid UTF-8 text", "save SKILL.md as UTF-8")
		case len(tool) > MaxToolLength:
			r.errorf(field, fmt.Sprintf("the tool is %d bytes long, more than %d", len(tool), MaxToolLength), "shorten it")
		case generated && (len(split) != 1 || split[0] != tool):
			r.errorf(field, fmt.Sprintf("%q would be read back from `allowed-tools` as %d tools", tool, len(split)),
				"list each tool on its own; spaces and commas separate tools unless inside parentheses")
		}
	}
}

func validateMetadata(r *Report, metadata map[string]string) {
	if len(metadata) > MaxMetadataEntries {
		r.errorf(fieldMetadata, fmt.Sprintf("%d entries, more than %d", len(metadata), MaxMetadataEntries), "keep fewer entries")
	}
	for _, k := range slices.Sorted(maps.Keys(metadata)) {
		field := fmt.Sprintf("%s[%s]", fieldMetadata, k)
		switch {
		case k == "":
			r.errorf(fieldMetadata, "an entry has an empty key", "remove it or give it a key")
		case len(k) > MaxMetadataKeyLength:
			r.errorf(fieldMetadata, fmt.Sprintf("the key %.40q... is %d bytes long, more than %d", k, len(k), MaxMetadataKeyLength), "shorten it")
		case !utf8.ValidString(k) || !utf8.ValidString(metadata[k]):
			r.errorf(field, "the entry is not valid UTF-8 text", "save SKILL.md as UTF-8")
		}
	}
}

func validateFiles(r *Report, files []File) {
	if len(files) > MaxFiles {
		r.errorf(fieldFiles, fmt.Sprintf("%d files are bundled, more than %d", len(files), MaxFiles),
			"bundle fewer files, or serve them from an OCI image with spec.bundle.image")
	}
	for i, f := range files {
		if message, hint := filePathProblem(f.Path); message != "" {
			r.errorf(fmt.Sprintf("%s[%d].path", fieldFiles, i), fmt.Sprintf("%q %s", f.Path, message), hint)
		}
	}
	for _, p := range append(fileSetProblems(files), bareRepositoryProblems(files)...) {
		r.errorf(fmt.Sprintf("%s[%d].path", fieldFiles, p.index), p.Message, p.Hint)
	}
}

// EstimateTokens estimates how many tokens a model reads for text: one token
// per four bytes, rounded up. It is the usual rule of thumb for English prose
// and Markdown; code and non-Latin scripts cost somewhat more per byte.
func EstimateTokens(text string) int {
	return (len(text) + 3) / 4
}

const agreeHint = "make the two agree, or clear spec.frontMatter to generate it from the fields"

// validateFrontMatter checks that Skill.FrontMatter, when set, can be written
// between `---` lines, parses as a YAML mapping and agrees with the fields.
func validateFrontMatter(r *Report, s *Skill) {
	fm := s.FrontMatter
	if fm == "" {
		if invocationOrDefault(s.Invocation) == InvocationExplicit {
			// Generated front matter says so with disable-model-invocation.
			warnForeignKeys(r, []frontMatterKey{{name: keyDisableModel, text: true}})
		}
		return
	}
	if len(fm) > MaxFrontMatterBytes {
		r.errorf(fieldFM, fmt.Sprintf("the front matter is %d bytes, more than %d", len(fm), MaxFrontMatterBytes),
			"keep the front matter short; put long text in the instructions or bundled files")
		return
	}
	for rest, n := fm, 2; rest != ""; n++ {
		var l line
		l, rest = cutLine(rest)
		if l.content == delimiter {
			r.errorf(fieldFM, fmt.Sprintf("line %d of SKILL.md would be a '---' line, which ends the front matter early", n),
				"remove the '---' line from spec.frontMatter")
			return
		}
	}
	fields, err := readFrontMatter(fm, 2)
	if err != nil {
		var syntaxErr *SyntaxError
		if errors.As(err, &syntaxErr) {
			p := syntaxErr.Problem
			p.Message = fmt.Sprintf("line %d of SKILL.md: %s", syntaxErr.Line, p.Message)
			r.Errors = append(r.Errors, p)
			return
		}
		r.errorf(fieldFM, err.Error(), "write the front matter as a YAML mapping")
		return
	}
	r.Errors = append(r.Errors, fields.problems...)
	warnForeignKeys(r, fields.foreign)
	agree(r, keyName, fields.name, fieldName, s.Name)
	agree(r, keyDescription, fields.description, fieldDescription, s.Description)
	agree(r, keyLicense, fields.license, fieldLicense, s.License)
	agree(r, keyCompatibility, fields.compatibility, fieldCompatibility, s.Compatibility)
	if !slices.Equal(fields.tools, s.AllowedTools) {
		r.errorf(fieldFM, fmt.Sprintf("allowed-tools lists %s in the front matter but %s lists %s",
			quoteList(fields.tools), fieldAllowedTools, quoteList(s.AllowedTools)), agreeHint)
	}
	agreeMetadata(r, fields.metadata, s.Metadata)
	mode := invocationOrDefault(s.Invocation)
	switch {
	case fields.explicit && mode == InvocationAuto:
		r.errorf(fieldFM, "disable-model-invocation is true in the front matter but spec.invocation is Auto",
			"set spec.invocation to Explicit, or remove disable-model-invocation from the front matter")
	case !fields.explicit && mode == InvocationExplicit:
		r.errorf(fieldFM, "spec.invocation is Explicit but the front matter does not set disable-model-invocation: true",
			"add `disable-model-invocation: true` to the front matter, or set spec.invocation to Auto")
	}
}

// foreignKeysBudget bounds the list of keys in the warning about keys
// outside the specification, so that the warning fits in a status entry.
const foreignKeysBudget = 400

// warnForeignKeys warns about front-matter keys outside the six of the Agent
// Skills specification: kubeskills keeps them, the reference validator
// refuses them.
func warnForeignKeys(r *Report, keys []frontMatterKey) {
	var listed []string
	seen := map[string]bool{}
	count, size, explicit := 0, 0, false
	for _, k := range keys {
		if k.text {
			if seen[k.name] {
				continue
			}
			seen[k.name] = true
		}
		count++
		explicit = explicit || (k.text && k.name == keyDisableModel)
		item := k.name
		if k.text {
			item = quoteKey(k.name)
		}
		if k.line > 0 {
			item += fmt.Sprintf(" (line %d)", k.line)
		}
		switch {
		case size+len(item) <= foreignKeysBudget:
			listed = append(listed, item)
			size += len(item) + 2
		case size <= foreignKeysBudget:
			listed = append(listed, "...")
			size = foreignKeysBudget + 1
		}
	}
	if count == 0 {
		return
	}
	hint := "kubeskills keeps such keys, but the Agent Skills reference validator (skills-ref) and the hosts that check skills with it refuse the skill; " +
		"put keys only some products read under `metadata:`, and check with `kubectl skills validate --strict`"
	if explicit {
		hint = "`disable-model-invocation: true` makes the skill Explicit in kubeskills and Claude Code; " + hint
	}
	r.portabilityf(fieldFM, fmt.Sprintf("the front matter has %s outside the six of the Agent Skills specification: %s",
		pluralWord(count, "a key", fmt.Sprintf("%d keys", count)), strings.Join(listed, ", ")), hint)
}

// quoteKey quotes a front-matter key for a message, cut to 40 characters.
func quoteKey(key string) string {
	const limit = 40
	if utf8.RuneCountInString(key) <= limit {
		return fmt.Sprintf("%q", key)
	}
	return fmt.Sprintf("%q...", string([]rune(key)[:limit-3]))
}

// pluralWord picks one or many by n.
func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// agree reports a front-matter key whose value differs from its field.
func agree(r *Report, key, inFrontMatter, field, inField string) {
	if inFrontMatter == inField {
		return
	}
	r.errorf(fieldFM, fmt.Sprintf("%s is %s in the front matter but %s is %s",
		key, quoteShort(inFrontMatter), field, quoteShort(inField)), agreeHint)
}

// agreeMetadata reports every metadata entry on which the front matter and
// spec.metadata differ.
func agreeMetadata(r *Report, inFrontMatter, inField map[string]string) {
	keys := slices.Sorted(maps.Keys(inFrontMatter))
	for _, k := range slices.Sorted(maps.Keys(inField)) {
		if _, ok := inFrontMatter[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmValue, inFM := inFrontMatter[k]
		fieldValue, inSpec := inField[k]
		switch {
		case inFM && !inSpec:
			r.errorf(fieldFM, fmt.Sprintf("metadata.%s is %s in the front matter but missing from %s", k, quoteShort(fmValue), fieldMetadata), agreeHint)
		case !inFM && inSpec:
			r.errorf(fieldFM, fmt.Sprintf("%s[%s] is %s but missing from the front matter's metadata", fieldMetadata, k, quoteShort(fieldValue)), agreeHint)
		case fmValue != fieldValue:
			r.errorf(fieldFM, fmt.Sprintf("metadata.%s is %s in the front matter but %s[%s] is %s",
				k, quoteShort(fmValue), fieldMetadata, k, quoteShort(fieldValue)), agreeHint)
		}
	}
}

// quoteShort quotes text for a message, cut to about 60 characters.
func quoteShort(text string) string {
	const limit = 60
	if text == "" {
		return "empty"
	}
	if utf8.RuneCountInString(text) <= limit {
		return fmt.Sprintf("%q", text)
	}
	runes := []rune(text)
	return fmt.Sprintf("%q...", string(runes[:limit-3]))
}

func quoteList(items []string) string {
	if len(items) == 0 {
		return "nothing"
	}
	quoted := make([]string, len(items))
	for i, item := range items {
		quoted[i] = fmt.Sprintf("%q", item)
	}
	return "[" + strings.Join(quoted, " ") + "]"
}
