package skillsref

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// kind is the JavaScript type of a value js-yaml constructs.
type kind int

const (
	kindNull   kind = iota // null
	kindBool               // boolean
	kindNumber             // number
	kindString             // string
	kindDate               // Date (!!timestamp)
	kindArray              // Array (!!seq, !!omap, !!pairs)
	kindObject             // plain Object (!!map, !!set)
	kindBytes              // Uint8Array (!!binary)
)

// value is a JavaScript value as js-yaml constructs it from YAML.
type value struct {
	kind   kind
	bool   bool
	number float64 // a number, or a Date's time value in milliseconds (NaN: Invalid Date)
	text   string
	items  []*value // an Array's elements
	keys   []string // an Object's own keys, in the order they were set
	props  map[string]*value
	bytes  []byte
}

var jsNull = &value{kind: kindNull}

func jsString(s string) *value { return &value{kind: kindString, text: s} }

func jsNumber(n float64) *value { return &value{kind: kindNumber, number: n} }

func newObject() *value { return &value{kind: kindObject, props: map[string]*value{}} }

// has tells whether an Object has an own key.
func (v *value) has(key string) bool {
	_, ok := v.props[key]
	return ok
}

// set sets an own key of an Object; a new key goes last.
func (v *value) set(key string, val *value) {
	if !v.has(key) {
		v.keys = append(v.keys, key)
	}
	v.props[key] = val
}

// ownKeys is Object.keys(v) for the values js-yaml may put where an object
// is expected: an Object's keys, an Array's or a Uint8Array's indexes, none
// for a Date.
func (v *value) ownKeys() []string {
	var n int
	switch v.kind {
	case kindObject:
		return v.keys
	case kindArray:
		n = len(v.items)
	case kindBytes:
		n = len(v.bytes)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	return keys
}

// isObject is js-yaml's common.isObject: typeof v === 'object' && v !== null.
func (v *value) isObject() bool {
	switch v.kind {
	case kindDate, kindArray, kindObject, kindBytes:
		return true
	}
	return false
}

// typeName names the value's JavaScript type for messages.
func (v *value) typeName() string {
	switch v.kind {
	case kindNull:
		return "null"
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "text"
	case kindDate:
		return "a date"
	case kindArray:
		return "a list"
	case kindBytes:
		return "binary data"
	}
	return "a mapping"
}

// maxStringBytes bounds the text String builds: aliases can make a list
// whose text grows exponentially, and past this size only its length
// matters to the rules, which it then exceeds.
const maxStringBytes = 1 << 20

// String is JavaScript's String(v).
func (v *value) String() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v *value) write(b *strings.Builder) {
	if b.Len() > maxStringBytes {
		return
	}
	switch v.kind {
	case kindNull:
		b.WriteString("null")
	case kindBool:
		b.WriteString(strconv.FormatBool(v.bool))
	case kindNumber:
		b.WriteString(numberString(v.number))
	case kindString:
		b.WriteString(v.text)
	case kindDate:
		b.WriteString(dateString(v.number))
	case kindObject:
		b.WriteString("[object Object]")
	case kindBytes:
		for i, c := range v.bytes {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(int(c)))
		}
	case kindArray:
		// Array.prototype.join: null elements are empty.
		for i, item := range v.items {
			if i > 0 {
				b.WriteByte(',')
			}
			if item.kind != kindNull {
				item.write(b)
			}
			if b.Len() > maxStringBytes {
				return
			}
		}
	}
}

// numberString is JavaScript's Number.prototype.toString() in base 10
// (ECMA-262 Number::toString): the shortest digits that round-trip, in
// plain notation from 1e-7 to 1e21 and in exponent notation outside.
func numberString(n float64) string {
	switch {
	case math.IsNaN(n):
		return "NaN"
	case math.IsInf(n, 1):
		return "Infinity"
	case math.IsInf(n, -1):
		return "-Infinity"
	case n == 0:
		return "0"
	case n < 0:
		return "-" + numberString(-n)
	}
	mantissa, exponent, _ := strings.Cut(strconv.FormatFloat(n, 'e', -1, 64), "e")
	digits := strings.Replace(mantissa, ".", "", 1)
	e, _ := strconv.Atoi(exponent)
	k, p := len(digits), e+1 // n = 0.digits × 10^p
	switch {
	case k <= p && p <= 21:
		return digits + strings.Repeat("0", p-k)
	case 0 < p && p <= 21:
		return digits[:p] + "." + digits[p:]
	case -6 < p && p <= 0:
		return "0." + strings.Repeat("0", -p) + digits
	}
	sign := "+"
	if p-1 < 0 {
		sign = "-"
	}
	exp := strconv.Itoa(abs(p - 1))
	if k == 1 {
		return digits + "e" + sign + exp
	}
	return digits[:1] + "." + digits[1:] + "e" + sign + exp
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// maxTimeValue is the largest time value, in milliseconds, a Date holds.
const maxTimeValue = 8.64e15

// dateString is String(date) for a Date of time value ms, as Node.js writes
// it in the UTC time zone (the reference validator's output depends on the
// TZ of the process that runs it; the side-by-side test runs it with TZ=UTC).
func dateString(ms float64) string {
	if math.IsNaN(ms) || math.Abs(ms) > maxTimeValue {
		return "Invalid Date"
	}
	t := time.UnixMilli(int64(ms)).UTC()
	year := fmt.Sprintf("%04d", t.Year())
	if t.Year() < 0 {
		year = fmt.Sprintf("-%04d", -t.Year())
	}
	return fmt.Sprintf("%s %s %02d %s %02d:%02d:%02d GMT+0000 (Coordinated Universal Time)",
		t.Weekday().String()[:3], t.Month().String()[:3], t.Day(), year, t.Hour(), t.Minute(), t.Second())
}

// utf16Len is a JavaScript string's length: its UTF-16 code units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}

// jsTrim is String.prototype.trim: it strips JavaScript's WhiteSpace and
// LineTerminator characters, which differ from Go's unicode.IsSpace (U+FEFF
// is one, U+0085 is not).
func jsTrim(s string) string {
	return strings.TrimFunc(s, isJSSpace)
}

func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// decodeUTF8 decodes bytes as Node.js reads a file as "utf-8" (the WHATWG
// UTF-8 decoder): each maximal invalid subsequence becomes one U+FFFD, and a
// byte order mark is kept.
func decodeUTF8(data []byte) string {
	if utf8.Valid(data) {
		return string(data)
	}
	var b strings.Builder
	b.Grow(len(data) + 16)
	needed, seen, lower, upper := 0, 0, byte(0x80), byte(0xBF)
	var cp rune
	for i := 0; i < len(data); i++ {
		c := data[i]
		if needed == 0 {
			switch {
			case c <= 0x7F:
				b.WriteByte(c)
			case c >= 0xC2 && c <= 0xDF:
				needed, cp = 1, rune(c&0x1F)
			case c >= 0xE0 && c <= 0xEF:
				if c == 0xE0 {
					lower = 0xA0
				} else if c == 0xED {
					upper = 0x9F
				}
				needed, cp = 2, rune(c&0xF)
			case c >= 0xF0 && c <= 0xF4:
				if c == 0xF0 {
					lower = 0x90
				} else if c == 0xF4 {
					upper = 0x8F
				}
				needed, cp = 3, rune(c&0x7)
			default:
				b.WriteRune(utf8.RuneError)
			}
			continue
		}
		if c < lower || c > upper {
			needed, seen, cp, lower, upper = 0, 0, 0, 0x80, 0xBF
			b.WriteRune(utf8.RuneError)
			i-- // read the byte again as the start of a sequence
			continue
		}
		lower, upper = 0x80, 0xBF
		cp = cp<<6 | rune(c&0x3F)
		if seen++; seen == needed {
			b.WriteRune(cp)
			needed, seen, cp = 0, 0, 0
		}
	}
	if needed != 0 {
		b.WriteRune(utf8.RuneError)
	}
	return b.String()
}
