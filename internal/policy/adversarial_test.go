package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policy/policytest"
)

// TestAdversarialCorpus judges every line of testdata/adversarial.yaml
// under every policy of the corpus and checks each expectation.
func TestAdversarialCorpus(t *testing.T) {
	c, err := policytest.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range c.Policies {
		m, err := policy.Compile(np.Policy)
		if err != nil {
			t.Fatalf("policy %s: %v", np.Name, err)
		}
		for _, l := range c.Lines {
			want, ok := l.Expect[np.Name]
			if !ok {
				continue
			}
			if d := m.Decide(l.Command); !policytest.Matches(want, d.Action) {
				t.Errorf("%s: %q: got %s, want %s: %s", np.Name, l.Command, d.Action, want, d.Reason)
			}
		}
	}
}

// TestChartDefaultExamples checks the examples the agent chart ships with
// its default policy, which the operator checks whenever the policy
// changes.
func TestChartDefaultExamples(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "charts", "agent", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Policy struct {
			DefaultAction string `yaml:"defaultAction"`
			Rules         []struct {
				Pattern string `yaml:"pattern"`
				Action  string `yaml:"action"`
			} `yaml:"rules"`
			Examples []struct {
				Command string `yaml:"command"`
				Expect  string `yaml:"expect"`
			} `yaml:"examples"`
		} `yaml:"policy"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	p := policy.Policy{Default: policy.Action(values.Policy.DefaultAction)}
	for _, r := range values.Policy.Rules {
		p.Rules = append(p.Rules, policy.Rule{Pattern: r.Pattern, Action: policy.Action(r.Action)})
	}
	var examples []policy.Example
	for _, e := range values.Policy.Examples {
		examples = append(examples, policy.Example{Command: e.Command, Expect: policy.Action(e.Expect)})
	}
	m, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(examples) < 8 {
		t.Fatalf("the chart has %d examples", len(examples))
	}
	if err := m.CheckExamples(examples); err != nil {
		t.Error(err)
	}
}
