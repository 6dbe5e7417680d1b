package policy_test

import (
	"testing"

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
