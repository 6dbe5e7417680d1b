package policyimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// claudeLists are the rule lists of Claude Code's permissions, in the order
// Claude Code consults them, with the action each maps to.
var claudeLists = []struct {
	key    string
	action policy.Action
}{
	{"deny", policy.Never},
	{"ask", policy.Ask},
	{"allow", policy.Always},
}

// claudeModes maps permissions.defaultMode to the action Claude Code takes
// for a Bash command that no rule matches, and says why where it is not
// plainly Ask.
var claudeModes = map[string]struct {
	action policy.Action
	why    string
}{
	"":                  {policy.Ask, ""},
	"default":           {policy.Ask, ""},
	"acceptEdits":       {policy.Ask, ""},
	"plan":              {policy.Ask, `defaultMode "plan" runs no command while a plan is made, and asks once it is left`},
	"dontAsk":           {policy.Never, `defaultMode "dontAsk" refuses every command that no allow rule matches`},
	"bypassPermissions": {policy.Always, `defaultMode "bypassPermissions" runs every command that no rule matches without asking`},
	"auto":              {policy.Always, `defaultMode "auto" lets a classifier approve commands that no rule matches`},
}

// Claude translates the permissions of a Claude Code settings.json:
// permissions.deny, ask and allow become Never, Ask and Always rules, in that
// order. name names the file in notes.
func Claude(name string, data []byte, opts Options) (*Result, error) {
	var settings struct {
		Permissions map[string]json.RawMessage `json:"permissions"`
		Hooks       json.RawMessage            `json:"hooks"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&settings); err != nil {
		return nil, fmt.Errorf("%s is not a Claude Code settings file (JSON with a permissions object): %w", name, err)
	}
	if settings.Permissions == nil {
		return nil, fmt.Errorf("%s has no permissions object: want {\"permissions\": {\"allow\": [...], \"ask\": [...], \"deny\": [...]}}", name)
	}
	r := &Result{}
	var mode string
	if raw, ok := settings.Permissions["defaultMode"]; ok {
		if err := json.Unmarshal(raw, &mode); err != nil {
			return nil, fmt.Errorf("%s: permissions.defaultMode must be a string: %w", name, err)
		}
	}
	m, ok := claudeModes[mode]
	if !ok {
		return nil, fmt.Errorf("%s: unknown permissions.defaultMode %q: want one of default, acceptEdits, plan, dontAsk, bypassPermissions, auto", name, mode)
	}
	r.defaultAction(opts, m.action, "permissions.defaultMode", m.why)
	for key := range settings.Permissions {
		switch key {
		case "allow", "ask", "deny", "defaultMode":
		default:
			r.note("permissions."+key, true, "only allow, ask, deny and defaultMode speak of commands")
		}
	}
	if len(settings.Hooks) > 0 && !bytes.Equal(bytes.TrimSpace(settings.Hooks), []byte("null")) {
		r.note("hooks", true, "hooks are programs Claude Code runs; what a PreToolUse hook decides cannot be read from the file")
	}
	for _, list := range claudeLists {
		raw, ok := settings.Permissions[list.key]
		if !ok {
			continue
		}
		var entries []string
		if err := json.Unmarshal(raw, &entries); err != nil {
			return nil, fmt.Errorf("%s: permissions.%s must be a list of strings: %w", name, list.key, err)
		}
		for i, entry := range entries {
			source := fmt.Sprintf("permissions.%s[%d] %q", list.key, i, entry)
			patterns, err := ClaudePatterns(entry)
			if err != nil {
				r.note(source, true, "%v", err)
				continue
			}
			for _, p := range patterns {
				r.Policy.Rules = append(r.Policy.Rules, policy.Rule{
					Pattern:     p,
					Action:      list.action,
					Description: fmt.Sprintf("%s: permissions.%s %s", name, list.key, entry),
				})
			}
			r.Translated++
		}
	}
	if _, err := r.check(nil); err != nil {
		return nil, err
	}
	return r, nil
}

// errNotBash is returned for permission rules of tools other than Bash.
var errNotBash = errors.New("a rule for another tool than Bash: a CommandPolicy judges shell commands only")

// ClaudePatterns translates one Claude Code permission rule into the
// patterns that match the same commands:
//
//	Bash, Bash(*)            every command: **
//	Bash(npm run test:*)     npm run test, with any arguments: npm run test *
//	Bash(git diff)           exactly git diff
//	Bash(ls *)               ls, with any arguments (the space is a word boundary): ls *
//	Bash(ls*)                ls, lsof, ls -la: ls* *
//	Bash(git * main)         git, one or more words, main: git * ** main
//	Bash(* --version)        any command whose last word is --version: * ** --version
//	Bash(cat *.txt)          cat, any words, a last word ending in .txt: cat ** *.txt
//
// Claude Code matches a rule against the text of each simple command; a *
// stands for any text, spaces included. The translation reads the rule's
// text as words separated by spaces, which is how that text reads a command
// written with plain words. Rules for other tools (Read, Edit, WebFetch,
// mcp__...), and Bash rules whose words hold quotes, shell syntax or a *
// inside a word, are errors: they are not translatable.
func ClaudePatterns(entry string) ([]string, error) {
	entry = strings.TrimSpace(entry)
	if entry == "Bash" {
		return []string{"**"}, nil
	}
	if !strings.HasPrefix(entry, "Bash(") || !strings.HasSuffix(entry, ")") {
		return nil, errNotBash
	}
	spec := strings.TrimSpace(entry[len("Bash(") : len(entry)-1])
	if spec == "" || spec == "*" {
		return []string{"**"}, nil
	}
	if strings.Contains(spec, `\`) {
		return nil, errors.New("a backslash (an escaped *) has no counterpart in the translation")
	}
	if prefix, ok := strings.CutSuffix(spec, ":*"); ok {
		if strings.Contains(prefix, "*") {
			return nil, errors.New("a * before the :* suffix: write the rule with * alone")
		}
		words, err := claudeWords(prefix)
		if err != nil {
			return nil, err
		}
		return finish(append(words, "*"))
	}
	tokens := strings.Fields(spec)
	stars := strings.Count(spec, "*")
	var words []string
	for i, t := range tokens {
		last := i == len(tokens)-1
		switch {
		case t == "*" && last && stars == 1:
			// A final " *" that is the only wildcard is optional:
			// `ls *` matches ls as well.
			words = append(words, "*")
		case t == "*" && last:
			// Any text after a space: at least one more word ("* *"
			// is one word, then any number).
			words = append(words, "*", "*")
		case t == "*":
			// Any text between spaces, or before the first one: at
			// least one word.
			words = append(words, "*", "**")
		case strings.Count(t, "*") > 1:
			return nil, fmt.Errorf("the word %q holds more than one *: a * inside a word may stand for several words", t)
		case strings.HasSuffix(t, "*"):
			lit := strings.TrimSuffix(t, "*")
			if !safeLiteral(lit) {
				return nil, notPlain(lit)
			}
			if last {
				words = append(words, lit+"*", "*")
			} else {
				words = append(words, lit+"*", "**")
			}
		case strings.HasPrefix(t, "*"):
			lit := strings.TrimPrefix(t, "*")
			if !safeLiteral(lit) {
				return nil, notPlain(lit)
			}
			words = append(words, "**", "*"+lit)
		case strings.Contains(t, "*"):
			return nil, fmt.Errorf("the word %q has a * inside it: it may stand for several words, which one pattern cannot say", t)
		default:
			if !safeLiteral(t) {
				return nil, notPlain(t)
			}
			words = append(words, t)
		}
	}
	return finish(words)
}

// finish joins the words of a pattern and compiles it.
func finish(words []string) ([]string, error) {
	p := strings.Join(words, " ")
	if err := compileOne(p); err != nil {
		return nil, fmt.Errorf("the translation %q is not a valid pattern: %v", p, err)
	}
	return []string{p}, nil
}

// claudeWords splits the text of a rule without wildcards into plain words.
func claudeWords(s string) ([]string, error) {
	words := strings.Fields(s)
	if len(words) == 0 {
		return nil, errors.New("an empty command prefix")
	}
	for _, w := range words {
		if !safeLiteral(w) {
			return nil, notPlain(w)
		}
	}
	return words, nil
}

// notPlain explains why a word is not translated.
func notPlain(w string) error {
	return fmt.Errorf("the word %q holds quotes, shell syntax or glob characters, which Claude Code matches as text and a pattern reads as shell words", w)
}
