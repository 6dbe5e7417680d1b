package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// patWordKind tells how a pattern word matches command words.
type patWordKind uint8

const (
	// pGlob matches one command word whose text the glob matches.
	pGlob patWordKind = iota
	// pOne is `*` on its own, not last: exactly one word, whatever it is.
	pOne
	// pAny is `**` on its own, or a final `*` on its own: any number of
	// words, including none.
	pAny
)

// tokKind is the kind of one glob token.
type tokKind uint8

const (
	tLit   tokKind = iota // a literal run of bytes
	tAnyCh                // ?
	tStar                 // *
	tClass                // [...]
)

// gtok is one glob token.
type gtok struct {
	kind  tokKind
	lit   string
	class *charClass
}

// charClass is a bracket expression such as [a-z] or [!0-9].
type charClass struct {
	negate bool
	ranges []runeRange
}

// runeRange is an inclusive range of runes.
type runeRange struct{ lo, hi rune }

// patWord is one compiled pattern word.
type patWord struct {
	kind patWordKind
	toks []gtok
}

// pattern is a compiled rule pattern.
type pattern struct {
	words []patWord
	// anyMask has bit i set when words[i] is pAny.
	anyMask uint64
	// first is the first word when literalFirst is set.
	first        string
	literalFirst bool
}

// errPatternShape is returned for patterns that are not one plain command.
var errPatternShape = errors.New("pattern must be one command: no ;, &&, ||, |, &, newline, redirection, assignment or keyword")

// compilePattern parses a pattern into words the way a shell would and
// compiles each word into a glob.
func compilePattern(s string) (*pattern, error) {
	if len(s) > MaxPatternBytes {
		return nil, fmt.Errorf("pattern is longer than %d bytes", MaxPatternBytes)
	}
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("pattern is empty")
	}
	parser := syntax.NewParser(syntax.KeepComments(true))
	f, err := parser.Parse(strings.NewReader(s), "")
	if err != nil {
		return nil, fmt.Errorf("failed to parse pattern: %w", err)
	}
	if len(f.Last) > 0 || len(f.Stmts) == 1 && len(f.Stmts[0].Comments) > 0 {
		return nil, errors.New("pattern contains a comment: quote a word that starts with #")
	}
	if len(f.Stmts) != 1 {
		return nil, errPatternShape
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 || len(call.Assigns) > 0 {
		return nil, errPatternShape
	}
	if len(call.Args) > MaxPatternWords {
		return nil, fmt.Errorf("pattern has %d words, at most %d are allowed", len(call.Args), MaxPatternWords)
	}
	p := &pattern{}
	for i, w := range call.Args {
		pw, err := compilePatternWord(w, i == len(call.Args)-1)
		if err != nil {
			return nil, fmt.Errorf("failed to compile pattern word %d: %w", i+1, err)
		}
		if pw.kind == pAny {
			p.anyMask |= 1 << uint(i)
		}
		p.words = append(p.words, pw)
	}
	if first := p.words[0]; first.kind == pGlob {
		switch {
		case len(first.toks) == 0:
			p.literalFirst = true
		case len(first.toks) == 1 && first.toks[0].kind == tLit:
			p.literalFirst = true
			p.first = first.toks[0].lit
		}
	}
	return p, nil
}

// compilePatternWord compiles one pattern word; quoted text is literal.
func compilePatternWord(w *syntax.Word, last bool) (patWord, error) {
	if len(w.Parts) == 1 {
		if lit, ok := w.Parts[0].(*syntax.Lit); ok {
			switch lit.Value {
			case "*":
				if last {
					return patWord{kind: pAny}, nil
				}
				return patWord{kind: pOne}, nil
			case "**":
				return patWord{kind: pAny}, nil
			}
		}
	}
	var b globBuilder
	for _, part := range w.Parts {
		switch x := part.(type) {
		case *syntax.Lit:
			if err := b.addGlob(x.Value); err != nil {
				return patWord{}, err
			}
		case *syntax.SglQuoted:
			if x.Dollar {
				b.addLit(ansiC(x.Value))
			} else {
				b.addLit(x.Value)
			}
		case *syntax.DblQuoted:
			for _, qp := range x.Parts {
				lit, ok := qp.(*syntax.Lit)
				if !ok {
					return patWord{}, errors.New("pattern must not contain $ expansions or substitutions; quote them with '...'")
				}
				b.addLit(unescapeDouble(lit.Value))
			}
		default:
			return patWord{}, errors.New("pattern must not contain $ expansions, substitutions or extended globs; quote them with '...'")
		}
	}
	b.flush()
	return patWord{kind: pGlob, toks: b.toks}, nil
}

// globBuilder accumulates glob tokens, merging literal runs.
type globBuilder struct {
	toks []gtok
	lit  strings.Builder
}

// addLit appends literal text.
func (b *globBuilder) addLit(s string) {
	b.lit.WriteString(s)
}

// flush ends the current literal run.
func (b *globBuilder) flush() {
	if b.lit.Len() > 0 {
		b.toks = append(b.toks, gtok{kind: tLit, lit: b.lit.String()})
		b.lit.Reset()
	}
}

// addGlob appends unquoted pattern text, where *, ? and [...] are special
// and a backslash quotes the next character.
func (b *globBuilder) addGlob(s string) error {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 < len(s) {
				i++
			}
			b.lit.WriteByte(s[i])
		case '*':
			b.flush()
			if n := len(b.toks); n == 0 || b.toks[n-1].kind != tStar {
				b.toks = append(b.toks, gtok{kind: tStar})
			}
		case '?':
			b.flush()
			b.toks = append(b.toks, gtok{kind: tAnyCh})
		case '[':
			class, end, err := parseClass(s, i+1)
			if err != nil {
				return err
			}
			if class == nil {
				b.lit.WriteByte(c) // no closing ']': a literal '['
				continue
			}
			b.flush()
			b.toks = append(b.toks, gtok{kind: tClass, class: class})
			i = end
		default:
			b.lit.WriteByte(c)
		}
	}
	return nil
}

// parseClass parses a bracket expression whose body starts at s[i]. It
// returns nil when there is no closing ']', else the class and the index of
// the closing ']'.
func parseClass(s string, i int) (*charClass, int, error) {
	c := &charClass{}
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		c.negate = true
		i++
	}
	for first := true; i < len(s); first = false {
		if s[i] == ']' && !first {
			return c, i, nil
		}
		lo, n := classRune(s, i)
		i += n
		hi := lo
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			hi, n = classRune(s, i+1)
			i += 1 + n
		}
		if hi < lo {
			return nil, 0, fmt.Errorf("bad range %q-%q in character class", lo, hi)
		}
		c.ranges = append(c.ranges, runeRange{lo, hi})
	}
	return nil, 0, nil
}

// classRune decodes one possibly escaped rune of a bracket expression.
func classRune(s string, i int) (rune, int) {
	if s[i] == '\\' && i+1 < len(s) {
		r, n := utf8.DecodeRuneInString(s[i+1:])
		return r, n + 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// matches reports whether r is in the class.
func (c *charClass) matches(r rune) bool {
	in := false
	for _, rg := range c.ranges {
		if rg.lo <= r && r <= rg.hi {
			in = true
			break
		}
	}
	return in != c.negate
}

// globMatch reports whether the tokens match s. With prefix set it reports
// whether they match some string that starts with s. '*' matches any
// characters including '/'. Work is O(len(s) * len(toks)).
func globMatch(toks []gtok, s string, prefix bool) bool {
	ti, si := 0, 0
	starTi, starSi := -1, 0
	for {
		if prefix && si == len(s) {
			return true
		}
		if ti < len(toks) {
			if ok, done := step(toks, &ti, &si, &starTi, &starSi, s, prefix); done {
				return true
			} else if ok {
				continue
			}
		} else if si == len(s) {
			return true
		}
		if starTi < 0 || starSi >= len(s) {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starSi:])
		starSi += n
		si = starSi
		ti = starTi + 1
	}
}

// step tries to consume toks[*ti] at s[*si]. ok means progress was made;
// done means a prefix match was established.
func step(toks []gtok, ti, si, starTi, starSi *int, s string, prefix bool) (ok, done bool) {
	t := toks[*ti]
	switch t.kind {
	case tStar:
		*starTi, *starSi = *ti, *si
		*ti++
		return true, false
	case tLit:
		if strings.HasPrefix(s[*si:], t.lit) {
			*si += len(t.lit)
			*ti++
			return true, false
		}
		if prefix && strings.HasPrefix(t.lit, s[*si:]) {
			return false, true
		}
	case tAnyCh, tClass:
		if *si < len(s) {
			r, n := utf8.DecodeRuneInString(s[*si:])
			if t.kind == tAnyCh || t.class.matches(r) {
				*si += n
				*ti++
				return true, false
			}
		}
	}
	return false, false
}

// wordKind tells what is known about a command word before it runs.
type wordKind uint8

const (
	// wStatic is a word whose text is known.
	wStatic wordKind = iota
	// wOne is one word whose text depends on an expansion ("$x").
	wOne
	// wMany is any number of words: an unquoted expansion, a glob or a
	// brace expansion.
	wMany
)

// cword is a command word as far as it is known statically.
type cword struct {
	// text is the unquoted text; for a dynamic word, the literal text
	// before its first expansion.
	text string
	kind wordKind
	// split is set for a wMany word that holds an unquoted expansion, so
	// that it may split into arbitrary words. A wMany word without it is
	// a glob or brace expansion: every word it becomes starts with the
	// literal text before its first *, ?, [ or {.
	split bool
	// start and end are byte offsets of the word in its source.
	start, end int
}

// match reports whether the pattern matches the words. With sure set, it
// must match whatever the expansions turn out to be; otherwise it is enough
// that it matches for some value. base, when not empty, replaces the text of
// the first word. Work is O(len(words) * len(p.words)) glob matches.
func (p *pattern) match(words []cword, base string, sure bool) bool {
	n := len(p.words)
	full := uint64(1)<<uint(n+1) - 1
	// once the final word is a pAny that has been reached, the rest of
	// the words cannot change the outcome
	var rest uint64
	if n > 0 && p.words[n-1].kind == pAny {
		rest = 1 << uint(n-1)
	}
	states := p.closure(1)
	for k, w := range words {
		if states&rest != 0 {
			return true
		}
		text := w.text
		if k == 0 && base != "" {
			text = base
		}
		var next uint64
		if w.kind == wMany {
			switch {
			case sure:
				next = states & p.anyMask
			case w.split || globPrefix(text) == "":
				lowest := states & -states
				next = ^(lowest - 1) & full
			default:
				next = p.spread(states, globPrefix(text))
			}
		} else {
			for i := 0; i < n; i++ {
				if states&(1<<uint(i)) == 0 {
					continue
				}
				pw := &p.words[i]
				switch {
				case pw.kind == pAny:
					next |= 1 << uint(i)
				case pw.kind == pOne:
					next |= 1 << uint(i+1)
				case w.kind == wStatic && globMatch(pw.toks, text, false):
					next |= 1 << uint(i+1)
				case w.kind == wOne && !sure && globMatch(pw.toks, text, true):
					next |= 1 << uint(i+1)
				}
			}
		}
		states = p.closure(next)
		if states == 0 {
			return false
		}
	}
	return states&(1<<uint(n)) != 0
}

// spread returns the states reachable from states by any number of words
// that each start with prefix.
func (p *pattern) spread(states uint64, prefix string) uint64 {
	for {
		next := states
		for i := 0; i < len(p.words); i++ {
			if states&(1<<uint(i)) == 0 {
				continue
			}
			pw := &p.words[i]
			if pw.kind != pGlob || globMatch(pw.toks, prefix, true) {
				next |= 1 << uint(i+1)
			}
		}
		next = p.closure(next)
		if next == states {
			return states
		}
		states = next
	}
}

// globPrefix returns the text of a glob before its first metacharacter.
func globPrefix(text string) string {
	if i := strings.IndexAny(text, "*?[{"); i >= 0 {
		return text[:i]
	}
	return text
}

// closure adds the states reachable by letting pAny words match nothing.
func (p *pattern) closure(states uint64) uint64 {
	for i := 0; i < len(p.words); i++ {
		if states&(1<<uint(i)) != 0 && p.anyMask&(1<<uint(i)) != 0 {
			states |= 1 << uint(i+1)
		}
	}
	return states
}

// evaluate applies the rules to a simple command whose name is known. A
// rule with Always applies only when it matches whatever the command's
// expansions turn out to be; a rule with Ask or Never applies when it could
// match for some value. When the name is a path, the rules are also matched
// against its base name and the stricter verdict is kept.
func (m *Matcher) evaluate(words []cword) verdict {
	dynamic := false
	for _, w := range words[1:] {
		dynamic = dynamic || w.kind != wStatic
	}
	v := m.evaluateAs(words, "", dynamic)
	if name := words[0].text; strings.Contains(name, "/") {
		if base := baseName(name); base != "" {
			if vb := m.evaluateAs(words, base, dynamic); vb.action.Stricter(v.action) {
				vb.base = base
				v = vb
			}
		}
	}
	return v
}

// evaluateStricter returns the strictest verdict of the rules stricter
// than action that match the words, surely or possibly as in evaluate, or
// a verdict with index -1 when there is none. The first word is matched
// as written and by its base name.
func (m *Matcher) evaluateStricter(words []cword, action Action) verdict {
	dynamic := false
	for _, w := range words[1:] {
		dynamic = dynamic || w.kind != wStatic
	}
	best := verdict{index: -1, action: action}
	try := func(name, base string) {
		for _, list := range [2][]int{m.byName[name], m.globFirst} {
			for _, i := range list {
				if r := &m.rules[i]; r.Action.Stricter(best.action) || best.index >= 0 && r.Action == best.action && i < best.index {
					m.try(i, words, base, dynamic, &best)
				}
			}
		}
	}
	try(words[0].text, "")
	if name := words[0].text; strings.Contains(name, "/") {
		if base := baseName(name); base != "" {
			before := best.index
			if try(base, base); best.index != before {
				best.base = base
			}
		}
	}
	return best
}

// evaluateAs applies the rules with the first word replaced by base when
// base is not empty.
func (m *Matcher) evaluateAs(words []cword, base string, dynamic bool) verdict {
	name := words[0].text
	if base != "" {
		name = base
	}
	best := verdict{index: -1}
	for _, i := range m.byName[name] {
		m.try(i, words, base, dynamic, &best)
	}
	for _, i := range m.globFirst {
		m.try(i, words, base, dynamic, &best)
	}
	if best.index < 0 {
		best.action = m.def
	}
	return best
}

// try applies rule i and keeps it when it is stricter than the best so
// far, or as strict with a lower index.
func (m *Matcher) try(i int, words []cword, base string, dynamic bool, best *verdict) {
	r := &m.rules[i]
	if best.index >= 0 && !r.Action.Stricter(best.action) && (r.Action != best.action || i > best.index) {
		return
	}
	possible := false
	if !r.pat.match(words, base, true) {
		if r.Action == Always || !dynamic || !r.pat.match(words, base, false) {
			return
		}
		possible = true
	}
	*best = verdict{action: r.Action, index: i, possible: possible}
}

// appendExplanation appends to dst what follows the quoted command in the
// reason for a verdict on a simple command: the rule (or the default
// action) that decided it.
func (m *Matcher) appendExplanation(dst []byte, v verdict) []byte {
	if v.index < 0 {
		if v.action != m.def {
			return append(append(dst, " matched no rule: default action "...), v.action...)
		}
		return append(dst, m.noRule...)
	}
	if v.possible {
		dst = append(dst, m.mayMatch[v.index]...)
	} else {
		dst = append(dst, m.matched[v.index]...)
	}
	if v.base != "" {
		dst = strconv.AppendQuote(append(dst, " through its base name "...), v.base)
	}
	if v.possible {
		dst = append(dst, ", depending on the value of an expansion"...)
	}
	if v.note != "" {
		dst = append(append(dst, ", "...), v.note...)
	}
	return dst
}
