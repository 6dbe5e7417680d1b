package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

const skillKind = "Skill"

// encodeObject writes a Skill as one YAML document, fields in the order of
// the API types (apiVersion, kind, metadata, spec), without status or unset
// fields. Multi-line text is written as literal blocks where kubectl reads
// them back unchanged, so that SKILL.md reads as itself.
func encodeObject(obj *skillsv1.Skill) ([]byte, error) {
	data, err := encodeManifest(obj)
	if err != nil {
		return nil, fmt.Errorf("failed to encode skill %s: %w", obj.Name, err)
	}
	return data, nil
}

// encodeManifest writes an API object as one YAML document, fields in the
// order of its type, without status, creationTimestamp or unset fields.
func encodeManifest(obj any) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	root, err := jsonToNode(dec)
	if err != nil {
		return nil, err
	}
	dropKeys(root, "status")
	if metadata := mappingValue(root, "metadata"); metadata != nil {
		dropKeys(metadata, "creationTimestamp")
	}
	moveFirst(root, "apiVersion")
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// jsonToNode reads one JSON value into a YAML node, keeping the order of
// object keys.
func jsonToNode(dec *json.Decoder) (*yaml.Node, error) {
	token, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := token.(type) {
	case json.Delim:
		node := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if v == '[' {
			node = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		}
		for dec.More() {
			if node.Kind == yaml.MappingNode {
				key, err := dec.Token()
				if err != nil {
					return nil, err
				}
				node.Content = append(node.Content, textNode(fmt.Sprint(key)))
			}
			child, err := jsonToNode(dec)
			if err != nil {
				return nil, err
			}
			node.Content = append(node.Content, child)
		}
		_, err := dec.Token()
		return node, err
	case string:
		return textNode(v), nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(v.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}, nil
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
}

// textNode is a YAML string. The encoder follows YAML 1.2 and picks a plain
// or literal style where it can; kubectl reads YAML 1.1, where `yes` or
// `0777` are not strings and tabs, carriage returns or Unicode line
// separators in a literal block read differently. Such text is
// double-quoted, with escapes.
func textNode(text string) *yaml.Node {
	node := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: text}
	if !safeUnquoted(text) || !readsBack(text) {
		node.Style = yaml.DoubleQuotedStyle
	}
	return node
}

// safeUnquoted tells whether text holds only characters that every YAML
// reader treats alike outside quotes: printable characters and line feeds.
func safeUnquoted(text string) bool {
	for _, r := range text {
		switch {
		case r == '\n':
		case r == '\t', r == '\r', r == 0x85, r == 0x2028, r == 0x2029, r == 0xfeff:
			return false
		case !unicode.IsPrint(r):
			return false
		}
	}
	return text != ""
}

// readsBack tells whether text, written in the style the encoder picks for
// it, reads back as the same string with the YAML reader kubectl uses.
func readsBack(text string) bool {
	data, err := yaml.Marshal(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: text})
	if err != nil {
		return false
	}
	got, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return false
	}
	want, err := json.Marshal(text)
	return err == nil && bytes.Equal(bytes.TrimSpace(got), want)
}

// mappingValue returns the value of key in a mapping node, nil when absent.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// dropKeys removes keys from a mapping node.
func dropKeys(m *yaml.Node, keys ...string) {
	kept := m.Content[:0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		drop := false
		for _, k := range keys {
			drop = drop || m.Content[i].Value == k
		}
		if !drop {
			kept = append(kept, m.Content[i], m.Content[i+1])
		}
	}
	m.Content = kept
}

// moveFirst moves key to the front of a mapping node.
func moveFirst(m *yaml.Node, key string) {
	for i := 2; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			pair := []*yaml.Node{m.Content[i], m.Content[i+1]}
			rest := append(append([]*yaml.Node{}, m.Content[:i]...), m.Content[i+2:]...)
			m.Content = append(pair, rest...)
			return
		}
	}
}

// manifestWriter writes Skills as a multi-document YAML stream.
type manifestWriter struct {
	w     io.Writer
	count int
}

// write appends one document, preceded by `---` after the first.
func (m *manifestWriter) write(obj *skillsv1.Skill) error {
	data, err := encodeObject(obj)
	if err != nil {
		return err
	}
	if m.count > 0 {
		if _, err := io.WriteString(m.w, "---\n"); err != nil {
			return fmt.Errorf("failed to write skill %s: %w", obj.Name, err)
		}
	}
	if _, err := m.w.Write(data); err != nil {
		return fmt.Errorf("failed to write skill %s: %w", obj.Name, err)
	}
	m.count++
	return nil
}

// manifestSkill is one Skill read from a manifest file, or the problem that
// kept it from being read.
type manifestSkill struct {
	// source is FILE when the file holds one Skill, else FILE#N for the N-th.
	source string
	// object is the Skill, nil when problem is set.
	object *skillsv1.Skill
	// problem says why a document that claims to be a Skill was not read.
	problem string
}

// readManifestFile reads every Skill of a YAML or JSON file: documents of
// kind Skill, and the Skills in the items of a List or SkillList (as written
// by `kubectl get skills -o yaml`). Documents of other kinds are skipped. It
// fails when the file cannot be read or split into documents.
func readManifestFile(path string) ([]manifestSkill, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read manifest %s: %w", path, err)
	}
	var skills []manifestSkill
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("failed to split manifest %s into documents: %w", path, err)
		}
		skills = append(skills, readDocument(doc)...)
	}
	for i := range skills {
		skills[i].source = path
		if len(skills) > 1 {
			skills[i].source = fmt.Sprintf("%s#%d", path, i+1)
		}
	}
	return skills, nil
}

// typeHeader is what readDocument looks at first in a document.
type typeHeader struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

// readDocument reads the Skills of one YAML document.
func readDocument(doc []byte) []manifestSkill {
	data, err := sigsyaml.YAMLToJSON(doc)
	if err != nil {
		return []manifestSkill{{problem: "the document is not valid YAML: " + err.Error()}}
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	return readJSON(data)
}

// readJSON reads the Skills of one document converted to JSON.
func readJSON(data []byte) []manifestSkill {
	var header typeHeader
	if err := json.Unmarshal(data, &header); err != nil {
		return []manifestSkill{{problem: "the document is not a Kubernetes object: " + err.Error()}}
	}
	if header.Kind == "List" || header.Kind == skillKind+"List" {
		var skills []manifestSkill
		for _, item := range header.Items {
			skills = append(skills, readJSON(item)...)
		}
		return skills
	}
	gv, err := schema.ParseGroupVersion(header.APIVersion)
	if err != nil || header.Kind != skillKind || gv.Group != skillsv1.GroupVersion.Group {
		return nil
	}
	if gv.Version != skillsv1.GroupVersion.Version {
		return []manifestSkill{{problem: fmt.Sprintf("apiVersion %s is not %s, the version this plugin reads",
			header.APIVersion, skillsv1.GroupVersion)}}
	}
	obj := &skillsv1.Skill{}
	strictErrs, err := sigsjson.UnmarshalStrict(data, obj)
	if err == nil && len(strictErrs) > 0 {
		err = errors.Join(strictErrs...)
	}
	if err != nil {
		return []manifestSkill{{problem: "the Skill does not match the API: " + strings.ReplaceAll(err.Error(), "\n", "; ")}}
	}
	return []manifestSkill{{object: obj}}
}
