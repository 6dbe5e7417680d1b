package skill

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Front-matter keys this package reads. Every other key is kept verbatim in
// Skill.FrontMatter and otherwise ignored.
const (
	keyName          = "name"
	keyDescription   = "description"
	keyLicense       = "license"
	keyCompatibility = "compatibility"
	keyAllowedTools  = "allowed-tools"
	keyMetadata      = "metadata"
	keyDisableModel  = "disable-model-invocation"
)

// specKeys are the six front-matter keys of the Agent Skills specification.
// The reference validator refuses a SKILL.md with any other key.
var specKeys = map[string]bool{
	keyName: true, keyDescription: true, keyLicense: true,
	keyCompatibility: true, keyAllowedTools: true, keyMetadata: true,
}

// mergeTag is the tag of a `<<` key, which merges the mappings it names.
const mergeTag = "!!merge"

// yamlLineRE finds the line number in an error from the YAML parser.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// frontMatterFields are the values read from front matter, and the problems
// met reading them (a key of the wrong type), which Validate reports.
type frontMatterFields struct {
	name, description, license, compatibility string
	tools                                     []string
	metadata                                  map[string]string
	explicit                                  bool
	// foreign are the top-level keys outside the specification.
	foreign  []frontMatterKey
	problems []Problem
}

// frontMatterKey is a top-level front-matter key and the line of SKILL.md
// it is on (0 for a key of generated front matter). A key that is not text
// has the description of its kind as name and text false.
type frontMatterKey struct {
	name string
	text bool
	line int
}

// readFrontMatter parses front matter text whose first line is line
// firstLine of SKILL.md and reads the keys this package knows.
func readFrontMatter(text string, firstLine int) (frontMatterFields, error) {
	root, err := decodeMapping(text, firstLine)
	if err != nil {
		return frontMatterFields{}, err
	}
	if err := checkDuplicateKeys(root, firstLine); err != nil {
		return frontMatterFields{}, err
	}
	return extractFields(root, firstLine), nil
}

// decodeMapping parses text as exactly one YAML document holding a mapping.
func decodeMapping(text string, firstLine int) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, syntaxError(firstLine, fmt.Sprintf("the front matter could not be parsed as YAML: %v", r),
				"write the front matter as a plain YAML mapping")
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, syntaxError(firstLine, "the front matter is empty",
				"write at least `name: my-skill` and `description: ...` between the '---' lines")
		}
		return nil, yamlError(err, firstLine)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(err, firstLine)
		}
		return nil, syntaxError(firstLine+extra.Line-1, "the front matter holds more than one YAML document",
			"remove the '...' or '---' document markers inside the front matter")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, syntaxError(firstLine, "the front matter is not a YAML document", "write the front matter as a YAML mapping")
	}
	node := doc.Content[0]
	if node.Kind != yaml.MappingNode {
		return nil, syntaxError(firstLine+node.Line-1, "the front matter is "+kindName(node)+", not a mapping of keys to values",
			"write `key: value` lines such as `name: my-skill` and `description: ...`")
	}
	return node, nil
}

// yamlError turns an error of the YAML parser into a SyntaxError on the line
// of SKILL.md it concerns.
func yamlError(err error, firstLine int) error {
	msg := err.Error()
	lineNumber := firstLine
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			lineNumber = firstLine + n - 1
		}
		msg = msg[len(m[0]):]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	hint := "fix the YAML syntax of the front matter"
	if strings.Contains(msg, "cannot start any token") {
		hint = "indent YAML with spaces, not tabs, and quote values that start with a special character"
	}
	return syntaxError(lineNumber, "the front matter is not valid YAML: "+msg, hint)
}

// checkDuplicateKeys refuses a mapping, at any depth, that repeats a key:
// YAML forbids it and readers disagree on which value wins.
func checkDuplicateKeys(node *yaml.Node, firstLine int) error {
	switch node.Kind {
	case yaml.MappingNode:
		seen := make(map[string]int, len(node.Content)/2)
		for i := 0; i+1 < len(node.Content); i += 2 {
			key := node.Content[i]
			if key.Kind == yaml.ScalarNode {
				if prev, dup := seen[key.Value]; dup {
					return syntaxError(firstLine+key.Line-1,
						fmt.Sprintf("the front matter repeats the key %q (first on line %d)", key.Value, firstLine+prev-1),
						"keep one of the two entries")
				}
				seen[key.Value] = key.Line
			}
			if err := checkDuplicateKeys(node.Content[i+1], firstLine); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for _, item := range node.Content {
			if err := checkDuplicateKeys(item, firstLine); err != nil {
				return err
			}
		}
	}
	return nil
}

// extractFields reads the known keys of a front-matter mapping.
func extractFields(root *yaml.Node, firstLine int) frontMatterFields {
	f := frontMatterFields{foreign: foreignKeys(root, firstLine)}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, value := root.Content[i], resolveAlias(root.Content[i+1])
		if key.Kind != yaml.ScalarNode {
			continue
		}
		switch key.Value {
		case keyName:
			f.name = f.scalar(key.Value, value, firstLine)
		case keyDescription:
			f.description = f.scalar(key.Value, value, firstLine)
		case keyLicense:
			f.license = f.scalar(key.Value, value, firstLine)
		case keyCompatibility:
			f.compatibility = f.scalar(key.Value, value, firstLine)
		case keyAllowedTools:
			f.tools = f.toolList(value, firstLine)
		case keyMetadata:
			f.metadata = f.metadataMap(value, firstLine)
		case keyDisableModel:
			f.explicit = value.Kind == yaml.ScalarNode && value.ShortTag() == "!!bool" && strings.EqualFold(value.Value, "true")
		}
	}
	return f
}

// foreignKeys lists the keys of a front-matter mapping outside the
// specification, in order. A merge key (`<<: *defaults`) stands for the keys
// of the mappings it merges, as YAML readers see them.
func foreignKeys(root *yaml.Node, firstLine int) []frontMatterKey {
	var keys []frontMatterKey
	for i := 0; i+1 < len(root.Content); i += 2 {
		key := root.Content[i]
		switch {
		case key.Kind == yaml.ScalarNode && key.Tag == mergeTag:
			keys = append(keys, mergedKeys(resolveAlias(root.Content[i+1]), firstLine)...)
		case key.Kind != yaml.ScalarNode:
			keys = append(keys, frontMatterKey{name: kindName(key), line: firstLine + key.Line - 1})
		case !specKeys[key.Value]:
			keys = append(keys, frontMatterKey{name: key.Value, text: true, line: firstLine + key.Line - 1})
		}
	}
	return keys
}

// mergedKeys lists the keys outside the specification that a merge key's
// value brings: those of a mapping, or of each mapping of a list.
func mergedKeys(value *yaml.Node, firstLine int) []frontMatterKey {
	switch value.Kind {
	case yaml.MappingNode:
		return foreignKeys(value, firstLine)
	case yaml.SequenceNode:
		var keys []frontMatterKey
		for _, item := range value.Content {
			if item = resolveAlias(item); item.Kind == yaml.MappingNode {
				keys = append(keys, foreignKeys(item, firstLine)...)
			}
		}
		return keys
	}
	return nil
}

// scalar returns the text of a scalar value, "" for null; any other value is
// recorded as a problem.
func (f *frontMatterFields) scalar(key string, value *yaml.Node, firstLine int) string {
	if value.Kind != yaml.ScalarNode {
		f.problems = append(f.problems, Problem{
			Field:   fieldFM,
			Message: fmt.Sprintf("%s on line %d must be text, not %s", key, firstLine+value.Line-1, kindName(value)),
			Hint:    "write `" + key + ": some text`, quoting the text if it contains ': ' or starts with a special character",
		})
		return ""
	}
	if value.ShortTag() == "!!null" {
		return ""
	}
	return value.Value
}

// toolList reads allowed-tools: a string of tools separated by spaces (or
// commas), or a YAML list of tools.
func (f *frontMatterFields) toolList(value *yaml.Node, firstLine int) []string {
	switch value.Kind {
	case yaml.ScalarNode:
		if value.ShortTag() == "!!null" {
			return nil
		}
		return splitTools(value.Value)
	case yaml.SequenceNode:
		var tools []string
		for _, item := range value.Content {
			item = resolveAlias(item)
			if item.Kind == yaml.ScalarNode && strings.TrimSpace(item.Value) != "" {
				tools = append(tools, strings.TrimSpace(item.Value))
			}
		}
		return tools
	}
	f.problems = append(f.problems, Problem{
		Field:   fieldFM,
		Message: fmt.Sprintf("%s on line %d must be a space-separated string, not %s", keyAllowedTools, firstLine+value.Line-1, kindName(value)),
		Hint:    "write `allowed-tools: Read Bash(git:*)`",
	})
	return nil
}

// metadataMap reads the scalar entries of the metadata mapping as strings.
// Nested values are left to FrontMatter.
func (f *frontMatterFields) metadataMap(value *yaml.Node, firstLine int) map[string]string {
	if value.Kind == yaml.ScalarNode && value.ShortTag() == "!!null" {
		return nil
	}
	if value.Kind != yaml.MappingNode {
		f.problems = append(f.problems, Problem{
			Field:   fieldFM,
			Message: fmt.Sprintf("%s on line %d must be a mapping, not %s", keyMetadata, firstLine+value.Line-1, kindName(value)),
			Hint:    "write `metadata:` followed by indented `key: value` lines",
		})
		return nil
	}
	var m map[string]string
	for i := 0; i+1 < len(value.Content); i += 2 {
		k, v := value.Content[i], resolveAlias(value.Content[i+1])
		if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
			continue
		}
		if m == nil {
			m = make(map[string]string)
		}
		m[k.Value] = v.Value
	}
	return m
}

// resolveAlias follows an alias to the node it names.
func resolveAlias(node *yaml.Node) *yaml.Node {
	if node.Kind == yaml.AliasNode && node.Alias != nil {
		return node.Alias
	}
	return node
}

func kindName(node *yaml.Node) string {
	switch node.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	case yaml.AliasNode:
		return "an alias"
	}
	return "empty"
}

// splitTools splits an allowed-tools string on spaces and commas that are
// outside parentheses, so `Bash(git add:*), Read` gives two tools.
func splitTools(text string) []string {
	var tools []string
	depth, start := 0, -1
	flush := func(end int) {
		if start >= 0 {
			tools = append(tools, text[start:end])
			start = -1
		}
	}
	for i, r := range text {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0 && (r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			flush(i)
			continue
		}
		if start < 0 {
			start = i
		}
	}
	flush(len(text))
	return tools
}

// generateFrontMatter writes canonical front matter for a skill whose
// FrontMatter is empty: the known keys in a fixed order, metadata keys
// sorted. Text that is not valid UTF-8 is written with U+FFFD in its place
// (Validate reports it).
func generateFrontMatter(s *Skill) string {
	root := &yaml.Node{Kind: yaml.MappingNode}
	add := func(key string, value *yaml.Node) {
		root.Content = append(root.Content, textNode(key), value)
	}
	add(keyName, textNode(s.Name))
	add(keyDescription, textNode(s.Description))
	if s.License != "" {
		add(keyLicense, textNode(s.License))
	}
	if s.Compatibility != "" {
		add(keyCompatibility, textNode(s.Compatibility))
	}
	if len(s.AllowedTools) > 0 {
		add(keyAllowedTools, textNode(strings.Join(s.AllowedTools, " ")))
	}
	if len(s.Metadata) > 0 {
		meta := &yaml.Node{Kind: yaml.MappingNode}
		keys := make([]string, 0, len(s.Metadata))
		for k := range s.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			meta.Content = append(meta.Content, textNode(k), textNode(s.Metadata[k]))
		}
		add(keyMetadata, meta)
	}
	if s.Invocation == InvocationExplicit {
		add(keyDisableModel, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		// Only invalid UTF-8 makes the encoder fail, and textNode removes it.
		return ""
	}
	_ = enc.Close()
	return b.String()
}

// textNode is a YAML string node. Values that YAML 1.1 readers would take for
// booleans are double-quoted so that every reader sees a string.
func textNode(value string) *yaml.Node {
	value = strings.ToValidUTF8(value, "\uFFFD")
	node := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
	switch strings.ToLower(value) {
	case "y", "n", "yes", "no", "on", "off":
		node.Style = yaml.DoubleQuotedStyle
	}
	return node
}
