package policy_test

import (
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policy/policytest"
)

// TestWarningsCorpusPolicies checks the warnings of the adversarial
// corpus's policies, the agent chart's default among them: only the
// policies that allow more than they seem to warn.
func TestWarningsCorpusPolicies(t *testing.T) {
	c, err := policytest.Default()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"chart-default":  nil,
		"docs-read-only": nil,
		// kubectl * lets kubectl label and scale through; kubectl get
		// secrets asks a person
		"docs-precedence": {`ToolAllowsMore rules[0] "kubectl *": it also allows, without a person: "kubectl delete pod web" deletes objects; "kubectl label`},
		"test-always":     nil,
		// find -exec, xargs and the action flags already ask a person
		"find-always":  nil,
		"tools-always": nil,
		"deny-list":    {"DefaultAlways defaultAction: Always runs every command that no rule matches"},
	}
	for _, np := range c.Policies {
		exp, ok := want[np.Name]
		if !ok {
			t.Errorf("policy %q of the corpus has no expectation here", np.Name)
			continue
		}
		m, err := policy.Compile(np.Policy)
		if err != nil {
			t.Fatal(err)
		}
		ws := m.Warnings()
		if len(ws) != len(exp) {
			t.Errorf("%s: got %d warnings %v, want %d", np.Name, len(ws), ws, len(exp))
			continue
		}
		for i, w := range ws {
			if got := string(w.Kind) + " " + w.String(); !strings.HasPrefix(got, exp[i]) {
				t.Errorf("%s: warning %d is %q, want it to start with %q", np.Name, i, got, exp[i])
			}
			if strings.Contains(w.Message, "secrets") {
				t.Errorf("%s: %q names Secrets, which the policy asks a person for", np.Name, w)
			}
		}
	}
}
