// Package sandboxtest builds, for tests, the largest policy a sandbox's
// runner can be given: the most rules, each with the longest pattern, that
// the CommandPolicy CRD admits, and the most allowed-tools, each the
// longest, that the Skill CRD admits. The limits are read from the CRDs
// themselves (config/crd/bases), so the tests follow them when they change.
package sandboxtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/checkout"
)

// Limits are the CRDs' limits on what reaches the runner's policy
// snapshot.
type Limits struct {
	// Rules is the most rules of a CommandPolicy (spec.rules maxItems).
	Rules int
	// PatternLength is the longest pattern of a rule, in characters
	// (spec.rules[].pattern maxLength).
	PatternLength int
	// AllowedTools is the most allowed-tools of a Skill
	// (spec.allowedTools maxItems).
	AllowedTools int
	// ToolLength is the longest allowed-tools entry, in characters
	// (spec.allowedTools[] maxLength).
	ToolLength int
}

// RepoRoot is the root of the kubeskills checkout.
func RepoRoot() string { return checkout.Root() }

// ReadLimits reads the limits from the CRDs of the checkout at root.
func ReadLimits(root string) (Limits, error) {
	var l Limits
	bases := filepath.Join(root, "config", "crd", "bases")
	policySpec, err := specSchema(filepath.Join(bases, "kubeskills.io_commandpolicies.yaml"))
	if err != nil {
		return l, err
	}
	skillSpec, err := specSchema(filepath.Join(bases, "kubeskills.io_skills.yaml"))
	if err != nil {
		return l, err
	}
	for _, f := range []struct {
		into   *int
		schema map[string]any
		path   string
	}{
		{&l.Rules, policySpec, "properties.rules.maxItems"},
		{&l.PatternLength, policySpec, "properties.rules.items.properties.pattern.maxLength"},
		{&l.AllowedTools, skillSpec, "properties.allowedTools.maxItems"},
		{&l.ToolLength, skillSpec, "properties.allowedTools.items.maxLength"},
	} {
		n, ok := lookup(f.schema, f.path).(float64)
		if !ok || n < 1 {
			return l, fmt.Errorf("the CRD schema of spec has no %s", f.path)
		}
		*f.into = int(n)
	}
	return l, nil
}

// MustReadLimits returns the limits of the checkout's CRDs, and panics
// when they cannot be read.
func MustReadLimits() Limits {
	l, err := ReadLimits(RepoRoot())
	if err != nil {
		panic(err)
	}
	return l
}

// specSchema returns the OpenAPI schema of spec in the CRD file at path.
func specSchema(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read CRD: %w", err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, fmt.Errorf("failed to decode CRD %s: %w", path, err)
	}
	versions, _ := lookup(crd, "spec.versions").([]any)
	if len(versions) != 1 {
		return nil, fmt.Errorf("CRD %s has %d versions, want 1", path, len(versions))
	}
	spec, ok := lookup(versions[0], "schema.openAPIV3Schema.properties.spec").(map[string]any)
	if !ok {
		return nil, fmt.Errorf("CRD %s has no schema for spec", path)
	}
	return spec, nil
}

// lookup follows a dotted path of keys through decoded YAML.
func lookup(v any, path string) any {
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[key]
	}
	return v
}

// patternText is what fills the patterns: plain text and characters that
// JSON escapes (", \, <, > and &), so that the encoded snapshot is longer
// than the rules.
var patternText = []string{"abc ", `"`, `\`, "<", ">", "&", "xyz"}

// LargestPolicy is a CommandPolicy with l.Rules rules whose patterns are
// each l.PatternLength characters long, all ASCII: as many characters as
// the CRD admits are then as many bytes as the policy compiler admits
// (policy.MaxPatternBytes), and a policy with a longer pattern never
// judges a command. Rule i matches only commands whose first word is
// "limit-<i>", so the policy's default action, Always, decides any other
// command; every third rule trusts its command's programs, which makes
// its snapshot longer still.
func LargestPolicy(l Limits) *skillsv1.CommandPolicy {
	pol := &skillsv1.CommandPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: skillsv1.GroupVersion.String(), Kind: "CommandPolicy"},
		Spec:     skillsv1.CommandPolicySpec{DefaultAction: skillsv1.ActionAlways},
	}
	actions := []skillsv1.PolicyAction{skillsv1.ActionAlways, skillsv1.ActionAsk, skillsv1.ActionNever}
	for i := range l.Rules {
		head, tail := fmt.Sprintf("limit-%d '", i), "' *"
		r := skillsv1.PolicyRule{
			Pattern: head + fill(patternText, l.PatternLength-len(head)-len(tail)) + tail,
			Action:  actions[i%len(actions)],
		}
		if r.Action == skillsv1.ActionAlways {
			r.Children = skillsv1.ChildrenTrusted
		}
		pol.Spec.Rules = append(pol.Spec.Rules, r)
	}
	return pol
}

// LargestAllowedTools are l.AllowedTools allowed-tools entries of
// l.ToolLength characters each, most of them four bytes long: the most
// bytes the Skill CRD admits, and characters that the pieces of the
// encoded snapshot end next to. They name programs no command runs.
func LargestAllowedTools(l Limits) []string {
	tools := make([]string, 0, l.AllowedTools)
	for i := range l.AllowedTools {
		head, tail := fmt.Sprintf("Bash(tool-%d ", i), ":*)"
		n := l.ToolLength - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
		tools = append(tools, head+strings.Repeat("🙂", n)+tail)
	}
	return tools
}

// fill returns n bytes of text made of pieces, in turn, padded with x
// where the next piece does not fit.
func fill(pieces []string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		p := pieces[i%len(pieces)]
		if b.Len()+len(p) > n {
			p = "x"
		}
		b.WriteString(p)
	}
	return b.String()
}
