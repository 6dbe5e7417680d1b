package policyimport

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// File is one source file.
type File struct {
	// Name names the file in notes and descriptions.
	Name string
	// Data is its content.
	Data []byte
}

// codexDecisions maps a prefix_rule decision to an action.
var codexDecisions = map[string]policy.Action{
	"allow":     policy.Always,
	"prompt":    policy.Ask,
	"forbidden": policy.Never,
}

// maxExpansion bounds the rules one prefix_rule may expand to.
const maxExpansion = 64

// codexRule is one prefix_rule, read.
type codexRule struct {
	// Source is file:line.
	Source string
	// Pattern holds, per position, the alternatives of the token there.
	Pattern [][]string
	// Decision is allow, prompt or forbidden.
	Decision string
	// Justification is the rule's reason, if any.
	Justification string
	// Match and NotMatch are the rule's examples, as argv.
	Match, NotMatch [][]string
}

// parseCodex reads the prefix rules of .rules files, in order. Calls that
// are not prefix_rule are returned as notes.
func parseCodex(files []File) ([]codexRule, []Note, error) {
	var rules []codexRule
	var notes []Note
	for _, f := range files {
		calls, err := parseCalls(f.Name, string(f.Data))
		if err != nil {
			return nil, nil, err
		}
		for _, c := range calls {
			source := fmt.Sprintf("%s:%d", f.Name, c.line)
			switch c.name {
			case "prefix_rule":
				r, err := readPrefixRule(source, c)
				if err != nil {
					return nil, nil, err
				}
				rules = append(rules, r)
			case "host_executable":
				notes = append(notes, Note{Source: source, Skipped: true,
					Message: "host_executable limits which paths fall back to a rule for a base name; a CommandPolicy matches a path against its base name's rules always, and keeps the stricter result"})
			case "network_rule":
				notes = append(notes, Note{Source: source, Skipped: true,
					Message: "network_rule decides network access, not commands; a CommandPolicy's sandbox.egress decides where a sandbox may connect"})
			default:
				return nil, nil, fmt.Errorf("%s: unknown function %s: a .rules file calls prefix_rule, host_executable and network_rule", source, c.name)
			}
		}
	}
	return rules, notes, nil
}

// readPrefixRule checks the arguments of one prefix_rule.
func readPrefixRule(source string, c call) (codexRule, error) {
	r := codexRule{Source: source, Decision: "allow"}
	for key, v := range c.args {
		var err error
		switch key {
		case "pattern":
			r.Pattern, err = codexPattern(v)
		case "decision":
			if !v.isStr() || codexDecisions[v.str] == "" {
				err = fmt.Errorf("decision must be \"allow\", \"prompt\" or \"forbidden\"")
			}
			r.Decision = v.str
		case "justification":
			switch {
			case v.kind == kindNone:
			case !v.isStr() || strings.TrimSpace(v.str) == "":
				err = fmt.Errorf("justification must be a string that is not empty")
			default:
				r.Justification = v.str
			}
		case "match":
			r.Match, err = codexExamples(v)
		case "not_match":
			r.NotMatch, err = codexExamples(v)
		default:
			err = fmt.Errorf("unknown argument %s: prefix_rule takes pattern, decision, justification, match and not_match", key)
		}
		if err != nil {
			return codexRule{}, fmt.Errorf("%s: prefix_rule: %w", source, err)
		}
	}
	if r.Pattern == nil {
		return codexRule{}, fmt.Errorf("%s: prefix_rule: pattern is missing", source)
	}
	return r, nil
}

// codexPattern reads a pattern: a non-empty list whose items are strings or
// non-empty lists of strings (alternatives).
func codexPattern(v value) ([][]string, error) {
	if !v.isList() || len(v.list) == 0 {
		return nil, fmt.Errorf("pattern must be a list of strings that is not empty")
	}
	var out [][]string
	for _, item := range v.list {
		switch {
		case item.isStr():
			out = append(out, []string{item.str})
		case item.isList() && len(item.list) > 0:
			var alts []string
			for _, a := range item.list {
				if !a.isStr() {
					return nil, fmt.Errorf("pattern alternatives must be strings")
				}
				alts = append(alts, a.str)
			}
			out = append(out, alts)
		default:
			return nil, fmt.Errorf("a pattern element must be a string or a list of strings that is not empty")
		}
	}
	return out, nil
}

// codexExamples reads match or not_match: argv lists, or strings split the
// way a POSIX shell splits words.
func codexExamples(v value) ([][]string, error) {
	if !v.isList() {
		return nil, fmt.Errorf("examples must be a list")
	}
	var out [][]string
	for _, item := range v.list {
		var argv []string
		switch {
		case item.isStr():
			words, err := shlexSplit(item.str)
			if err != nil {
				return nil, fmt.Errorf("example %q: %w", item.str, err)
			}
			argv = words
		case item.isList():
			for _, w := range item.list {
				if !w.isStr() {
					return nil, fmt.Errorf("example tokens must be strings")
				}
				argv = append(argv, w.str)
			}
		default:
			return nil, fmt.Errorf("an example must be a string or a list of strings")
		}
		if len(argv) == 0 {
			return nil, fmt.Errorf("an example cannot be empty")
		}
		out = append(out, argv)
	}
	return out, nil
}

// matches reports whether the rule matches an argv: the argv starts with
// one alternative of each pattern position, compared exactly.
func (r codexRule) matches(argv []string) bool {
	if len(argv) < len(r.Pattern) {
		return false
	}
	for i, alts := range r.Pattern {
		found := false
		for _, a := range alts {
			if argv[i] == a {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// codexDecide is Codex's decision for an argv under a set of rules: the
// strictest decision of all matching rules (forbidden over prompt over
// allow), or "" when none matches and Codex falls back to its heuristics.
func codexDecide(rules []codexRule, argv []string) string {
	best := ""
	rank := map[string]int{"": 0, "allow": 1, "prompt": 2, "forbidden": 3}
	for _, r := range rules {
		if r.matches(argv) && rank[r.Decision] > rank[best] {
			best = r.Decision
		}
	}
	return best
}

// Codex translates Codex execpolicy .rules files. Each prefix_rule becomes
// one rule per combination of its alternatives, whose pattern is the
// prefix's words, quoted, then a final * (any further arguments). Its match
// and not_match examples become examples with the action Codex decides for
// them under all the rules.
func Codex(files []File, opts Options) (*Result, error) {
	rules, notes, err := parseCodex(files)
	if err != nil {
		return nil, err
	}
	r := &Result{Notes: notes}
	r.defaultAction(opts, policy.Always, "(no rule matches)",
		"Codex decides a command that no rule matches by its own heuristics and approval mode, and in its usual mode runs it in its sandbox without asking")
	var exampleSource []string
	seenExample := map[string]bool{}
	for _, cr := range rules {
		patterns, err := codexPatterns(cr.Pattern)
		if err != nil {
			r.note(cr.Source, true, "%v", err)
			continue
		}
		desc := cr.Source + ": prefix_rule " + cr.Decision
		if cr.Justification != "" {
			desc += ": " + cr.Justification
		}
		for _, p := range patterns {
			r.Policy.Rules = append(r.Policy.Rules, policy.Rule{Pattern: p, Action: codexDecisions[cr.Decision], Description: desc})
		}
		r.Translated++
		for _, set := range []struct {
			name  string
			argvs [][]string
		}{{"match", cr.Match}, {"not_match", cr.NotMatch}} {
			for _, argv := range set.argvs {
				command := joinWords(argv)
				if seenExample[command] {
					continue
				}
				seenExample[command] = true
				decision := codexDecide(rules, argv)
				expect := r.Policy.Default
				if decision != "" {
					expect = codexDecisions[decision]
				}
				r.Examples = append(r.Examples, policy.Example{Command: command, Expect: expect})
				exampleSource = append(exampleSource, cr.Source+" "+set.name)
			}
		}
	}
	if _, err := r.check(exampleSource); err != nil {
		return nil, err
	}
	return r, nil
}

// codexPatterns expands the alternatives of a prefix into patterns.
func codexPatterns(pattern [][]string) ([]string, error) {
	n := 1
	for _, alts := range pattern {
		n *= len(alts)
		if n > maxExpansion {
			return nil, fmt.Errorf("its alternatives expand to more than %d rules", maxExpansion)
		}
	}
	prefixes := [][]string{nil}
	for _, alts := range pattern {
		var next [][]string
		for _, p := range prefixes {
			for _, a := range alts {
				next = append(next, append(append([]string(nil), p...), a))
			}
		}
		prefixes = next
	}
	var out []string
	seen := map[string]bool{}
	for _, words := range prefixes {
		first := words[0]
		if first == "" || strings.Contains(first, "=") && !strings.Contains(first, "/") {
			return nil, fmt.Errorf("the program %q cannot be a command's first word in a pattern", first)
		}
		p := joinWords(words) + " *"
		if err := compileOne(p); err != nil {
			return nil, fmt.Errorf("the translation %q is not a valid pattern: %v", p, err)
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// shlexSplit splits a string into words as a POSIX shell does without
// expansions: spaces separate words, single quotes are literal, double
// quotes keep a backslash except before $, `, ", \ and a newline, a
// backslash outside quotes escapes the next character, and # at the start
// of a word begins a comment.
func shlexSplit(s string) ([]string, error) {
	var words []string
	var b strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, b.String())
				b.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '\\':
			i++
			if i >= len(s) {
				return nil, errors.New("a backslash at the end")
			}
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
			inWord = true
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("an unterminated single quote")
			}
			b.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue
					}
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("an unterminated double quote")
			}
			inWord = true
		default:
			b.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, b.String())
	}
	return words, nil
}
