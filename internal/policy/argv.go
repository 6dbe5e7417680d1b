package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// DecideArgs judges one simple command whose words are already known: the
// argv a shell is about to run, after every expansion. The sandbox's runner
// calls it for each command it runs, so a word that an expansion produced
// (${x:--exec}) is judged as the word it became. allowedTools narrows the
// decision as in DecideFor.
//
// The words are quoted and judged as a command line, so a runtime argv gets
// exactly the rules, wrappers and action-flag checks that a literal command
// line gets. The quoting is the judge's own, so the $'...' it uses for
// control characters is read as the literal word it stands for, not as
// bash-only syntax. A word that cannot be quoted (it holds a NUL byte) is
// Never.
func (m *Matcher) DecideArgs(args []string, allowedTools []string) Decision {
	if len(args) == 0 {
		return Decision{Action: Ask, RuleIndex: -1, Reason: "there is no command to judge"}
	}
	var b strings.Builder
	for i, a := range args {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			return Decision{Action: Never, RuleIndex: -1, Reason: "argument " + quoteText(a) + " cannot be judged: " + err.Error()}
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(q)
	}
	return m.decide(b.String(), compileToolsOrNil(allowedTools), true)
}
