// Package policyapi converts a CommandPolicy object into the pure
// policy.Policy, so the operator and `kubectl skills policy check` judge a
// command with the same code.
package policyapi

import (
	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policy"
)

// FromObject returns the rules and the examples of a CommandPolicy.
func FromObject(obj *skillsv1.CommandPolicy) (policy.Policy, []policy.Example) {
	p := policy.Policy{Default: policy.Action(obj.Spec.DefaultAction)}
	for _, r := range obj.Spec.Rules {
		p.Rules = append(p.Rules, policy.Rule{Pattern: r.Pattern, Action: policy.Action(r.Action), Description: r.Description})
	}
	examples := make([]policy.Example, 0, len(obj.Spec.Examples))
	for _, e := range obj.Spec.Examples {
		examples = append(examples, policy.Example{Command: e.Command, Expect: policy.Action(e.Expect)})
	}
	return p, examples
}

// Compile compiles a CommandPolicy and checks its examples; the error names
// the bad rule or every failing example.
func Compile(obj *skillsv1.CommandPolicy) (*policy.Matcher, error) {
	p, examples := FromObject(obj)
	m, err := policy.Compile(p)
	if err != nil {
		return nil, err
	}
	if err := m.CheckExamples(examples); err != nil {
		return nil, err
	}
	return m, nil
}
