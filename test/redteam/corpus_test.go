package redteam

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// The corpus: one YAML file per policy in testdata/. A file names the
// policy (its rules, or a Helm values file whose policy it reads), what that
// policy forbids besides programs (API requests, reading the secret
// fixtures), and its lines.

// policyFile is one file of the corpus.
type policyFile struct {
	// Name names the policy in test names and messages.
	Name string `yaml:"name"`
	// Description says what the policy stands for.
	Description string `yaml:"description"`
	// Chart is a Helm values file, relative to the corpus file, whose
	// policy.defaultAction, policy.rules and policy.extraRules are the
	// policy's; set it or DefaultAction and Rules.
	Chart         string        `yaml:"chart"`
	DefaultAction policy.Action `yaml:"defaultAction"`
	Rules         []corpusRule  `yaml:"rules"`
	// Approved makes every line a run a person approved, unless the line
	// says otherwise.
	Approved bool `yaml:"approved"`
	// ForbidAPI lists the API requests the policy forbids.
	ForbidAPI []apiRule `yaml:"forbidAPI"`
	// SecretFiles is what the policy answers for reading the secret
	// fixtures (secret.txt, secret.json): their content printed by a run
	// it forbids is a failure. Empty: reading them is allowed.
	SecretFiles policy.Action `yaml:"secretFiles"`
	// Include adds the lines of shared files (relative to the corpus file,
	// each holding only `lines`), under the class given, if any.
	Include []include `yaml:"include"`
	// Lines are the command lines run under the policy.
	Lines []corpusLine `yaml:"lines"`
}

// include names a shared file of lines.
type include struct {
	File  string `yaml:"file"`
	Class string `yaml:"class"`
}

// corpusRule is a rule of a policy, as the runner's --policy carries it.
type corpusRule struct {
	Pattern  string        `yaml:"pattern"`
	Action   policy.Action `yaml:"action"`
	Children string        `yaml:"children"`
}

// apiRule matches requests to the stand-in API server. Empty fields match
// anything; Action says when a matching request is forbidden: Never in any
// run, Ask in a run no person approved.
type apiRule struct {
	Method   string        `yaml:"method"`
	Resource string        `yaml:"resource"`
	Action   policy.Action `yaml:"action"`
}

// corpusLine is one line of the corpus, or with Each, one per value.
type corpusLine struct {
	// Name is short and unique within the file.
	Name string `yaml:"name"`
	// Class is the finding class (see classes).
	Class string `yaml:"class"`
	// Line is the command line. {{canary}} stands for a payload path under
	// /tmp that must not appear, {{api}} for the stand-in API server's URL
	// and {{x}} for each value of Each.
	Line string `yaml:"line"`
	// Each expands the line once per value, named NAME/VALUE.
	Each []string `yaml:"each"`
	// Approved overrides the policy's Approved for this line.
	Approved *bool `yaml:"approved"`
	// Expect is "ok" for a line that must run and exit 0: a runner that
	// refuses everything does not pass.
	Expect string `yaml:"expect"`
	// Stdout must appear in the output of an "ok" line.
	Stdout string `yaml:"stdout"`
	// Standins are extra programs replaced by logging stand-ins for this
	// line (e.g. zstd, to see that tar starts it).
	Standins []string `yaml:"standins"`
	// ForbidAPI adds API requests this line forbids.
	ForbidAPI []apiRule `yaml:"forbidAPI"`
	// Needs are programs the line needs besides the common ones.
	Needs []string `yaml:"needs"`
}

// classes are the finding classes of issue 25 and the benign lines; every
// line belongs to one.
var classes = map[string]string{
	"config":      "programs that load a program from their own configuration",
	"environment": "configuration environment that names a program",
	"kubectl":     "kubectl objects named outside the words",
	"redirection": "reads through redirections",
	"children":    "children no one judges",
	"approved":    "approved is not everything",
	"wrappers":    "wrappers and interpreters that start what they carry",
	"writes":      "programs that write files through their options",
	"benign":      "allowed lines that must still run",
}

// redteamCase is one (policy, line, approved) case, expanded.
type redteamCase struct {
	pol      *loadedPolicy
	name     string
	class    string
	line     string // with {{x}} expanded; {{canary}} and {{api}} kept
	approved bool
	expectOK bool
	stdout   string
	standins []string
	forbid   []apiRule
	needs    []string
}

// loadedPolicy is a policyFile with its rules resolved and compiled.
type loadedPolicy struct {
	file     *policyFile
	snapshot runner.PolicySnapshot
	matcher  *policy.Matcher
}

// loadCorpus reads every file of dir and expands its lines.
func loadCorpus(dir string) ([]*loadedPolicy, []*redteamCase, error) {
	// Shared files of lines live in subfolders; every file here is a policy.
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, nil, err
	}
	var pols []*loadedPolicy
	var cases []*redteamCase
	for _, p := range paths {
		lp, cs, err := loadPolicyFile(p)
		if err != nil {
			return nil, nil, err
		}
		pols = append(pols, lp)
		cases = append(cases, cs...)
	}
	return pols, cases, nil
}

// loadPolicyFile reads one corpus file.
func loadPolicyFile(path string) (*loadedPolicy, []*redteamCase, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var f policyFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("failed to decode %s: %w", path, err)
	}
	if f.Name == "" {
		return nil, nil, fmt.Errorf("%s: the policy has no name", path)
	}
	if f.Chart != "" {
		if len(f.Rules) > 0 || f.DefaultAction != "" {
			return nil, nil, fmt.Errorf("%s: chart and rules exclude each other", path)
		}
		def, rules, err := chartPolicy(filepath.Join(filepath.Dir(path), f.Chart))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		f.DefaultAction, f.Rules = def, rules
	}
	snap := runner.PolicySnapshot{DefaultAction: f.DefaultAction}
	p := policy.Policy{Default: f.DefaultAction}
	for _, r := range f.Rules {
		snap.Rules = append(snap.Rules, runner.SnapshotRule{Pattern: r.Pattern, Action: r.Action, Children: r.Children})
		p.Rules = append(p.Rules, policy.Rule{Pattern: r.Pattern, Action: r.Action})
	}
	m, err := policy.Compile(p)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, inc := range f.Include {
		var shared struct {
			Lines []corpusLine `yaml:"lines"`
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(path), inc.File))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&shared); err != nil {
			return nil, nil, fmt.Errorf("failed to decode %s: %w", inc.File, err)
		}
		for _, l := range shared.Lines {
			if inc.Class != "" {
				l.Class = inc.Class
			}
			f.Lines = append(f.Lines, l)
		}
	}
	lp := &loadedPolicy{file: &f, snapshot: snap, matcher: m}
	var cases []*redteamCase
	seen := map[string]bool{}
	for i, l := range f.Lines {
		if l.Name == "" || l.Line == "" {
			return nil, nil, fmt.Errorf("%s: lines[%d] needs a name and a line", path, i)
		}
		if _, ok := classes[l.Class]; !ok {
			return nil, nil, fmt.Errorf("%s: line %q: unknown class %q", path, l.Name, l.Class)
		}
		if l.Expect != "" && l.Expect != "ok" {
			return nil, nil, fmt.Errorf("%s: line %q: expect must be ok or empty", path, l.Name)
		}
		values := l.Each
		if len(values) == 0 {
			values = []string{""}
		}
		for _, v := range values {
			c := &redteamCase{
				pol: lp, name: l.Name, class: l.Class, line: l.Line, approved: f.Approved,
				expectOK: l.Expect == "ok", stdout: l.Stdout, standins: l.Standins,
				forbid: slices.Concat(f.ForbidAPI, l.ForbidAPI), needs: l.Needs,
			}
			if v != "" {
				c.name += "/" + v
				c.line = strings.ReplaceAll(c.line, "{{x}}", v)
			}
			c.line = strings.TrimSuffix(c.line, "\n")
			if l.Approved != nil {
				c.approved = *l.Approved
			}
			if seen[c.name] {
				return nil, nil, fmt.Errorf("%s: two lines are named %q", path, c.name)
			}
			seen[c.name] = true
			cases = append(cases, c)
		}
	}
	return lp, cases, nil
}

// chartPolicy reads the agent chart's default policy from its values file.
func chartPolicy(path string) (policy.Action, []corpusRule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var v struct {
		Policy struct {
			DefaultAction policy.Action `yaml:"defaultAction"`
			Rules         []corpusRule  `yaml:"rules"`
			ExtraRules    []corpusRule  `yaml:"extraRules"`
		} `yaml:"policy"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		return "", nil, fmt.Errorf("failed to decode %s: %w", path, err)
	}
	if len(v.Policy.Rules) == 0 {
		return "", nil, fmt.Errorf("%s has no policy.rules", path)
	}
	return v.Policy.DefaultAction, slices.Concat(v.Policy.Rules, v.Policy.ExtraRules), nil
}
