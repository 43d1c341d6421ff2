package jinja

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// missing marks a parameter the caller did not pass (None is a real value).
type missingT struct{}

var missing Value = missingT{}

func given(v Value) bool { return v != missing }

// bind maps call arguments onto a Python-style signature: positional first,
// then keywords by name; the first `required` names must be supplied.
// Unsupplied parameters are `missing`.
func bind(fname string, a *callArgs, names []string, required int) ([]Value, error) {
	out := make([]Value, len(names))
	for i := range out {
		out[i] = missing
	}
	if len(a.pos) > len(names) {
		return nil, typeErr("%s() takes at most %d argument(s) (%d given)", fname, len(names), len(a.pos))
	}
	copy(out, a.pos)
	for _, k := range a.kw {
		found := false
		for i, n := range names {
			if n == k.name {
				if i < len(a.pos) {
					return nil, typeErr("%s() got multiple values for argument '%s'", fname, k.name)
				}
				out[i] = k.val
				found = true
				break
			}
		}
		if !found {
			return nil, typeErr("%s() got an unexpected keyword argument '%s'", fname, k.name)
		}
	}
	for i := 0; i < required; i++ {
		if !given(out[i]) {
			return nil, typeErr("%s() missing required argument '%s' (pos %d)", fname, names[i], i+1)
		}
	}
	return out, nil
}

func argStr(fname string, v Value) (string, error) {
	if u, ok := v.(*Undefined); ok {
		return "", u.err()
	}
	s, ok := v.(string)
	if !ok {
		return "", typeErr("%s() argument must be str, not %s", fname, typeName(v))
	}
	return s, nil
}

// argInt reads an optional int argument (bool counts, None is the default).
func argInt(fname string, v Value, def int64) (int64, error) {
	if !given(v) || v == nil {
		return def, nil
	}
	i, _, isF, ok := number(v)
	if !ok || isF {
		return 0, typeErr("%s() argument must be int, not %s", fname, typeName(v))
	}
	return i, nil
}

type method func(st *state, recv Value, a *callArgs) (Value, error)

// bindMethod binds a method to its receiver. Calls charge the receiver's
// size (st.call charges the arguments and the result).
func bindMethod(typ, name string, recv Value, m method) *Func {
	return &Func{Name: typ + "." + name, fn: func(st *state, a *callArgs) (Value, error) {
		st.charge(cost(recv))
		return m(st, recv, a)
	}}
}

// strMethod adapts a method on the receiver string with a fixed signature.
func strMethod(name string, names []string, required int, f func(st *state, s string, args []Value) (Value, error)) method {
	return func(st *state, recv Value, a *callArgs) (Value, error) {
		args, err := bind(name, a, names, required)
		if err != nil {
			return nil, err
		}
		return f(st, recv.(string), args)
	}
}

var strMethods map[string]method

func init() {
	strMethods = map[string]method{
		"lower":      strMethod("lower", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return pyLower(s), nil }),
		"upper":      strMethod("upper", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return pyUpper(s), nil }),
		"casefold":   strMethod("casefold", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return pyLower(s), nil }),
		"capitalize": strMethod("capitalize", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return pyCapitalize(s), nil }),
		"title":      strMethod("title", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return pyTitle(s), nil }),
		"swapcase": strMethod("swapcase", nil, 0, func(_ *state, s string, _ []Value) (Value, error) {
			return strings.Map(func(r rune) rune {
				if unicode.IsUpper(r) {
					return unicode.ToLower(r)
				}
				if unicode.IsLower(r) {
					return unicode.ToUpper(r)
				}
				return r
			}, s), nil
		}),
		"strip":  strMethod("strip", []string{"chars"}, 0, stripMethod(true, true)),
		"lstrip": strMethod("lstrip", []string{"chars"}, 0, stripMethod(true, false)),
		"rstrip": strMethod("rstrip", []string{"chars"}, 0, stripMethod(false, true)),
		"split": strMethod("split", []string{"sep", "maxsplit"}, 0, func(st *state, s string, a []Value) (Value, error) {
			return splitMethod(st, "split", s, a, false)
		}),
		"rsplit": strMethod("rsplit", []string{"sep", "maxsplit"}, 0, func(st *state, s string, a []Value) (Value, error) {
			return splitMethod(st, "rsplit", s, a, true)
		}),
		"splitlines": strMethod("splitlines", []string{"keepends"}, 0, func(st *state, s string, a []Value) (Value, error) {
			st.buildItems(2*countLines(s), "splitlines")
			return splitLines(s, given(a[0]) && truthy(a[0])), nil
		}),
		"startswith": strMethod("startswith", []string{"prefix", "start", "end"}, 1, func(st *state, s string, a []Value) (Value, error) {
			return affixMethod("startswith", s, a, strings.HasPrefix)
		}),
		"endswith": strMethod("endswith", []string{"suffix", "start", "end"}, 1, func(st *state, s string, a []Value) (Value, error) {
			return affixMethod("endswith", s, a, strings.HasSuffix)
		}),
		"replace": strMethod("replace", []string{"old", "new", "count"}, 2, func(st *state, s string, a []Value) (Value, error) {
			old, err := argStr("replace", a[0])
			if err != nil {
				return nil, err
			}
			nw, err := argStr("replace", a[1])
			if err != nil {
				return nil, err
			}
			n, err := argInt("replace", a[2], -1)
			if err != nil {
				return nil, err
			}
			return replaceStr(st, s, old, nw, n), nil
		}),
		"find": strMethod("find", []string{"sub", "start", "end"}, 1, func(st *state, s string, a []Value) (Value, error) {
			return findMethod("find", s, a, false, false)
		}),
		"rfind": strMethod("rfind", []string{"sub", "start", "end"}, 1, func(st *state, s string, a []Value) (Value, error) {
			return findMethod("rfind", s, a, true, false)
		}),
		"index": strMethod("index", []string{"sub", "start", "end"}, 1, func(st *state, s string, a []Value) (Value, error) {
			return findMethod("index", s, a, false, true)
		}),
		"rindex": strMethod("rindex", []string{"sub", "start", "end"}, 1, func(st *state, s string, a []Value) (Value, error) {
			return findMethod("rindex", s, a, true, true)
		}),
		"count": strMethod("count", []string{"sub", "start", "end"}, 1, func(st *state, s string, a []Value) (Value, error) {
			sub, err := argStr("count", a[0])
			if err != nil {
				return nil, err
			}
			s, _, err = subRange("count", s, a[1], a[2])
			if err != nil {
				return nil, err
			}
			if sub == "" {
				return int64(utf8.RuneCountInString(s) + 1), nil
			}
			return int64(strings.Count(s, sub)), nil
		}),
		"join": strMethod("join", []string{"iterable"}, 1, func(st *state, s string, a []Value) (Value, error) {
			items, err := iterate(st, a[0])
			if err != nil {
				return nil, err
			}
			st.buildItems(int64(len(items)), "str.join")
			parts := make([]string, len(items))
			for i, it := range items {
				str, ok := it.(string)
				if !ok {
					return nil, typeErr("sequence item %d: expected str instance, %s found", i, typeName(it))
				}
				parts[i] = str
			}
			return joinStrings(st, parts, s), nil
		}),
		"center": strMethod("center", []string{"width", "fillchar"}, 1, func(st *state, s string, a []Value) (Value, error) {
			return padMethod(st, "center", s, a)
		}),
		"ljust": strMethod("ljust", []string{"width", "fillchar"}, 1, func(st *state, s string, a []Value) (Value, error) {
			return padMethod(st, "ljust", s, a)
		}),
		"rjust": strMethod("rjust", []string{"width", "fillchar"}, 1, func(st *state, s string, a []Value) (Value, error) {
			return padMethod(st, "rjust", s, a)
		}),
		"zfill": strMethod("zfill", []string{"width"}, 1, func(st *state, s string, a []Value) (Value, error) {
			w, err := argInt("zfill", a[0], 0)
			if err != nil {
				return nil, err
			}
			n := utf8.RuneCountInString(s)
			if w <= int64(n) {
				return s, nil
			}
			st.buildStr(w-int64(n)+int64(len(s)), "zfill")
			sign := ""
			if s != "" && (s[0] == '+' || s[0] == '-') {
				sign, s = s[:1], s[1:]
			}
			return sign + strings.Repeat("0", int(w)-n) + s, nil
		}),
		"partition": strMethod("partition", []string{"sep"}, 1, func(st *state, s string, a []Value) (Value, error) {
			sep, err := argStr("partition", a[0])
			if err != nil {
				return nil, err
			}
			if sep == "" {
				return nil, valueErr("empty separator")
			}
			if before, after, ok := strings.Cut(s, sep); ok {
				return NewTuple(before, sep, after), nil
			}
			return NewTuple(s, "", ""), nil
		}),
		"rpartition": strMethod("rpartition", []string{"sep"}, 1, func(st *state, s string, a []Value) (Value, error) {
			sep, err := argStr("rpartition", a[0])
			if err != nil {
				return nil, err
			}
			if sep == "" {
				return nil, valueErr("empty separator")
			}
			if i := strings.LastIndex(s, sep); i >= 0 {
				return NewTuple(s[:i], sep, s[i+len(sep):]), nil
			}
			return NewTuple("", "", s), nil
		}),
		"removeprefix": strMethod("removeprefix", []string{"prefix"}, 1, func(st *state, s string, a []Value) (Value, error) {
			p, err := argStr("removeprefix", a[0])
			if err != nil {
				return nil, err
			}
			return strings.TrimPrefix(s, p), nil
		}),
		"removesuffix": strMethod("removesuffix", []string{"suffix"}, 1, func(st *state, s string, a []Value) (Value, error) {
			p, err := argStr("removesuffix", a[0])
			if err != nil {
				return nil, err
			}
			return strings.TrimSuffix(s, p), nil
		}),
		"format":  func(st *state, recv Value, a *callArgs) (Value, error) { return strFormat(st, recv.(string), a, 0) },
		"isalpha": strPredicate("isalpha", unicode.IsLetter),
		"isdigit": strPredicate("isdigit", unicode.IsDigit),
		"isdecimal": strPredicate("isdecimal", func(r rune) bool {
			return unicode.Is(unicode.Nd, r)
		}),
		"isnumeric": strPredicate("isnumeric", unicode.IsNumber),
		"isalnum": strPredicate("isalnum", func(r rune) bool {
			return unicode.IsLetter(r) || unicode.IsNumber(r)
		}),
		"isspace": strPredicate("isspace", pyIsSpace),
		"isascii": func(_ *state, recv Value, a *callArgs) (Value, error) {
			if _, err := bind("isascii", a, nil, 0); err != nil {
				return nil, err
			}
			return isASCII(recv.(string)), nil
		},
		"isprintable": func(_ *state, recv Value, a *callArgs) (Value, error) {
			if _, err := bind("isprintable", a, nil, 0); err != nil {
				return nil, err
			}
			for _, r := range recv.(string) {
				if !unicode.IsPrint(r) {
					return false, nil
				}
			}
			return true, nil
		},
		"isidentifier": strMethod("isidentifier", nil, 0, func(_ *state, s string, _ []Value) (Value, error) {
			if s == "" {
				return false, nil
			}
			for i, r := range s {
				if r != '_' && !unicode.IsLetter(r) && (i == 0 || !unicode.IsDigit(r)) {
					return false, nil
				}
			}
			return true, nil
		}),
		"islower": strMethod("islower", nil, 0, func(_ *state, s string, _ []Value) (Value, error) {
			cased := false
			for _, r := range s {
				if unicode.IsUpper(r) || unicode.IsTitle(r) {
					return false, nil
				}
				cased = cased || unicode.IsLower(r)
			}
			return cased, nil
		}),
		"isupper": strMethod("isupper", nil, 0, func(_ *state, s string, _ []Value) (Value, error) {
			cased := false
			for _, r := range s {
				if unicode.IsLower(r) || unicode.IsTitle(r) {
					return false, nil
				}
				cased = cased || unicode.IsUpper(r)
			}
			return cased, nil
		}),
		"istitle": strMethod("istitle", nil, 0, func(_ *state, s string, _ []Value) (Value, error) {
			return s != "" && pyTitle(s) == s && strings.IndexFunc(s, isCased) >= 0, nil
		}),
	}
	// Methods that exist on str but are not implemented: looking them up
	// works (so `x.encode is defined` is true), calling them is an error.
	for _, name := range []string{"encode", "expandtabs", "format_map", "maketrans", "translate"} {
		n := name
		strMethods[n] = func(*state, Value, *callArgs) (Value, error) {
			return nil, runtimeErr("str.%s() is not supported by this engine", n)
		}
	}
}

func strPredicate(name string, ok func(rune) bool) method {
	return strMethod(name, nil, 0, func(_ *state, s string, _ []Value) (Value, error) {
		if s == "" {
			return false, nil
		}
		for _, r := range s {
			if !ok(r) {
				return false, nil
			}
		}
		return true, nil
	})
}

// Case mapping. Go's simple case mappings match Python's except for the
// few characters with multi-character (SpecialCasing) mappings such as
// "ß".upper() == "SS"; those are rare in prompts and not reproduced.

func pyLower(s string) string { return strings.ToLower(s) }

func pyUpper(s string) string { return strings.ToUpper(s) }

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

// pyCapitalize is str.capitalize: first character title-cased, the rest
// lower-cased (so "tOOL" becomes "Tool").
func pyCapitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[n:])
}

// pyTitle is str.title: a character is title-cased after an uncased one,
// lower-cased after a cased one.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = isCased(r)
	}
	return b.String()
}

// stripMethod is stripper as a method body.
func stripMethod(left, right bool) func(*state, string, []Value) (Value, error) {
	f := stripper(left, right)
	return func(_ *state, s string, a []Value) (Value, error) { return f(s, a) }
}

func stripper(left, right bool) func(string, []Value) (Value, error) {
	return func(s string, a []Value) (Value, error) {
		if !given(a[0]) || a[0] == nil {
			if left {
				s = strings.TrimLeftFunc(s, pyIsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, pyIsSpace)
			}
			return s, nil
		}
		chars, err := argStr("strip", a[0])
		if err != nil {
			return nil, err
		}
		if left {
			s = strings.TrimLeft(s, chars)
		}
		if right {
			s = strings.TrimRight(s, chars)
		}
		return s, nil
	}
}

// splitMethod is str.split / str.rsplit. The parts are counted before
// the list is built.
func splitMethod(st *state, name, s string, a []Value, fromRight bool) (Value, error) {
	max, err := argInt(name, a[1], -1)
	if err != nil {
		return nil, err
	}
	if max > math.MaxInt32 {
		max = -1 // more splits than the string can have
	}
	var parts []string
	if !given(a[0]) || a[0] == nil {
		st.buildItems(2*countFields(s), name)
		parts = splitWhitespace(s, int(max), fromRight)
	} else {
		sep, err := argStr(name, a[0])
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, valueErr("empty separator")
		}
		st.buildItems(2*int64(strings.Count(s, sep)+1), name)
		switch {
		case max < 0:
			parts = strings.Split(s, sep)
		case !fromRight:
			parts = strings.SplitN(s, sep, int(max)+1)
		default:
			for len(parts) < int(max) {
				i := strings.LastIndex(s, sep)
				if i < 0 {
					break
				}
				parts = append(parts, s[i+len(sep):])
				s = s[:i]
			}
			parts = append(parts, s)
			reverseStrings(parts)
		}
	}
	out := &List{Items: make([]Value, len(parts))}
	for i, p := range parts {
		out.Items[i] = p
	}
	return out, nil
}

// countFields counts the whitespace-separated fields of s.
func countFields(s string) int64 {
	n := int64(0)
	in := false
	for _, r := range s {
		w := !pyIsSpace(r)
		if w && !in {
			n++
		}
		in = w
	}
	return n
}

func reverseStrings(p []string) {
	for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
		p[i], p[j] = p[j], p[i]
	}
}

// splitWhitespace is split() without a separator: runs of whitespace
// separate, leading and trailing whitespace is ignored, and after max
// splits the rest is one item (whitespace on its far side kept).
func splitWhitespace(s string, max int, fromRight bool) []string {
	var parts []string
	if !fromRight {
		for {
			s = strings.TrimLeftFunc(s, pyIsSpace)
			if s == "" {
				return parts
			}
			if max >= 0 && len(parts) == max {
				return append(parts, s)
			}
			i := strings.IndexFunc(s, pyIsSpace)
			if i < 0 {
				return append(parts, s)
			}
			parts = append(parts, s[:i])
			s = s[i:]
		}
	}
	for {
		s = strings.TrimRightFunc(s, pyIsSpace)
		if s == "" {
			break
		}
		if max >= 0 && len(parts) == max {
			parts = append(parts, s)
			break
		}
		i := strings.LastIndexFunc(s, pyIsSpace)
		if i < 0 {
			parts = append(parts, s)
			break
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		parts = append(parts, s[i+n:])
		s = s[:i]
	}
	reverseStrings(parts)
	return parts
}

// splitLines is str.splitlines, with Python's set of line boundaries.
func splitLines(s string, keepends bool) *List {
	out := &List{Items: []Value{}}
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if isLineBreak(r) {
			end := i + n
			if r == '\r' && end < len(s) && s[end] == '\n' {
				end++
			}
			if keepends {
				out.Items = append(out.Items, s[start:end])
			} else {
				out.Items = append(out.Items, s[start:i])
			}
			start = end
			i = end
			continue
		}
		i += n
	}
	if start < len(s) {
		out.Items = append(out.Items, s[start:])
	}
	return out
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// countLines is an upper bound on the lines splitLines returns for s.
func countLines(s string) int64 {
	n := int64(1)
	for _, r := range s {
		if isLineBreak(r) {
			n++
		}
	}
	return n
}

// subRange applies optional start/end (character positions, slice
// semantics) and returns the substring and its character offset (-1 when
// start is past end).
func subRange(name, s string, start, end Value) (string, int, error) {
	if (!given(start) || start == nil) && (!given(end) || end == nil) {
		return s, 0, nil
	}
	n := int64(utf8.RuneCountInString(s))
	st, err := argInt(name, start, 0)
	if err != nil {
		return "", 0, err
	}
	en, err := argInt(name, end, n)
	if err != nil {
		return "", 0, err
	}
	norm := func(x int64) int64 {
		if x < 0 {
			x += n
			if x < 0 {
				x = 0
			}
		}
		if x > n {
			x = n
		}
		return x
	}
	st, en = norm(st), norm(en)
	if st > en {
		return "", -1, nil
	}
	// byte offsets of characters st and en
	from, to := len(s), len(s)
	k := int64(0)
	for i := range s {
		if k == st {
			from = i
		}
		if k == en {
			to = i
			break
		}
		k++
	}
	return s[from:to], int(st), nil
}

func affixMethod(name, s string, a []Value, test func(string, string) bool) (Value, error) {
	sub, off, err := subRange(name, s, a[1], a[2])
	if err != nil {
		return nil, err
	}
	var affixes []Value
	switch x := a[0].(type) {
	case string:
		affixes = []Value{x}
	case *List:
		if !x.Tuple {
			return nil, typeErr("%s first arg must be str or a tuple of str, not list", name)
		}
		affixes = x.Items
	default:
		return nil, typeErr("%s first arg must be str or a tuple of str, not %s", name, typeName(a[0]))
	}
	if off < 0 {
		return false, nil
	}
	for _, af := range affixes {
		str, ok := af.(string)
		if !ok {
			return nil, typeErr("tuple for %s must only contain str, not %s", name, typeName(af))
		}
		if test(sub, str) {
			return true, nil
		}
	}
	return false, nil
}

func findMethod(name, s string, a []Value, fromRight, raise bool) (Value, error) {
	sub, err := argStr(name, a[0])
	if err != nil {
		return nil, err
	}
	hay, off, err := subRange(name, s, a[1], a[2])
	if err != nil {
		return nil, err
	}
	i := -1
	if off >= 0 {
		if fromRight {
			i = strings.LastIndex(hay, sub)
		} else {
			i = strings.Index(hay, sub)
		}
	}
	if i < 0 {
		if raise {
			return nil, valueErr("substring not found")
		}
		return int64(-1), nil
	}
	return int64(off + utf8.RuneCountInString(hay[:i])), nil
}

func padMethod(st *state, name, s string, a []Value) (Value, error) {
	w, err := argInt(name, a[0], 0)
	if err != nil {
		return nil, err
	}
	fill := " "
	if given(a[1]) {
		f, err := argStr(name, a[1])
		if err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(f) != 1 {
			return nil, typeErr("The fill character must be exactly one character long")
		}
		fill = f
	}
	n := utf8.RuneCountInString(s)
	if w <= int64(n) {
		return s, nil
	}
	st.buildStr(satAdd(int64(len(s)), satMul(w-int64(n), int64(len(fill)))), name)
	marg := int(w) - n
	switch name {
	case "ljust":
		return s + strings.Repeat(fill, marg), nil
	case "rjust":
		return strings.Repeat(fill, marg) + s, nil
	}
	// CPython's centering puts the odd space on the left when the width
	// is odd.
	left := marg/2 + (marg & int(w) & 1)
	return strings.Repeat(fill, left) + s + strings.Repeat(fill, marg-left), nil
}

var dictMethods = map[string]method{
	"keys": func(_ *state, recv Value, a *callArgs) (Value, error) {
		if _, err := bind("keys", a, nil, 0); err != nil {
			return nil, err
		}
		return &List{Items: recv.(*Dict).Keys(), view: "dict_keys"}, nil
	},
	"values": func(_ *state, recv Value, a *callArgs) (Value, error) {
		if _, err := bind("values", a, nil, 0); err != nil {
			return nil, err
		}
		return &List{Items: recv.(*Dict).Values(), view: "dict_values"}, nil
	},
	"items": func(st *state, recv Value, a *callArgs) (Value, error) {
		if _, err := bind("items", a, nil, 0); err != nil {
			return nil, err
		}
		items := dictItems(st, recv.(*Dict))
		items.view = "dict_items"
		return items, nil
	},
	"get": func(st *state, recv Value, a *callArgs) (Value, error) {
		args, err := bind("get", a, []string{"key", "default"}, 1)
		if err != nil {
			return nil, err
		}
		if v, ok := recv.(*Dict).get(st, args[0]); ok {
			return v, nil
		}
		if given(args[1]) {
			return args[1], nil
		}
		return nil, nil
	},
	"copy": func(st *state, recv Value, a *callArgs) (Value, error) {
		if _, err := bind("copy", a, nil, 0); err != nil {
			return nil, err
		}
		d := recv.(*Dict)
		st.buildItems(3*int64(d.Len()), "dict.copy()")
		return copyDict(d), nil
	},
}

// dictItems lists a dict's (key, value) tuples.
func dictItems(st *state, d *Dict) *List {
	st.buildItems(4*int64(d.Len()), "dict items")
	out := &List{Items: make([]Value, d.Len())}
	for i := range d.keys {
		out.Items[i] = NewTuple(d.keys[i], d.vals[i])
	}
	return out
}

var unsafeDictMethods = map[string]bool{"clear": true, "pop": true, "popitem": true, "setdefault": true, "update": true}

var listMethods = map[string]method{
	"count": func(st *state, recv Value, a *callArgs) (Value, error) {
		args, err := bind("count", a, []string{"value"}, 1)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, it := range recv.(*List).Items {
			if sameObject(it, args[0]) || equal(st, it, args[0], 0) {
				n++
			}
		}
		return int64(n), nil
	},
	"index": func(st *state, recv Value, a *callArgs) (Value, error) {
		args, err := bind("index", a, []string{"value", "start", "stop"}, 1)
		if err != nil {
			return nil, err
		}
		items := recv.(*List).Items
		n := int64(len(items))
		start, err := argInt("index", args[1], 0)
		if err != nil {
			return nil, err
		}
		en, err := argInt("index", args[2], n)
		if err != nil {
			return nil, err
		}
		if start < 0 {
			start = max(start+n, 0)
		}
		if en < 0 {
			en = max(en+n, 0)
		}
		for i := start; i < en && i < n; i++ {
			if sameObject(items[i], args[0]) || equal(st, items[i], args[0], 0) {
				return i, nil
			}
		}
		return nil, valueErr("%s is not in list", shortRepr(args[0]))
	},
	"copy": func(_ *state, recv Value, a *callArgs) (Value, error) {
		if _, err := bind("copy", a, nil, 0); err != nil {
			return nil, err
		}
		l := recv.(*List)
		return &List{Items: append([]Value{}, l.Items...), Tuple: l.Tuple}, nil
	},
}

var unsafeListMethods = map[string]bool{
	"append": true, "clear": true, "extend": true, "insert": true,
	"pop": true, "remove": true, "reverse": true, "sort": true,
}
