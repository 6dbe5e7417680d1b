package controller

import (
	"sync"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policyapi"
)

// PolicyCache compiles each CommandPolicy generation once: a generation
// never changes, so neither does its matcher. It keeps the latest
// generation of each policy. The zero value is ready to use.
type PolicyCache struct {
	mu    sync.Mutex
	byUID map[string]compiledPolicy
}

type compiledPolicy struct {
	generation int64
	matcher    *policy.Matcher
	err        error
}

// Compile returns the policy's matcher, or why it is not in force (a bad
// rule, a failing example).
func (c *PolicyCache) Compile(pol *skillsv1.CommandPolicy) (*policy.Matcher, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := string(pol.UID)
	if e, ok := c.byUID[key]; ok && key != "" && e.generation == pol.Generation {
		return e.matcher, e.err
	}
	m, err := policyapi.Compile(pol)
	if c.byUID == nil {
		c.byUID = map[string]compiledPolicy{}
	}
	c.byUID[key] = compiledPolicy{generation: pol.Generation, matcher: m, err: err}
	return m, err
}
