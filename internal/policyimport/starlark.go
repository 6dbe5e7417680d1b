package policyimport

import (
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"go.starlark.net/syntax"
)

// The .rules files of Codex are Starlark programs. Real files are a list of
// calls with literal arguments, and this reader takes exactly that subset:
// the file is parsed by go.starlark.net/syntax, so every form of Starlark
// syntax (comments, line continuations, trailing commas, string escapes and
// prefixes, triple quotes) reads as Starlark reads it. Nothing is executed:
// each top-level statement must be a call name(key = value, ...) whose
// values are literals (strings, integers, True, False, None, and lists,
// tuples and dicts of literals). Anything else (variables, loops,
// functions, operators, f-strings) is an error naming the place, so that no
// rule is silently dropped. A statement is named file:line, as rule
// descriptions and notes name it; a place inside one, file:line:col.

// call is one top-level call of a .rules file.
type call struct {
	name string
	line int
	args map[string]value
}

// kind is the type of a literal value.
type kind int

const (
	kindNone kind = iota
	kindString
	kindInt
	kindBool
	kindList
	kindTuple
	kindDict
)

// value is a literal.
type value struct {
	pos  syntax.Position
	kind kind
	str  string
	num  *big.Int
	b    bool
	// list holds the items of a list or a tuple.
	list []value
	dict []dictEntry
}

// dictEntry is one key: value of a dict.
type dictEntry struct {
	key, val value
}

func (v value) isStr() bool  { return v.kind == kindString }
func (v value) isList() bool { return v.kind == kindList }

// literalsRead says which values are read, for errors.
const literalsRead = "only literal strings, integers, True, False, None, and lists, tuples and dicts of them are read as values"

// parseCalls reads a .rules file as a list of calls.
func parseCalls(file, src string) ([]call, error) {
	f, err := (&syntax.FileOptions{}).Parse(file, src, 0)
	if err != nil {
		return nil, syntaxError(err, src)
	}
	var calls []call
	for _, stmt := range f.Stmts {
		start, _ := stmt.Span()
		source := fmt.Sprintf("%s:%d", file, start.Line)
		x, ok := stmt.(*syntax.ExprStmt)
		if !ok {
			return nil, fmt.Errorf("%s: only calls such as prefix_rule(...) are read, found %s", source, describeStmt(stmt))
		}
		ce, ok := x.X.(*syntax.CallExpr)
		if !ok {
			return nil, fmt.Errorf("%s: only calls such as prefix_rule(...) are read, found %s", source, describe(x.X))
		}
		fn, ok := ce.Fn.(*syntax.Ident)
		if !ok {
			return nil, fmt.Errorf("%s: only calls of a function by its name, such as prefix_rule(...), are read, found a call of %s", source, describe(ce.Fn))
		}
		c := call{name: fn.Name, line: int(fn.NamePos.Line), args: map[string]value{}}
		for _, arg := range ce.Args {
			kw, ok := arg.(*syntax.BinaryExpr)
			if !ok || kw.Op != syntax.EQ {
				return nil, fmt.Errorf("%s: %s: expected a keyword argument (name = value), found %s", syntax.Start(arg), c.name, describe(arg))
			}
			key := kw.X.(*syntax.Ident) // the parser accepts only a name before =
			if _, dup := c.args[key.Name]; dup {
				return nil, fmt.Errorf("%s: %s: argument %s given twice", key.NamePos, c.name, key.Name)
			}
			v, err := literal(kw.Y)
			if err != nil {
				return nil, err
			}
			c.args[key.Name] = v
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// literal evaluates a literal expression, and refuses any other.
func literal(e syntax.Expr) (value, error) {
	v := value{pos: syntax.Start(e)}
	switch e := e.(type) {
	case *syntax.ParenExpr:
		return literal(e.X)
	case *syntax.Literal:
		switch x := e.Value.(type) {
		case string:
			if e.Token == syntax.STRING {
				v.kind, v.str = kindString, x
				return v, nil
			}
		case int64:
			v.kind, v.num = kindInt, big.NewInt(x)
			return v, nil
		case *big.Int:
			v.kind, v.num = kindInt, x
			return v, nil
		}
	case *syntax.Ident:
		switch e.Name {
		case "None":
			v.kind = kindNone
			return v, nil
		case "True", "False":
			v.kind, v.b = kindBool, e.Name == "True"
			return v, nil
		}
	case *syntax.UnaryExpr:
		// A signed integer, -1 or +1, is a literal too.
		if l, ok := e.X.(*syntax.Literal); ok && (e.Op == syntax.MINUS || e.Op == syntax.PLUS) && l.Token == syntax.INT {
			n, err := literal(l)
			if err != nil {
				return value{}, err
			}
			if e.Op == syntax.MINUS {
				n.num = new(big.Int).Neg(n.num)
			}
			n.pos = v.pos
			return n, nil
		}
	case *syntax.ListExpr:
		items, err := literals(e.List)
		v.kind, v.list = kindList, items
		return v, err
	case *syntax.TupleExpr:
		items, err := literals(e.List)
		v.kind, v.list = kindTuple, items
		return v, err
	case *syntax.DictExpr:
		return literalDict(e)
	}
	switch e := e.(type) {
	case *syntax.BinaryExpr:
		return value{}, fmt.Errorf("%s: unexpected '%s': %s", e.OpPos, e.Op, literalsRead)
	case *syntax.UnaryExpr:
		return value{}, fmt.Errorf("%s: unexpected '%s': %s", e.OpPos, e.Op, literalsRead)
	}
	return value{}, fmt.Errorf("%s: %s, found %s", v.pos, literalsRead, describe(e))
}

// literals evaluates the items of a list or a tuple.
func literals(exprs []syntax.Expr) ([]value, error) {
	var out []value
	for _, e := range exprs {
		v, err := literal(e)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// literalDict evaluates a dict literal. As in Starlark, a key must be
// hashable and given once.
func literalDict(e *syntax.DictExpr) (value, error) {
	v := value{pos: e.Lbrace, kind: kindDict}
	seen := map[string]bool{}
	for _, item := range e.List {
		entry := item.(*syntax.DictEntry)
		k, err := literal(entry.Key)
		if err != nil {
			return value{}, err
		}
		if !k.hashable() {
			return value{}, fmt.Errorf("%s: a dict key cannot be a list or a dict", k.pos)
		}
		if seen[k.repr()] {
			return value{}, fmt.Errorf("%s: dict key %s given twice", k.pos, k.repr())
		}
		seen[k.repr()] = true
		val, err := literal(entry.Value)
		if err != nil {
			return value{}, err
		}
		v.dict = append(v.dict, dictEntry{key: k, val: val})
	}
	return v, nil
}

// hashable reports whether a value can be a dict key.
func (v value) hashable() bool {
	switch v.kind {
	case kindList, kindDict:
		return false
	case kindTuple:
		for _, item := range v.list {
			if !item.hashable() {
				return false
			}
		}
	}
	return true
}

// repr writes a value in Starlark syntax, for errors and to tell dict keys
// apart.
func (v value) repr() string {
	switch v.kind {
	case kindString:
		return strconv.Quote(v.str)
	case kindInt:
		return v.num.String()
	case kindBool:
		if v.b {
			return "True"
		}
		return "False"
	case kindList, kindTuple:
		items := make([]string, len(v.list))
		for i, item := range v.list {
			items[i] = item.repr()
		}
		if v.kind == kindList {
			return "[" + strings.Join(items, ", ") + "]"
		}
		if len(items) == 1 {
			return "(" + items[0] + ",)"
		}
		return "(" + strings.Join(items, ", ") + ")"
	case kindDict:
		items := make([]string, len(v.dict))
		for i, entry := range v.dict {
			items[i] = entry.key.repr() + ": " + entry.val.repr()
		}
		return "{" + strings.Join(items, ", ") + "}"
	}
	return "None"
}

// describe names an expression in an error.
func describe(e syntax.Expr) string {
	switch e := e.(type) {
	case *syntax.ParenExpr:
		return describe(e.X)
	case *syntax.Literal:
		switch e.Token {
		case syntax.STRING:
			return "the string " + shorten(e.Raw)
		case syntax.BYTES:
			return "the bytes literal " + shorten(e.Raw)
		case syntax.FLOAT:
			return "the float " + e.Raw
		}
		return e.Raw
	case *syntax.Ident:
		return "the name " + e.Name
	case *syntax.BinaryExpr:
		if e.Op == syntax.EQ {
			return "a keyword argument"
		}
		return "the operator '" + e.Op.String() + "'"
	case *syntax.UnaryExpr:
		if e.Op == syntax.STAR || e.Op == syntax.STARSTAR {
			return "'" + e.Op.String() + "' unpacking"
		}
		return "the operator '" + e.Op.String() + "'"
	case *syntax.CallExpr:
		return "a call"
	case *syntax.DotExpr:
		return "the attribute ." + e.Name.Name
	case *syntax.IndexExpr:
		return "an index"
	case *syntax.SliceExpr:
		return "a slice"
	case *syntax.Comprehension:
		return "a comprehension"
	case *syntax.LambdaExpr:
		return "a lambda"
	case *syntax.CondExpr:
		return "a conditional expression"
	case *syntax.ListExpr:
		return "a list"
	case *syntax.TupleExpr:
		return "a tuple"
	case *syntax.DictExpr:
		return "a dict"
	}
	return "an expression"
}

// shorten cuts a literal's text for an error.
func shorten(raw string) string {
	if r := []rune(raw); len(r) > 40 {
		return string(r[:37]) + "..."
	}
	return raw
}

// describeStmt names a statement that is not an expression in an error.
func describeStmt(s syntax.Stmt) string {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		if s.Op == syntax.EQ {
			return "an assignment"
		}
		return "an assignment " + s.Op.String()
	case *syntax.LoadStmt:
		return "a load statement"
	case *syntax.DefStmt:
		return "a function definition"
	case *syntax.IfStmt:
		return "an if statement"
	case *syntax.ForStmt:
		return "a for loop"
	case *syntax.WhileStmt:
		return "a while loop"
	case *syntax.ReturnStmt:
		return "a return statement"
	case *syntax.BranchStmt:
		return "a " + s.Token.String() + " statement"
	}
	return "a statement"
}

// fString finds a Python f-string prefix before a quote.
var fString = regexp.MustCompile(`(^|[^\w])([fF][rR]?|[rR][fF])["']`)

// syntaxError returns a syntax error of the parser, which names
// file:line:col, with a hint where a Python user would expect more than
// Starlark has: f"..." reads as the name f, then a string.
func syntaxError(err error, src string) error {
	var e syntax.Error
	if !errors.As(err, &e) {
		return err
	}
	lines := strings.Split(src, "\n")
	if n := int(e.Pos.Line); strings.HasPrefix(e.Msg, "got string literal") && n >= 1 && n <= len(lines) && fString.MatchString(lines[n-1]) {
		return fmt.Errorf("%w (f-strings are not read: write the string as a plain literal)", e)
	}
	return e
}
