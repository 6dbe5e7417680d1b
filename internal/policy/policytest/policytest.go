// Package policytest loads the project's adversarial corpus of command
// lines: the policies they are judged under and the decision each line
// must get. It is pure and importable from any package's tests, so the
// judge's tests and the sandbox runner's differential tests read the same
// lines.
package policytest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/kubeskills/kubeskills/internal/checkout"
	"github.com/kubeskills/kubeskills/internal/policy"
)

// Expectations a line can have under a policy.
const (
	// ExpectAlways, ExpectAsk and ExpectNever name the exact decision.
	ExpectAlways = "Always"
	ExpectAsk    = "Ask"
	ExpectNever  = "Never"
	// ExpectNotAlways is Ask or Never: the line must never run unasked.
	ExpectNotAlways = "NotAlways"
)

// allPolicies, as a key of a line's expect map, stands for every policy of
// the corpus that the line does not name itself.
const allPolicies = "*"

// Corpus is the set of policies and the command lines judged under them.
type Corpus struct {
	Policies []NamedPolicy
	Lines    []Line
}

// NamedPolicy is one policy of the corpus.
type NamedPolicy struct {
	Name   string
	Policy policy.Policy
}

// Line is one command line and the decisions it must get.
type Line struct {
	// Command is the command line.
	Command string
	// Finding is the short id of the finding it reproduces, "" for plain
	// lines.
	Finding string
	// Expect maps a policy name to "Always", "Ask", "Never" or
	// "NotAlways"; a policy that is missing has no expectation.
	Expect map[string]string
}

// Matches reports whether a decision meets an expectation.
func Matches(expect string, got policy.Action) bool {
	if expect == ExpectNotAlways {
		return got != policy.Always
	}
	return string(got) == expect
}

// file is the shape of adversarial.yaml.
type file struct {
	Policies []filePolicy `yaml:"policies"`
	Lines    []fileLine   `yaml:"lines"`
}

// filePolicy is a policy written out, or read from a chart's values file.
type filePolicy struct {
	Name string `yaml:"name"`
	// Chart is a Helm values file, relative to the corpus file, whose
	// policy.defaultAction and policy.rules make the policy.
	Chart         string     `yaml:"chart"`
	DefaultAction string     `yaml:"defaultAction"`
	Rules         []fileRule `yaml:"rules"`
}

// fileRule is one rule, as in a CommandPolicy or a chart's values.
type fileRule struct {
	Pattern     string `yaml:"pattern"`
	Action      string `yaml:"action"`
	Description string `yaml:"description"`
}

// fileLine is one line of the corpus.
type fileLine struct {
	Command string            `yaml:"command"`
	Finding string            `yaml:"finding"`
	Expect  map[string]string `yaml:"expect"`
}

// chartValues is the part of a chart's values file that holds a policy.
type chartValues struct {
	Policy struct {
		DefaultAction string     `yaml:"defaultAction"`
		Rules         []fileRule `yaml:"rules"`
	} `yaml:"policy"`
}

// Default loads testdata/adversarial.yaml of package policy.
func Default() (Corpus, error) {
	return Load(filepath.Join(checkout.Root(), "internal", "policy", "testdata", "adversarial.yaml"))
}

// Load reads a corpus file. Every policy must compile, every line must
// have a command, and every expectation must name a policy of the corpus
// and a known decision.
func Load(path string) (Corpus, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Corpus{}, fmt.Errorf("failed to read corpus %s: %w", path, err)
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Corpus{}, fmt.Errorf("failed to parse corpus %s: %w", path, err)
	}
	var c Corpus
	for i, fp := range f.Policies {
		p, err := fp.load(filepath.Dir(path))
		if err != nil {
			return Corpus{}, fmt.Errorf("failed to load policies[%d] %q of %s: %w", i, fp.Name, path, err)
		}
		if fp.Name == "" || fp.Name == allPolicies || slices.ContainsFunc(c.Policies, func(n NamedPolicy) bool { return n.Name == fp.Name }) {
			return Corpus{}, fmt.Errorf("failed to load policies[%d] of %s: name %q is empty, reserved or used twice", i, path, fp.Name)
		}
		if _, err := policy.Compile(p); err != nil {
			return Corpus{}, fmt.Errorf("failed to compile policies[%d] %q of %s: %w", i, fp.Name, path, err)
		}
		c.Policies = append(c.Policies, NamedPolicy{Name: fp.Name, Policy: p})
	}
	for i, fl := range f.Lines {
		l, err := c.line(fl)
		if err != nil {
			return Corpus{}, fmt.Errorf("failed to load lines[%d] of %s: %w", i, path, err)
		}
		c.Lines = append(c.Lines, l)
	}
	return c, nil
}

// load builds one policy, from its rules or from a chart's values file.
func (fp filePolicy) load(dir string) (policy.Policy, error) {
	def, rules := fp.DefaultAction, fp.Rules
	if fp.Chart != "" {
		if def != "" || len(rules) > 0 {
			return policy.Policy{}, fmt.Errorf("a policy read from a chart has no rules of its own")
		}
		path := filepath.Join(dir, fp.Chart)
		data, err := os.ReadFile(path)
		if err != nil {
			return policy.Policy{}, fmt.Errorf("failed to read chart values %s: %w", path, err)
		}
		var v chartValues
		if err := yaml.Unmarshal(data, &v); err != nil {
			return policy.Policy{}, fmt.Errorf("failed to parse chart values %s: %w", path, err)
		}
		if len(v.Policy.Rules) == 0 {
			return policy.Policy{}, fmt.Errorf("chart values %s have no policy.rules", path)
		}
		def, rules = v.Policy.DefaultAction, v.Policy.Rules
	}
	p := policy.Policy{Default: policy.Action(def)}
	for _, r := range rules {
		p.Rules = append(p.Rules, policy.Rule{Pattern: r.Pattern, Action: policy.Action(r.Action), Description: r.Description})
	}
	return p, nil
}

// line checks one line and expands its "*" expectation to every policy it
// does not name.
func (c *Corpus) line(fl fileLine) (Line, error) {
	if fl.Command == "" {
		return Line{}, fmt.Errorf("command is empty")
	}
	l := Line{Command: fl.Command, Finding: fl.Finding, Expect: map[string]string{}}
	for name, e := range fl.Expect {
		switch e {
		case ExpectAlways, ExpectAsk, ExpectNever, ExpectNotAlways:
		default:
			return Line{}, fmt.Errorf("%q: expectation %q under %q must be Always, Ask, Never or NotAlways", fl.Command, e, name)
		}
		if name != allPolicies && !slices.ContainsFunc(c.Policies, func(n NamedPolicy) bool { return n.Name == name }) {
			return Line{}, fmt.Errorf("%q: expectation names %q, which is not a policy of the corpus", fl.Command, name)
		}
		if name != allPolicies {
			l.Expect[name] = e
		}
	}
	if all, ok := fl.Expect[allPolicies]; ok {
		for _, p := range c.Policies {
			if _, named := l.Expect[p.Name]; !named {
				l.Expect[p.Name] = all
			}
		}
	}
	return l, nil
}
