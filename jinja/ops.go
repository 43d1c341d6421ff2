package jinja

import (
	"math"
	"strings"
	"unicode/utf8"
)

// Attribute and item lookup follow jinja2's sandboxed environment:
//
//	obj.name:  Python attribute (a method, a namespace attribute, a loop
//	           property), else obj["name"], else Undefined.
//	obj[key]:  obj[key], else, for a string key, the Python attribute,
//	           else Undefined.
//
// Failed lookups (missing key, index out of range, wrong key type, looking
// into None) give Undefined rather than an error; only looking into an
// Undefined is an error. Methods that would mutate a list or dict exist
// but are unsafe in the immutable sandbox, so they come back as an
// Undefined that explains why.

func getattr(st *state, obj Value, name string) (Value, error) {
	if u, ok := obj.(*Undefined); ok {
		return nil, u.err()
	}
	if v, ok := pyAttr(obj, name); ok {
		return v, nil
	}
	if v, ok := item(st, obj, name); ok {
		return v, nil
	}
	return undefinedIn(obj, name), nil
}

func getitem(st *state, obj, key Value) (Value, error) {
	if u, ok := obj.(*Undefined); ok {
		return nil, u.err()
	}
	if s, ok := key.(*sliceVal); ok {
		// jinja2 compiles slices to a plain Python subscript, bypassing the
		// environment's forgiving getitem, so a bad slice is an error.
		return sliceOf(st, obj, s)
	}
	if v, ok := item(st, obj, key); ok {
		return v, nil
	}
	if s, ok := key.(string); ok {
		if v, ok := pyAttr(obj, s); ok {
			return v, nil
		}
	}
	return undefinedIn(obj, key), nil
}

// sliceVal is the value of a[start:stop:step]; it only lives as a
// subscript.
type sliceVal struct {
	parts [3]Value // start, stop, step; nil is None
}

// sliceOf is obj[start:stop:step].
func sliceOf(st *state, obj Value, s *sliceVal) (Value, error) {
	switch x := obj.(type) {
	case *List:
		if x.view != "" && x.view != "range" {
			break
		}
		sl, err := s.indices(len(x.Items))
		if err != nil {
			return nil, err
		}
		// (a sliced range is a range in Python; it only prints differently)
		st.buildItems(int64(sl.n), "a slice")
		out := &List{Items: make([]Value, sl.n), Tuple: x.Tuple}
		for i := range out.Items {
			out.Items[i] = x.Items[sl.start+i*sl.step]
		}
		return out, nil
	case string:
		if isASCII(x) {
			sl, err := s.indices(len(x))
			if err != nil {
				return nil, err
			}
			if sl.step == 1 || sl.n <= 1 {
				return x[sl.start : sl.start+sl.n], nil
			}
			st.buildStr(int64(sl.n), "a slice")
			out := make([]byte, sl.n)
			for i := range out {
				out[i] = x[sl.start+i*sl.step]
			}
			return string(out), nil
		}
		sl, err := s.indices(utf8.RuneCountInString(x))
		if err != nil {
			return nil, err
		}
		if sl.n == 0 {
			return "", nil
		}
		if sl.step == 1 {
			from, to := -1, len(x)
			k := 0
			for i := range x {
				if k == sl.start {
					from = i
				}
				if k == sl.start+sl.n {
					to = i
					break
				}
				k++
			}
			return x[from:to], nil
		}
		b := st.newBuf("a slice")
		last := sl.start + (sl.n-1)*sl.step
		if sl.step > 0 {
			k := 0
			for _, r := range x {
				if k >= sl.start && (k-sl.start)%sl.step == 0 {
					b.WriteRune(r)
				}
				if k == last {
					break
				}
				k++
			}
		} else {
			k := utf8.RuneCountInString(x) - 1
			for rest := x; rest != ""; k-- {
				r, size := utf8.DecodeLastRuneInString(rest)
				rest = rest[:len(rest)-size]
				if k <= sl.start && (sl.start-k)%(-sl.step) == 0 {
					b.WriteRune(r)
				}
				if k == last {
					break
				}
			}
		}
		return b.String(), nil
	case *Dict:
		return nil, typeErr("unhashable type: 'slice'")
	}
	return nil, typeErr("'%s' object is not subscriptable", typeName(obj))
}

// item is Python's obj[key]; ok is false where Python would raise a
// LookupError or TypeError.
func item(st *state, obj, key Value) (Value, bool) {
	switch x := obj.(type) {
	case *Dict:
		return x.get(st, key)
	case *List:
		if x.view != "" && x.view != "range" {
			return nil, false // dict views are not subscriptable
		}
		if i, ok := index(key, len(x.Items)); ok {
			return x.Items[i], true
		}
	case string:
		if _, ok := key.(string); ok {
			return nil, false
		}
		if isASCII(x) {
			if i, ok := index(key, len(x)); ok {
				return x[i : i+1], true
			}
			return nil, false
		}
		i, ok := index(key, utf8.RuneCountInString(x))
		if !ok {
			return nil, false
		}
		for _, r := range x {
			if i == 0 {
				return string(r), true
			}
			i--
		}
	case *Namespace:
		// jinja2's Namespace has __getitem__-less attribute storage, but
		// the sandbox's getitem falls back to the attribute for str keys.
	}
	return nil, false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// index resolves a Python sequence index (negative counts from the end).
func index(key Value, n int) (int, bool) {
	var i int64
	switch k := key.(type) {
	case int64:
		i = k
	case bool:
		if k {
			i = 1
		}
	default:
		return 0, false
	}
	if i < 0 {
		i += int64(n)
	}
	if i < 0 || i >= int64(n) {
		return 0, false
	}
	return int(i), true
}

// span is what a slice selects from a sequence of n items: count items
// starting at start, step apart.
type span struct{ start, step, n int }

// indices is slice.indices(n) with the selected positions counted rather
// than listed.
func (s *sliceVal) indices(n int) (span, error) {
	var v [3]int64
	var set [3]bool
	for i, p := range s.parts {
		switch x := p.(type) {
		case nil:
		case int64:
			v[i], set[i] = x, true
		case bool:
			if x {
				v[i] = 1
			}
			set[i] = true
		default:
			return span{}, typeErr("slice indices must be integers or None or have an __index__ method")
		}
	}
	step := int64(1)
	if set[2] {
		step = v[2]
	}
	if step == 0 {
		return span{}, valueErr("slice step cannot be zero")
	}
	ln := int64(n)
	clamp := func(x int64, lo, hi int64) int64 {
		if x < 0 {
			x += ln
			if x < lo {
				x = lo
			}
		} else if x > hi {
			x = hi
		}
		return x
	}
	var start, stop, count int64
	if step > 0 {
		start, stop = 0, ln
		if set[0] {
			start = clamp(v[0], 0, ln)
		}
		if set[1] {
			stop = clamp(v[1], 0, ln)
		}
		if stop > start {
			count = (stop-start-1)/step + 1
		}
	} else {
		start, stop = ln-1, -1
		if set[0] {
			start = clamp(v[0], -1, ln-1)
		}
		if set[1] {
			stop = clamp(v[1], -1, ln-1)
		}
		if start > stop {
			// (step is at least -2^63, so -step may overflow: count with
			// the distance, which fits)
			dist := uint64(start - stop - 1)
			count = int64(dist/(uint64(-(step+1))+1)) + 1
		}
	}
	switch {
	case count == 0:
		start, step = 0, 1
	case count == 1:
		step = 1 // a single item: any step selects it
	}
	return span{start: int(start), step: int(step), n: int(count)}, nil
}

// builtinMethod is the str, dict or list method obj.name, unbound, or nil
// (where pyAttr would return it bound).
func builtinMethod(obj Value, name string) method {
	switch x := obj.(type) {
	case string:
		return strMethods[name]
	case *Dict:
		return dictMethods[name]
	case *List:
		if x.view == "" || x.view == "range" {
			return listMethods[name]
		}
	}
	return nil
}

// pyAttr is Python's getattr(obj, name) for the attributes templates can
// reach: str, dict and list methods, namespace attributes, loop
// properties and a few object methods.
func pyAttr(obj Value, name string) (Value, bool) {
	switch x := obj.(type) {
	case string:
		if m, ok := strMethods[name]; ok {
			return bindMethod("str", name, x, m), true
		}
	case *Dict:
		if m, ok := dictMethods[name]; ok {
			return bindMethod("dict", name, x, m), true
		}
		if unsafeDictMethods[name] {
			return unsafeAttr(obj, name), true
		}
	case *List:
		if x.view != "" && x.view != "range" {
			break // dict views have no methods templates use
		}
		if m, ok := listMethods[name]; ok {
			return bindMethod(typeName(x), name, x, m), true
		}
		if unsafeListMethods[name] {
			return unsafeAttr(obj, name), true
		}
	case *Namespace:
		return x.attrs.Get(name)
	case *loopContext:
		return x.attr(name)
	case *cycler:
		return x.attr(name)
	case *Macro:
		switch name {
		case "name":
			return x.name, true
		case "arguments":
			args := make([]Value, len(x.def.params))
			for i, p := range x.def.params {
				args[i] = p
			}
			return NewTuple(args...), true
		}
	case int64, bool:
		switch name {
		case "real", "numerator":
			i, _, _, _ := number(x)
			return i, true
		case "imag":
			return int64(0), true
		case "denominator":
			return int64(1), true
		}
	case float64:
		switch name {
		case "real":
			return x, true
		case "imag":
			return 0.0, true
		case "is_integer":
			return &Func{Name: "is_integer", fn: func(_ *state, a *callArgs) (Value, error) {
				return x == math.Trunc(x) && !math.IsInf(x, 0), nil
			}}, true
		}
	}
	return nil, false
}

func unsafeAttr(obj Value, name string) *Undefined {
	return &Undefined{name: name, obj: obj, hasObj: true, kind: "SecurityError",
		hint: "access to attribute " + strRepr(name) + " of " + strRepr(typeName(obj)) + " object is unsafe."}
}

// binop applies an arithmetic operator with Python semantics. st meters
// it and checks the size of what + and * would build before building it
// (nil: unmetered).
func binop(st *state, op string, l, r Value) (Value, error) {
	if s, ok := l.(string); ok && op == "%" {
		// str has its own %, tried before the right operand's __rmod__,
		// so even an Undefined argument is just formatted.
		return percentFormat(st, s, r)
	}
	// Otherwise Undefined's arithmetic dunders (reflected ones too) raise,
	// before the other operand's type errors.
	if u, ok := l.(*Undefined); ok {
		return nil, u.err()
	}
	if u, ok := r.(*Undefined); ok {
		return nil, u.err()
	}
	li, lf, lflt, lnum := number(l)
	ri, rf, rflt, rnum := number(r)
	if lnum && rnum {
		return arith(op, li, lf, lflt, ri, rf, rflt)
	}
	switch op {
	case "+":
		switch x := l.(type) {
		case string:
			if y, ok := r.(string); ok {
				st.buildStr(int64(len(x))+int64(len(y)), "str + str")
				return x + y, nil
			}
			return nil, typeErr("can only concatenate str (not \"%s\") to str", typeName(r))
		case *List:
			if y, ok := r.(*List); ok && x.Tuple == y.Tuple && x.view == "" && y.view == "" {
				st.buildItems(int64(len(x.Items))+int64(len(y.Items)), typeName(l)+" + "+typeName(l))
				items := make([]Value, 0, len(x.Items)+len(y.Items))
				items = append(append(items, x.Items...), y.Items...)
				return &List{Items: items, Tuple: x.Tuple}, nil
			}
			if x.view != "" {
				break
			}
			return nil, typeErr("can only concatenate %s (not \"%s\") to %s", typeName(l), typeName(r), typeName(l))
		}
	case "*":
		// sequence repetition, either order
		seq, n := l, r
		if lnum {
			seq, n = r, l
		}
		if k, _, isF, ok := number(n); ok && !isF {
			switch x := seq.(type) {
			case string:
				if k <= 0 || x == "" {
					return "", nil
				}
				st.buildStr(satMul(int64(len(x)), k), "str * int")
				if st == nil && satMul(int64(len(x)), k) > math.MaxInt32 {
					return nil, &RuntimeError{Kind: "MemoryError", Msg: "repeated string too large"}
				}
				return strings.Repeat(x, int(k)), nil
			case *List:
				if x.view != "" {
					break
				}
				if k <= 0 || len(x.Items) == 0 {
					return &List{Tuple: x.Tuple, Items: []Value{}}, nil
				}
				total := satMul(int64(len(x.Items)), k)
				st.buildItems(total, typeName(seq)+" * int")
				if st == nil && total > math.MaxInt32 {
					return nil, &RuntimeError{Kind: "MemoryError", Msg: "repeated list too large"}
				}
				out := &List{Tuple: x.Tuple, Items: make([]Value, 0, total)}
				for i := int64(0); i < k; i++ {
					out.Items = append(out.Items, x.Items...)
				}
				return out, nil
			}
		}
	}
	if op == "**" {
		return nil, typeErr("unsupported operand type(s) for ** or pow(): '%s' and '%s'", typeName(l), typeName(r))
	}
	return nil, typeErr("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
}

// floatFloorDiv is CPython's float floor division (float_divmod), which
// differs from floor(a/b) when a/b rounds up to an integer: 10 // 0.1 is
// 99.0 in Python.
func floatFloorDiv(a, b float64) float64 {
	mod := math.Mod(a, b)
	div := (a - mod) / b
	if mod != 0 && ((b < 0) != (mod < 0)) {
		div -= 1.0
	}
	if div == 0 {
		return math.Copysign(0, a/b)
	}
	fl := math.Floor(div)
	if div-fl > 0.5 {
		fl += 1.0
	}
	return fl
}

func arith(op string, li int64, lf float64, lflt bool, ri int64, rf float64, rflt bool) (Value, error) {
	isInt := !lflt && !rflt
	zeroDiv := func(msg string) error {
		return &RuntimeError{Kind: "ZeroDivisionError", Msg: msg}
	}
	switch op {
	case "+":
		if isInt {
			return li + ri, nil
		}
		return lf + rf, nil
	case "-":
		if isInt {
			return li - ri, nil
		}
		return lf - rf, nil
	case "*":
		if isInt {
			return li * ri, nil
		}
		return lf * rf, nil
	case "/":
		if rf == 0 {
			return nil, zeroDiv("division by zero")
		}
		return lf / rf, nil
	case "//":
		if isInt {
			if ri == 0 {
				return nil, zeroDiv("integer division or modulo by zero")
			}
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			return q, nil
		}
		if rf == 0 {
			return nil, zeroDiv("float floor division by zero")
		}
		return floatFloorDiv(lf, rf), nil
	case "%":
		if isInt {
			if ri == 0 {
				return nil, zeroDiv("integer division or modulo by zero")
			}
			m := li % ri
			if m != 0 && ((m < 0) != (ri < 0)) {
				m += ri
			}
			return m, nil
		}
		if rf == 0 {
			return nil, zeroDiv("float modulo")
		}
		m := math.Mod(lf, rf)
		if m == 0 {
			return math.Copysign(0, rf), nil
		}
		if (m < 0) != (rf < 0) {
			m += rf
		}
		return m, nil
	case "**":
		if isInt && ri >= 0 {
			// square-and-multiply; like Go's other int ops this wraps past
			// int64 where Python would grow
			out, base := int64(1), li
			for e := ri; e > 0; e >>= 1 {
				if e&1 == 1 {
					out *= base
				}
				base *= base
			}
			return out, nil
		}
		if lf == 0 && rf < 0 {
			return nil, zeroDiv("0.0 cannot be raised to a negative power")
		}
		if lf < 0 && rf != math.Trunc(rf) {
			return nil, runtimeErr("negative number cannot be raised to a fractional power (complex result)")
		}
		// (Go's Pow may differ from C's in the last bit for fractional powers)
		p := math.Pow(lf, rf)
		if math.IsInf(p, 0) && !math.IsInf(lf, 0) && !math.IsInf(rf, 0) {
			return nil, &RuntimeError{Kind: "OverflowError", Msg: "(34, 'Numerical result out of range')"}
		}
		return p, nil
	}
	return nil, typeErr("unsupported operator %s", op)
}
