package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Python string formatting: `"%s" % x` (and the format filter, which is
// the same operation) and str.format. Both cover the conversions templates
// use; exotic ones (%a on non-ASCII, "n" locale grouping, the "z" flag)
// behave like their closest plain equivalent.

// percentFormat is Python's `format % args`.
func percentFormat(st *state, format string, args Value) (string, error) {
	// CPython: a tuple supplies the arguments; any other object with
	// __getitem__ (dict, list, Undefined, ...) is "a mapping", which
	// %(name)s looks into and which need not be used up.
	var pos []Value
	var mapping Value
	if l, ok := args.(*List); ok && l.Tuple {
		pos = l.Items
	} else {
		pos = []Value{args}
		switch x := args.(type) {
		case *Dict, *Undefined:
			mapping = args
		case *List:
			if x.view == "" || x.view == "range" {
				mapping = args
			}
		}
	}
	used := 0
	next := func() (Value, error) {
		if used >= len(pos) {
			return nil, typeErr("not enough arguments for format string")
		}
		used++
		return pos[used-1], nil
	}
	b := st.newBuf("a % format")
	for i := 0; i < len(format); {
		c := format[i]
		if c != '%' {
			j := strings.IndexByte(format[i:], '%')
			if j < 0 {
				j = len(format) - i
			}
			b.WriteString(format[i : i+j])
			i += j
			continue
		}
		i++
		if i >= len(format) {
			return "", valueErr("incomplete format")
		}
		var val Value = missing
		if format[i] == '(' {
			end := strings.IndexByte(format[i:], ')')
			if end < 0 {
				return "", valueErr("incomplete format key")
			}
			key := format[i+1 : i+end]
			i += end + 1
			switch m := mapping.(type) {
			case *Dict:
				v, ok := m.get(st, key)
				if !ok {
					return "", &RuntimeError{Kind: "KeyError", Msg: shortRepr(key)}
				}
				val = v
			case *Undefined:
				return "", m.err()
			case *List:
				return "", typeErr("list indices must be integers or slices, not str")
			default:
				return "", typeErr("format requires a mapping")
			}
		}
		spec := fmtSpec{align: '>', fill: ' '}
	flags:
		for i < len(format) {
			switch format[i] {
			case '-':
				spec.align = '<'
			case '+':
				spec.sign = '+'
			case ' ':
				if spec.sign != '+' {
					spec.sign = ' '
				}
			case '0':
				spec.zero = true
			case '#':
				spec.alt = true
			default:
				break flags
			}
			i++
		}
		readNum := func() (int, bool, error) {
			if i < len(format) && format[i] == '*' {
				i++
				v, err := next()
				if err != nil {
					return 0, false, err
				}
				n, _, isF, ok := number(v)
				if !ok || isF {
					return 0, false, typeErr("* wants int")
				}
				return int(n), true, nil
			}
			start := i
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				i++
			}
			if start == i {
				return 0, false, nil
			}
			n, _ := strconv.Atoi(format[start:i])
			return n, true, nil
		}
		var err error
		if spec.width, _, err = readNum(); err != nil {
			return "", err
		}
		if spec.width < 0 {
			spec.align, spec.width = '<', -spec.width
		}
		if i < len(format) && format[i] == '.' {
			i++
			if spec.prec, _, err = readNum(); err != nil {
				return "", err
			}
			spec.hasPrec = true
		}
		for i < len(format) && strings.IndexByte("hlL", format[i]) >= 0 {
			i++
		}
		if i >= len(format) {
			return "", valueErr("incomplete format")
		}
		conv := format[i]
		i++
		if conv == '%' {
			b.byte('%')
			continue
		}
		if val == missing {
			if val, err = next(); err != nil {
				return "", err
			}
		}
		if spec.zero && spec.align == '>' {
			spec.align = '='
			spec.fill = '0'
		}
		spec.typ = conv
		s, err := formatPercentValue(st, val, spec)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	if mapping == nil && used < len(pos) {
		return "", typeErr("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

func formatPercentValue(st *state, v Value, spec fmtSpec) (string, error) {
	switch spec.typ {
	case 's', 'r', 'a':
		s := toStr(st, v)
		if spec.typ != 's' {
			s = repr(st, v)
		}
		if spec.hasPrec {
			s = truncRunes(s, spec.prec)
		}
		if spec.align == '=' {
			spec.align, spec.fill = '>', ' '
		}
		return pad(st, s, spec), nil
	case 'c':
		switch x := v.(type) {
		case string:
			if utf8.RuneCountInString(x) != 1 {
				return "", typeErr("%%c requires int or char")
			}
			return pad(st, x, spec), nil
		case int64:
			return pad(st, string(rune(x)), spec), nil
		}
		return "", typeErr("%%c requires int or char")
	case 'd', 'i', 'u', 'o', 'x', 'X', 'e', 'E', 'f', 'F', 'g', 'G':
		if spec.typ == 'i' || spec.typ == 'u' {
			spec.typ = 'd'
		}
		if _, _, _, ok := number(v); !ok {
			if u, ok := v.(*Undefined); ok {
				return "", u.err()
			}
			return "", typeErr("%%%c format: a real number is required, not %s", spec.typ, typeName(v))
		}
		if !spec.hasPrec && strings.IndexByte("eEfFgG", spec.typ) >= 0 {
			spec.prec, spec.hasPrec = 6, true
		}
		return formatNumber(st, v, spec)
	}
	return "", valueErr("unsupported format character '%c'", spec.typ)
}

// fmtSpec is a parsed format specification, shared by both syntaxes.
type fmtSpec struct {
	fill    rune
	align   byte // < > ^ =
	sign    byte // + - space, 0 for default
	alt     bool
	zero    bool
	width   int
	comma   byte // grouping character, 0 for none
	prec    int
	hasPrec bool
	typ     byte // 0 for none
}

func truncRunes(s string, n int) string {
	if n < 0 {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// pad pads s to spec.width characters, counting the result before it is
// built.
func pad(st *state, s string, spec fmtSpec) string {
	n := utf8.RuneCountInString(s)
	if spec.width <= n {
		return s
	}
	st.buildStr(satAdd(int64(len(s)), satMul(int64(spec.width-n), int64(utf8.RuneLen(spec.fill)))), "a format width")
	fill := strings.Repeat(string(spec.fill), spec.width-n)
	switch spec.align {
	case '<':
		return s + fill
	case '^':
		left := (spec.width - n) / 2
		return strings.Repeat(string(spec.fill), left) + s + strings.Repeat(string(spec.fill), spec.width-n-left)
	}
	return fill + s
}

// formatNumber formats an int or float per spec (types d o x X b c e E f
// F g G % n, or none).
func formatNumber(st *state, v Value, spec fmtSpec) (string, error) {
	if spec.hasPrec {
		st.buildStr(int64(spec.prec), "a format precision")
	}
	i, f, isF, _ := number(v)
	neg := false
	var body string
	typ := spec.typ
	switch typ {
	case 'd', 'n', 'o', 'x', 'X', 'b', 'c':
		if isF {
			if typ != 'd' {
				return "", valueErr("Unknown format code '%c' for object of type 'float'", typ)
			}
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return "", valueErr("cannot convert float %s to integer", floatRepr(f))
			}
			i = int64(f) // %d truncates floats
		}
		if i < 0 {
			neg, i = true, -i
		}
		base := map[byte]int{'d': 10, 'n': 10, 'o': 8, 'x': 16, 'X': 16, 'b': 2}[typ]
		if typ == 'c' {
			body = string(rune(i))
			break
		}
		body = strconv.FormatUint(uint64(i), base)
		if typ == 'X' {
			body = strings.ToUpper(body)
		}
		if spec.comma != 0 && base == 10 {
			body = group(body, spec.comma)
		}
		if spec.alt {
			body = map[byte]string{'o': "0o", 'x': "0x", 'X': "0X", 'b': "0b"}[typ] + body
		}
	default:
		if !isF {
			f = float64(i)
		}
		if f < 0 || (f == 0 && math.Signbit(f)) {
			neg, f = true, -f
		}
		prec := spec.prec
		switch {
		case math.IsInf(f, 0):
			body = "inf"
		case math.IsNaN(f):
			body = "nan"
		case typ == 0 && !spec.hasPrec:
			if !isF {
				body = strconv.FormatInt(i, 10)
				if neg {
					body = body[1:]
				}
			} else {
				body = floatRepr(f)
			}
		case typ == '%':
			if !spec.hasPrec {
				prec = 6
			}
			body = strconv.FormatFloat(f*100, 'f', prec, 64) + "%"
		case typ == 'f' || typ == 'F':
			if !spec.hasPrec {
				prec = 6
			}
			body = strconv.FormatFloat(f, 'f', prec, 64)
		case typ == 'e' || typ == 'E':
			if !spec.hasPrec {
				prec = 6
			}
			body = strconv.FormatFloat(f, 'e', prec, 64)
		default: // g, G, n and none with a precision
			if !spec.hasPrec {
				prec = 6
			}
			if prec == 0 {
				prec = 1
			}
			verb := "%." + strconv.Itoa(prec) + "g"
			if spec.alt {
				verb = "%#." + strconv.Itoa(prec) + "g"
			}
			body = fmt.Sprintf(verb, f)
			if typ == 0 && !strings.ContainsAny(body, ".e") {
				// format(1.0, ".3") is "1.0": the no-type form keeps a point
				body += ".0"
			}
		}
		if typ == 'E' || typ == 'F' || typ == 'G' {
			body = strings.ToUpper(body)
		}
		if spec.comma != 0 {
			intPart, rest := body, ""
			if k := strings.IndexAny(body, ".e%"); k >= 0 {
				intPart, rest = body[:k], body[k:]
			}
			body = group(intPart, spec.comma) + rest
		}
	}
	sign := ""
	switch {
	case neg:
		sign = "-"
	case spec.sign == '+':
		sign = "+"
	case spec.sign == ' ':
		sign = " "
	}
	if spec.align == '=' {
		n := utf8.RuneCountInString(sign + body)
		if spec.width > n {
			st.buildStr(satAdd(int64(len(sign+body)), satMul(int64(spec.width-n), int64(utf8.RuneLen(spec.fill)))), "a format width")
			return sign + strings.Repeat(string(spec.fill), spec.width-n) + body, nil
		}
		return sign + body, nil
	}
	return pad(st, sign+body, spec), nil
}

func group(digits string, sep byte) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	first := len(digits) % 3
	if first > 0 {
		b.WriteString(digits[:first])
	}
	for i := first; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(sep)
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

// parseFormatSpec parses the str.format mini-language:
// [[fill]align][sign][#][0][width][,|_][.precision][type].
func parseFormatSpec(s string) (fmtSpec, error) {
	spec := fmtSpec{fill: ' '}
	runes := []rune(s)
	i := 0
	isAlign := func(r rune) bool { return r == '<' || r == '>' || r == '^' || r == '=' }
	if len(runes) >= 2 && isAlign(runes[1]) {
		spec.fill, spec.align = runes[0], byte(runes[1])
		i = 2
	} else if len(runes) >= 1 && isAlign(runes[0]) {
		spec.align = byte(runes[0])
		i = 1
	}
	if i < len(runes) && (runes[i] == '+' || runes[i] == '-' || runes[i] == ' ') {
		spec.sign = byte(runes[i])
		i++
	}
	if i < len(runes) && runes[i] == 'z' {
		i++
	}
	if i < len(runes) && runes[i] == '#' {
		spec.alt = true
		i++
	}
	if i < len(runes) && runes[i] == '0' {
		spec.zero = true
		i++
	}
	start := i
	for i < len(runes) && runes[i] >= '0' && runes[i] <= '9' {
		i++
	}
	if i > start {
		spec.width, _ = strconv.Atoi(string(runes[start:i]))
	}
	if i < len(runes) && (runes[i] == ',' || runes[i] == '_') {
		spec.comma = byte(runes[i])
		i++
	}
	if i < len(runes) && runes[i] == '.' {
		i++
		start = i
		for i < len(runes) && runes[i] >= '0' && runes[i] <= '9' {
			i++
		}
		if i == start {
			return spec, valueErr("Format specifier missing precision")
		}
		spec.prec, _ = strconv.Atoi(string(runes[start:i]))
		spec.hasPrec = true
	}
	if i < len(runes) {
		spec.typ = byte(runes[i])
		i++
	}
	if i != len(runes) {
		return spec, valueErr("Invalid format specifier")
	}
	return spec, nil
}

// formatValue is Python's format(v, spec).
func formatValue(st *state, v Value, specStr string) (string, error) {
	if specStr == "" {
		return toStr(st, v), nil
	}
	spec, err := parseFormatSpec(specStr)
	if err != nil {
		return "", err
	}
	if spec.zero && spec.align == 0 {
		spec.fill, spec.align = '0', '='
	}
	switch v.(type) {
	case bool, int64, float64:
		if spec.align == 0 {
			spec.align = '>'
		}
		if _, ok := v.(bool); ok && spec.typ == 0 {
			return pad(st, toStr(st, v), spec), nil
		}
		if spec.typ == 's' {
			return "", valueErr("Unknown format code 's' for object of type '%s'", typeName(v))
		}
		return formatNumber(st, v, spec)
	}
	if spec.typ != 0 && spec.typ != 's' {
		return "", valueErr("Unknown format code '%c' for object of type '%s'", spec.typ, typeName(v))
	}
	if spec.align == '=' {
		return "", valueErr("'=' alignment not allowed in string format specifier")
	}
	if spec.align == 0 {
		spec.align = '<'
	}
	s := toStr(st, v)
	if spec.hasPrec {
		s = truncRunes(s, spec.prec)
	}
	return pad(st, s, spec), nil
}

// strFormat is str.format(*args, **kwargs). nesting counts replacement
// fields nested in format specs, which CPython allows one level of.
func strFormat(st *state, format string, a *callArgs, nesting int) (Value, error) {
	if nesting >= 2 {
		return nil, valueErr("Max string recursion exceeded")
	}
	b := st.newBuf("str.format")
	auto := 0
	for i := 0; i < len(format); {
		c := format[i]
		if c == '}' {
			if i+1 < len(format) && format[i+1] == '}' {
				b.byte('}')
				i += 2
				continue
			}
			return nil, valueErr("Single '}' encountered in format string")
		}
		if c != '{' {
			j := strings.IndexAny(format[i:], "{}")
			if j < 0 {
				j = len(format) - i
			}
			b.WriteString(format[i : i+j])
			i += j
			continue
		}
		if i+1 < len(format) && format[i+1] == '{' {
			b.byte('{')
			i += 2
			continue
		}
		// find the matching close brace (nested braces in the spec allowed)
		depth, j := 1, i+1
		for ; j < len(format) && depth > 0; j++ {
			switch format[j] {
			case '{':
				depth++
			case '}':
				depth--
			}
		}
		if depth != 0 {
			return nil, valueErr("expected '}' before end of string")
		}
		field := format[i+1 : j-1]
		i = j
		spec := ""
		if k := strings.IndexByte(field, ':'); k >= 0 {
			field, spec = field[:k], field[k+1:]
		}
		conv := byte(0)
		if k := strings.IndexByte(field, '!'); k >= 0 {
			if k+2 != len(field) {
				return nil, valueErr("expected ':' after conversion specifier")
			}
			conv = field[k+1]
			field = field[:k]
		}
		v, err := lookupField(st, field, a, &auto)
		if err != nil {
			return nil, err
		}
		switch conv {
		case 0:
		case 's':
			v = toStr(st, v)
		case 'r', 'a':
			v = repr(st, v)
		default:
			return nil, valueErr("Unknown conversion specifier %c", conv)
		}
		if strings.Contains(spec, "{") {
			expanded, err := strFormat(st, spec, a, nesting+1)
			if err != nil {
				return nil, err
			}
			spec = expanded.(string)
		}
		s, err := formatValue(st, v, spec)
		if err != nil {
			return nil, err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// lookupField resolves a str.format field name: "", a number or a keyword,
// followed by .attr and [key] parts.
func lookupField(st *state, field string, a *callArgs, auto *int) (Value, error) {
	head := field
	if k := strings.IndexAny(field, ".["); k >= 0 {
		head = field[:k]
	}
	rest := field[len(head):]
	var v Value
	switch {
	case head == "":
		if *auto >= len(a.pos) {
			return nil, &RuntimeError{Kind: "IndexError", Msg: fmt.Sprintf("Replacement index %d out of range for positional args tuple", *auto)}
		}
		v = a.pos[*auto]
		*auto++
	case head[0] >= '0' && head[0] <= '9':
		n, err := strconv.Atoi(head)
		if err != nil || n >= len(a.pos) {
			return nil, &RuntimeError{Kind: "IndexError", Msg: fmt.Sprintf("Replacement index %s out of range for positional args tuple", shortStr(head))}
		}
		v = a.pos[n]
	default:
		found := false
		for _, k := range a.kw {
			if k.name == head {
				v, found = k.val, true
			}
		}
		if !found {
			return nil, &RuntimeError{Kind: "KeyError", Msg: shortRepr(head)}
		}
	}
	for rest != "" {
		if rest[0] == '.' {
			end := strings.IndexAny(rest[1:], ".[")
			if end < 0 {
				end = len(rest) - 1
			}
			name := rest[1 : end+1]
			rest = rest[end+1:]
			var err error
			st.tick()
			if v, err = getattr(st, v, name); err != nil {
				return nil, err
			}
			continue
		}
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return nil, valueErr("Missing ']' in format string")
		}
		key := rest[1:end]
		rest = rest[end+1:]
		var k Value = key
		if n, err := strconv.ParseInt(key, 10, 64); err == nil {
			k = n
		}
		var err error
		st.tick()
		if v, err = getitem(st, v, k); err != nil {
			return nil, err
		}
	}
	return v, nil
}
