package policy

import (
	"strings"
)

// sedScriptSpawns reports whether a sed script may run a command: it has
// an e command or an s command with the e flag, or it cannot be read to
// the end (an unknown command, an unterminated s or y): GNU sed runs what
// e names with the shell.
func sedScriptSpawns(s string) bool {
	i := 0
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', ';':
			i++
			continue
		case '#':
			i = lineEnd(s, i)
			continue
		}
		var ok bool
		if i, ok = sedAddresses(s, i); !ok || i >= len(s) {
			return true
		}
		c := s[i]
		i++
		switch {
		case c == 'e':
			return true
		case strings.IndexByte("{}=dDgGhHnNpPxzF", c) >= 0:
		case strings.IndexByte("qQlL", c) >= 0:
			for i < len(s) && (s[i] == ' ' || s[i] >= '0' && s[i] <= '9') {
				i++
			}
		case strings.IndexByte("aicrRwW", c) >= 0:
			i = sedTextEnd(s, i)
		case strings.IndexByte(":btTv", c) >= 0:
			// a label ends at ; too, so that nothing after it is missed
			for i < len(s) && s[i] != '\n' && s[i] != ';' {
				i++
			}
		case c == 's':
			if i, ok = sedSubstitute(s, i); !ok {
				return true
			}
		case c == 'y':
			if i, ok = sedDelimited(s, i, 2); !ok {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// sedAddresses skips the addresses and the ! before a command.
func sedAddresses(s string, i int) (int, bool) {
	for n := 0; n < 2; n++ {
		switch {
		case i < len(s) && (s[i] == '/' || s[i] == '\\'):
			if s[i] == '\\' {
				i++
			}
			var ok bool
			if i, ok = sedDelimited(s, i, 1); !ok {
				return i, false
			}
			for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		default:
			for i < len(s) && strings.IndexByte("0123456789$~+", s[i]) >= 0 {
				i++
			}
		}
		if n == 0 && i < len(s) && s[i] == ',' {
			i++
			continue
		}
		break
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '!') {
		i++
	}
	return i, true
}

// sedSubstitute skips an s command after the s: its two parts and its
// flags; it fails on the e flag, as it fails on what it cannot read.
func sedSubstitute(s string, i int) (int, bool) {
	i, ok := sedDelimited(s, i, 2)
	if !ok {
		return i, false
	}
	for i < len(s) {
		switch c := s[i]; {
		case c == 'w':
			return sedTextEnd(s, i+1), true
		case strings.IndexByte("gpiImM0123456789", c) >= 0:
			i++
		case c == ';' || c == '\n' || c == '}' || c == ' ' || c == '#':
			return i, true
		default:
			return i, false // e, or a flag sed refuses
		}
	}
	return i, true
}

// sedDelimited skips parts ending in the delimiter at s[i] (s/a/b/ has
// two, /re/ one), with backslash escapes; it fails when a part does not
// end.
func sedDelimited(s string, i, parts int) (int, bool) {
	if i >= len(s) || s[i] == '\n' || s[i] == '\\' {
		return i, false
	}
	delim := s[i]
	i++
	for parts > 0 {
		if i >= len(s) {
			return i, false
		}
		switch s[i] {
		case '\\':
			i += 2
			continue
		case delim:
			parts--
		}
		i++
	}
	return i, true
}

// sedTextEnd returns the end of the text of a, i, c or a file name: the
// end of the line, past lines continued with a backslash.
func sedTextEnd(s string, i int) int {
	for i < len(s) && s[i] != '\n' {
		if s[i] == '\\' {
			i++
		}
		i++
	}
	return i
}

// lineEnd returns the index of the newline at or after i, or len(s).
func lineEnd(s string, i int) int {
	if n := strings.IndexByte(s[i:], '\n'); n >= 0 {
		return i + n
	}
	return len(s)
}
