package policytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
)

func TestDefaultCorpus(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Lines) < 300 {
		t.Errorf("corpus has %d lines, want at least 300", len(c.Lines))
	}
	if len(c.Policies) < 5 || c.Policies[0].Name != "chart-default" {
		t.Fatalf("corpus has %d policies, want at least 5 with chart-default first", len(c.Policies))
	}
	// The chart's default is read from the chart, so it is what ships.
	if p := c.Policies[0].Policy; p.Default != policy.Ask || len(p.Rules) == 0 || p.Rules[0].Pattern != "kubectl get *" {
		t.Errorf("chart-default = %+v, want the rules of charts/agent/values.yaml", p)
	}
	always := 0
	for _, l := range c.Lines {
		for _, e := range l.Expect {
			if e == ExpectAlways {
				always++
				break
			}
		}
	}
	if always < 100 {
		t.Errorf("%d lines are expected Always under some policy, want at least 100", always)
	}
}

func TestLoadExpandsEveryPolicy(t *testing.T) {
	path := writeCorpus(t, `
policies:
- {name: a, rules: [{pattern: "ls *", action: Always}]}
- {name: b, defaultAction: Never, rules: [{pattern: "ls *", action: Ask}]}
lines:
- {command: "ls", expect: {"*": NotAlways, a: Always}}
- {command: "rm x", finding: f1}
`)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Lines[0].Expect; got["a"] != "Always" || got["b"] != "NotAlways" || len(got) != 2 {
		t.Errorf("expect = %v, want a: Always, b: NotAlways", got)
	}
	if l := c.Lines[1]; l.Finding != "f1" || len(l.Expect) != 0 {
		t.Errorf("line 1 = %+v, want finding f1 and no expectation", l)
	}
	if c.Policies[1].Policy.Default != policy.Never {
		t.Errorf("policy b default = %s", c.Policies[1].Policy.Default)
	}
}

func TestLoadRejectsBadCorpora(t *testing.T) {
	for name, tc := range map[string]struct{ body, want string }{
		"unknown policy": {`
policies: [{name: a, rules: [{pattern: "ls *", action: Always}]}]
lines: [{command: ls, expect: {b: Always}}]`, `"b", which is not a policy`},
		"bad expectation": {`
policies: [{name: a, rules: [{pattern: "ls *", action: Always}]}]
lines: [{command: ls, expect: {a: Sometimes}}]`, `"Sometimes"`},
		"bad rule": {`
policies: [{name: a, rules: [{pattern: "ls; rm", action: Always}]}]
lines: []`, `rules[0]`},
		"duplicate policy": {`
policies: [{name: a, rules: []}, {name: a, rules: []}]`, `used twice`},
		"unknown field": {`
policies: [{name: a, rulez: []}]`, `rulez`},
		"empty command": {`
policies: [{name: a, rules: []}]
lines: [{command: ""}]`, `command is empty`},
		"chart without rules": {`
policies: [{name: a, chart: values.yaml}]`, `no policy.rules`},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeCorpus(t, tc.body)
			if err := os.WriteFile(filepath.Join(filepath.Dir(path), "values.yaml"), []byte("policy: {}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		expect string
		got    policy.Action
		want   bool
	}{
		{ExpectNotAlways, policy.Ask, true},
		{ExpectNotAlways, policy.Never, true},
		{ExpectNotAlways, policy.Always, false},
		{ExpectAlways, policy.Always, true},
		{ExpectNever, policy.Ask, false},
	} {
		if got := Matches(tc.expect, tc.got); got != tc.want {
			t.Errorf("Matches(%s, %s) = %v, want %v", tc.expect, tc.got, got, tc.want)
		}
	}
}

func writeCorpus(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "corpus.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
