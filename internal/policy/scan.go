package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// maxCommentRounds bounds how many times fixComments parses a text.
const maxCommentRounds = 4

// fixComments returns src with the backslash at the end of each comment
// replaced by a space. Shells end a comment at the newline, backslash or
// not; the parser reads a backslash-newline in a comment as a line
// continuation and so takes the next line as more words of the commented
// command: `echo #\<newline>rm -rf /` would be one echo. fixed is set when
// a comment was rewritten. Only text with both '#' and a backslash-newline
// is parsed again.
func fixComments(src string) (string, bool) {
	if !strings.Contains(src, "\\\n") || strings.IndexByte(src, '#') < 0 {
		return src, false
	}
	fixed := false
	// Each round ends every such comment the parser found; ending one can
	// reveal another on the line after it, so there are a few rounds.
	for range maxCommentRounds {
		offs := continuedComments(src)
		if len(offs) == 0 {
			break
		}
		b := []byte(src)
		for _, off := range offs {
			b[off] = ' '
		}
		src, fixed = string(b), true
	}
	return src, fixed
}

// continuedComments returns the offsets of the backslashes that end the
// comments the parser continues onto the next line.
func continuedComments(src string) []int {
	var offs []int
	// A syntax error still leaves the statements and comments before it.
	f, _ := syntax.NewParser(syntax.KeepComments(true)).Parse(strings.NewReader(src), "")
	if f == nil {
		return nil
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		c, ok := n.(*syntax.Comment)
		if !ok || !strings.HasSuffix(c.Text, "\\\n") {
			return true
		}
		start, end := int(c.Pos().Offset()), min(int(c.End().Offset()), len(src))
		if i := strings.LastIndexByte(src[start:end], '\\'); i >= 0 {
			offs = append(offs, start+i)
		}
		return true
	})
	return offs
}

// scanBytes reads a command once. It guesses how many parts the command
// has, from the bytes that may start a new simple command, so that Parts
// is allocated once for most commands; and it returns the index of the
// first NUL byte or, if there is none, of the first other control
// character (other than tab and newline), or -1.
func scanBytes(src string) (parts, control int) {
	parts, control = 1, -1
	nul := false
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case ';', '|', '&', '\n', '(', '`':
			parts++
		case '\t':
		case 0:
			if !nul {
				control, nul = i, true
			}
		default:
			if (c < 0x20 || c == 0x7f) && control < 0 {
				control = i
			}
		}
	}
	return parts, control
}

// countOpeners counts the tokens that may open a nested construct. Quotes
// are ignored, so the count is an upper bound of the nesting depth that no
// quoting can hide.
func countOpeners(src string) int {
	n := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '(' || c == '{' || c == '`':
			n++
		case c >= 'a' && c <= 'z' && (i == 0 || !isWordByte(src[i-1])):
			end := i
			for end < len(src) && isWordByte(src[end]) {
				end++
			}
			switch src[i:end] {
			case "if", "while", "until", "for", "case", "select", "function", "time", "coproc":
				n++
			}
			i = end - 1
		}
	}
	return n
}

// isWordByte reports whether c can be part of a shell keyword or name.
func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
