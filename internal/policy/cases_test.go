package policy

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.yaml.in/yaml/v3"
)

// update rewrites testdata/cases.yaml from the table.
var update = flag.Bool("update", false, "rewrite testdata/cases.yaml from the table in decide_test.go")

// casesFile is where the table is exported for the CLI's tests.
const casesFile = "testdata/cases.yaml"

// casesDoc is the shape of testdata/cases.yaml.
type casesDoc struct {
	Policy struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			DefaultAction string `yaml:"defaultAction"`
			Rules         []struct {
				Pattern     string `yaml:"pattern"`
				Action      string `yaml:"action"`
				Description string `yaml:"description"`
			} `yaml:"rules"`
		} `yaml:"spec"`
	} `yaml:"policy"`
	Cases []struct {
		Command string `yaml:"command"`
		Expect  string `yaml:"expect"`
		Reason  string `yaml:"reason"`
	} `yaml:"cases"`
}

// renderCases writes the policy and the table as YAML. Strings are written
// double-quoted with Go escapes, which YAML reads the same way.
func renderCases(p Policy, cases []tableCase) []byte {
	var b bytes.Buffer
	b.WriteString("# Code generated from the table in internal/policy/decide_test.go. DO NOT EDIT.\n")
	b.WriteString("# Regenerate with: go test ./internal/policy -run TestCasesFile -update\n")
	b.WriteString("#\n")
	b.WriteString("# policy is a CommandPolicy. Every case must get the action in expect, and\n")
	b.WriteString("# its reason must contain reason when reason is not empty.\n")
	b.WriteString("policy:\n")
	b.WriteString("  apiVersion: kubeskills.io/v1alpha1\n")
	b.WriteString("  kind: CommandPolicy\n")
	b.WriteString("  metadata:\n")
	b.WriteString("    name: realistic\n")
	b.WriteString("  spec:\n")
	fmt.Fprintf(&b, "    defaultAction: %s\n", p.Default)
	b.WriteString("    rules:\n")
	for _, r := range p.Rules {
		fmt.Fprintf(&b, "    - pattern: %s\n", strconv.Quote(r.Pattern))
		fmt.Fprintf(&b, "      action: %s\n", r.Action)
		fmt.Fprintf(&b, "      description: %s\n", strconv.Quote(r.Description))
	}
	b.WriteString("cases:\n")
	for _, c := range cases {
		fmt.Fprintf(&b, "- command: %s\n", strconv.Quote(c.command))
		fmt.Fprintf(&b, "  expect: %s\n", c.expect)
		if c.reason != "" {
			fmt.Fprintf(&b, "  reason: %s\n", strconv.Quote(c.reason))
		}
	}
	return b.Bytes()
}

// TestCasesFile keeps testdata/cases.yaml equal to the table and checks
// that it reads back as the same policy and cases.
func TestCasesFile(t *testing.T) {
	p, cases := realisticPolicy(), decideTable()
	want := renderCases(p, cases)
	if *update {
		if err := os.MkdirAll(filepath.Dir(casesFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(casesFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(casesFile)
	if err != nil {
		t.Fatalf("failed to read %s (run with -update): %v", casesFile, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./internal/policy -run TestCasesFile -update", casesFile)
	}
	var doc casesDoc
	if err := yaml.Unmarshal(got, &doc); err != nil {
		t.Fatalf("failed to parse %s: %v", casesFile, err)
	}
	if doc.Policy.Kind != "CommandPolicy" || doc.Policy.Spec.DefaultAction != string(p.Default) || len(doc.Policy.Spec.Rules) != len(p.Rules) {
		t.Fatalf("%s: policy does not read back", casesFile)
	}
	for i, r := range doc.Policy.Spec.Rules {
		if r.Pattern != p.Rules[i].Pattern || r.Action != string(p.Rules[i].Action) {
			t.Errorf("%s: rules[%d] reads back as %q %s", casesFile, i, r.Pattern, r.Action)
		}
	}
	if len(doc.Cases) != len(cases) {
		t.Fatalf("%s: %d cases, want %d", casesFile, len(doc.Cases), len(cases))
	}
	for i, c := range doc.Cases {
		if c.Command != cases[i].command || c.Expect != string(cases[i].expect) || c.Reason != cases[i].reason {
			t.Errorf("%s: cases[%d] reads back as %q", casesFile, i, short(c.Command))
		}
	}
}
