package controller

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/policy"
)

// selection is what an Agent's skill selection resolves to.
type selection struct {
	entries  []catalog.Entry
	included []skillsv1.CatalogSkill
	excluded []skillsv1.ExcludedSkill
}

// selectSkills decides which selected Skills enter the catalog and why the
// others are left out. named maps each name of spec.skills.names to its
// Skill, nil when it does not exist; matched are the Skills the selector
// picks.
func selectSkills(named map[string]*skillsv1.Skill, matched []skillsv1.Skill) selection {
	var sel selection
	seen := map[string]bool{}
	consider := func(s *skillsv1.Skill) {
		if seen[s.Name] {
			sel.excluded = append(sel.excluded, skillsv1.ExcludedSkill{Name: s.Name, Reason: skillsv1.ExcludedDuplicate,
				Message: "selected both by name and by the selector; it is listed once"})
			return
		}
		seen[s.Name] = true
		switch {
		case s.Status.ServedGeneration == 0 || len(s.Status.ConfigMaps) == 0:
			sel.excluded = append(sel.excluded, skillsv1.ExcludedSkill{Name: s.Name, Reason: skillsv1.ExcludedInvalid,
				Message: "no valid generation is served: see kubectl describe skill " + s.Name})
		case s.Spec.Invocation == skillsv1.InvocationDisabled:
			sel.excluded = append(sel.excluded, skillsv1.ExcludedSkill{Name: s.Name, Reason: skillsv1.ExcludedDisabled,
				Message: "its invocation is Disabled"})
		default:
			sel.entries = append(sel.entries, catalogEntry(s))
		}
	}
	names := make([]string, 0, len(named))
	for name := range named {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if s := named[name]; s != nil {
			consider(s)
		} else {
			sel.excluded = append(sel.excluded, skillsv1.ExcludedSkill{Name: name, Reason: skillsv1.ExcludedNotFound,
				Message: "no Skill of this name in the namespace"})
		}
	}
	for i := range matched {
		if _, byName := named[matched[i].Name]; byName || !seen[matched[i].Name] {
			consider(&matched[i])
		}
	}
	sort.Slice(sel.entries, func(i, j int) bool { return sel.entries[i].Name < sel.entries[j].Name })
	sort.Slice(sel.excluded, func(i, j int) bool { return sel.excluded[i].Name < sel.excluded[j].Name })
	for _, e := range sel.entries {
		sel.included = append(sel.included, skillsv1.CatalogSkill{Name: e.Name, ContentHash: e.ContentHash})
	}
	return sel
}

// catalogEntry is a served Skill as its catalog entry. A Skill with
// spec.bundle names its image, which the agent's pods mount beside its
// shards.
func catalogEntry(s *skillsv1.Skill) catalog.Entry {
	e := catalog.Entry{
		Name:         s.Name,
		Description:  s.Spec.Description,
		Invocation:   string(invocationOrDefault(s.Spec.Invocation)),
		ContentHash:  s.Status.ContentHash,
		Shards:       len(s.Status.ConfigMaps),
		AllowedTools: s.Spec.AllowedTools,
	}
	if b := s.Spec.Bundle; b != nil && b.Image != "" {
		e.BundleImage, e.BundlePullPolicy = b.Image, b.PullPolicy
	}
	return e
}

func invocationOrDefault(m skillsv1.InvocationMode) skillsv1.InvocationMode {
	if m == "" {
		return skillsv1.InvocationAuto
	}
	return m
}

// toolWarnings names the allowed tools of catalog skills that the policy
// never allows: the skill expects a command it will never get to run.
func toolWarnings(entries []catalog.Entry, m *policy.Matcher, policyName string) []string {
	var warnings []string
	for _, e := range entries {
		for _, tool := range e.AllowedTools {
			pattern, ok := policy.ToolPattern(tool)
			if !ok {
				continue
			}
			command := strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(pattern, "**"), "*"))
			if command == "" {
				continue
			}
			if d := m.Decide(command); d.Action == policy.Never {
				warnings = append(warnings, fmt.Sprintf("skill %s expects %q, which CommandPolicy %s never allows", e.Name, tool, policyName))
			}
		}
	}
	return warnings
}

// skillChangesAgents tells whether an update of a Skill can change what an
// Agent makes of it: its labels (which selectors match it), whether it is
// served, or its catalog entry. Any other update, such as new instructions
// not served yet, leaves every Agent as it was. It reads exactly what
// selectSkills and catalogEntry read.
func skillChangesAgents(before, after *skillsv1.Skill) bool {
	served := func(s *skillsv1.Skill) bool { return s.Status.ServedGeneration != 0 && len(s.Status.ConfigMaps) != 0 }
	return !maps.Equal(before.Labels, after.Labels) || served(before) != served(after) ||
		!sameEntry(catalogEntry(before), catalogEntry(after))
}

// sameEntry tells whether two catalog entries are equal.
func sameEntry(a, b catalog.Entry) bool {
	return a.Name == b.Name && a.Description == b.Description && a.Invocation == b.Invocation &&
		a.ContentHash == b.ContentHash && a.Shards == b.Shards && slices.Equal(a.AllowedTools, b.AllowedTools) &&
		a.BundleImage == b.BundleImage && a.BundlePullPolicy == b.BundlePullPolicy
}

// selectorMatches tells whether a label selector selects an object's
// labels, as metav1.LabelSelectorAsSelector would; a selector it cannot
// parse selects nothing. A selector of labels only, the usual kind, is
// matched without parsing it: an object's labels are valid, so a key or
// value the parser would refuse matches none of them anyway.
func selectorMatches(sel *metav1.LabelSelector, set map[string]string) bool {
	if len(sel.MatchExpressions) == 0 {
		for k, v := range sel.MatchLabels {
			if got, ok := set[k]; !ok || got != v {
				return false
			}
		}
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(set))
}
