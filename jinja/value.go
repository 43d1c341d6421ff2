package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Value is a template value. Its dynamic type is one of
//
//	nil        Python None
//	bool       True / False
//	int64      int (Go ints of other sizes are converted by ValueOf)
//	float64    float
//	string     str
//	*List      list, or tuple when Tuple is set
//	*Dict      dict, insertion-ordered
//	*Namespace the object namespace() returns
//	*Undefined a missing variable, attribute or item
//	*Func      a built-in function or bound method
//
// plus the template's own macros and loop objects. Values handed to Render
// are never modified: the sandbox has no mutating list or dict methods.
type Value = any

// List is a Python list, or a tuple when Tuple is set (they print and
// compare differently: [1] != (1,)).
type List struct {
	Items []Value
	Tuple bool
	// view marks the list-like objects Python prints differently:
	// "dict_keys", "dict_values", "dict_items" (dict views) and "range".
	view     string
	rangeArg string // range(...) arguments, for repr
}

// NewList returns a list holding items.
func NewList(items ...Value) *List { return &List{Items: items} }

// NewTuple returns a tuple holding items.
func NewTuple(items ...Value) *List { return &List{Items: items, Tuple: true} }

// Dict is a Python dict: keys keep insertion order, and setting an existing
// key replaces its value in place (the order observable through tojson,
// `| string` and iteration must match the reference).
type Dict struct {
	keys []Value
	vals []Value
	// strIdx indexes string keys (the common case, looked up without
	// building anything); idx indexes the others by hashKey.
	strIdx map[string]int
	idx    map[string]int
}

// NewDict returns an empty dict.
func NewDict() *Dict { return &Dict{} }

// Len is the number of entries.
func (d *Dict) Len() int { return len(d.keys) }

// Set adds or replaces key. It fails for unhashable keys (lists, dicts),
// as Python does.
func (d *Dict) Set(key, val Value) error { return d.put(nil, key, val) }

// put is Set, metered by st (nil: unmetered).
func (d *Dict) put(st *state, key, val Value) error {
	if s, ok := key.(string); ok {
		d.SetString(s, val)
		return nil
	}
	h, ok := hashKey(st, key, 0)
	if !ok {
		return typeErr("unhashable type: '%s'", typeName(key))
	}
	if i, ok := d.idx[h]; ok {
		d.vals[i] = val
		return nil
	}
	if d.idx == nil {
		d.idx = map[string]int{}
	}
	d.idx[h] = len(d.keys)
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, val)
	return nil
}

// SetString is Set for the common string key; it cannot fail.
func (d *Dict) SetString(key string, val Value) {
	if i, ok := d.strIdx[key]; ok {
		d.vals[i] = val
		return
	}
	if d.strIdx == nil {
		d.strIdx = map[string]int{}
	}
	d.strIdx[key] = len(d.keys)
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, val)
}

// Get looks key up. Unhashable keys are simply absent.
func (d *Dict) Get(key Value) (Value, bool) { return d.get(nil, key) }

// get is Get, metered by st (nil: unmetered).
func (d *Dict) get(st *state, key Value) (Value, bool) {
	if d == nil {
		return nil, false
	}
	var i int
	var ok bool
	if s, isStr := key.(string); isStr {
		i, ok = d.strIdx[s]
	} else if len(d.idx) > 0 {
		h, hashable := hashKey(st, key, 0)
		if !hashable {
			return nil, false
		}
		i, ok = d.idx[h]
	}
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// has reports whether d has key (a hashable key; see hashKey).
func (d *Dict) has(st *state, key Value) bool {
	_, ok := d.get(st, key)
	return ok
}

// copyDict is dict(d): the same entries in the same order.
func copyDict(d *Dict) *Dict {
	c := &Dict{keys: append([]Value(nil), d.keys...), vals: append([]Value(nil), d.vals...)}
	if d.strIdx != nil {
		c.strIdx = make(map[string]int, len(d.strIdx))
		for k, i := range d.strIdx {
			c.strIdx[k] = i
		}
	}
	if d.idx != nil {
		c.idx = make(map[string]int, len(d.idx))
		for k, i := range d.idx {
			c.idx[k] = i
		}
	}
	return c
}

// Keys returns the keys in insertion order (a copy).
func (d *Dict) Keys() []Value { return append([]Value(nil), d.keys...) }

// Values returns the values in insertion order (a copy).
func (d *Dict) Values() []Value { return append([]Value(nil), d.vals...) }

// Range calls f for each entry in order until f returns false.
func (d *Dict) Range(f func(key, val Value) bool) {
	for i := range d.keys {
		if !f(d.keys[i], d.vals[i]) {
			return
		}
	}
}

// hashKey gives the identity of a non-string dict key (strings are their
// own identity, see Dict). Python makes 1, 1.0 and True the same key, so
// integral numbers share one form. The forms are prefix-free, so a
// tuple's is its items' one after the other. st meters the walk through
// nested tuples and bounds the result (nil: unmetered); ok is false for
// unhashable keys.
func hashKey(st *state, v Value, depth int) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "n", true
	case bool:
		if x {
			return "i1;", true
		}
		return "i0;", true
	case int64:
		return "i" + strconv.FormatInt(x, 10) + ";", true
	case *Undefined:
		// All undefined values are equal to each other (see pyEqual).
		return "u", true
	case *List:
		if !x.Tuple {
			return "", false
		}
	}
	b := st.newBuf("a dict key")
	if !writeKey(b, v, depth) {
		return "", false
	}
	return b.String(), true
}

func writeKey(b *sbuf, v Value, depth int) bool {
	b.st.tick()
	switch x := v.(type) {
	case nil:
		b.WriteString("n")
	case string:
		b.WriteString("s" + strconv.Itoa(len(x)) + ":")
		b.WriteString(x)
	case bool, int64:
		i, _, _, _ := number(x)
		b.WriteString("i" + strconv.FormatInt(i, 10) + ";")
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			b.WriteString("i" + strconv.FormatInt(int64(x), 10) + ";")
		} else {
			b.WriteString("f" + strconv.FormatUint(math.Float64bits(x), 16) + ";")
		}
	case *List:
		if !x.Tuple {
			return false
		}
		b.st.nest(depth + 1)
		b.WriteString("t(")
		for _, it := range x.Items {
			if !writeKey(b, it, depth+1) {
				return false
			}
		}
		b.WriteString(")")
	case *Dict:
		return false
	case *Undefined:
		b.WriteString("u")
	default:
		// Everything else (namespaces, functions, macros) hashes by
		// identity in Python; the pointer gives the same behaviour.
		b.WriteString(fmt.Sprintf("p%p;", v))
	}
	return true
}

// Namespace is what namespace(...) returns: the one mutable object of a
// template, whose attributes `{% set ns.attr = ... %}` may change from
// inside a loop.
type Namespace struct {
	attrs *Dict
}

// Undefined stands for a missing variable, attribute or item. It prints as
// the empty string, is false, iterates as empty and has length 0; using it
// any other way (arithmetic, calling it, looking into it) is an
// UndefinedError whose message says what was missing.
type Undefined struct {
	name   Value // variable name, attribute name or item key
	obj    Value // the object it was looked up in, when hasObj
	hasObj bool
	hint   string // overrides the generated message when set
	kind   string // exception kind when used; "" means UndefinedError
}

// Message is jinja2's description of what is undefined, e.g.
// "'dict object' has no attribute 'role'".
func (u *Undefined) Message() string {
	if u.hint != "" {
		return u.hint
	}
	if !u.hasObj {
		return shortRepr(u.name) + " is undefined"
	}
	if _, ok := u.name.(string); !ok {
		return objectTypeRepr(u.obj) + " has no element " + shortRepr(u.name)
	}
	return strRepr(objectTypeRepr(u.obj)) + " has no attribute " + shortRepr(u.name)
}

func (u *Undefined) err() error {
	kind := u.kind
	if kind == "" {
		kind = "UndefinedError"
	}
	return &RuntimeError{Kind: kind, Msg: u.Message()}
}

func undefinedName(name string) *Undefined { return &Undefined{name: name} }

func undefinedIn(obj, name Value) *Undefined {
	return &Undefined{name: name, obj: obj, hasObj: true}
}

// Func is a callable: a global such as range or raise_exception, or a
// method bound to its receiver ("abc".upper).
type Func struct {
	Name string
	fn   func(st *state, a *callArgs) (Value, error)
}

// NewFunc makes a Go function callable from templates, e.g. as a render
// variable. Arguments arrive as template values; kwargs is nil when the
// call had no keyword arguments.
func NewFunc(name string, fn func(args []Value, kwargs map[string]Value) (Value, error)) *Func {
	return &Func{Name: name, fn: func(_ *state, a *callArgs) (Value, error) {
		var kw map[string]Value
		if len(a.kw) > 0 {
			kw = make(map[string]Value, len(a.kw))
			for _, k := range a.kw {
				kw[k.name] = k.val
			}
		}
		return fn(a.pos, kw)
	}}
}

// typeName is Python's type(v).__name__, used in error messages.
func typeName(v Value) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *List:
		switch {
		case x.view != "":
			return x.view
		case x.Tuple:
			return "tuple"
		}
		return "list"
	case *Dict:
		return "dict"
	case *Namespace:
		return "Namespace"
	case *Undefined:
		return "Undefined"
	case *Func:
		return "builtin_function_or_method"
	case *Macro:
		return "Macro"
	case *loopContext:
		return "LoopContext"
	case *cycler:
		return "Cycler"
	case *joiner:
		return "Joiner"
	case *generator:
		return x.pyType
	}
	return "object"
}

// objectTypeRepr is jinja2.utils.object_type_repr: how undefined-messages
// name the object a lookup failed on.
func objectTypeRepr(v Value) string {
	switch v.(type) {
	case nil:
		return "None"
	case *Namespace:
		return "jinja2.utils.Namespace object"
	case *Macro:
		return "jinja2.runtime.Macro object"
	case *loopContext:
		return "jinja2.runtime.LoopContext object"
	case *cycler:
		return "jinja2.utils.Cycler object"
	case *joiner:
		return "jinja2.utils.Joiner object"
	}
	return typeName(v) + " object"
}

// toStr is Python's str(v); it is what {{ v }}, `~` and `| string` print.
// st bounds and meters the repr of containers (nil: unbounded).
func toStr(st *state, v Value) string {
	switch x := v.(type) {
	case string:
		return x
	case *Undefined:
		return ""
	}
	return repr(st, v)
}

// repr is Python's repr(v); containers print their items with repr, which
// is why a dict of strings shows single quotes. st bounds the text by
// MaxOutputBytes and the nesting by MaxNesting, and meters the walk (nil:
// unbounded, for values the engine made itself).
func repr(st *state, v Value) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return floatRepr(x)
	}
	b := st.newBuf("a repr")
	writeRepr(b, v, 0)
	return b.String()
}

// shortRepr is repr cut to about 200 bytes, for error messages: the
// value may be huge, or a deep structure.
func shortRepr(v Value) string {
	b := &sbuf{trunc: 200}
	writeRepr(b, v, 0)
	if b.full {
		return b.String() + "..."
	}
	return b.String()
}

func writeRepr(b *sbuf, v Value, depth int) {
	if b.full {
		return
	}
	b.st.tick()
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(floatRepr(x))
	case string:
		writeStrRepr(b, x)
	case *List:
		b.st.nest(depth + 1)
		switch x.view {
		case "range":
			b.WriteString("range(" + x.rangeArg + ")")
			return
		case "dict_keys", "dict_values", "dict_items":
			b.WriteString(x.view + "(")
			writeRepr(b, &List{Items: x.Items}, depth)
			b.WriteString(")")
			return
		}
		open, close := "[", "]"
		if x.Tuple {
			open, close = "(", ")"
		}
		b.WriteString(open)
		for i, it := range x.Items {
			if b.full {
				return
			}
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, it, depth+1)
		}
		if x.Tuple && len(x.Items) == 1 {
			b.byte(',')
		}
		b.WriteString(close)
	case *Dict:
		b.st.nest(depth + 1)
		b.byte('{')
		for i := range x.keys {
			if b.full {
				return
			}
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x.keys[i], depth+1)
			b.WriteString(": ")
			writeRepr(b, x.vals[i], depth+1)
		}
		b.byte('}')
	case *Namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, x.attrs, depth+1)
		b.byte('>')
	case *Undefined:
		b.WriteString("Undefined")
	case *Func:
		b.WriteString("<built-in function " + x.Name + ">")
	case *Macro:
		b.WriteString("<Macro ")
		writeStrRepr(b, x.name)
		b.WriteString(">")
	case *generator:
		b.WriteString(x.repr())
	case *loopContext:
		b.WriteString("<LoopContext " + strconv.Itoa(x.index+1) + "/" + strconv.Itoa(len(x.items)) + ">")
	default:
		b.WriteString("<" + typeName(v) + " object>")
	}
}

// strRepr is CPython's str.__repr__ (see writeStrRepr), unbounded: for
// names and short strings in messages.
func strRepr(s string) string {
	b := &sbuf{}
	writeStrRepr(b, s)
	return b.String()
}

// writeStrRepr writes CPython's str.__repr__ of s: single quotes unless
// the string contains a single quote and no double quote; backslash
// escapes for quotes, backslashes, \t \n \r and characters that are not
// printable. Runs of characters that need no escape are written whole.
func writeStrRepr(b *sbuf, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.byte(quote)
	plain := 0 // start of the run of characters written as they are
	for i := 0; i < len(s) && !b.full; {
		r, n := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch {
		case r == rune(quote) || r == '\\':
			esc = "\\" + string(r)
		case r == '\t':
			esc = `\t`
		case r == '\n':
			esc = `\n`
		case r == '\r':
			esc = `\r`
		case r == utf8.RuneError && n == 1:
			// invalid UTF-8 (only Go callers can make it): as U+FFFD
			esc = string(utf8.RuneError)
		case r < ' ' || r == 0x7f:
			esc = `\x` + hex2(int(r))
		case r < 0x7f:
		case unicode.IsPrint(r):
			// Go's IsPrint (L, M, N, P, S and U+0020) is exactly the
			// complement of Python's non-printable classes (C*, Z*).
		case r <= 0xff:
			esc = `\x` + hex2(int(r))
		case r <= 0xffff:
			esc = `\u` + hexN(int(r), 4)
		default:
			esc = `\U` + hexN(int(r), 8)
		}
		if esc == "" && b.trunc > 0 && i-plain >= b.trunc {
			break // (a message: the rest would be cut anyway)
		}
		if esc != "" {
			b.WriteString(s[plain:i])
			b.WriteString(esc)
			plain = i + n
		}
		i += n
	}
	if !b.full {
		b.WriteString(s[plain:])
	}
	b.byte(quote)
}

func hex2(n int) string { return hexN(n, 2) }

func hexN(n, width int) string {
	s := strconv.FormatInt(int64(n), 16)
	for len(s) < width {
		s = "0" + s
	}
	return s
}

// floatRepr is CPython's repr(float): the shortest digits that round-trip,
// in positional notation when the decimal exponent is in [-4, 16), else
// scientific with at least two exponent digits; integral values keep ".0".
func floatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	e := strings.IndexByte(s, 'e')
	digits := strings.Replace(s[:e], ".", "", 1)
	exp, _ := strconv.Atoi(s[e+1:])
	decpt := exp + 1 // position of the decimal point relative to digits
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			return sign + "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			return sign + digits[:decpt] + "." + digits[decpt:]
		}
	}
	mant := digits[:1]
	if len(digits) > 1 {
		mant += "." + digits[1:]
	}
	esign := "+"
	if exp < 0 {
		esign, exp = "-", -exp
	}
	es := strconv.Itoa(exp)
	if len(es) < 2 {
		es = "0" + es
	}
	return sign + mant + "e" + esign + es
}

// truthy is Python's bool(v).
func truthy(v Value) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case *List:
		return len(x.Items) > 0
	case *Dict:
		return x.Len() > 0
	case *Undefined:
		return false
	}
	return true
}

// number reports v as a Python number; bool counts, as in Python (True+1 == 2).
func number(v Value) (i int64, f float64, isFloat, ok bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, 1, false, true
		}
		return 0, 0, false, true
	case int64:
		return x, float64(x), false, true
	case float64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

// pyEqual is Python's ==, unmetered (for values the engine made).
func pyEqual(a, b Value) bool { return equal(nil, a, b, 0) }

// equal is Python's ==; st meters the walk and bounds its depth (nil:
// unmetered). As in CPython, items that are the same object are equal
// without being compared.
func equal(st *state, a, b Value, depth int) bool {
	st.tick()
	if ai, af, aflt, ok := number(a); ok {
		bi, bf, bflt, ok := number(b)
		if !ok {
			return false
		}
		if !aflt && !bflt {
			return ai == bi
		}
		return af == bf
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		if ok && len(x) == len(y) {
			st.charge(int64(len(x)) / bytesPerStep)
		}
		return ok && x == y
	case *List:
		y, ok := b.(*List)
		if !ok || x.Tuple != y.Tuple || x.view != y.view || len(x.Items) != len(y.Items) {
			return false
		}
		if x.view == "dict_values" || x == y {
			return x == y // Python's dict_values compare by identity
		}
		st.nest(depth + 1)
		for i := range x.Items {
			if !sameObject(x.Items[i], y.Items[i]) && !equal(st, x.Items[i], y.Items[i], depth+1) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		if x == y {
			return true
		}
		st.nest(depth + 1)
		for i, k := range x.keys {
			v, ok := y.get(st, k)
			if !ok || (!sameObject(x.vals[i], v) && !equal(st, x.vals[i], v, depth+1)) {
				return false
			}
		}
		return true
	case *Undefined:
		// jinja2's Undefined.__eq__: equal to any other Undefined.
		_, ok := b.(*Undefined)
		return ok
	}
	return a == b
}

// sameObject reports whether a and b are the same list or dict, which
// CPython's container comparisons take as equal without looking inside.
func sameObject(a, b Value) bool {
	switch x := a.(type) {
	case *List:
		y, ok := b.(*List)
		return ok && x == y
	case *Dict:
		y, ok := b.(*Dict)
		return ok && x == y
	}
	return false
}

// pyCompare implements <, <=, > and >= as Python does: numbers with
// numbers, strings with strings (code point order, which is UTF-8 byte
// order), sequences of the same kind item by item; anything else is a
// TypeError. st meters it (nil: unmetered).
func pyCompare(st *state, op string, a, b Value) (bool, error) {
	if u, ok := a.(*Undefined); ok {
		return false, u.err()
	}
	if u, ok := b.(*Undefined); ok {
		return false, u.err()
	}
	c, err := cmp3(st, op, a, b, 0)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	default:
		return c >= 0, nil
	}
}

// cmp3 orders a and b (-1, 0, 1). NaN compares as unordered in Python; it
// is rare enough in templates that treating it like any float is fine.
func cmp3(st *state, op string, a, b Value, depth int) (int, error) {
	st.tick()
	if ai, af, aflt, ok := number(a); ok {
		if bi, bf, bflt, ok := number(b); ok {
			if !aflt && !bflt {
				return cmpOrdered(ai, bi), nil
			}
			return cmpOrdered(af, bf), nil
		}
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			st.charge(int64(min(len(x), len(y))) / bytesPerStep)
			return strings.Compare(x, y), nil
		}
	case *List:
		if y, ok := b.(*List); ok && x.Tuple == y.Tuple {
			st.nest(depth + 1)
			for i := 0; i < len(x.Items) && i < len(y.Items); i++ {
				if sameObject(x.Items[i], y.Items[i]) || equal(st, x.Items[i], y.Items[i], depth+1) {
					continue
				}
				return cmp3(st, op, x.Items[i], y.Items[i], depth+1)
			}
			return cmpOrdered(len(x.Items), len(y.Items)), nil
		}
	}
	return 0, typeErr("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
}

func cmpOrdered[T int | int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// iterate is Python's iter(v) materialised: list and tuple items, dict
// keys, the characters of a string. Undefined iterates as empty. st
// accounts for the list it builds (nil: unmetered).
func iterate(st *state, v Value) ([]Value, error) {
	switch x := v.(type) {
	case *List:
		return x.Items, nil
	case *Dict:
		st.buildItems(int64(len(x.keys)), "iterating over a dict")
		return x.Keys(), nil
	case string:
		n := utf8.RuneCountInString(x)
		// each character becomes a string of its own: an item and a header
		st.buildItems(2*int64(n), "iterating over a string")
		out := make([]Value, 0, n)
		for i := 0; i < len(x); {
			r, size := utf8.DecodeRuneInString(x[i:])
			if r == utf8.RuneError && size == 1 {
				out = append(out, string(r)) // invalid UTF-8 (from Go callers only)
			} else {
				out = append(out, x[i:i+size])
			}
			i += size
		}
		return out, nil
	case *Undefined:
		return nil, nil
	case *generator:
		return x.rest()
	}
	return nil, typeErr("'%s' object is not iterable", typeName(v))
}

// length is Python's len(v); Undefined has length 0.
func length(v Value) (int, error) {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x), nil
	case *List:
		return len(x.Items), nil
	case *Dict:
		return x.Len(), nil
	case *Undefined:
		return 0, nil
	case *Namespace:
		// jinja2's Namespace has no __len__.
	}
	return 0, typeErr("object of type '%s' has no len()", typeName(v))
}

// contains is Python's `item in container`, metered by st (nil:
// unmetered).
func contains(st *state, container, item Value) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			if u, ok := item.(*Undefined); ok {
				return false, u.err()
			}
			return false, typeErr("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		st.charge(int64(len(c)) / bytesPerStep)
		return strings.Contains(c, s), nil
	case *List:
		for _, it := range c.Items {
			if sameObject(it, item) || equal(st, it, item, 0) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		if _, isStr := item.(string); !isStr {
			if _, ok := hashKey(st, item, 0); !ok {
				return false, typeErr("unhashable type: '%s'", typeName(item))
			}
		}
		return c.has(st, item), nil
	case *Undefined:
		// Undefined has no __contains__; Python falls back to iterating it,
		// which yields nothing.
		return false, nil
	case *generator:
		return c.containsItem(st, item)
	}
	return false, typeErr("argument of type '%s' is not iterable", typeName(container))
}
