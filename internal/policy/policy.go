// Package policy decides whether an agent may run a shell command.
//
// A Policy is an ordered list of glob rules over a command's words, each
// with an Action, plus a default action. Compile turns it into a Matcher.
// The Matcher parses a command as bash, judges every simple command of it on
// its own (inside lists, pipelines, subshells, blocks, loops, conditionals,
// substitutions and, where they are literal, the command strings given to
// shells, eval and wrappers), and answers with the strictest decision.
// Constructs that cannot be judged statically (command substitution,
// expansions in a command name, eval, shells, wrappers, interpreters,
// writing redirections, ...) are never Always: they get Ask, or Never when a
// rule says Never for some part. See docs/policy.md for the full semantics.
//
// The package is pure: it imports no Kubernetes code and keeps no global
// mutable state; a Matcher is safe for concurrent use.
package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"mvdan.cc/sh/v3/syntax"
)

// Action is what a policy decides for a command.
type Action string

const (
	// Always runs the command without asking anyone.
	Always Action = "Always"
	// Ask runs the command once a person approves it.
	Ask Action = "Ask"
	// Never refuses the command.
	Never Action = "Never"
)

// Limits that bound the work done for one command. Input beyond a limit is
// answered with Ask (or Never when a part judged so far is Never) and the
// reason names the limit.
const (
	// MaxCommandBytes is the longest command that is parsed at all.
	MaxCommandBytes = 64 << 10
	// MaxArgvBytes is the longest argv, quoted, that DecideArgs judges: an
	// expansion can make an argv far longer than the line it came from
	// (cat /var/log/*), and Linux passes up to about 2 MiB of arguments.
	// Its words are all literal, so judging it takes linear time.
	MaxArgvBytes = 2 << 20
	// MaxOpeners is the largest number of tokens that can open a nested
	// construct ('(', '{', '`' and the words if, while, until, for, case,
	// select, function, time and coproc) in a command that is parsed. It
	// bounds the nesting the parser has to follow, which costs more than
	// linear time when it is deep.
	MaxOpeners = 1024
	// MaxDepth is the deepest nesting of compound commands, substitutions
	// and wrapped commands that is judged without escalating to Ask.
	MaxDepth = 64
	// MaxScriptDepth is how many command strings nested in each other
	// (sh -c "sh -c '...'", eval, watch, ...) are parsed and judged.
	MaxScriptDepth = 4
	// MaxParts is how many simple commands a Decision lists; a command with
	// more is judged in full but escalated to at least Ask.
	MaxParts = 1024
	// MaxRules is the largest number of rules in a Policy.
	MaxRules = 256
	// MaxPatternBytes is the longest rule pattern.
	MaxPatternBytes = 1024
	// MaxPatternWords is the largest number of words in a rule pattern.
	MaxPatternWords = 63
)

// Valid reports whether a is Always, Ask or Never.
func (a Action) Valid() bool {
	return a == Always || a == Ask || a == Never
}

// Stricter reports whether a is stricter than b: Never > Ask > Always.
func (a Action) Stricter(b Action) bool {
	return strictness(a) > strictness(b)
}

// strictness orders actions; anything unknown counts as Never.
func strictness(a Action) int {
	switch a {
	case Always:
		return 0
	case Ask:
		return 1
	default:
		return 2
	}
}

// Rule is one glob pattern over a command's words and the action taken for
// the simple commands it matches.
type Rule struct {
	// Pattern is a glob over a simple command's words, e.g. `kubectl get *`.
	Pattern string
	// Action is taken for the commands the pattern matches.
	Action Action
	// Description says why the rule exists.
	Description string
}

// Policy is a set of rules and the action for commands no rule matches.
type Policy struct {
	// Rules are matched against every simple command; when several match,
	// the strictest action wins.
	Rules []Rule
	// Default applies to a simple command that no rule matches; empty means
	// Ask.
	Default Action
}

// Example is a command and the action a policy must decide for it.
type Example struct {
	// Command is a shell command line.
	Command string
	// Expect is the action the policy must decide.
	Expect Action
}

// Part is one simple command (or one construct) of a command line, with
// the decision taken for it alone.
type Part struct {
	// Command is the source text of the simple command or construct.
	Command string
	// Action is the decision for this part.
	Action Action
	// Rule is the pattern of the deciding rule, "" when the default action
	// or a construct decided.
	Rule string
	// RuleIndex is the index of the deciding rule, -1 when no rule decided.
	RuleIndex int
	// Reason explains the decision in one sentence.
	Reason string
}

// Decision is the verdict for a whole command line.
type Decision struct {
	// Action is the strictest action of all parts.
	Action Action
	// Rule is the pattern of the deciding rule, "" when the default action
	// or a construct decided.
	Rule string
	// RuleIndex is the index of the deciding rule, -1 when no rule decided.
	RuleIndex int
	// Reason names the deciding simple command and the rule or construct
	// that decided it.
	Reason string
	// Parts lists the simple commands and constructs judged, in source
	// order, at most MaxParts of them.
	Parts []Part
}

// Matcher judges commands against a compiled Policy. It is immutable and
// safe for concurrent use. Make one with Compile.
type Matcher struct {
	rules []compiledRule
	def   Action
	// byName holds, per literal first word, the indexes of the rules whose
	// pattern starts with that word, in rule order.
	byName map[string][]int
	// globFirst holds the indexes of the rules whose first pattern word is
	// a glob, in rule order.
	globFirst []int
	// matched and mayMatch hold, per rule, the end of a reason for a
	// command that matched it, or that may match it; noRule the end of a
	// reason for a command that matched no rule. They are worded once
	// here rather than for every simple command judged.
	matched, mayMatch []string
	noRule            string
	// parsers recycles shell parsers, which are costly to allocate, and
	// judges the scratch space of decisions (see getJudge).
	parsers, judges sync.Pool
}

// compiledRule is a Rule with its compiled pattern.
type compiledRule struct {
	Rule
	pat *pattern
}

// Compile checks a policy and prepares it for matching. The error names the
// first bad field, e.g. rules[3].
func Compile(p Policy) (*Matcher, error) {
	def := p.Default
	if def == "" {
		def = Ask
	}
	if !def.Valid() {
		return nil, fmt.Errorf("failed to compile default action %q: must be Always, Ask or Never", p.Default)
	}
	if len(p.Rules) > MaxRules {
		return nil, fmt.Errorf("failed to compile rules: %d rules, at most %d are allowed", len(p.Rules), MaxRules)
	}
	m := &Matcher{def: def, byName: map[string][]int{}, noRule: " matched no rule: default action " + string(def)}
	m.parsers.New = func() any { return syntax.NewParser() }
	for i, r := range p.Rules {
		if !r.Action.Valid() {
			return nil, fmt.Errorf("failed to compile rules[%d] %q: action %q must be Always, Ask or Never", i, r.Pattern, r.Action)
		}
		pat, err := compilePattern(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("failed to compile rules[%d] %q: %w", i, r.Pattern, err)
		}
		m.rules = append(m.rules, compiledRule{Rule: r, pat: pat})
		m.matched = append(m.matched, fmt.Sprintf(" matched rules[%d] %q (%s)", i, r.Pattern, r.Action))
		m.mayMatch = append(m.mayMatch, fmt.Sprintf(" may match rules[%d] %q (%s)", i, r.Pattern, r.Action))
		if pat.literalFirst {
			m.byName[pat.first] = append(m.byName[pat.first], i)
		} else {
			m.globFirst = append(m.globFirst, i)
		}
	}
	return m, nil
}

// Default returns the action for commands that no rule matches.
func (m *Matcher) Default() Action {
	return m.def
}

// Decide judges a command line.
func (m *Matcher) Decide(command string) Decision {
	return m.decide(command, nil, false)
}

// DecideFor judges a command line run on behalf of a skill whose
// allowed-tools are given. Non-empty allowedTools can only narrow the
// decision: a part the policy allows (Always) that no entry covers becomes
// Ask. Ask and Never are never widened. See ToolPattern for the accepted
// entries.
func (m *Matcher) DecideFor(command string, allowedTools []string) Decision {
	return m.decide(command, compileToolsOrNil(allowedTools), false)
}

// compileToolsOrNil compiles allowed-tools entries; nil for none, which
// narrows nothing.
func compileToolsOrNil(allowedTools []string) *toolSet {
	if len(allowedTools) == 0 {
		return nil
	}
	return compileTools(allowedTools)
}

// CheckExamples judges each example and returns an error naming every
// example whose decision differs from the expected action, or nil.
func (m *Matcher) CheckExamples(examples []Example) error {
	var errs []error
	for i, ex := range examples {
		if !ex.Expect.Valid() {
			errs = append(errs, fmt.Errorf("examples[%d] %s: expect %q must be Always, Ask or Never", i, quoteText(ex.Command), ex.Expect))
			continue
		}
		d := m.Decide(ex.Command)
		if d.Action != ex.Expect {
			errs = append(errs, fmt.Errorf("examples[%d] %s: expected %s, got %s: %s", i, quoteText(ex.Command), ex.Expect, d.Action, d.Reason))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("failed to check examples: %w", errors.Join(errs...))
}

// decide runs one judgement; tools is nil when nothing narrows it, and
// argv is set when the command is an argv quoted by DecideArgs.
func (m *Matcher) decide(command string, tools *toolSet, argv bool) Decision {
	j := m.getJudge(tools, argv)
	j.top(command)
	d := j.decision()
	m.putJudge(j)
	return d
}

// maxQuoted is how much of a command a reason quotes.
const maxQuoted = 120

// quoteText quotes a command for a reason, shortening long ones.
func quoteText(s string) string {
	return string(appendQuoted(nil, s))
}

// appendQuoted appends quoteText(s) to dst.
func appendQuoted(dst []byte, s string) []byte {
	if len(s) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return strconv.AppendQuote(dst, strings.TrimSpace(s[:cut]+"..."))
	}
	return strconv.AppendQuote(dst, strings.TrimSpace(s))
}

// isRuneStart reports whether b starts a UTF-8 sequence.
func isRuneStart(b byte) bool {
	return b&0xC0 != 0x80
}

// toolSet is a skill's allowed-tools, as patterns over commands.
type toolSet struct {
	all  bool
	pats []*pattern
}

// ToolPattern converts one allowed-tools entry into a rule pattern:
//
//	Bash                    every command ("**")
//	Bash(*)                 every command
//	Bash(git status:*)      "git status *": git status with any arguments
//	Bash(kubectl get *)     the pattern as written
//	git, kubectl get        "git *", "kubectl get *": a command prefix
//
// ok is false for entries naming other tools (Read, Edit(...), WebFetch,
// mcp__server__tool, ...): they allow no command.
func ToolPattern(entry string) (pattern string, ok bool) {
	entry = strings.TrimSpace(entry)
	switch {
	case entry == "Bash":
		return "**", true
	case strings.HasPrefix(entry, "Bash(") && strings.HasSuffix(entry, ")"):
		inner := strings.TrimSpace(entry[len("Bash(") : len(entry)-1])
		switch {
		case inner == "" || inner == "*":
			return "**", true
		case strings.HasSuffix(inner, ":*"):
			return strings.TrimSpace(strings.TrimSuffix(inner, ":*")) + " *", true
		}
		return inner, true
	case entry == "" || strings.ContainsAny(entry, "()") || strings.HasPrefix(entry, "mcp__"):
		return "", false
	}
	if r := []rune(entry)[0]; unicode.IsUpper(r) {
		return "", false
	}
	return entry + " *", true
}

// SplitAllowedTools splits an allowed-tools string from SKILL.md front
// matter, where entries are separated by spaces or commas outside
// parentheses: "Bash(git status:*) Read, Grep".
func SplitAllowedTools(s string) []string {
	var out []string
	depth, start := 0, -1
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0 && (r == ',' || unicode.IsSpace(r)):
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// compileTools compiles allowed-tools entries; entries that are not valid
// patterns allow nothing.
func compileTools(entries []string) *toolSet {
	ts := &toolSet{}
	for _, e := range entries {
		p, ok := ToolPattern(e)
		if !ok {
			continue
		}
		if p == "**" {
			ts.all = true
			continue
		}
		if pat, err := compilePattern(p); err == nil {
			ts.pats = append(ts.pats, pat)
		}
	}
	return ts
}

// covers reports whether an entry allows the command, as written or by the
// base name of its path, whatever its expansions turn out to be.
func (ts *toolSet) covers(words []cword) bool {
	if ts.all {
		return true
	}
	if len(words) == 0 {
		return false
	}
	base := ""
	if strings.Contains(words[0].text, "/") {
		base = baseName(words[0].text)
	}
	for _, p := range ts.pats {
		if p.match(words, "", true) || base != "" && p.match(words, base, true) {
			return true
		}
	}
	return false
}
