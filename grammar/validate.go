package grammar

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The validator checks a JSON value against a schema of the supported
// subset, with the semantics the grammar enforces. The compiler uses it
// to keep the values of an enum that the schema's other keywords allow,
// and to prove the schemas of a oneOf disjoint; the tests use it too.

// valid reports whether v is valid against s.
func (c *compiler) valid(s, v *value, depth int) bool { return c.validate(s, v, depth, false) }

// validRest is valid without s's own enum and const.
func (c *compiler) validRest(s, v *value) bool { return c.validate(s, v, 0, true) }

const maxValidateDepth = 200

func (c *compiler) validate(s, v *value, depth int, skipEnum bool) bool {
	if depth > maxValidateDepth {
		return false
	}
	if s.kind == kBool {
		return s.b
	}
	if s.kind != kObject {
		return false
	}
	if ref := s.get("$ref"); ref != nil && ref.kind == kString {
		t, _ := c.resolve(ref.str, "")
		if !c.validate(t, v, depth+1, false) {
			return false
		}
	}
	if l := s.get("allOf"); l != nil {
		for _, b := range l.arr {
			if !c.validate(b, v, depth+1, false) {
				return false
			}
		}
	}
	if l := s.get("anyOf"); l != nil {
		if !slices.ContainsFunc(l.arr, func(b *value) bool { return c.validate(b, v, depth+1, false) }) {
			return false
		}
	}
	if l := s.get("oneOf"); l != nil {
		k := 0
		for _, b := range l.arr {
			if c.validate(b, v, depth+1, false) {
				k++
			}
		}
		if k != 1 {
			return false
		}
	}
	if !skipEnum {
		if e := s.get("const"); e != nil && !equalValues(e, v) {
			return false
		}
		if e := s.get("enum"); e != nil && !slices.ContainsFunc(e.arr, func(x *value) bool { return equalValues(x, v) }) {
			return false
		}
	}
	if s.get("type") != nil && c.types(s, "")&typeOf(v) == 0 {
		return false
	}
	switch v.kind {
	case kNumber:
		if iv := c.interval(s, ""); iv.lo.set || iv.hi.set {
			d, err := parseDecimal(v.num)
			if err != nil || !iv.contains(d) {
				return false
			}
		}
	case kString:
		n := utf8.RuneCountInString(v.str)
		if k := c.count(s, "minLength", ""); k >= 0 && n < k {
			return false
		}
		if k := c.count(s, "maxLength", ""); k >= 0 && n > k {
			return false
		}
		if p := s.get("pattern"); p != nil {
			d, err := compilePattern(p.str, c.opts.Limits.DFAStates)
			if err != nil || !d.matches(v.str) {
				return false
			}
		}
		if f := s.get("format"); f != nil {
			d, err := compilePattern(formats[f.str], c.opts.Limits.DFAStates)
			if err != nil || !d.matches(v.str) {
				return false
			}
		}
	case kArray:
		if k := c.count(s, "minItems", ""); k >= 0 && len(v.arr) < k {
			return false
		}
		if k := c.count(s, "maxItems", ""); k >= 0 && len(v.arr) > k {
			return false
		}
		var prefix []*value
		rest := s.get("items")
		if p := s.get("prefixItems"); p != nil {
			prefix = p.arr
		}
		if rest != nil && rest.kind == kArray {
			prefix, rest = rest.arr, s.get("additionalItems")
		}
		for i, e := range v.arr {
			sch := rest
			if i < len(prefix) {
				sch = prefix[i]
			}
			if sch != nil && !c.validate(sch, e, depth+1, false) {
				return false
			}
		}
	case kObject:
		props := s.get("properties")
		add := s.get("additionalProperties")
		for _, m := range v.obj {
			if p := props.get(m.key); p != nil {
				if !c.validate(p, m.val, depth+1, false) {
					return false
				}
			} else if add != nil && !c.validate(add, m.val, depth+1, false) {
				return false
			}
		}
		if r := s.get("required"); r != nil {
			for _, k := range r.arr {
				if v.get(k.str) == nil {
					return false
				}
			}
		}
	}
	return true
}

// typeOf is the types a value has (an integral number is both a number
// and an integer).
func typeOf(v *value) typeSet {
	switch v.kind {
	case kNull:
		return tNull
	case kBool:
		return tBoolean
	case kString:
		return tString
	case kArray:
		return tArray
	case kObject:
		return tObject
	}
	if integral(v.num) {
		return tNumber | tInteger
	}
	return tNumber
}

// integral reports whether a JSON number's value is an integer, however
// large its exponent.
func integral(num string) bool {
	mant, exp := num, 0
	if i := strings.IndexAny(num, "eE"); i >= 0 {
		mant = num[:i]
		e, err := strconv.Atoi(strings.TrimPrefix(num[i+1:], "+"))
		if err != nil {
			e = math.MaxInt32 // out of int range: sign decides below
			if strings.HasPrefix(num[i+1:], "-") {
				e = math.MinInt32
			}
		}
		exp = e
	}
	_, frac, _ := strings.Cut(mant, ".")
	frac = strings.TrimRight(frac, "0")
	ip := strings.TrimLeft(strings.TrimPrefix(strings.SplitN(mant, ".", 2)[0], "-"), "0")
	if frac == "" && ip == "" {
		return true // zero
	}
	if exp >= 0 {
		return len(frac) <= exp
	}
	// A negative exponent moves integer digits into the fraction: the
	// trailing zeros of the integer part must absorb it.
	if frac != "" {
		return false
	}
	zeros := len(ip) - len(strings.TrimRight(ip, "0"))
	return -exp <= zeros
}

// equalValues is JSON equality: numbers by value, objects regardless of
// member order.
func equalValues(a, b *value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case kNull:
		return true
	case kBool:
		return a.b == b.b
	case kString:
		return a.str == b.str
	case kNumber:
		x, err1 := parseDecimal(a.num)
		y, err2 := parseDecimal(b.num)
		return err1 == nil && err2 == nil && cmpDec(x, y) == 0
	case kArray:
		return len(a.arr) == len(b.arr) && !slices.ContainsFunc(indices(len(a.arr)), func(i int) bool { return !equalValues(a.arr[i], b.arr[i]) })
	}
	if len(a.obj) != len(b.obj) {
		return false
	}
	for _, m := range a.obj {
		o := b.get(m.key)
		if o == nil || !equalValues(m.val, o) {
			return false
		}
	}
	return true
}

func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// deref follows a schema that is only a $ref (with annotations).
func (c *compiler) deref(s *value) *value {
	for i := 0; i < 32 && s.kind == kObject; i++ {
		ref := s.get("$ref")
		if ref == nil || ref.kind != kString {
			break
		}
		s, _ = c.resolve(ref.str, "")
	}
	return s
}

// possibleTypes over-approximates the types of the values s allows
// (integers counted in tNumber too).
func (c *compiler) possibleTypes(s *value, depth int) typeSet {
	s = c.deref(s)
	if s.kind == kBool {
		if s.b {
			return tAll
		}
		return 0
	}
	if depth <= 0 || s.kind != kObject {
		return tAll
	}
	lits := literalList(s)
	if lits != nil {
		var ts typeSet
		for _, v := range lits {
			ts |= typeOf(v)
		}
		return ts
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if l := s.get(key); l != nil && l.kind == kArray {
			var ts typeSet
			for _, b := range l.arr {
				ts |= c.possibleTypes(b, depth-1)
			}
			return ts
		}
	}
	if l := s.get("allOf"); l != nil && l.kind == kArray && len(l.arr) == 1 {
		return c.possibleTypes(l.arr[0], depth-1)
	}
	ts := c.types(s, "")
	if ts&tNumber != 0 {
		ts |= tInteger
	}
	return ts
}

// literalList is s's const or enum values (nil: neither).
func literalList(s *value) []*value {
	if v := s.get("const"); v != nil {
		return []*value{v}
	}
	if v := s.get("enum"); v != nil && v.kind == kArray {
		return v.arr
	}
	return nil
}

// disjoint reports whether no value can be valid against both a and b,
// when that can be shown: their types differ, one lists values the other
// refuses, or both are objects with a common required property whose
// schemas are disjoint. false means "maybe not".
func (c *compiler) disjoint(a, b *value, depth int) bool {
	if depth <= 0 {
		return false
	}
	a, b = c.deref(a), c.deref(b)
	ta, tb := c.possibleTypes(a, 8), c.possibleTypes(b, 8)
	if ta&tb == 0 {
		return true
	}
	if a.kind != kObject || b.kind != kObject {
		return false
	}
	for _, pair := range [][2]*value{{a, b}, {b, a}} {
		if lits := literalList(pair[0]); lits != nil {
			if !slices.ContainsFunc(lits, func(v *value) bool { return c.valid(pair[0], v, 0) && c.valid(pair[1], v, 0) }) {
				return true
			}
		}
	}
	if ta&tb == tObject {
		pa, pb := a.get("properties"), b.get("properties")
		ra, rb := a.get("required"), b.get("required")
		if pa == nil || pb == nil || ra == nil || rb == nil {
			return false
		}
		for _, k := range ra.arr {
			if !slices.ContainsFunc(rb.arr, func(x *value) bool { return x.kind == kString && x.str == k.str }) {
				continue
			}
			sa, sb := pa.get(k.str), pb.get(k.str)
			if sa != nil && sb != nil && c.disjoint(sa, sb, depth-1) {
				return true
			}
		}
	}
	return false
}
