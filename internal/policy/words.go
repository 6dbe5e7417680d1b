package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// quoteMode says how the literal text of a word is unquoted.
type quoteMode uint8

const (
	// modeUnquoted is a plain shell word: backslash quotes any character,
	// and unquoted *, ?, [...] and {a,b} expand.
	modeUnquoted quoteMode = iota
	// modeDouble is text in double quotes or an unquoted here-document
	// body: backslash quotes only $, `, ", \ and newline.
	modeDouble
	// modeRaw is a quoted here-document body: no escapes at all.
	modeRaw
)

// Constructs found in words. They are constant so that judging thousands
// of parts does not format thousands of strings.
const (
	reasonCmdSubst   = "command substitution $(...) cannot be judged statically"
	reasonBackquote  = "command substitution `...` cannot be judged statically"
	reasonArithmetic = "arithmetic on variables or substitutions cannot be judged statically"
)

// wordScan accumulates what is known about one word.
type wordScan struct {
	// text is the known text while it is one piece, as the parser read it
	// (most words); more pieces are joined in joined.
	text    string
	pieces  int
	joined  strings.Builder
	dynamic bool // an expansion was seen; text stops growing
	many    bool // it may become several words, or none
	split   bool // an unquoted expansion may split it into any words
	// glob and brace detection over the unquoted characters
	bracket, brace, braceSep bool
	// braces is set when a brace expansion was seen
	braces bool
}

// literal appends known text while no expansion has been seen.
func (s *wordScan) literal(t string) {
	if s.dynamic || t == "" {
		return
	}
	switch s.pieces {
	case 0:
		s.text = t
	case 1:
		s.joined.Grow(len(s.text) + len(t))
		s.joined.WriteString(s.text)
		s.joined.WriteString(t)
	default:
		s.joined.WriteString(t)
	}
	s.pieces++
}

// String returns the known text of the word.
func (s *wordScan) String() string {
	if s.pieces <= 1 {
		return s.text
	}
	return s.joined.String()
}

// word analyses a word, judges the commands nested in it as parts of their
// own, and records the constructs it holds in pb.
func (j *judge) word(w *syntax.Word, mode quoteMode, pb *partBuilder, depth int) cword {
	if len(w.Parts) == 0 {
		return cword{}
	}
	cw := cword{start: int(w.Pos().Offset()), end: int(w.End().Offset())}
	if lit, ok := w.Parts[0].(*syntax.Lit); ok && len(w.Parts) == 1 {
		// fast path: one literal without anything to unquote or expand
		switch {
		case mode == modeRaw,
			mode == modeDouble && !strings.Contains(lit.Value, "\\"),
			mode == modeUnquoted && !strings.ContainsAny(lit.Value, "\\*?[{"):
			cw.text = lit.Value
			return cw
		}
	}
	var s wordScan
	for _, part := range w.Parts {
		j.wordPart(part, mode, &s, pb, depth)
	}
	if s.braces {
		pb.addBashReason(reasonBashBraces)
	}
	cw.text = s.String()
	switch {
	case s.many:
		cw.kind = wMany
		cw.split = s.split
	case s.dynamic:
		cw.kind = wOne
	}
	return cw
}

// wordPart analyses one part of a word.
func (j *judge) wordPart(part syntax.WordPart, mode quoteMode, s *wordScan, pb *partBuilder, depth int) {
	quoted := mode != modeUnquoted
	switch x := part.(type) {
	case *syntax.Lit:
		switch mode {
		case modeUnquoted:
			s.unquotedLit(x.Value)
		case modeDouble:
			s.literal(unescapeDouble(x.Value))
		default:
			s.literal(x.Value)
		}
	case *syntax.SglQuoted:
		if !x.Dollar {
			s.literal(x.Value)
			break
		}
		if !j.argv || j.scripts > 0 {
			// the judge's own quoting of an argv is not bash-only
			// syntax; a command string inside it is the user's
			pb.addBashReason(reasonBashAnsiC)
		}
		v := ansiC(x.Value)
		if strings.IndexByte(v, 0) >= 0 {
			pb.refuse(reasonNUL)
		}
		s.literal(v)
	case *syntax.DblQuoted:
		if x.Dollar {
			pb.addBashReason(reasonBashLocale)
		}
		for _, qp := range x.Parts {
			j.wordPart(qp, modeDouble, s, pb, depth)
		}
	case *syntax.ParamExp:
		many := j.param(x, quoted, pb, depth)
		s.dynamic = true
		s.many = s.many || !quoted || many
		s.split = s.split || !quoted || many
	case *syntax.CmdSubst:
		if x.Backquotes {
			pb.add(reasonBackquote)
		} else {
			pb.add(reasonCmdSubst)
		}
		j.stmtList(x.Stmts, depth+1)
		s.dynamic = true
		s.many = s.many || !quoted
		s.split = s.split || !quoted
	case *syntax.ArithmExp:
		if x.Bracket || x.Unsigned {
			pb.addBashReason(reasonBashArithm)
		}
		if !j.arithm(x.X, pb, depth) {
			pb.add(reasonArithmetic)
		}
		s.dynamic = true
		s.many = s.many || !quoted
		s.split = s.split || !quoted
	case *syntax.ProcSubst:
		pb.add(fmt.Sprintf("process substitution %s...) cannot be judged statically", x.Op))
		j.stmtList(x.Stmts, depth+1)
		s.dynamic = true
	case *syntax.ExtGlob:
		pb.addBash("the extended glob " + x.Op.String() + "(...)")
		s.dynamic = true
		s.many = true
		s.split = true
	default: // anything newer
		pb.add(fmt.Sprintf("%T cannot be judged statically", part))
		s.dynamic = true
		s.many = true
		s.split = true
	}
}

// unquotedLit adds unquoted text, noting globs and brace expansions.
func (s *wordScan) unquotedLit(v string) {
	start := 0
	flush := func(end int) {
		s.literal(v[start:end])
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			flush(i)
			if i+1 < len(v) {
				i++
			}
			start = i // the quoted character is kept as text
		case '*', '?':
			s.many = true
		case '[':
			s.bracket = true
		case ']':
			s.many = s.many || s.bracket
		case '{':
			s.brace = true
		case ',':
			s.braceSep = s.braceSep || s.brace
		case '.':
			s.braceSep = s.braceSep || s.brace && i+1 < len(v) && v[i+1] == '.'
		case '}':
			s.braces = s.braces || s.braceSep
			s.many = s.many || s.braceSep
		}
	}
	flush(len(v))
}

// param checks a parameter expansion. The POSIX forms ($x, ${x}, ${#x},
// ${x:-word}, ${x+word}, ${x?word}, ${x#pat}, ${x%%pat}, ...) are data.
// Forms that assign are constructs, and so are the forms only bash reads
// (${x/a/b}, ${x^^}, ${x:1:2}, ${!x}, ${a[i]}, ${x@Q}, ...): other shells
// fail on them or read them differently. quoted is set inside "...". It
// reports whether the expansion becomes several words even when quoted
// ("$@").
func (j *judge) param(pe *syntax.ParamExp, quoted bool, pb *partBuilder, depth int) bool {
	bad := pe.Width || pe.IsSet || pe.Flags != nil || pe.NestedParam != nil || len(pe.Modifiers) > 0 ||
		pe.Split != syntax.OptUnset || pe.GlobSubst != syntax.OptUnset || pe.RcExpand != syntax.OptUnset
	bash := pe.Excl || pe.Names != 0 || pe.Index != nil || pe.Slice != nil || pe.Repl != nil
	many := pe.Names == syntax.NamesPrefixWords || pe.Param != nil && pe.Param.Value == "@"
	if pe.Index != nil {
		if w, ok := pe.Index.(*syntax.Word); ok && (w.Lit() == "@" || w.Lit() == "*") {
			many = many || w.Lit() == "@"
		} else {
			j.arithm(pe.Index, pb, depth)
		}
	}
	if pe.Slice != nil {
		j.arithm(pe.Slice.Offset, pb, depth)
		j.arithm(pe.Slice.Length, pb, depth)
	}
	if pe.Repl != nil {
		j.subWord(pe.Repl.Orig, pb, depth)
		j.subWord(pe.Repl.With, pb, depth)
	}
	if pe.Exp != nil {
		switch pe.Exp.Op {
		case syntax.AssignUnset, syntax.AssignUnsetOrNull:
			bad = true
		case syntax.AlternateUnset, syntax.AlternateUnsetOrNull, syntax.DefaultUnset, syntax.DefaultUnsetOrNull,
			syntax.ErrorUnset, syntax.ErrorUnsetOrNull, syntax.RemSmallPrefix, syntax.RemLargePrefix,
			syntax.RemSmallSuffix, syntax.RemLargeSuffix:
		default:
			bash = true
		}
		if quoted && hasSingleQuotes(pe.Exp.Word) {
			pb.addBashReason(reasonBashQuotes)
		}
		j.subWord(pe.Exp.Word, pb, depth)
	}
	switch {
	case bad:
		pb.add(fmt.Sprintf("parameter expansion %s cannot be judged statically", j.snippet(pe)))
	case bash:
		pb.addBash("the parameter expansion " + j.snippet(pe))
	}
	return many
}

// hasSingleQuotes reports whether a word has a '...' part. Inside a
// double-quoted ${x:-'...'}, bash reads the quotes as quotes and dash and
// ash as characters, so they end the word at different places.
func hasSingleQuotes(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		if _, ok := p.(*syntax.SglQuoted); ok {
			return true
		}
	}
	return false
}

// Reasons for the common bash-only constructs, worded once.
var (
	reasonBashTest   = bashOnly("[[ ... ]]")
	reasonBashAnsiC  = bashOnly("$'...' quoting")
	reasonBashLocale = bashOnly(`$"..." quoting`)
	reasonBashBraces = bashOnly("brace expansion")
	reasonBashArithm = bashOnly("arithmetic expansion $[...]")
	reasonBashQuotes = bashOnly(`single quotes in "${...}"`)
	reasonBashPipe   = bashOnly("the pipe |&")
)

// bashOnly words the reason for a construct that only bash reads as the
// judge does.
func bashOnly(what string) string {
	return what + " is bash syntax that /bin/sh (dash, busybox ash) reads differently"
}

// subWord walks a word nested in an expansion for the constructs it holds.
func (j *judge) subWord(w *syntax.Word, pb *partBuilder, depth int) {
	if w != nil {
		j.word(w, modeDouble, pb, depth)
	}
}

// arithm walks an arithmetic expression, judging nested substitutions, and
// reports whether it only combines numbers. Variables are not data in
// arithmetic: bash evaluates their values as expressions, which can run
// command substitutions held in array subscripts.
func (j *judge) arithm(x syntax.ArithmExpr, pb *partBuilder, depth int) bool {
	switch x := x.(type) {
	case nil:
		return true
	case *syntax.Word:
		cw := j.word(x, modeDouble, pb, depth)
		return cw.kind == wStatic && isNumber(cw.text)
	case *syntax.BinaryArithm:
		// 1+1+1+... is a tree as deep as it is long, leaning left: it is
		// walked down its left side without recursing, so that a long one
		// needs no deep stack. The operands are judged left to right.
		n := 0
		var left syntax.ArithmExpr = x
		for b, ok := left.(*syntax.BinaryArithm); ok; b, ok = left.(*syntax.BinaryArithm) {
			n++
			left = b.X
		}
		// rights[i] is the right operand of the i-th operator from the left.
		rights := make([]syntax.ArithmExpr, n)
		left = x
		for b, ok := left.(*syntax.BinaryArithm); ok; b, ok = left.(*syntax.BinaryArithm) {
			n--
			rights[n] = b.Y
			left = b.X
		}
		static := j.arithm(left, pb, depth)
		for _, right := range rights {
			static = j.arithm(right, pb, depth) && static
		}
		return static
	case *syntax.UnaryArithm:
		return j.arithm(x.X, pb, depth)
	case *syntax.ParenArithm:
		return j.arithm(x.X, pb, depth)
	default:
		return false
	}
}

// isNumber reports whether s is an arithmetic literal such as 42, 0x1f or
// 2#101: it starts with a digit, so it cannot name a variable.
func isNumber(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '#' || c == '_' || c == '@') {
			return false
		}
	}
	return true
}

// unescapeDouble removes the backslashes that quote $, `, ", \ and newline
// in double quotes.
func unescapeDouble(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ansiC decodes the body of a $'...' string.
func ansiC(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		if r, ok := simpleEscape(s[i]); ok {
			b.WriteByte(r)
			continue
		}
		switch c := s[i]; {
		case c >= '0' && c <= '7':
			n, used := digits(s[i:], 3, 8)
			b.WriteByte(byte(n))
			i += used - 1
		case c == 'x' || c == 'u' || c == 'U':
			width := 2
			if c == 'u' {
				width = 4
			} else if c == 'U' {
				width = 8
			}
			n, used := digits(s[i+1:], width, 16)
			switch {
			case used == 0:
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == 'x':
				b.WriteByte(byte(n))
			default:
				b.WriteRune(rune(n))
			}
			i += used
		case c == 'c' && i+1 < len(s):
			i++
			b.WriteByte(s[i] & 0x1f)
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String()
}

// simpleEscape decodes the one-letter escapes of $'...'.
func simpleEscape(c byte) (byte, bool) {
	switch c {
	case 'a':
		return '\a', true
	case 'b':
		return '\b', true
	case 'e', 'E':
		return 0x1b, true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'v':
		return '\v', true
	case '\\', '\'', '"', '?':
		return c, true
	}
	return 0, false
}

// digits reads up to max digits of the given base from the start of s.
func digits(s string, max, base int) (int64, int) {
	n := 0
	for n < len(s) && n < max && isDigitIn(s[n], base) {
		n++
	}
	if n == 0 {
		return 0, 0
	}
	v, err := strconv.ParseInt(s[:n], base, 64)
	if err != nil || v > utf8.MaxRune {
		return utf8.RuneError, n
	}
	return v, n
}

// isDigitIn reports whether c is a digit of base 8 or 16.
func isDigitIn(c byte, base int) bool {
	if base == 8 {
		return c >= '0' && c <= '7'
	}
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
