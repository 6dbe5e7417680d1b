package policy

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// judge holds the state of one Decide call.
type judge struct {
	m     *Matcher
	tools *toolSet
	// argv is set when the command line is an argv quoted word by word
	// (DecideArgs): its quoting is the judge's own, so $'...' and control
	// bytes in it are not constructs.
	argv bool
	// src is the text being walked: the command, or a nested command
	// string; node offsets are relative to it.
	src string
	// scripts is how many command strings deep the walk is.
	scripts int
	parts   []Part
	// best is the strictest part so far, recorded or not.
	best                     Part
	hasBest                  bool
	depthCapped, partsCapped bool
	// words holds the words of the simple commands being judged, those of
	// a command nested in another after those of the outer one; each call
	// gives back what it took.
	words []cword
	// stmts holds the statements of the programs being walked, those of a
	// nested command string after those of the outer one, and stack the
	// statements of the pipelines and lists still to walk; each gives
	// back what it took, as words does.
	stmts, stack []*syntax.Stmt
	// reads holds the files that the redirections of the statements being
	// walked read (< FILE, <> FILE, N< FILE), those of an enclosing
	// statement first: the commands they feed are judged as if they named
	// them too (see readVerdict).
	reads []cword
	// parseErr is the error of the last parse, read right after it.
	parseErr error
	// reader feeds the parser; a parse reads its text to the end before
	// the walk, so one reader serves every parse of a decision.
	reader strings.Reader
	// reasons holds the text of every reason worded so far, one after the
	// other; spans[i] is where the reason of parts[i] lies in it, and
	// bestSpan that of best. The reasons become strings once, when the
	// decision is made.
	reasons  []byte
	spans    []span
	bestSpan span
}

// span is where a reason lies in judge.reasons; start < 0 when the part's
// Reason is already a string.
type span struct{ start, end int }

// noSpan marks a part whose Reason is already set.
var noSpan = span{-1, -1}

// Bounds of the scratch space a judge keeps between decisions: a decision
// on a larger input grows it for itself only.
const (
	maxKeptItems = 1 << 10
	maxKeptBytes = 64 << 10
)

// getJudge returns a judge for one decision, with the scratch space of
// an earlier decision and nothing else of it.
func (m *Matcher) getJudge(tools *toolSet, argv bool) *judge {
	j, _ := m.judges.Get().(*judge)
	if j == nil {
		return &judge{m: m, tools: tools, argv: argv}
	}
	j.m, j.tools, j.argv = m, tools, argv
	return j
}

// putJudge keeps a judge's scratch space for a later decision. Everything
// that refers to this decision (the text, the tree, the parts) is dropped,
// so that a later decision sees none of it and keeps none of it alive.
func (m *Matcher) putJudge(j *judge) {
	*j = judge{
		words:   keep(j.words, maxKeptItems),
		stmts:   keep(j.stmts, maxKeptItems),
		stack:   keep(j.stack, maxKeptItems),
		spans:   keep(j.spans, maxKeptItems),
		reasons: keep(j.reasons, maxKeptBytes),
	}
	m.judges.Put(j)
}

// keep empties s for reuse, or drops it when it grew beyond max.
func keep[T any](s []T, max int) []T {
	if cap(s) > max {
		return nil
	}
	s = s[:cap(s)]
	clear(s)
	return s[:0]
}

// top judges a whole command line.
func (j *judge) top(command string) {
	limit := MaxCommandBytes
	if j.argv {
		limit = MaxArgvBytes
	}
	if len(command) > limit {
		j.constructPart(-1, command, fmt.Sprintf("command is longer than %d bytes and is not parsed", limit))
		return
	}
	parts, c := scanBytes(command)
	j.parts = make([]Part, 0, min(parts, MaxParts))
	switch {
	case c < 0:
	case command[c] == 0:
		// Shells cut a command, or a word, at a NUL byte, each in its
		// own way: what runs is not what the judge reads.
		j.neverPart(command, reasonNUL)
		return
	case !j.argv:
		j.constructPart(-1, command, fmt.Sprintf("command contains the control character %q, which shells and terminals do not all read alike", command[c]))
	}
	j.program(command, 0, "command")
}

// reasonNUL is why a NUL byte, written or decoded from $'...', is Never.
const reasonNUL = "a NUL byte cuts the command or the word short, differently in each shell, so what runs is not what is judged"

// program parses and walks a command line or a nested command string.
// Statements parsed before a syntax error are judged too: a shell runs them
// before it reaches the error.
func (j *judge) program(src string, depth int, what string) {
	if countOpeners(src) > MaxOpeners {
		j.constructPart(-1, src, fmt.Sprintf("%s has more than %d nesting tokens ((, {, `, if, while, for, ...) and is not parsed", what, MaxOpeners))
		return
	}
	written := src
	src, fixed := fixComments(src)
	saved := j.src
	j.src = src
	defer func() { j.src = saved }()
	if fixed {
		j.constructPart(-1, written, "a comment ends in a backslash: shells end the comment at the newline, so the next line is a command of its own (judged as one)")
	}
	parser := j.m.parsers.Get().(*syntax.Parser)
	defer j.m.parsers.Put(parser)
	// The statements go on j.stmts after those of the programs this one is
	// nested in, and are given back once walked.
	start := len(j.stmts)
	j.parseErr = nil
	j.reader.Reset(src)
	// The sequence is read to its end: stopping early makes the parser
	// panic on some inputs.
	for s, e := range parser.StmtsSeq(&j.reader) {
		switch {
		case e != nil && j.parseErr == nil:
			j.parseErr = e
		case s != nil:
			j.stmts = append(j.stmts, s)
		}
	}
	err := j.parseErr
	end := len(j.stmts)
	// Capped, so that the statements of a nested program never go over
	// these.
	j.stmtList(j.stmts[start:end:end], depth)
	clear(j.stmts[start:end])
	j.stmts = j.stmts[:start]
	if err != nil {
		j.constructPart(-1, src, fmt.Sprintf("failed to parse %s: %v", what, err))
	}
}

// script judges a command string given to a shell, eval or a wrapper.
func (j *judge) script(text string, depth int, what string, pb *partBuilder) {
	if j.scripts >= MaxScriptDepth {
		pb.add("command strings are nested too deep")
		j.constructPart(-1, text, fmt.Sprintf("the command string of %s is nested in more than %d command strings and is not judged", what, MaxScriptDepth))
		return
	}
	j.scripts++
	j.program(text, depth+1, "the command string of "+what)
	j.scripts--
}

// stmtList walks a statement list.
func (j *judge) stmtList(list []*syntax.Stmt, depth int) {
	for _, s := range list {
		j.stmt(s, depth)
	}
}

// stmt walks one statement.
func (j *judge) stmt(s *syntax.Stmt, depth int) {
	j.checkDepth(s, depth)
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		j.call(s, c, depth)
	case *syntax.TestClause:
		j.testClause(s, c, depth)
	case *syntax.DeclClause:
		j.declClause(s, c, depth)
	case *syntax.BinaryCmd:
		j.binary(s, c, depth)
	default:
		j.compound(s, depth)
	}
}

// checkDepth escalates once when the nesting gets too deep. The walk goes
// on, so that a Never deeper down still counts.
func (j *judge) checkDepth(s *syntax.Stmt, depth int) {
	if depth > MaxDepth && !j.depthCapped {
		j.depthCapped = true
		j.constructPart(-1, j.text(s), fmt.Sprintf("nesting is deeper than %d levels", MaxDepth))
	}
}

// binary walks a pipeline or an && / || list without recursing along its
// spine, so that long chains need no deep stack.
func (j *judge) binary(s *syntax.Stmt, c *syntax.BinaryCmd, depth int) {
	mark := len(j.reads)
	defer func() { j.reads = j.reads[:mark] }()
	if len(s.Redirs) > 0 {
		j.compoundRedirs(s, depth)
	}
	j.pipeAll(s, c)
	// The statements still to walk go on j.stack, above those of the
	// pipelines this one is nested in; a nested one takes back all it
	// pushes before this one goes on.
	base := len(j.stack)
	j.stack = append(j.stack, c.Y, c.X)
	for len(j.stack) > base {
		next := j.stack[len(j.stack)-1]
		j.stack[len(j.stack)-1] = nil
		j.stack = j.stack[:len(j.stack)-1]
		if b, ok := next.Cmd.(*syntax.BinaryCmd); ok && len(next.Redirs) == 0 {
			j.pipeAll(next, b)
			j.stack = append(j.stack, b.Y, b.X)
			continue
		}
		j.stmt(next, depth)
	}
}

// pipeAll records a |& pipe, which POSIX shells read as | then &.
func (j *judge) pipeAll(s *syntax.Stmt, c *syntax.BinaryCmd) {
	if c.Op == syntax.PipeAll {
		j.constructPart(-1, j.text(s), reasonBashPipe)
	}
}

// compound walks every statement that is not a simple command.
func (j *judge) compound(s *syntax.Stmt, depth int) {
	pb := &partBuilder{}
	// The files its redirections read feed every command inside.
	mark := len(j.reads)
	defer func() { j.reads = j.reads[:mark] }()
	j.redirs(s, nil, pb, depth)
	d := depth + 1
	switch c := s.Cmd.(type) {
	case nil:
		pb.add("a redirection without a command cannot be judged statically")
	case *syntax.Block:
		j.stmtList(c.Stmts, d)
	case *syntax.Subshell:
		j.stmtList(c.Stmts, d)
	case *syntax.IfClause:
		for ; c != nil; c = c.Else {
			j.stmtList(c.Cond, d)
			j.stmtList(c.Then, d)
		}
	case *syntax.WhileClause:
		j.stmtList(c.Cond, d)
		j.stmtList(c.Do, d)
	case *syntax.ForClause:
		j.forClause(c, pb, d)
	case *syntax.CaseClause:
		j.word(c.Word, modeUnquoted, pb, depth)
		for _, item := range c.Items {
			if item.Op == syntax.Fallthrough || item.Op == syntax.Resume {
				pb.addBash(item.Op.String() + " in case")
			}
			for _, p := range item.Patterns {
				j.word(p, modeUnquoted, pb, depth)
			}
			j.stmtList(item.Stmts, d)
		}
	default:
		j.otherCommand(s.Cmd, pb, d)
	}
	j.flush(j.text(s), pb)
}

// compoundRedirs judges the redirections of a pipeline or list.
func (j *judge) compoundRedirs(s *syntax.Stmt, depth int) {
	pb := &partBuilder{}
	j.redirs(s, nil, pb, depth)
	j.flush(j.text(s), pb)
}

// flush records the constructs of a part that is not a simple command.
func (j *judge) flush(text string, pb *partBuilder) {
	switch {
	case pb.never != "":
		j.neverPart(text, pb.never)
	case pb.why() != "":
		j.constructPart(-1, text, pb.why())
	}
}

// otherCommand handles the constructs that are never allowed without a
// person: function definitions, arithmetic commands, let, time, coproc.
func (j *judge) otherCommand(cmd syntax.Command, pb *partBuilder, d int) {
	switch c := cmd.(type) {
	case *syntax.FuncDecl:
		name := "f"
		if c.Name != nil {
			name = c.Name.Value
		}
		pb.add(fmt.Sprintf("function definition %s() changes what the command %s runs", name, name))
		j.stmt(c.Body, d)
	case *syntax.ArithmCmd:
		j.arithm(c.X, pb, d)
		pb.add("arithmetic command ((...)) cannot be judged statically")
	case *syntax.LetClause:
		for _, x := range c.Exprs {
			j.arithm(x, pb, d)
		}
		pb.add("let evaluates arithmetic on variables and cannot be judged statically")
	case *syntax.TimeClause:
		pb.add("time runs another command")
		if c.Stmt != nil {
			j.stmt(c.Stmt, d)
		}
	case *syntax.CoprocClause:
		pb.add("coproc runs a command in the background")
		j.stmt(c.Stmt, d)
	default:
		pb.add(fmt.Sprintf("%T cannot be judged statically", cmd))
	}
}

// forClause walks a for or select loop. The loop variable must not be one
// that changes how commands run (PATH, IFS, ...).
func (j *judge) forClause(c *syntax.ForClause, pb *partBuilder, d int) {
	if c.Select {
		pb.add("select reads a choice from the input and cannot be judged statically")
	}
	switch loop := c.Loop.(type) {
	case *syntax.WordIter:
		if !safeLoopVar(loop.Name.Value) {
			pb.add(fmt.Sprintf("loop variable %s may change how commands run", loop.Name.Value))
		}
		for _, w := range loop.Items {
			j.word(w, modeUnquoted, pb, d-1)
		}
	case *syntax.CStyleLoop:
		j.arithm(loop.Init, pb, d)
		j.arithm(loop.Cond, pb, d)
		j.arithm(loop.Post, pb, d)
		pb.add("arithmetic for ((...)) loop cannot be judged statically")
	}
	j.stmtList(c.Do, d)
}

// call judges a simple command.
func (j *judge) call(s *syntax.Stmt, c *syntax.CallExpr, depth int) {
	idx := j.reserve()
	pb := &partBuilder{}
	// The words go on j.words, after those of the commands this one is
	// nested in; a command nested in a word takes and gives back its own
	// words beyond these.
	start := len(j.words)
	j.words = slices.Grow(j.words, len(c.Args))
	for _, w := range c.Args {
		cw := j.word(w, modeUnquoted, pb, depth)
		j.words = append(j.words, cw)
	}
	end := len(j.words)
	// Capped, so that an append to words never writes over the words of
	// a nested command.
	words := j.words[start:end:end]
	j.assigns(c.Assigns, words, pb, depth)
	mark := len(j.reads)
	j.redirs(s, words, pb, depth)
	j.simple(idx, j.text(s), words, pb, depth)
	j.reads = j.reads[:mark]
	j.words = j.words[:start]
}

// simple decides a simple command from its words: the rules, then the
// constructs, then the skill's allowed-tools.
func (j *judge) simple(idx int, text string, words []cword, pb *partBuilder, depth int) {
	if len(words) == 0 {
		pb.add("there is no command to judge")
		j.finish(idx, text, nil, pb, verdict{action: Ask, index: -1})
		return
	}
	if name := words[0]; name.kind != wStatic {
		pb.add("the command name is not known before the command runs (expansion, glob or brace expansion)")
		j.finish(idx, text, nil, pb, verdict{action: Ask, index: -1})
		return
	}
	variants := j.special(words, pb, depth)
	v := j.m.evaluate(words)
	for _, vw := range variants {
		// A variant decides only through a rule that is stricter: the
		// words as written already met the rules and the default.
		if vv := j.m.evaluateStricter(vw.words, v.action); vv.index >= 0 {
			vv.note = vw.note
			v = vv
		}
	}
	v = j.readVerdict(words, v)
	j.checkForms(v, pb)
	j.finish(idx, text, words, pb, v)
}

// inner judges the command a wrapper runs, as a part of its own.
func (j *judge) inner(words []cword, depth int) {
	if len(words) == 0 {
		return
	}
	text := j.slice(words[0].start, words[len(words)-1].end)
	if depth > MaxDepth {
		// Each level costs time in the length of the command, so the
		// command run by a wrapper this deep is not judged.
		j.constructPart(-1, text, fmt.Sprintf("commands are wrapped deeper than %d levels; the innermost are not judged", MaxDepth))
		return
	}
	idx := j.reserve()
	j.simple(idx, text, words, &partBuilder{}, depth)
}

// finish turns a verdict and the constructs of a part into a Part.
func (j *judge) finish(idx int, text string, words []cword, pb *partBuilder, v verdict) {
	p := Part{Command: text, Action: v.action, RuleIndex: v.index}
	if v.index >= 0 {
		p.Rule = j.m.rules[v.index].Pattern
	}
	why := ""
	switch {
	case pb.never != "" && p.Action != Never:
		p.Action, p.Rule, p.RuleIndex = Never, "", -1
		why = pb.never
	case p.Action != Never && pb.why() != "":
		p.Action, p.Rule, p.RuleIndex = Ask, "", -1
		why = pb.why()
	case p.Action == Always && j.tools != nil && !j.tools.covers(words):
		p.Action, p.Rule, p.RuleIndex = Ask, "", -1
		why = "allowed by the policy but not by the skill's allowed-tools"
	}
	if idx < 0 && j.hasBest && !p.Action.Stricter(j.best.Action) {
		return // neither listed nor deciding: skip formatting its reason
	}
	var sp span
	if why != "" {
		sp = j.reason(text, ": ", why)
	} else {
		sp = j.explain(text, v)
	}
	j.record(idx, p, sp)
}

// constructPart records a part decided by a construct alone.
func (j *judge) constructPart(idx int, text, reason string) {
	if idx < 0 {
		idx = j.reserve()
	}
	p := Part{Command: text, Action: Ask, RuleIndex: -1}
	j.record(idx, p, j.reason(text, ": ", reason))
}

// neverPart records a part that is Never whatever the rules say.
func (j *judge) neverPart(text, reason string) {
	p := Part{Command: text, Action: Never, RuleIndex: -1}
	j.record(j.reserve(), p, j.reason(text, ": ", reason))
}

// reason words the reason of a part, quoteText(text) followed by the
// parts, and returns where it lies in j.reasons.
func (j *judge) reason(text string, parts ...string) span {
	start := len(j.reasons)
	j.reasons = appendQuoted(j.reasons, text)
	for _, p := range parts {
		j.reasons = append(j.reasons, p...)
	}
	return span{start, len(j.reasons)}
}

// explain words the reason of a part that the rules decided.
func (j *judge) explain(text string, v verdict) span {
	start := len(j.reasons)
	j.reasons = appendQuoted(j.reasons, text)
	j.reasons = j.m.appendExplanation(j.reasons, v)
	return span{start, len(j.reasons)}
}

// reserve returns the index of a new slot in Parts, or -1 when Parts is
// full; the first time it is full, the whole escalates to Ask.
func (j *judge) reserve() int {
	if len(j.parts) < MaxParts {
		j.parts = append(j.parts, Part{})
		j.spans = append(j.spans, noSpan)
		return len(j.parts) - 1
	}
	if !j.partsCapped {
		j.partsCapped = true
		reason := fmt.Sprintf("the command has more than %d simple commands; only the first ones are listed", MaxParts)
		j.record(-1, Part{Action: Ask, RuleIndex: -1, Reason: reason}, noSpan)
	}
	return -1
}

// record stores a part, whose reason lies at sp in j.reasons, in its slot
// and keeps the strictest one.
func (j *judge) record(idx int, p Part, sp span) {
	if idx >= 0 {
		j.parts[idx], j.spans[idx] = p, sp
	}
	if !j.hasBest || p.Action.Stricter(j.best.Action) {
		j.best, j.bestSpan, j.hasBest = p, sp, true
	}
}

// decision returns the verdict for the whole command line. Every reason
// is cut from one string, made here.
func (j *judge) decision() Decision {
	if !j.hasBest {
		return Decision{Action: Ask, RuleIndex: -1, Reason: "empty command: there is nothing to judge"}
	}
	reasons := string(j.reasons)
	for i, sp := range j.spans {
		if sp.start >= 0 {
			j.parts[i].Reason = reasons[sp.start:sp.end]
		}
	}
	if sp := j.bestSpan; sp.start >= 0 {
		j.best.Reason = reasons[sp.start:sp.end]
	}
	return Decision{
		Action:    j.best.Action,
		Rule:      j.best.Rule,
		RuleIndex: j.best.RuleIndex,
		Reason:    j.best.Reason,
		Parts:     j.parts,
	}
}

// text returns the source of a statement without its terminator and
// without here-document bodies.
func (j *judge) text(s *syntax.Stmt) string {
	start := int(s.Pos().Offset())
	end := start
	if s.Cmd != nil {
		end = max(end, int(s.Cmd.End().Offset()))
	}
	for _, r := range s.Redirs {
		if r.Hdoc != nil || r.Word == nil {
			end = max(end, int(r.OpPos.Offset())+len(r.Op.String()))
			if r.Word != nil {
				end = max(end, int(r.Word.End().Offset()))
			}
			continue
		}
		end = max(end, int(r.End().Offset()))
	}
	return j.slice(start, end)
}

// slice returns src[start:end], or "" when the offsets do not fit.
func (j *judge) slice(start, end int) string {
	if start < 0 || end > len(j.src) || start > end {
		return ""
	}
	return j.src[start:end]
}

// snippet returns the source of a node, for reasons.
func (j *judge) snippet(n syntax.Node) string {
	return j.slice(int(n.Pos().Offset()), int(n.End().Offset()))
}
