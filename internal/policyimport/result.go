// Package policyimport translates the command rules of other agents into the
// rules of a CommandPolicy: Claude Code's permissions (settings.json) and
// Codex's execpolicy (.rules files).
//
// Each source rule is translated so that it matches the same commands it
// matched where it came from, or it is reported as not translatable and left
// out. A rule is never widened: an allow rule never becomes a rule that
// allows more, and a deny or ask rule never becomes one that catches less.
// Where the source decides a command that no rule matches on its own
// (Claude Code's permission modes, Codex's heuristics), the default action
// of the result is Ask unless the caller chooses another, and a note says so.
// See docs/policy.md, "Importing rules".
//
// The package is pure: it imports no Kubernetes code.
package policyimport

import (
	"fmt"
	"strings"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// Options tune a translation.
type Options struct {
	// Default is the default action of the result; empty means the one the
	// source implies when it is not wider than Ask, and Ask otherwise.
	Default policy.Action
}

// Note is one thing about the translation a person should know: a source
// rule that was left out, or a difference in meaning.
type Note struct {
	// Source names the source rule or setting, e.g.
	// `permissions.allow[2] "Read(./.env)"` or `git.rules:12`.
	Source string
	// Message says what happened and why.
	Message string
	// Skipped is set when the source rule was not translated at all.
	Skipped bool
}

// String formats a note as one line.
func (n Note) String() string {
	if n.Skipped {
		return n.Source + ": not translated: " + n.Message
	}
	return n.Source + ": " + n.Message
}

// Result is a translated policy.
type Result struct {
	// Policy holds the rules and the default action. Rule descriptions name
	// the source rule.
	Policy policy.Policy
	// Examples are commands and the actions the source decides for them
	// (Codex's match and not_match examples), kept only where the
	// translated policy decides the same.
	Examples []policy.Example
	// Notes list what was not translated and the differences in meaning.
	Notes []Note
	// Translated counts the source rules that were translated.
	Translated int
}

// note adds a note.
func (r *Result) note(source string, skipped bool, format string, args ...any) {
	r.Notes = append(r.Notes, Note{Source: source, Message: fmt.Sprintf(format, args...), Skipped: skipped})
}

// check compiles the result, which must always succeed because every
// pattern was compiled on its own before, and keeps the examples the
// translated policy decides as the source does.
func (r *Result) check(exampleSource []string) (*policy.Matcher, error) {
	if len(r.Policy.Rules) > policy.MaxRules {
		return nil, fmt.Errorf("the translation has %d rules, a CommandPolicy holds at most %d: split the source into several policies",
			len(r.Policy.Rules), policy.MaxRules)
	}
	m, err := policy.Compile(r.Policy)
	if err != nil {
		return nil, fmt.Errorf("failed to compile the translated policy: %w", err)
	}
	kept := r.Examples[:0]
	for i, ex := range r.Examples {
		d := m.Decide(ex.Command)
		if d.Action == ex.Expect {
			kept = append(kept, ex)
			continue
		}
		r.note(exampleSource[i], false, "example %q left out of spec.examples: the source decides %s, the CommandPolicy %s (%s)",
			ex.Command, ex.Expect, d.Action, d.Reason)
	}
	r.Examples = kept
	return m, nil
}

// compileOne reports whether a pattern is valid on its own.
func compileOne(pattern string) error {
	_, err := policy.Compile(policy.Policy{Rules: []policy.Rule{{Pattern: pattern, Action: policy.Never}}})
	if err != nil {
		// The error names rules[0]; say what is wrong with the pattern.
		msg := err.Error()
		if i := strings.Index(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// safeLiteral reports whether a word needs no quoting in a pattern: it
// holds only characters that are neither glob nor shell syntax.
func safeLiteral(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("-_./:=,@%+^", r):
		default:
			return false
		}
	}
	return true
}

// quoteWord writes a word so that a pattern reads it literally.
func quoteWord(s string) string {
	if safeLiteral(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// joinWords writes an argv as a command line that a shell reads back as the
// same words.
func joinWords(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = quoteWord(w)
	}
	return strings.Join(quoted, " ")
}

// defaultAction picks the default action: the caller's choice, else the
// source's when it is not wider than Ask, else Ask with a note.
func (r *Result) defaultAction(opts Options, implied policy.Action, source, why string) {
	switch {
	case opts.Default != "":
		r.Policy.Default = opts.Default
		if opts.Default != implied {
			r.note(source, false, "%s; the default action is %s, as chosen", why, opts.Default)
		}
	case implied == policy.Always:
		r.Policy.Default = policy.Ask
		r.note(source, false, "%s; the default action is Ask, never Always unless chosen (--default Always)", why)
	default:
		r.Policy.Default = implied
		if why != "" {
			r.note(source, false, "%s; the default action is %s", why, implied)
		}
	}
}
