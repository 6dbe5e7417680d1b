package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// RefusalPrefix starts the one line the runner writes to stderr when it
// refuses a command, a simple command or a write.
const RefusalPrefix = "kubeskills: refused "

// maxRefusedText is how much of a refused command a refusal quotes.
const maxRefusedText = 200

// PolicySnapshot is the policy that judged a run, as the sandbox hands it to
// the runner (the --policy flag, in JSON): the rules and default action of
// the CommandPolicy, the allowed-tools of the skill the run serves, and
// whether a person approved the run.
type PolicySnapshot struct {
	// DefaultAction applies to a simple command that no rule matches;
	// empty means Ask.
	DefaultAction policy.Action `json:"defaultAction,omitempty"`
	// Rules are the policy's rules, in order.
	Rules []SnapshotRule `json:"rules,omitempty"`
	// AllowedTools are the skill's allowed-tools; empty narrows nothing.
	AllowedTools []string `json:"allowedTools,omitempty"`
	// Approved is true when a person approved the run: commands the policy
	// answers Ask and writing redirections may then run.
	Approved bool `json:"approved"`
}

// SnapshotRule is one rule of a PolicySnapshot.
type SnapshotRule struct {
	// Pattern is the rule's glob over a simple command's words.
	Pattern string `json:"pattern"`
	// Action is Always, Ask or Never.
	Action policy.Action `json:"action"`
	// Children is ChildrenTrusted when the programs that a command this
	// rule allowed starts are not judged; empty means they are judged.
	Children string `json:"children,omitempty"`
}

// SnapshotRule.Children values: whether the programs that a command the
// rule allowed starts are judged one by one (the default) or not.
const (
	ChildrenJudged  = "Judged"
	ChildrenTrusted = "Trusted"
)

// Encode returns the snapshot as the JSON text the --policy flag carries.
func (s PolicySnapshot) Encode() string {
	b, err := json.Marshal(s)
	if err != nil {
		// Strings, a bool and slices of them always marshal.
		panic(fmt.Sprintf("failed to encode policy snapshot: %v", err))
	}
	return string(b)
}

// ParsePolicySnapshot decodes the --policy flag's JSON. Unknown fields and
// trailing data are errors, so a snapshot the runner does not understand
// never runs as a weaker one.
func ParsePolicySnapshot(text string) (PolicySnapshot, error) {
	var s PolicySnapshot
	if strings.TrimSpace(text) == "" {
		return s, errors.New("failed to decode policy: it is empty, and a command is never run unjudged")
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("failed to decode policy %s: %w", clip(text, 80), err)
	}
	if dec.More() {
		return s, fmt.Errorf("failed to decode policy %s: trailing data after the JSON object", clip(text, 80))
	}
	return s, nil
}

// Compile turns the snapshot into an Enforcer; the error names the bad
// rule or default action.
func (s PolicySnapshot) Compile() (*Enforcer, error) {
	p := policy.Policy{Default: s.DefaultAction}
	for _, r := range s.Rules {
		p.Rules = append(p.Rules, policy.Rule{Pattern: r.Pattern, Action: r.Action})
	}
	m, err := policy.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("failed to compile policy: %w", err)
	}
	e := &Enforcer{m: m, tools: s.AllowedTools, approved: s.Approved, trusts: make([]bool, len(s.Rules))}
	for i, r := range s.Rules {
		switch r.Children {
		case "", ChildrenJudged:
		case ChildrenTrusted:
			e.trusts[i] = true
		default:
			return nil, fmt.Errorf("failed to compile policy: rules[%d].children must be %s or %s, got %q", i, ChildrenJudged, ChildrenTrusted, r.Children)
		}
	}
	return e, nil
}

// CompilePolicy decodes and compiles the --policy flag's JSON.
func CompilePolicy(text string) (*Enforcer, error) {
	s, err := ParsePolicySnapshot(text)
	if err != nil {
		return nil, err
	}
	return s.Compile()
}

// Enforcer judges what the runner's shell is about to do against the
// policy that judged the run. It is immutable and safe for concurrent use.
type Enforcer struct {
	m        *policy.Matcher
	tools    []string
	approved bool
	// trusts says, per rule, whether the programs that a command the rule
	// allowed starts go unjudged (ChildrenTrusted).
	trusts []bool
}

// Approved reports whether a person approved the run.
func (e *Enforcer) Approved() bool { return e.approved }

// Refusal is the error for something the runner will not run.
type Refusal struct {
	// What is the refused command line, argv or redirection, as shell text.
	What string
	// Reason says why, in one sentence.
	Reason string
	// Program is the file that would have run, for a program refused at
	// its exec; empty for the shell's own refusals.
	Program string
	// StartedBy names the program that started it, for a program refused
	// at its exec.
	StartedBy string
}

// Error is the one line the runner writes to stderr for the refusal.
func (r *Refusal) Error() string {
	s := RefusalPrefix + strconv.Quote(clip(r.What, maxRefusedText))
	if r.Program != "" {
		s += " (" + r.Program + ", started by " + r.StartedBy + ")"
	}
	return s + ": " + r.Reason
}

// Line judges a whole command line before any of it runs, as the
// controller did: Never is refused, and so is Ask in a run no person
// approved.
func (e *Enforcer) Line(command string) error {
	return e.refuse(command, e.m.DecideFor(command, e.tools))
}

// Args judges one simple command's argv, after every expansion, just
// before the shell runs it (a builtin, a function or a program).
func (e *Enforcer) Args(args []string) error {
	return e.refuse(argvText(args), e.m.DecideArgs(args, e.tools))
}

// refuse returns a Refusal when the decision does not let the command run
// in this run, or nil.
func (e *Enforcer) refuse(what string, d policy.Decision) error {
	switch {
	case d.Action == policy.Always:
		return nil
	case d.Action == policy.Ask && e.approved:
		return nil
	case d.Action == policy.Ask:
		return &Refusal{What: what, Reason: "the policy says Ask and no person approved this run: " + d.Reason}
	default:
		return &Refusal{What: what, Reason: "the policy says Never: " + d.Reason}
	}
}

// writeFlags are the open flags that make an open a write.
const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_APPEND | os.O_TRUNC

// Open judges a redirection the shell is about to open: path as written,
// dir the shell's working directory. Reading is always allowed; writing
// anything but /dev/null needs a run a person approved, as the judge makes
// any other writing redirection Ask.
func (e *Enforcer) Open(dir, path string, flag int) error {
	if flag&writeFlags == 0 || e.approved {
		return nil
	}
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(dir, abs)
	}
	if filepath.Clean(abs) == "/dev/null" {
		return nil
	}
	return &Refusal{What: "> " + path, Reason: "writing a file needs a run a person approved; only /dev/null may be written without one"}
}

// argvText renders an argv as shell words for a refusal.
func argvText(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			q = strconv.Quote(a)
		}
		b.WriteString(q)
		if b.Len() > maxRefusedText {
			break
		}
	}
	return b.String()
}

// clip shortens s to at most n bytes at a character boundary, marking the
// cut with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncateUTF8(strings.ToValidUTF8(s, "\uFFFD"), n) + "..."
}

// RefusalIn returns the runner's refusal line in a command's stderr, or ""
// when there is none. The refusal is the last line the shell writes, so
// the last such line is the one.
func RefusalIn(stderr string) string {
	found := ""
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, RefusalPrefix) {
			found = strings.TrimRight(line, "\n")
		}
	}
	return found
}
