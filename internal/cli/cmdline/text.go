package cmdline

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Cell makes text fit a table cell: runs of white space become one space,
// other characters that are not printable become U+FFFD (so that text an
// agent wrote cannot drive the terminal), and text longer than max runes is
// cut with an ellipsis. Empty text reads <none>.
func Cell(text string, max int) string {
	text = OneLine(text)
	if text == "" {
		return "<none>"
	}
	if utf8.RuneCountInString(text) <= max {
		return text
	}
	return string([]rune(text)[:max-1]) + "…"
}

// OneLine makes text one line: its runs of white space become one space
// and characters that could drive the terminal are replaced.
func OneLine(text string) string {
	return Printable(strings.Join(strings.Fields(text), " "))
}

// Printable replaces the characters of text that are not printable (control
// characters, escape sequences, bidirectional overrides) with U+FFFD.
func Printable(text string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || unicode.IsPrint(r) {
			return r
		}
		return utf8.RuneError
	}, text)
}

// NoneIfEmpty is s, or <none> (as kubectl prints a field without a value)
// when s is empty.
func NoneIfEmpty(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
