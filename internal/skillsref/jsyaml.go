package skillsref

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The loader below reads front matter into the values js-yaml 4 (the YAML
// library of the reference validator) constructs with its default schema:
// the YAML 1.2 core types (null, bool, int, float) with js-yaml's own
// patterns, timestamps as Dates, merge keys, and the explicit !!binary,
// !!set, !!omap and !!pairs types. Mapping keys become strings as
// JavaScript's String() writes them, a repeated key is an error, and any
// other tag is an error. The YAML syntax itself is read by go.yaml.in/yaml/v3.

// Limits of js-yaml's loader.
const (
	maxDepth          = 100   // nesting of nodes
	maxTotalMergeKeys = 10000 // mappings and keys read by merge keys
	maxMergeSequence  = 100   // mappings in one merge key's list
)

// Tags of the js-yaml default schema, as go.yaml.in/yaml/v3 shortens them.
const (
	tagStr       = "!!str"
	tagNull      = "!!null"
	tagBool      = "!!bool"
	tagInt       = "!!int"
	tagFloat     = "!!float"
	tagTimestamp = "!!timestamp"
	tagBinary    = "!!binary"
	tagMerge     = "!!merge"
	tagMap       = "!!map"
	tagSet       = "!!set"
	tagSeq       = "!!seq"
	tagOmap      = "!!omap"
	tagPairs     = "!!pairs"
)

// loadYAML is js-yaml's load(text): undefined (nil) for a stream without a
// document, the document's value for one document, an error for more.
func loadYAML(text string) (*value, error) {
	if strings.ContainsRune(text, 0) {
		return nil, errors.New("null byte is not allowed in input")
	}
	text = strings.TrimPrefix(text, "\uFEFF")
	text, rewritten := prepare(text)
	dec := yaml.NewDecoder(strings.NewReader(text))
	var doc yaml.Node
	if err := decode(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := decode(dec, &extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, errors.New("expected a single document in the stream, but found more")
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	l := &loader{anchors: map[*yaml.Node]*value{}, rewritten: rewritten}
	return l.construct(doc.Content[0], 1)
}

// decode reads the next document, turning a panic of the parser into an
// error.
func decode(dec *yaml.Decoder, node *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return dec.Decode(node)
}

// loader constructs the values of one document.
type loader struct {
	// anchors holds the value constructed for each node an alias names:
	// js-yaml gives an alias the anchored value itself.
	anchors map[*yaml.Node]*value
	// mergeWork counts what merge keys read, as js-yaml bounds it.
	mergeWork int
	// rewritten tells that prepare rewrote the text.
	rewritten bool
}

func (l *loader) construct(n *yaml.Node, depth int) (*value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nesting exceeded maxDepth (%d)", maxDepth)
	}
	if n.Kind == yaml.AliasNode {
		if v, ok := l.anchors[n.Alias]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("unidentified alias %q", n.Value)
	}
	var v *value
	var err error
	switch n.Kind {
	case yaml.ScalarNode:
		v, err = l.scalar(n)
	case yaml.MappingNode:
		v, err = l.mapping(n, depth)
	case yaml.SequenceNode:
		v, err = l.sequence(n, depth)
	default:
		err = fmt.Errorf("unexpected YAML node on line %d", n.Line)
	}
	if err != nil {
		return nil, err
	}
	if n.Anchor != "" {
		l.anchors[n] = v
	}
	return v, nil
}

// tagged tells whether a node carries an explicit tag.
func tagged(n *yaml.Node) bool { return n.Style&yaml.TaggedStyle != 0 }

// scalar constructs a scalar: a plain one by js-yaml's implicit types, a
// quoted or block one as a string, a tagged one by its tag.
func (l *loader) scalar(n *yaml.Node) (*value, error) {
	if l.rewritten {
		text, err := reveal(n)
		if err != nil {
			return nil, err
		}
		revealed := *n
		revealed.Value = text
		n = &revealed
	}
	styled := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
	empty := !styled && n.Value == "" // a node without content: js-yaml's null
	if !tagged(n) {
		switch {
		case styled:
			return jsString(n.Value), nil
		case empty:
			return jsNull, nil
		}
		return resolveImplicit(n.Value), nil
	}
	cannot := fmt.Errorf("cannot resolve a node with !<%s> explicit tag (line %d)", n.Tag, n.Line)
	switch n.Tag {
	case tagStr:
		return jsString(n.Value), nil
	case tagNull:
		if empty || isNull(n.Value) {
			return jsNull, nil
		}
	case tagBool:
		if b, ok := resolveBool(n.Value); ok && !empty {
			return &value{kind: kindBool, bool: b}, nil
		}
	case tagInt:
		if f, ok := resolveInt(n.Value); ok && !empty {
			return jsNumber(f), nil
		}
	case tagFloat:
		if f, ok := resolveFloat(n.Value); ok && !empty {
			return jsNumber(f), nil
		}
	case tagTimestamp:
		if ms, ok := resolveTimestamp(n.Value); ok && !empty {
			return &value{kind: kindDate, number: ms}, nil
		}
	case tagBinary:
		if b, ok := resolveBinary(n.Value); ok && !empty {
			return &value{kind: kindBytes, bytes: b}, nil
		}
	case tagMerge:
		if empty {
			return jsNull, nil
		}
		if n.Value == "<<" {
			return jsString(n.Value), nil
		}
	case tagMap, tagSet:
		if empty {
			return newObject(), nil
		}
		return nil, unacceptable(n, "mapping", "scalar")
	case tagSeq, tagOmap, tagPairs:
		if empty {
			return &value{kind: kindArray}, nil
		}
		return nil, unacceptable(n, "sequence", "scalar")
	default:
		return nil, unknownTag(n)
	}
	return nil, cannot
}

func unknownTag(n *yaml.Node) error {
	return fmt.Errorf("unknown tag !<%s> (line %d)", n.Tag, n.Line)
}

func unacceptable(n *yaml.Node, want, got string) error {
	return fmt.Errorf("unacceptable node kind for !<%s> tag; it should be %q, not %q (line %d)", n.Tag, want, got, n.Line)
}

// mapping constructs a mapping as a plain Object, as js-yaml's
// storeMappingPair does: keys are written as strings, merge keys copy the
// keys a mapping lacks, and a key set twice is an error unless a merge set
// it first.
func (l *loader) mapping(n *yaml.Node, depth int) (*value, error) {
	if tagged(n) {
		switch n.Tag {
		case tagMap, tagSet:
		case tagStr, tagNull, tagBool, tagInt, tagFloat, tagTimestamp, tagBinary, tagMerge:
			return nil, unacceptable(n, "scalar", "mapping")
		case tagSeq, tagOmap, tagPairs:
			return nil, unacceptable(n, "sequence", "mapping")
		default:
			return nil, unknownTag(n)
		}
	}
	obj := newObject()
	overridable := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		keyNode, valueNode := n.Content[i], n.Content[i+1]
		key, err := l.construct(keyNode, depth+1)
		if err != nil {
			return nil, err
		}
		val, err := l.construct(valueNode, depth+1)
		if err != nil {
			return nil, err
		}
		if keyNode.Kind == yaml.ScalarNode && keyNode.Tag == tagMerge {
			if err := l.merge(obj, val, overridable); err != nil {
				return nil, fmt.Errorf("%w (line %d)", err, keyNode.Line)
			}
			continue
		}
		name, err := keyString(key)
		if err != nil {
			return nil, fmt.Errorf("%w (line %d)", err, keyNode.Line)
		}
		if obj.has(name) && !overridable[name] {
			return nil, fmt.Errorf("duplicated mapping key %q (line %d)", name, keyNode.Line)
		}
		obj.set(name, val)
		delete(overridable, name)
	}
	if n.Tag == tagSet {
		for _, k := range obj.keys {
			if obj.props[k].kind != kindNull {
				return nil, fmt.Errorf("cannot resolve a node with !<%s> explicit tag (line %d)", n.Tag, n.Line)
			}
		}
	}
	return obj, nil
}

// keyString writes a constructed key as js-yaml does: String(key), with
// plain objects inside a list key written "[object Object]" and lists
// inside a list key refused.
func keyString(key *value) (string, error) {
	if key.kind == kindArray {
		for _, item := range key.items {
			if item.kind == kindArray {
				return "", errors.New("nested arrays are not supported inside keys")
			}
		}
	}
	return key.String(), nil
}

// merge copies into obj the keys it lacks from a merge key's value: a
// mapping, or a list of mappings.
func (l *loader) merge(obj, val *value, overridable map[string]bool) error {
	sources := []*value{val}
	if val.kind == kindArray {
		if len(val.items) > maxMergeSequence {
			return errors.New("abnormal merge sequence size")
		}
		sources = val.items
	}
	for _, src := range sources {
		if !src.isObject() {
			return errors.New("cannot merge mappings; the provided source object is unacceptable")
		}
		if err := l.chargeMerge(); err != nil {
			return err
		}
		for _, k := range src.ownKeys() {
			if err := l.chargeMerge(); err != nil {
				return err
			}
			if !obj.has(k) {
				obj.set(k, src.property(k))
				overridable[k] = true
			}
		}
	}
	return nil
}

func (l *loader) chargeMerge() error {
	if l.mergeWork++; l.mergeWork > maxTotalMergeKeys {
		return fmt.Errorf("merge keys exceeded maxTotalMergeKeys (%d)", maxTotalMergeKeys)
	}
	return nil
}

// property is v[key] for a key of ownKeys.
func (v *value) property(key string) *value {
	switch v.kind {
	case kindObject:
		return v.props[key]
	case kindArray:
		i, _ := strconv.Atoi(key)
		return v.items[i]
	case kindBytes:
		i, _ := strconv.Atoi(key)
		return jsNumber(float64(v.bytes[i]))
	}
	return jsNull
}

// sequence constructs a list as an Array; !!omap and !!pairs check that
// each item is a mapping of one key, and !!pairs turns each into a
// [key, value] Array.
func (l *loader) sequence(n *yaml.Node, depth int) (*value, error) {
	if tagged(n) {
		switch n.Tag {
		case tagSeq, tagOmap, tagPairs:
		case tagMap, tagSet:
			return nil, unacceptable(n, "mapping", "sequence")
		case tagStr, tagNull, tagBool, tagInt, tagFloat, tagTimestamp, tagBinary, tagMerge:
			return nil, unacceptable(n, "scalar", "sequence")
		default:
			return nil, unknownTag(n)
		}
	}
	arr := &value{kind: kindArray}
	for _, item := range n.Content {
		v, err := l.construct(item, depth+1)
		if err != nil {
			return nil, err
		}
		arr.items = append(arr.items, v)
	}
	if n.Tag != tagOmap && n.Tag != tagPairs {
		return arr, nil
	}
	seen := map[string]bool{}
	for i, item := range arr.items {
		if item.kind != kindObject || len(item.keys) != 1 || (n.Tag == tagOmap && seen[item.keys[0]]) {
			return nil, fmt.Errorf("cannot resolve a node with !<%s> explicit tag (line %d)", n.Tag, n.Line)
		}
		seen[item.keys[0]] = true
		if n.Tag == tagPairs {
			arr.items[i] = &value{kind: kindArray, items: []*value{jsString(item.keys[0]), item.props[item.keys[0]]}}
		}
	}
	return arr, nil
}

// resolveImplicit gives a plain scalar the first of js-yaml's implicit types
// that matches it: null, bool, int, float, timestamp; else it is a string.
func resolveImplicit(s string) *value {
	if isNull(s) {
		return jsNull
	}
	if b, ok := resolveBool(s); ok {
		return &value{kind: kindBool, bool: b}
	}
	if f, ok := resolveInt(s); ok {
		return jsNumber(f)
	}
	if f, ok := resolveFloat(s); ok {
		return jsNumber(f)
	}
	if ms, ok := resolveTimestamp(s); ok {
		return &value{kind: kindDate, number: ms}
	}
	return jsString(s)
}

func isNull(s string) bool {
	return s == "~" || s == "null" || s == "Null" || s == "NULL"
}

func resolveBool(s string) (bool, bool) {
	switch s {
	case "true", "True", "TRUE":
		return true, true
	case "false", "False", "FALSE":
		return false, true
	}
	return false, false
}

// resolveInt is js-yaml's int type: an optional sign, then 0b, 0x or 0o
// digits, or decimal digits; a value too large for a double is no int.
func resolveInt(s string) (float64, bool) {
	sign, rest := 1.0, s
	if strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
		if rest[0] == '-' {
			sign = -1
		}
		rest = rest[1:]
	}
	base, digits := 10, rest
	if len(rest) >= 2 && rest[0] == '0' {
		switch rest[1] {
		case 'b':
			base, digits = 2, rest[2:]
		case 'x':
			base, digits = 16, rest[2:]
		case 'o':
			base, digits = 8, rest[2:]
		}
	}
	if digits == "" {
		return 0, false
	}
	for _, c := range digits {
		if !isDigit(c, base) {
			return 0, false
		}
	}
	n, ok := new(big.Int).SetString(digits, base)
	if !ok {
		return 0, false
	}
	f, _ := new(big.Float).SetInt(n).Float64()
	if math.IsInf(f, 0) {
		return 0, false
	}
	return sign * f, true
}

func isDigit(c rune, base int) bool {
	switch base {
	case 2:
		return c == '0' || c == '1'
	case 8:
		return c >= '0' && c <= '7'
	case 16:
		return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
	}
	return c >= '0' && c <= '9'
}

var (
	floatPattern        = regexp.MustCompile(`^(?:[-+]?(?:[0-9]+)(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
	floatSpecialPattern = regexp.MustCompile(`^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)
)

// resolveFloat is js-yaml's float type.
func resolveFloat(s string) (float64, bool) {
	if !floatPattern.MatchString(s) {
		return 0, false
	}
	lower := strings.ToLower(s)
	sign := 1.0
	if lower[0] == '-' {
		sign = -1
	}
	lower = strings.TrimLeft(lower, "+-")
	switch lower {
	case ".inf":
		return math.Inf(int(sign)), floatSpecialPattern.MatchString(s)
	case ".nan":
		return math.NaN(), floatSpecialPattern.MatchString(s)
	}
	f, err := strconv.ParseFloat(lower, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return sign * f, true
}

var (
	datePattern      = regexp.MustCompile(`^([0-9][0-9][0-9][0-9])-([0-9][0-9])-([0-9][0-9])$`)
	timestampPattern = regexp.MustCompile(`^([0-9][0-9][0-9][0-9])-([0-9][0-9]?)-([0-9][0-9]?)(?:[Tt]|[ \t]+)([0-9][0-9]?):([0-9][0-9]):([0-9][0-9])(?:\.([0-9]*))?(?:[ \t]*(Z|([-+])([0-9][0-9]?)(?::([0-9][0-9]))?))?$`)
)

// resolveTimestamp is js-yaml's timestamp type: the Date's time value in
// milliseconds.
func resolveTimestamp(s string) (float64, bool) {
	m := datePattern.FindStringSubmatch(s)
	if m == nil {
		m = timestampPattern.FindStringSubmatch(s)
	}
	if m == nil {
		return 0, false
	}
	num := func(i int) int {
		n, _ := strconv.Atoi(m[i])
		return n
	}
	if len(m) < 5 || m[4] == "" {
		return dateUTC(num(1), num(2)-1, num(3), 0, 0, 0, 0), true
	}
	fraction := 0
	if m[7] != "" {
		f := m[7]
		if len(f) > 3 {
			f = f[:3]
		}
		fraction, _ = strconv.Atoi(f + strings.Repeat("0", 3-len(f)))
	}
	ms := dateUTC(num(1), num(2)-1, num(3), num(4), num(5), num(6), fraction)
	if m[9] != "" {
		delta := float64((num(10)*60 + num(11)) * 60000)
		if m[9] == "-" {
			delta = -delta
		}
		ms -= delta
	}
	return ms, true
}

// dateUTC is JavaScript's Date.UTC: years 0 to 99 mean 1900 to 1999, and
// fields out of range carry over.
func dateUTC(year, month, day, hour, minute, second, ms int) float64 {
	if year >= 0 && year <= 99 {
		year += 1900
	}
	t := time.Date(year, time.Month(month+1), day, hour, minute, second, 0, time.UTC)
	v := float64(t.UnixMilli() + int64(ms))
	if math.Abs(v) > maxTimeValue {
		return math.NaN()
	}
	return v
}

// base64Alphabet is js-yaml's BASE64_MAP: the alphabet, then '=', LF and CR.
const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n\r"

// resolveBinary is js-yaml's binary type, byte for byte: padding counts as
// six bits, line breaks are skipped, and what remains is decoded in groups
// of four.
func resolveBinary(s string) ([]byte, bool) {
	bitlen := 0
	for _, c := range s {
		code := strings.IndexRune(base64Alphabet, c)
		if code > 64 {
			continue
		}
		if code < 0 {
			return nil, false
		}
		bitlen += 6
	}
	if bitlen%8 != 0 {
		return nil, false
	}
	input := strings.NewReplacer("\r", "", "\n", "", "=", "").Replace(s)
	var out []byte
	bits := 0
	for i := 0; i < len(input); i++ {
		if i%4 == 0 && i > 0 {
			out = append(out, byte(bits>>16), byte(bits>>8), byte(bits))
		}
		bits = bits<<6 | strings.IndexByte(base64Alphabet, input[i])
	}
	switch (len(input) % 4) * 6 {
	case 0:
		out = append(out, byte(bits>>16), byte(bits>>8), byte(bits))
	case 18:
		out = append(out, byte(bits>>10), byte(bits>>2))
	case 12:
		out = append(out, byte(bits>>4))
	}
	return out, true
}
