package jinja

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Filters follow jinja2's filters.py (behaviour with autoescape off), and
// tojson is transformers' replacement. Most stringify their input with
// str() first, which is why `None | trim` is "None" and `12345 | trim` is
// "12345".

type filterFn func(st *state, v Value, a *callArgs) (Value, error)

var filters map[string]filterFn

// strFilter adapts a filter that takes the value as str and a fixed
// signature.
func strFilter(name string, names []string, required int, f func(st *state, s string, args []Value) (Value, error)) filterFn {
	return func(st *state, v Value, a *callArgs) (Value, error) {
		args, err := bind(name, a, names, required)
		if err != nil {
			return nil, err
		}
		return f(st, toStr(st, v), args)
	}
}

func init() {
	filters = map[string]filterFn{
		"abs":        filterAbs,
		"attr":       filterAttr,
		"capitalize": strFilter("capitalize", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return pyCapitalize(s), nil }),
		"center": strFilter("center", []string{"width"}, 0, func(st *state, s string, a []Value) (Value, error) {
			w := a[0]
			if !given(w) {
				w = int64(80)
			}
			return padMethod(st, "center", s, []Value{w, missing})
		}),
		"count":    filterLength,
		"length":   filterLength,
		"d":        filterDefault,
		"default":  filterDefault,
		"dictsort": filterDictsort,
		"e":        strFilter("escape", nil, 0, func(st *state, s string, _ []Value) (Value, error) { return htmlEscape(st, s), nil }),
		"escape":   strFilter("escape", nil, 0, func(st *state, s string, _ []Value) (Value, error) { return htmlEscape(st, s), nil }),
		"forceescape": strFilter("forceescape", nil, 0, func(st *state, s string, _ []Value) (Value, error) {
			return htmlEscape(st, s), nil
		}),
		"first":  filterFirst,
		"last":   filterLast,
		"float":  filterFloat,
		"int":    filterInt,
		"format": filterFormat,
		"indent": filterIndent,
		"items":  filterItems,
		"join":   filterJoin,
		"list": func(st *state, v Value, a *callArgs) (Value, error) {
			if _, err := bind("list", a, nil, 0); err != nil {
				return nil, err
			}
			items, err := iterate(st, v)
			if err != nil {
				return nil, err
			}
			st.buildItems(int64(len(items)), "list()")
			return NewList(append([]Value{}, items...)...), nil
		},
		"lower":  strFilter("lower", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return pyLower(s), nil }),
		"upper":  strFilter("upper", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return pyUpper(s), nil }),
		"title":  strFilter("title", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return jinjaTitle(s), nil }),
		"string": strFilter("string", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return s, nil }),
		"trim": strFilter("trim", []string{"chars"}, 0, func(_ *state, s string, a []Value) (Value, error) {
			return stripper(true, true)(s, a)
		}),
		"replace": func(st *state, v Value, a *callArgs) (Value, error) {
			args, err := bind("replace", a, []string{"old", "new", "count"}, 2)
			if err != nil {
				return nil, err
			}
			n, err := argInt("replace", args[2], -1)
			if err != nil {
				return nil, err
			}
			return replaceStr(st, toStr(st, v), toStr(st, args[0]), toStr(st, args[1]), n), nil
		},
		"safe": func(_ *state, v Value, a *callArgs) (Value, error) { return v, nil },
		"map":  filterMap,
		"max": func(st *state, v Value, a *callArgs) (Value, error) {
			return filterMinMax(st, v, a, "max")
		},
		"min": func(st *state, v Value, a *callArgs) (Value, error) {
			return filterMinMax(st, v, a, "min")
		},
		"pprint": func(st *state, v Value, a *callArgs) (Value, error) { return repr(st, v), nil },
		"reject": func(st *state, v Value, a *callArgs) (Value, error) {
			return selectOrReject(st, v, a, false, false)
		},
		"rejectattr": func(st *state, v Value, a *callArgs) (Value, error) {
			return selectOrReject(st, v, a, false, true)
		},
		"select": func(st *state, v Value, a *callArgs) (Value, error) {
			return selectOrReject(st, v, a, true, false)
		},
		"selectattr": func(st *state, v Value, a *callArgs) (Value, error) {
			return selectOrReject(st, v, a, true, true)
		},
		"reverse":   filterReverse,
		"round":     filterRound,
		"sort":      filterSort,
		"sum":       filterSum,
		"tojson":    filterToJSON,
		"unique":    filterUnique,
		"wordcount": strFilter("wordcount", nil, 0, func(_ *state, s string, _ []Value) (Value, error) { return wordCount(s), nil }),
	}
}

// applyFilter evaluates a filter's arguments and applies it to v.
func (st *state) applyFilter(f *filterExpr, v Value, sc *scope) (Value, error) {
	fn, ok := filters[f.name]
	if !ok {
		return nil, &RuntimeError{Kind: "TemplateAssertionError", Msg: "No filter named '" + f.name + "'."}
	}
	a, err := st.evalArgs(f.callSpec, sc)
	if err != nil {
		return nil, err
	}
	return st.callFilter(fn, f.name, v, a)
}

// callFilter applies a filter, charging its inputs and accounting for its
// result.
func (st *state) callFilter(fn filterFn, name string, v Value, a *callArgs) (Value, error) {
	st.chargeArgs(v, a)
	r, err := fn(st, v, a)
	if err == nil {
		st.result(r, name)
	}
	return r, err
}

func filterAbs(_ *state, v Value, a *callArgs) (Value, error) {
	if _, err := bind("abs", a, nil, 0); err != nil {
		return nil, err
	}
	i, f, isF, ok := number(v)
	if !ok {
		if u, ok := v.(*Undefined); ok {
			return nil, u.err()
		}
		return nil, typeErr("bad operand type for abs(): '%s'", typeName(v))
	}
	if isF {
		return math.Abs(f), nil
	}
	if i < 0 {
		return -i, nil
	}
	return i, nil
}

func filterAttr(st *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("attr", a, []string{"name"}, 1)
	if err != nil {
		return nil, err
	}
	name := toStr(st, args[0])
	if x, ok := pyAttr(v, name); ok {
		return x, nil
	}
	return undefinedIn(v, name), nil
}

func filterLength(_ *state, v Value, a *callArgs) (Value, error) {
	if _, err := bind("length", a, nil, 0); err != nil {
		return nil, err
	}
	n, err := length(v)
	return int64(n), err
}

func filterDefault(_ *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("default", a, []string{"default_value", "boolean"}, 0)
	if err != nil {
		return nil, err
	}
	_, undef := v.(*Undefined)
	if undef || (given(args[1]) && truthy(args[1]) && !truthy(v)) {
		if given(args[0]) {
			return args[0], nil
		}
		return "", nil
	}
	return v, nil
}

// ignoreCase is jinja2's sort key helper: strings compare lower-cased
// unless case_sensitive is set.
func ignoreCase(v Value, caseSensitive bool) Value {
	if s, ok := v.(string); ok && !caseSensitive {
		return pyLower(s)
	}
	return v
}

// sortValues sorts stably by key, failing like Python when keys are not
// comparable.
func sortValues(st *state, items []Value, key func(Value) (Value, error), reverse bool) ([]Value, error) {
	st.buildItems(3*int64(len(items)), "sorting")
	keys := make([]Value, len(items))
	for i, it := range items {
		k, err := key(it)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var cmpErr error
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := keys[idx[i]], keys[idx[j]]
		if reverse {
			a, b = b, a
		}
		lt, err := pyCompare(st, "<", a, b)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		return lt
	})
	if cmpErr != nil {
		return nil, cmpErr
	}
	out := make([]Value, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, nil
}

func filterDictsort(st *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("dictsort", a, []string{"case_sensitive", "by", "reverse"}, 0)
	if err != nil {
		return nil, err
	}
	d, ok := v.(*Dict)
	if !ok {
		return nil, runtimeErr("You can only sort by either \"key\" or \"value\"")
	}
	pos := 0
	if given(args[1]) {
		switch toStr(st, args[1]) {
		case "key":
		case "value":
			pos = 1
		default:
			return nil, runtimeErr("You can only sort by either \"key\" or \"value\"")
		}
	}
	cs := given(args[0]) && truthy(args[0])
	out, err := sortValues(st, dictItems(st, d).Items, func(it Value) (Value, error) {
		return ignoreCase(it.(*List).Items[pos], cs), nil
	}, given(args[2]) && truthy(args[2]))
	if err != nil {
		return nil, err
	}
	return NewList(out...), nil
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

// htmlEscape is markupsafe's escape. Its output size is counted before
// it is built.
func htmlEscape(st *state, s string) string {
	n := int64(len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&', '<', '>', '"', '\'':
			n += 4
		}
	}
	st.buildStr(n, "escape")
	return htmlEscaper.Replace(s)
}

func filterFirst(st *state, v Value, a *callArgs) (Value, error) {
	if _, err := bind("first", a, nil, 0); err != nil {
		return nil, err
	}
	if g, ok := v.(*generator); ok {
		it, ok, err := g.next()
		if err != nil || ok {
			return it, err
		}
		return &Undefined{hint: "No first item, sequence was empty."}, nil
	}
	items, err := iterate(st, v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &Undefined{hint: "No first item, sequence was empty."}, nil
	}
	return items[0], nil
}

func filterLast(st *state, v Value, a *callArgs) (Value, error) {
	if _, err := bind("last", a, nil, 0); err != nil {
		return nil, err
	}
	// next(iter(reversed(seq))): iterators cannot be reversed
	if g, ok := v.(*generator); ok {
		return nil, typeErr("'%s' object is not reversible", g.pyType)
	}
	items, err := iterate(st, v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &Undefined{hint: "No last item, sequence was empty."}, nil
	}
	return items[len(items)-1], nil
}

// pyFloatOf is float(v) for numbers and numeric strings.
func pyFloatOf(v Value) (float64, bool) {
	if _, f, _, ok := number(v); ok {
		return f, true
	}
	if s, ok := v.(string); ok {
		s = strings.ReplaceAll(strings.TrimFunc(s, pyIsSpace), "_", "")
		switch strings.ToLower(strings.TrimLeft(s, "+-")) {
		case "inf", "infinity", "nan":
			f, err := strconv.ParseFloat(s, 64)
			return f, err == nil
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil
	}
	return 0, false
}

func filterFloat(_ *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("float", a, []string{"default"}, 0)
	if err != nil {
		return nil, err
	}
	if u, ok := v.(*Undefined); ok {
		return nil, u.err() // float(Undefined) raises
	}
	if f, ok := pyFloatOf(v); ok {
		return f, nil
	}
	if given(args[0]) {
		return args[0], nil
	}
	return 0.0, nil
}

func filterInt(_ *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("int", a, []string{"default", "base"}, 0)
	if err != nil {
		return nil, err
	}
	base, err := argInt("int", args[1], 10)
	if err != nil {
		return nil, err
	}
	var def Value = int64(0)
	if given(args[0]) {
		def = args[0]
	}
	if u, ok := v.(*Undefined); ok {
		return nil, u.err() // int(Undefined) raises
	}
	switch x := v.(type) {
	case string:
		s := strings.ReplaceAll(strings.TrimFunc(x, pyIsSpace), "_", "")
		b := int(base)
		if b == 0 || b == 16 || b == 8 || b == 2 {
			low := strings.ToLower(strings.TrimLeft(s, "+-"))
			prefix := map[string]int{"0x": 16, "0o": 8, "0b": 2}
			if len(low) > 2 {
				if pb, ok := prefix[low[:2]]; ok && (b == 0 || b == pb) {
					sign := s[:len(s)-len(strings.TrimLeft(s, "+-"))]
					s, b = sign+low[2:], pb
				}
			}
			if b == 0 {
				b = 10
			}
		}
		if n, err := strconv.ParseInt(s, b, 64); err == nil {
			return n, nil
		}
		// jinja2 retries with int(float(value))
		if f, ok := pyFloatOf(x); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return int64(f), nil
		}
		return def, nil
	}
	if i, f, isF, ok := number(v); ok {
		if isF {
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return def, nil
			}
			return int64(f), nil
		}
		return i, nil
	}
	return def, nil
}

func filterFormat(st *state, v Value, a *callArgs) (Value, error) {
	if len(a.pos) > 0 && len(a.kw) > 0 {
		return nil, runtimeErr("can't handle positional and keyword arguments at the same time")
	}
	var args Value = NewTuple(a.pos...)
	if len(a.kw) > 0 {
		d := NewDict()
		for _, k := range a.kw {
			d.SetString(k.name, k.val)
		}
		args = d
	}
	return percentFormat(st, toStr(st, v), args)
}

func filterIndent(st *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("indent", a, []string{"width", "first", "blank"}, 0)
	if err != nil {
		return nil, err
	}
	indent := "    "
	if given(args[0]) {
		if s, ok := args[0].(string); ok {
			indent = s
		} else {
			w, err := argInt("indent", args[0], 4)
			if err != nil {
				return nil, err
			}
			st.buildStr(w, "indent width")
			indent = strings.Repeat(" ", int(max(w, 0)))
		}
	}
	first := given(args[1]) && truthy(args[1])
	blank := given(args[2]) && truthy(args[2])
	// jinja2 does `s += "\n"` (so splitlines keeps a trailing empty line),
	// which only works on strings.
	str, ok := v.(string)
	if !ok {
		if u, isU := v.(*Undefined); isU {
			return nil, u.err()
		}
		return nil, typeErr("unsupported operand type(s) for +=: '%s' and 'str'", typeName(v))
	}
	s := str + "\n"
	// every line may get the indent: count the result before building it
	nLines := countLines(s)
	st.buildStr(int64(len(s))+satMul(nLines+1, int64(len(indent))), "indent")
	st.buildItems(2*nLines, "indent")
	lines := splitLines(s, false).Items
	var out string
	if blank {
		parts := make([]string, len(lines))
		for i, l := range lines {
			parts[i] = l.(string)
		}
		out = strings.Join(parts, "\n"+indent)
	} else {
		out = lines[0].(string)
		if len(lines) > 1 {
			parts := make([]string, 0, len(lines)-1)
			for _, l := range lines[1:] {
				if l.(string) != "" {
					parts = append(parts, indent+l.(string))
				} else {
					parts = append(parts, "")
				}
			}
			out += "\n" + strings.Join(parts, "\n")
		}
	}
	if first {
		out = indent + out
	}
	return out, nil
}

func filterItems(st *state, v Value, a *callArgs) (Value, error) {
	if _, err := bind("items", a, nil, 0); err != nil {
		return nil, err
	}
	return newGenerator("do_items", func() ([]Value, error) {
		switch x := v.(type) {
		case *Undefined:
			return nil, nil
		case *Dict:
			return dictItems(st, x).Items, nil
		}
		return nil, typeErr("Can only get item pairs from a mapping.")
	}), nil
}

// attrGetter is jinja2's make_attrgetter: "a.b.0" looks up a, then b, then
// item 0, each with getitem semantics.
func attrGetter(st *state, attr Value, def Value) func(Value) (Value, error) {
	var parts []Value
	if s, ok := attr.(string); ok {
		st.buildItems(2*int64(strings.Count(s, ".")+1), "an attribute path")
		for _, p := range strings.Split(s, ".") {
			if n, err := strconv.ParseInt(p, 10, 64); err == nil {
				parts = append(parts, n)
			} else {
				parts = append(parts, p)
			}
		}
	} else {
		parts = []Value{attr}
	}
	return func(item Value) (Value, error) {
		for _, p := range parts {
			var err error
			st.tick()
			if item, err = getitem(st, item, p); err != nil {
				return nil, err
			}
			if _, ok := item.(*Undefined); ok && given(def) && def != nil {
				item = def
			}
		}
		return item, nil
	}
}

func filterJoin(st *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("join", a, []string{"d", "attribute"}, 0)
	if err != nil {
		return nil, err
	}
	items, err := iterate(st, v)
	if err != nil {
		return nil, err
	}
	sep := ""
	if given(args[0]) {
		sep = toStr(st, args[0])
	}
	get := func(x Value) (Value, error) { return x, nil }
	if given(args[1]) && args[1] != nil {
		get = attrGetter(st, args[1], missing)
	}
	st.buildItems(int64(len(items)), "join")
	parts := make([]string, len(items))
	for i, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		parts[i] = toStr(st, x)
	}
	return joinStrings(st, parts, sep), nil
}

// joinStrings is strings.Join with the result counted before it is built.
func joinStrings(st *state, parts []string, sep string) string {
	if len(parts) == 0 {
		return ""
	}
	n := satMul(int64(len(parts)-1), int64(len(sep)))
	for _, p := range parts {
		n = satAdd(n, int64(len(p)))
	}
	st.buildStr(n, "join")
	return strings.Join(parts, sep)
}

// replaceStr is str.replace(old, new, count) with the result counted
// before it is built.
func replaceStr(st *state, s, old, new string, count int64) string {
	if len(new) > len(old) {
		n := int64(strings.Count(s, old))
		if count >= 0 && count < n {
			n = count
		}
		st.buildStr(satAdd(int64(len(s)), satMul(n, int64(len(new)-len(old)))), "replace")
	}
	if count < 0 || count > math.MaxInt32 {
		count = -1
	}
	return strings.Replace(s, old, new, int(count))
}

// filterMap, like jinja2's, is a generator that does nothing at all (not
// even check its arguments) for a false input.
func filterMap(st *state, v Value, a *callArgs) (Value, error) {
	return newGenerator("sync_do_map", func() ([]Value, error) {
		if !truthy(v) {
			return nil, nil
		}
		return mapItems(st, v, a)
	}), nil
}

func mapItems(st *state, v Value, a *callArgs) ([]Value, error) {
	var fn func(Value) (Value, error)
	if len(a.pos) == 0 {
		var attr, def Value = missing, missing
		for _, k := range a.kw {
			switch k.name {
			case "attribute":
				attr = k.val
			case "default":
				def = k.val
			default:
				return nil, runtimeErr("Unexpected keyword argument %s", strRepr(k.name))
			}
		}
		if !given(attr) {
			return nil, runtimeErr("map requires a filter argument")
		}
		fn = attrGetter(st, attr, def)
	} else {
		name := toStr(st, a.pos[0])
		f, ok := filters[name]
		if !ok {
			return nil, &RuntimeError{Kind: "TemplateRuntimeError", Msg: "No filter named '" + shortStr(name) + "'."}
		}
		rest := &callArgs{pos: a.pos[1:], kw: a.kw}
		fn = func(x Value) (Value, error) { return st.callFilter(f, name, x, rest) }
	}
	items, err := iterate(st, v)
	if err != nil {
		return nil, err
	}
	st.buildItems(int64(len(items)), "map")
	out := make([]Value, len(items))
	for i, it := range items {
		if out[i], err = fn(it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// shortStr cuts a template-supplied name for an error message.
func shortStr(s string) string {
	if len(s) > 100 {
		return truncRunes(s, 100) + "..."
	}
	return s
}

func filterMinMax(st *state, v Value, a *callArgs, which string) (Value, error) {
	args, err := bind(which, a, []string{"case_sensitive", "attribute"}, 0)
	if err != nil {
		return nil, err
	}
	items, err := iterate(st, v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return &Undefined{hint: "No aggregated item, sequence was empty."}, nil
	}
	cs := given(args[0]) && truthy(args[0])
	get := func(x Value) (Value, error) { return x, nil }
	if given(args[1]) && args[1] != nil {
		get = attrGetter(st, args[1], missing)
	}
	best := items[0]
	bestKey, err := get(best)
	if err != nil {
		return nil, err
	}
	bestKey = ignoreCase(bestKey, cs)
	for _, it := range items[1:] {
		k, err := get(it)
		if err != nil {
			return nil, err
		}
		k = ignoreCase(k, cs)
		op := "<"
		if which == "max" {
			op = ">"
		}
		better, err := pyCompare(st, op, k, bestKey)
		if err != nil {
			return nil, err
		}
		if better {
			best, bestKey = it, k
		}
	}
	return best, nil
}

// selectOrReject implements select, reject, selectattr and rejectattr: a
// generator that, like jinja2's, yields nothing for a false input.
func selectOrReject(st *state, v Value, a *callArgs, keep, byAttr bool) (Value, error) {
	return newGenerator("select_or_reject", func() ([]Value, error) {
		if !truthy(v) {
			return nil, nil
		}
		return selectItems(st, v, a, keep, byAttr)
	}), nil
}

func selectItems(st *state, v Value, a *callArgs, keep, byAttr bool) ([]Value, error) {
	args := a.pos
	get := func(x Value) (Value, error) { return x, nil }
	if byAttr {
		if len(args) == 0 {
			return nil, runtimeErr("Missing parameter for attribute name")
		}
		get = attrGetter(st, args[0], missing)
		args = args[1:]
	}
	test := func(x Value) (bool, error) { return truthy(x), nil }
	if len(args) > 0 {
		name := toStr(st, args[0])
		t, ok := tests[name]
		if !ok {
			return nil, runtimeErr("No test named '%s'.", shortStr(name))
		}
		rest := &callArgs{pos: args[1:], kw: a.kw}
		test = func(x Value) (bool, error) {
			st.chargeArgs(x, rest)
			return t(st, x, rest)
		}
	}
	items, err := iterate(st, v)
	if err != nil {
		return nil, err
	}
	st.buildItems(int64(len(items)), "select")
	var out []Value
	for _, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		ok, err := test(x)
		if err != nil {
			return nil, err
		}
		if ok == keep {
			out = append(out, it)
		}
	}
	return out, nil
}

func filterReverse(st *state, v Value, a *callArgs) (Value, error) {
	if _, err := bind("reverse", a, nil, 0); err != nil {
		return nil, err
	}
	if s, ok := v.(string); ok {
		b := st.newBuf("reverse")
		for rest := s; rest != ""; {
			r, size := utf8.DecodeLastRuneInString(rest)
			rest = rest[:len(rest)-size]
			b.WriteRune(r)
		}
		return b.String(), nil
	}
	// reversed() where Python supports it (an iterator), else a reversed
	// copy as a list.
	if g, ok := reversedIter(st, v); ok {
		return g, nil
	}
	items, err := iterate(st, v)
	if err != nil {
		return nil, runtimeErr("argument must be iterable")
	}
	st.buildItems(int64(len(items)), "reverse")
	out := &List{Items: make([]Value, len(items))}
	for i, it := range items {
		out.Items[len(items)-1-i] = it
	}
	return out, nil
}

func filterRound(_ *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("round", a, []string{"precision", "method"}, 0)
	if err != nil {
		return nil, err
	}
	prec, err := argInt("round", args[0], 0)
	if err != nil {
		return nil, err
	}
	method := "common"
	if given(args[1]) {
		method = toStr(nil, args[1])
	}
	i, f, isF, ok := number(v)
	if !ok {
		if u, ok := v.(*Undefined); ok {
			return nil, u.err()
		}
		return nil, typeErr("type %s doesn't define __round__ method", typeName(v))
	}
	// Beyond 400 digits either way, rounding a float changes nothing, or
	// leaves zero; clamping keeps the arithmetic (and FormatFloat) small.
	prec = min(max(prec, -400), 400)
	scale := math.Pow(10, float64(prec))
	switch method {
	case "common":
		if !isF {
			// round(int, n) stays an int in Python
			if prec >= 0 {
				return i, nil
			}
			return int64(pyRound(float64(i), prec)), nil
		}
		return pyRound(f, prec), nil
	case "ceil":
		return math.Ceil(f*scale) / scale, nil
	case "floor":
		return math.Floor(f*scale) / scale, nil
	}
	return nil, runtimeErr("method must be common, ceil or floor")
}

// pyRound is Python's round(x, n): correctly rounded, ties to even. Go's
// decimal formatting rounds the exact binary value the same way.
func pyRound(f float64, n int64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f
	}
	if n >= 0 {
		r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(n), 64), 64)
		return r
	}
	scale := math.Pow(10, float64(-n))
	return math.RoundToEven(f/scale) * scale
}

func filterSort(st *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("sort", a, []string{"reverse", "case_sensitive", "attribute"}, 0)
	if err != nil {
		return nil, err
	}
	items, err := iterate(st, v)
	if err != nil {
		return nil, err
	}
	cs := given(args[1]) && truthy(args[1])
	var getters []func(Value) (Value, error)
	if given(args[2]) && args[2] != nil {
		if s, ok := args[2].(string); ok {
			st.buildItems(2*int64(strings.Count(s, ",")+1), "sort attributes")
			for _, part := range strings.Split(s, ",") {
				getters = append(getters, attrGetter(st, strings.TrimSpace(part), missing))
			}
		} else {
			getters = append(getters, attrGetter(st, args[2], missing))
		}
	}
	out, err := sortValues(st, items, func(x Value) (Value, error) {
		if len(getters) == 0 {
			return ignoreCase(x, cs), nil
		}
		keys := make([]Value, len(getters))
		for i, g := range getters {
			k, err := g(x)
			if err != nil {
				return nil, err
			}
			keys[i] = ignoreCase(k, cs)
		}
		if len(keys) == 1 {
			return keys[0], nil
		}
		return NewTuple(keys...), nil
	}, given(args[0]) && truthy(args[0]))
	if err != nil {
		return nil, err
	}
	return NewList(out...), nil
}

func filterSum(st *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("sum", a, []string{"attribute", "start"}, 0)
	if err != nil {
		return nil, err
	}
	items, err := iterate(st, v)
	if err != nil {
		return nil, err
	}
	var total Value = int64(0)
	if given(args[1]) {
		total = args[1]
	}
	get := func(x Value) (Value, error) { return x, nil }
	if given(args[0]) && args[0] != nil {
		get = attrGetter(st, args[0], missing)
	}
	for _, it := range items {
		x, err := get(it)
		if err != nil {
			return nil, err
		}
		st.charge(1 + cost(total) + cost(x))
		if total, err = binop(st, "+", total, x); err != nil {
			return nil, err
		}
	}
	return total, nil
}

// filterToJSON is transformers' tojson:
// json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
func filterToJSON(st *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("tojson", a, []string{"ensure_ascii", "indent", "separators", "sort_keys"}, 0)
	if err != nil {
		return nil, err
	}
	o := jsonOptions{itemSep: ", ", keySep: ": "}
	o.ensureASCII = given(args[0]) && truthy(args[0])
	if given(args[1]) && args[1] != nil {
		o.hasIndent = true
		o.itemSep = "," // json.dumps' default when indenting
		switch x := args[1].(type) {
		case string:
			o.indent = x
		default:
			n, err := argInt("tojson", x, 0)
			if err != nil {
				return nil, err
			}
			st.buildStr(n, "tojson indent")
			o.indent = strings.Repeat(" ", int(max(n, 0)))
		}
	}
	if given(args[2]) && args[2] != nil {
		seps, err := iterate(st, args[2])
		if err != nil || len(seps) != 2 {
			return nil, valueErr("separators must be an (item_separator, key_separator) pair")
		}
		o.itemSep, o.keySep = toStr(st, seps[0]), toStr(st, seps[1])
	}
	o.sortKeys = given(args[3]) && truthy(args[3])
	return toJSON(st, v, o)
}

func filterUnique(st *state, v Value, a *callArgs) (Value, error) {
	args, err := bind("unique", a, []string{"case_sensitive", "attribute"}, 0)
	if err != nil {
		return nil, err
	}
	return newGenerator("sync_do_unique", func() ([]Value, error) { return uniqueItems(st, v, args) }), nil
}

func uniqueItems(st *state, v Value, args []Value) ([]Value, error) {
	items, err := iterate(st, v)
	if err != nil {
		return nil, err
	}
	cs := given(args[0]) && truthy(args[0])
	get := func(x Value) (Value, error) { return x, nil }
	if given(args[1]) && args[1] != nil {
		get = attrGetter(st, args[1], missing)
	}
	st.buildItems(2*int64(len(items)), "unique")
	seen := NewDict()
	var out []Value
	for _, it := range items {
		k, err := get(it)
		if err != nil {
			return nil, err
		}
		k = ignoreCase(k, cs)
		if seen.has(st, k) {
			continue
		}
		if err := seen.put(st, k, true); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// wordCount is jinja2's wordcount: the number of matches of
// [\p{L}\p{N}_]+ (Python's \w+).
func wordCount(s string) int64 {
	n := int64(0)
	in := false
	for _, r := range s {
		w := r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
		if w && !in {
			n++
		}
		in = w
	}
	return n
}

// jinjaTitle is jinja2's title filter (not str.title): words start after
// whitespace, hyphens and opening brackets.
func jinjaTitle(s string) string {
	var b strings.Builder
	start := true
	for _, r := range s {
		if pyIsSpace(r) || strings.ContainsRune("-({[<", r) {
			b.WriteRune(r)
			start = true
			continue
		}
		if start {
			b.WriteRune(unicode.ToUpper(r))
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
		start = false
	}
	return b.String()
}
