package policyimport

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The .rules files of Codex are Starlark programs. Real files are a list of
// calls with literal arguments, and this reader takes exactly that subset:
// top-level calls name(key = value, ...) whose values are strings, lists of
// values and None. Anything else (variables, loops, functions, f-strings)
// is an error naming the line, so that no rule is silently dropped.

// call is one top-level call of a .rules file.
type call struct {
	name string
	line int
	args map[string]value
}

// value is a literal: a string, a list or None.
type value struct {
	line  int
	isStr bool
	str   string
	list  []value
	none  bool
}

// token kinds of the reader.
const (
	tokEOF = iota
	tokName
	tokString
	tokPunct
)

type token struct {
	kind int
	text string
	line int
}

// lexer splits a .rules file into tokens.
type lexer struct {
	src  string
	pos  int
	line int
	file string
}

func (l *lexer) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", l.file, line, fmt.Sprintf(format, args...))
}

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r':
			l.pos++
		case c == '\\' && strings.HasPrefix(l.src[l.pos:], "\\\n"):
			l.line++
			l.pos += 2
		case c == '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		default:
			return l.token()
		}
	}
	return token{kind: tokEOF, line: l.line}, nil
}

func (l *lexer) token() (token, error) {
	start, line := l.pos, l.line
	c := l.src[l.pos]
	switch {
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		for l.pos < len(l.src) && isNameByte(l.src[l.pos]) {
			l.pos++
		}
		name := l.src[start:l.pos]
		if (name == "r" || name == "R") && l.pos < len(l.src) && (l.src[l.pos] == '"' || l.src[l.pos] == '\'') {
			s, err := l.str(true)
			return token{kind: tokString, text: s, line: line}, err
		}
		if (name == "f" || name == "b" || name == "rb" || name == "br") && l.pos < len(l.src) && (l.src[l.pos] == '"' || l.src[l.pos] == '\'') {
			return token{}, l.errorf(line, "%s-strings are not read: write the string as a plain literal", name)
		}
		return token{kind: tokName, text: name, line: line}, nil
	case c == '"' || c == '\'':
		s, err := l.str(false)
		return token{kind: tokString, text: s, line: line}, err
	case strings.ContainsRune("()[],=", rune(c)):
		l.pos++
		return token{kind: tokPunct, text: string(c), line: line}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
	return token{}, l.errorf(line, "unexpected %q: only calls with literal strings and lists are read", r)
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// str reads a string literal at l.pos: '...', "...", or their triple-quoted
// forms; raw strings keep backslashes.
func (l *lexer) str(raw bool) (string, error) {
	line := l.line
	q := l.src[l.pos : l.pos+1]
	if strings.HasPrefix(l.src[l.pos:], q+q+q) {
		q = q + q + q
	}
	l.pos += len(q)
	var b strings.Builder
	for {
		if l.pos >= len(l.src) {
			return "", l.errorf(line, "unterminated string")
		}
		if strings.HasPrefix(l.src[l.pos:], q) {
			l.pos += len(q)
			return b.String(), nil
		}
		c := l.src[l.pos]
		switch {
		case c == '\n' && len(q) == 1:
			return "", l.errorf(line, "unterminated string")
		case c == '\n':
			l.line++
			b.WriteByte(c)
			l.pos++
		case c == '\\' && raw:
			// A raw string keeps the backslash and the next byte.
			if l.pos+1 >= len(l.src) {
				return "", l.errorf(line, "unterminated string")
			}
			b.WriteString(l.src[l.pos : l.pos+2])
			if l.src[l.pos+1] == '\n' {
				l.line++
			}
			l.pos += 2
		case c == '\\':
			if err := l.escape(&b, line); err != nil {
				return "", err
			}
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
}

// escape reads one escape sequence of a string.
func (l *lexer) escape(b *strings.Builder, line int) error {
	if l.pos+1 >= len(l.src) {
		return l.errorf(line, "unterminated string")
	}
	c := l.src[l.pos+1]
	simple := map[byte]string{'\\': `\`, '\'': `'`, '"': `"`, 'n': "\n", 't': "\t", 'r': "\r", 'a': "\a", 'b': "\b", 'f': "\f", 'v': "\v", '\n': ""}
	if s, ok := simple[c]; ok {
		if c == '\n' {
			l.line++
		}
		b.WriteString(s)
		l.pos += 2
		return nil
	}
	var n int
	var base int
	switch {
	case c == 'x':
		n, base = 2, 16
	case c == 'u':
		n, base = 4, 16
	case c == 'U':
		n, base = 8, 16
	case c >= '0' && c <= '7':
		n, base = 3, 8
	default:
		return l.errorf(line, "invalid escape \\%c in a string", c)
	}
	start := l.pos + 2
	if base == 8 {
		start = l.pos + 1
		end := start
		for end < len(l.src) && end-start < 3 && l.src[end] >= '0' && l.src[end] <= '7' {
			end++
		}
		v, _ := strconv.ParseUint(l.src[start:end], 8, 32)
		b.WriteByte(byte(v))
		l.pos = end
		return nil
	}
	if start+n > len(l.src) {
		return l.errorf(line, "invalid escape in a string")
	}
	v, err := strconv.ParseUint(l.src[start:start+n], base, 32)
	if err != nil || v > utf8.MaxRune {
		return l.errorf(line, "invalid escape \\%s in a string", l.src[l.pos+1:start+n])
	}
	if c == 'x' {
		b.WriteByte(byte(v))
	} else {
		b.WriteRune(rune(v))
	}
	l.pos = start + n
	return nil
}

// parser reads calls from tokens.
type parser struct {
	lex *lexer
	tok token
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	p.tok = t
	return err
}

func (p *parser) expect(text string) error {
	if p.tok.kind != tokPunct || p.tok.text != text {
		return p.lex.errorf(p.tok.line, "expected %q, found %s", text, describe(p.tok))
	}
	return p.advance()
}

func describe(t token) string {
	switch t.kind {
	case tokEOF:
		return "the end of the file"
	case tokString:
		return strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

// parseCalls reads a .rules file as a list of calls.
func parseCalls(file, src string) ([]call, error) {
	p := &parser{lex: &lexer{src: src, line: 1, file: file}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	var calls []call
	for p.tok.kind != tokEOF {
		if p.tok.kind != tokName {
			return nil, p.lex.errorf(p.tok.line, "expected a call such as prefix_rule(...), found %s", describe(p.tok))
		}
		c := call{name: p.tok.text, line: p.tok.line, args: map[string]value{}}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tokPunct || p.tok.text != "(" {
			return nil, p.lex.errorf(c.line, "only calls such as prefix_rule(...) are read, not statements like %q", c.name+" "+p.tok.text)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		for !(p.tok.kind == tokPunct && p.tok.text == ")") {
			if p.tok.kind != tokName {
				return nil, p.lex.errorf(p.tok.line, "%s: expected a keyword argument (name = value), found %s", c.name, describe(p.tok))
			}
			key, line := p.tok.text, p.tok.line
			if err := p.advance(); err != nil {
				return nil, err
			}
			if err := p.expect("="); err != nil {
				return nil, err
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			if _, dup := c.args[key]; dup {
				return nil, p.lex.errorf(line, "%s: argument %s given twice", c.name, key)
			}
			c.args[key] = v
			if p.tok.kind == tokPunct && p.tok.text == "," {
				if err := p.advance(); err != nil {
					return nil, err
				}
				continue
			}
			if !(p.tok.kind == tokPunct && p.tok.text == ")") {
				return nil, p.lex.errorf(p.tok.line, "%s: expected \",\" or \")\", found %s", c.name, describe(p.tok))
			}
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// value reads a literal.
func (p *parser) value() (value, error) {
	t := p.tok
	switch {
	case t.kind == tokString:
		// Adjacent string literals are not concatenated in Starlark.
		return value{line: t.line, isStr: true, str: t.text}, p.advance()
	case t.kind == tokName && t.text == "None":
		return value{line: t.line, none: true}, p.advance()
	case t.kind == tokPunct && t.text == "[":
		if err := p.advance(); err != nil {
			return value{}, err
		}
		v := value{line: t.line, list: []value{}}
		for !(p.tok.kind == tokPunct && p.tok.text == "]") {
			item, err := p.value()
			if err != nil {
				return value{}, err
			}
			v.list = append(v.list, item)
			if p.tok.kind == tokPunct && p.tok.text == "," {
				if err := p.advance(); err != nil {
					return value{}, err
				}
				continue
			}
			if !(p.tok.kind == tokPunct && p.tok.text == "]") {
				return value{}, p.lex.errorf(p.tok.line, "expected \",\" or \"]\", found %s", describe(p.tok))
			}
		}
		return v, p.advance()
	}
	return value{}, p.lex.errorf(t.line, "only literal strings, lists and None are read as values, found %s", describe(t))
}
