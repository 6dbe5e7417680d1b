package skillsref

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// go.yaml.in/yaml/v3 reads YAML as libyaml does, and js-yaml as YAML 1.2
// says. Where they differ on text a SKILL.md may hold, prepare rewrites the
// front matter before yaml/v3 reads it, and reveal gives each scalar the
// text js-yaml reads, or js-yaml's error:
//
//   - control characters: yaml/v3 refuses them anywhere; js-yaml accepts
//     them in comments, accepts DEL and C1 controls in quoted scalars, and
//     refuses them elsewhere;
//   - NEL, LS and PS (U+0085, U+2028, U+2029) break lines in yaml/v3 and
//     are ordinary characters in js-yaml;
//   - the escapes of double-quoted scalars: js-yaml reads `\/` and
//     surrogates written `\uD83D\uDE00`, which yaml/v3 refuses, and refuses
//     `\'`, which yaml/v3 reads.
//
// prepare moves such characters to private-use code points (controlBase+c)
// and writes such escapes as an escaped backslash and a marker, so that
// yaml/v3 reads the scalar in any style; reveal undoes it by the scalar's
// style. Text that already holds code points of the private-use planes is
// left as it is.

// controlBase is where prepare moves a character c: controlBase+c.
const controlBase = 0xF0000

// Markers prepare writes after an escaped backslash.
const (
	markSlash = 0x100000 + iota // `\/`
	markApos                    // `\'`
	markU                       // `\u` and 4 hex digits of a surrogate
	markBigU                    // `\U` and 8 hex digits of a surrogate or past U+10FFFF
)

// isRefused tells whether js-yaml refuses r as a raw character of a plain or
// block scalar (C0 controls but tab and line breaks, DEL, C1 controls but
// NEL, U+FFFE, U+FFFF); yaml/v3 refuses these anywhere.
func isRefused(r rune) bool {
	return (r < 0x20 && r != '\t' && r != '\n' && r != '\r') ||
		(r >= 0x7F && r <= 0x9F && r != 0x85) || r == 0xFFFE || r == 0xFFFF
}

// isMoved tells whether prepare moves r to controlBase+r.
func isMoved(r rune) bool {
	return isRefused(r) || r == 0x85 || r == 0x2028 || r == 0x2029
}

// prepare rewrites text for yaml/v3, and tells whether it changed it.
func prepare(text string) (string, bool) {
	if strings.ContainsFunc(text, func(r rune) bool { return r >= controlBase }) ||
		(!strings.ContainsFunc(text, isMoved) && !strings.Contains(text, `\`)) {
		return text, false
	}
	var b strings.Builder
	b.Grow(len(text) + 16)
	changed := false
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\\':
			j := i
			for j < len(text) && text[j] == '\\' {
				j++
			}
			b.WriteString(text[i : j-(j-i)%2]) // escaped backslashes
			if (j-i)%2 == 1 {
				n, mark := escapeAt(text[j:])
				b.WriteByte('\\')
				if mark != 0 {
					b.WriteByte('\\')
					b.WriteRune(mark)
					if n > 0 {
						b.WriteString(text[j+1 : j+n])
					}
					j += n
					changed = true
				}
			}
			i = j
		case isMoved(r):
			b.WriteRune(controlBase + r)
			changed = true
			i += size
		default:
			b.WriteString(text[i : i+size])
			i += size
		}
	}
	return b.String(), changed
}

// escapeAt looks at the text after a backslash: when it starts an escape
// on which yaml/v3 and js-yaml differ, it returns the escape's length
// (without the backslash) and its marker; the marker stands for the
// escape's first character, and the rest follows it. The apostrophe of
// `\'` stays in the text (length 0), so that a single-quoted scalar ends
// where it did.
func escapeAt(rest string) (int, rune) {
	switch {
	case strings.HasPrefix(rest, "/"):
		return 1, markSlash
	case strings.HasPrefix(rest, "'"):
		return 0, markApos
	case len(rest) >= 5 && rest[0] == 'u':
		if c, err := strconv.ParseUint(rest[1:5], 16, 32); err == nil && c >= 0xD800 && c <= 0xDFFF {
			return 5, markU
		}
	case len(rest) >= 9 && rest[0] == 'U':
		if c, err := strconv.ParseUint(rest[1:9], 16, 32); err == nil && ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) {
			return 9, markBigU
		}
	}
	return 0, 0
}

// reveal gives a scalar's text as js-yaml reads it, undoing prepare, or
// js-yaml's error.
func reveal(n *yaml.Node) (string, error) {
	doubleQuoted := n.Style&yaml.DoubleQuotedStyle != 0
	quoted := doubleQuoted || n.Style&yaml.SingleQuotedStyle != 0
	var units []uint16
	text := n.Value
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r >= controlBase && r <= controlBase+0xFFFF:
			r -= controlBase
			if isRefused(r) && (!quoted || r < 0x20) {
				return "", fmt.Errorf("the stream contains non-printable characters (line %d)", n.Line)
			}
			units = utf16.AppendRune(units, r)
			i += size
		case r == '\\' && i+size < len(text):
			mark, markSize := utf8.DecodeRuneInString(text[i+size:])
			if doubleQuoted && mark >= markSlash && mark <= markBigU {
				var err error
				units, i, err = unescape(units, text, i+size+markSize, mark, n.Line)
				if err != nil {
					return "", err
				}
				continue
			}
			if !doubleQuoted && mark == '\\' && i+2*size < len(text) {
				if m, mSize := utf8.DecodeRuneInString(text[i+2*size:]); m >= markSlash && m <= markBigU {
					units = utf16.AppendRune(units, '\\')
					units = append(units, literalEscape[m]...)
					i += 2*size + mSize
					continue
				}
			}
			units = append(units, '\\')
			i += size
		default:
			units = utf16.AppendRune(units, r)
			i += size
		}
	}
	return string(utf16.Decode(units)), nil
}

// literalEscape is what each marker stands for outside a double-quoted
// scalar, after its backslash: the text as written. The apostrophe of `\'`
// follows the marker in the text.
var literalEscape = map[rune][]uint16{
	markSlash: {'/'},
	markApos:  nil,
	markU:     {'u'},
	markBigU:  {'U'},
}

// unescape reads the escape a marker stands for in a double-quoted scalar,
// at text[i:], as js-yaml does: `\/` is a slash, `\'` an error, and `\u`
// and `\U` escapes become UTF-16 code units, paired into characters when
// they can be.
func unescape(units []uint16, text string, i int, mark rune, line int) ([]uint16, int, error) {
	switch mark {
	case markSlash:
		return append(units, '/'), i, nil
	case markApos:
		return nil, 0, fmt.Errorf("unknown escape sequence (line %d)", line)
	}
	digits := 4
	if mark == markBigU {
		digits = 8
	}
	c, _ := strconv.ParseUint(text[i:i+digits], 16, 32)
	if c <= 0xFFFF {
		return append(units, uint16(c)), i + digits, nil
	}
	// js-yaml's charFromCodepoint, whose results String.fromCharCode
	// truncates to 16 bits.
	return append(units, uint16(((c-0x10000)>>10)+0xD800), uint16(((c-0x10000)&0x3FF)+0xDC00)), i + digits, nil
}
