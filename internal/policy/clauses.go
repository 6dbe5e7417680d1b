package policy

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// testClause judges [[ ... ]] as the command `test` with the same operands,
// so that rules for `test *` decide it.
func (j *judge) testClause(s *syntax.Stmt, c *syntax.TestClause, depth int) {
	idx := j.reserve()
	pb := &partBuilder{}
	pb.addBashReason(reasonBashTest)
	words := []cword{{text: "test"}}
	words = j.testExpr(c.X, words, pb, depth)
	mark := len(j.reads)
	j.redirs(s, words, pb, depth)
	j.reads = j.reads[:mark]
	j.finish(idx, j.text(s), words, pb, j.m.evaluate(words))
}

// testExpr flattens a [[ ]] expression into words. Words inside [[ ]] are
// not split or globbed, so an expansion is one word. Arithmetic operators
// evaluate their operands as expressions, so only numbers are data there.
func (j *judge) testExpr(x syntax.TestExpr, words []cword, pb *partBuilder, depth int) []cword {
	switch x := x.(type) {
	case *syntax.Word:
		cw := j.word(x, modeUnquoted, pb, depth)
		if cw.kind == wMany {
			cw.kind = wOne
		}
		return append(words, cw)
	case *syntax.UnaryTest:
		words = append(words, cword{text: x.Op.String()})
		words = j.testExpr(x.X, words, pb, depth)
		if x.Op == syntax.TsVarSet || x.Op == syntax.TsRefVar {
			if last := words[len(words)-1]; last.kind != wStatic || strings.Contains(last.text, "[") {
				pb.add(fmt.Sprintf("[[ %s ]] on an array element evaluates its subscript", x.Op))
			}
		}
		return words
	case *syntax.BinaryTest:
		words = j.testExpr(x.X, words, pb, depth)
		left := words[len(words)-1]
		words = append(words, cword{text: x.Op.String()})
		words = j.testExpr(x.Y, words, pb, depth)
		right := words[len(words)-1]
		if arithmeticTest(x.Op) && !(numericOperand(x.X, left) && numericOperand(x.Y, right)) {
			pb.add(fmt.Sprintf("[[ %s ]] evaluates its operands as arithmetic and cannot be judged statically", x.Op))
		}
		return words
	case *syntax.ParenTest:
		words = append(words, cword{text: "("})
		words = j.testExpr(x.X, words, pb, depth)
		return append(words, cword{text: ")"})
	}
	return words
}

// arithmeticTest reports whether a [[ ]] operator compares numbers.
func arithmeticTest(op syntax.BinTestOperator) bool {
	switch op {
	case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
		return true
	}
	return false
}

// numericOperand reports whether a [[ ]] operand is a literal number.
func numericOperand(x syntax.TestExpr, cw cword) bool {
	_, isWord := x.(*syntax.Word)
	return isWord && cw.kind == wStatic && isNumber(cw.text)
}

// declClause judges declare, local, export, readonly, typeset and nameref:
// they change the shell's variables, so they are at most Ask; rules still
// see their words, so a Never rule applies.
func (j *judge) declClause(s *syntax.Stmt, c *syntax.DeclClause, depth int) {
	idx := j.reserve()
	pb := &partBuilder{}
	words := []cword{{text: c.Variant.Value, start: int(c.Variant.Pos().Offset()), end: int(c.Variant.End().Offset())}}
	for _, a := range c.Args {
		switch {
		case a.Naked && a.Name != nil:
			words = append(words, cword{text: a.Name.Value})
		case a.Naked && a.Value != nil:
			words = append(words, j.word(a.Value, modeUnquoted, pb, depth))
		default:
			j.assignValue(a, pb, depth)
			words = append(words, cword{text: j.snippet(a)})
			if a.Name != nil && programEnv(a.Name.Value) {
				pb.add(programEnvReason(a.Name.Value, "every later command"))
			}
		}
	}
	pb.add(fmt.Sprintf("%s changes the shell's variables", c.Variant.Value))
	mark := len(j.reads)
	j.redirs(s, words, pb, depth)
	j.reads = j.reads[:mark]
	j.finish(idx, j.text(s), words, pb, j.m.evaluate(words))
}

// assigns checks the assignments before a command. Without a command they
// change the shell's variables; before a command they change its
// environment, which is allowed only for a few harmless variables with
// literal values.
func (j *judge) assigns(list []*syntax.Assign, words []cword, pb *partBuilder, depth int) {
	for _, a := range list {
		static := j.assignValue(a, pb, depth)
		name := a.Name.Value
		switch {
		case programEnv(name):
			cmd := "the shell"
			if len(words) > 0 {
				cmd = words[0].text
			}
			pb.add(programEnvReason(name, cmd))
		case len(words) == 0:
			pb.add(fmt.Sprintf("assignment %s=... changes the shell's variables", name))
		case a.Append || a.Array != nil || a.Index != nil || !static || !safeEnv(name):
			pb.add(fmt.Sprintf("environment assignment %s=... may change what %s does", name, words[0].text))
		}
	}
}

// assignValue walks the value of an assignment and reports whether it is
// a literal.
func (j *judge) assignValue(a *syntax.Assign, pb *partBuilder, depth int) bool {
	static := a.Array == nil && a.Index == nil
	if a.Index != nil {
		j.arithm(a.Index, pb, depth)
	}
	if a.Value != nil {
		static = j.word(a.Value, modeUnquoted, pb, depth).kind == wStatic && static
	}
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			if e.Index != nil {
				j.arithm(e.Index, pb, depth)
			}
			if e.Value != nil {
				j.word(e.Value, modeUnquoted, pb, depth)
			}
		}
	}
	return static
}

// safeEnv reports whether a variable may be set before an allowed command:
// only locale, time zone and terminal settings.
func safeEnv(name string) bool {
	if strings.HasPrefix(name, "LC_") {
		return true
	}
	switch name {
	case "LANG", "LANGUAGE", "TZ", "TERM", "COLUMNS", "LINES", "NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE":
		return true
	}
	return false
}

// safeLoopVar reports whether a for loop may set this variable: a
// lowercase name that neither the shell, the dynamic loader nor common
// tools read from the environment.
func safeLoopVar(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	if strings.HasSuffix(name, "proxy") {
		return false
	}
	switch name {
	case "path", "cdpath", "fpath", "manpath", "module_path":
		return false
	}
	return true
}

// redirs checks the redirections of a statement; words are the command's
// words, nil for a compound command.
func (j *judge) redirs(s *syntax.Stmt, words []cword, pb *partBuilder, depth int) {
	name := innermostName(words)
	for _, r := range s.Redirs {
		switch {
		case r.N != nil && strings.HasPrefix(r.N.Value, "{"):
			pb.add(fmt.Sprintf("redirection %s%s sets a shell variable", r.N.Value, r.Op))
		case r.N != nil && len(r.N.Value) > 1:
			pb.addBash("the descriptor number " + r.N.Value)
		}
		switch r.Op {
		case syntax.RdrAll, syntax.AppAll, syntax.WordHdoc:
			pb.addBash("the redirection " + r.Op.String())
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			body, static := j.hdocBody(r, pb, depth)
			j.feeds(name, "here-document", body, static, pb, depth)
		case syntax.WordHdoc:
			cw := j.word(r.Word, modeUnquoted, pb, depth)
			j.feeds(name, "here-string", cw.text+"\n", cw.kind == wStatic, pb, depth)
		default:
			cw := j.word(r.Word, modeUnquoted, pb, depth)
			if why := redirTarget(r.Op, cw); why != "" {
				pb.add(why + " " + quoteText(j.snippet(r.Word)))
			}
			if r.Op == syntax.RdrIn || r.Op == syntax.RdrInOut {
				j.reads = append(j.reads, cw)
			}
		}
	}
}

// redirTarget returns why a redirection is a construct, or "". Reading a
// file, duplicating or closing a descriptor and writing to /dev/null are
// fine; writing anywhere else is not.
func redirTarget(op syntax.RedirOperator, target cword) string {
	static := target.kind == wStatic
	if !static || strings.HasPrefix(target.text, "/dev/tcp/") || strings.HasPrefix(target.text, "/dev/udp/") {
		if op == syntax.RdrIn {
			return "redirection < from a network connection or from a path that is not known statically:"
		}
	}
	switch op {
	case syntax.RdrIn:
		return ""
	case syntax.DplIn, syntax.DplOut:
		if static && isDescriptor(target.text) {
			return ""
		}
		if op == syntax.DplIn {
			return "redirection <& from"
		}
		return "writing redirection >& to"
	}
	if static && target.text == "/dev/null" {
		return ""
	}
	return fmt.Sprintf("writing redirection %s to", op)
}

// isDescriptor reports whether a >& target is a descriptor such as 1, 2-
// or - (close).
func isDescriptor(s string) bool {
	s = strings.TrimSuffix(s, "-")
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// hdocBody returns the text of a here-document and whether it is known.
// With a quoted delimiter the body is literal; otherwise it expands like a
// double-quoted string.
func (j *judge) hdocBody(r *syntax.Redirect, pb *partBuilder, depth int) (string, bool) {
	if r.Hdoc == nil {
		return "", true
	}
	mode := modeDouble
	for _, p := range r.Word.Parts {
		if lit, ok := p.(*syntax.Lit); !ok || strings.Contains(lit.Value, "\\") {
			mode = modeRaw
		}
	}
	cw := j.word(r.Hdoc, mode, pb, depth)
	return cw.text, cw.kind == wStatic
}

// feeds records a here-document or here-string given to a shell or an
// interpreter; a literal one given to a shell is judged as a script.
func (j *judge) feeds(name, kind, body string, static bool, pb *partBuilder, depth int) {
	switch spec := lookupCommand(name); spec.kind {
	case kindShell:
		pb.add(fmt.Sprintf("%s feeds the shell %s", kind, name))
		if static && spec.posix {
			j.script(body, depth, kind+" of "+name, pb)
		}
	case kindInterpreter:
		pb.add(fmt.Sprintf("%s feeds the interpreter %s", kind, name))
	}
}

// innermostName returns the base name of the command that reads a
// statement's input: the command itself, or the one its wrappers run
// (sudo bash <<EOF feeds bash). It is "" when the name is not known.
func innermostName(words []cword) string {
	for range MaxDepth {
		if len(words) == 0 || words[0].kind != wStatic {
			return ""
		}
		name := baseName(words[0].text)
		spec := lookupCommand(name)
		if spec.kind != kindWrapper || spec.wrap.joins || spec.wrap.noInner {
			return name
		}
		u := spec.wrap.unwrap(words)
		if !u.known || len(u.rest) == 0 {
			return name
		}
		words = u.rest
	}
	return ""
}

// baseName returns the part of a command name after its last slash.
func baseName(name string) string {
	return name[strings.LastIndexByte(name, '/')+1:]
}
