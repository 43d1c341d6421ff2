package jinja

import (
	"strconv"
	"strings"
	"time"
)

// maxRange is the sandbox's cap on range(): jinja2 refuses to build
// ranges larger than this.
const maxRange = 100000

// globals are the names every template sees unless a render variable of
// the same name shadows them: jinja2's defaults plus the two transformers
// adds for chat templates. They hold no per-render state (strftime_now
// reads the clock from the render's state).
var globals map[string]Value

func init() {
	globals = map[string]Value{
		"range":           &Func{Name: "range", fn: builtinRange},
		"dict":            &Func{Name: "dict", fn: builtinDict},
		"namespace":       &Func{Name: "namespace", fn: builtinNamespace},
		"cycler":          &Func{Name: "cycler", fn: builtinCycler},
		"joiner":          &Func{Name: "joiner", fn: builtinJoiner},
		"raise_exception": &Func{Name: "raise_exception", fn: builtinRaise},
		"strftime_now":    &Func{Name: "strftime_now", fn: builtinStrftimeNow},
	}
}

func builtinRange(st *state, a *callArgs) (Value, error) {
	if len(a.kw) > 0 {
		return nil, typeErr("range() takes no keyword arguments")
	}
	var n [3]int64
	for i, v := range a.pos {
		if i >= 3 {
			return nil, typeErr("range expected at most 3 arguments, got %d", len(a.pos))
		}
		x, _, isF, ok := number(v)
		if !ok || isF {
			return nil, typeErr("'%s' object cannot be interpreted as an integer", typeName(v))
		}
		n[i] = x
	}
	var start, stop, step int64
	switch len(a.pos) {
	case 0:
		return nil, typeErr("range expected at least 1 argument, got 0")
	case 1:
		start, stop, step = 0, n[0], 1
	case 2:
		start, stop, step = n[0], n[1], 1
	default:
		start, stop, step = n[0], n[1], n[2]
	}
	if step == 0 {
		return nil, valueErr("range() arg 3 must not be zero")
	}
	// (counted in unsigned arithmetic: the distance between two int64s
	// always fits)
	var count uint64
	if step > 0 && stop > start {
		count = (uint64(stop)-uint64(start)-1)/uint64(step) + 1
	} else if step < 0 && stop < start {
		count = (uint64(start)-uint64(stop)-1)/(uint64(-(step+1))+1) + 1
	}
	if count > maxRange {
		return nil, &RuntimeError{Kind: "OverflowError", Msg: "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."}
	}
	st.buildItems(int64(count), "range()")
	args := make([]string, len(a.pos))
	for i := range a.pos {
		args[i] = strconv.FormatInt(n[i], 10)
	}
	switch {
	case len(args) == 1:
		args = []string{"0", args[0]}
	case len(args) == 3 && step == 1:
		args = args[:2] // Python's repr omits a step of 1
	}
	out := &List{Items: make([]Value, count), view: "range", rangeArg: strings.Join(args, ", ")}
	for i := range out.Items {
		out.Items[i] = start + int64(i)*step // (wraps back into range)
	}
	return out, nil
}

// builtinDict is dict(mapping_or_pairs, **kwargs).
func builtinDict(st *state, a *callArgs) (Value, error) {
	d := NewDict()
	if len(a.pos) > 1 {
		return nil, typeErr("dict expected at most 1 argument, got %d", len(a.pos))
	}
	if len(a.pos) == 1 {
		if err := fillDict(st, d, a.pos[0]); err != nil {
			return nil, err
		}
	}
	for _, k := range a.kw {
		d.SetString(k.name, k.val)
	}
	return d, nil
}

func fillDict(st *state, d *Dict, src Value) error {
	if m, ok := src.(*Dict); ok {
		st.buildItems(3*int64(m.Len()), "dict()")
		for i, k := range m.keys {
			if err := d.put(st, k, m.vals[i]); err != nil {
				return err
			}
		}
		return nil
	}
	items, err := iterate(st, src)
	if err != nil {
		return err
	}
	st.buildItems(3*int64(len(items)), "dict()")
	for i, it := range items {
		pair, err := iterate(st, it)
		if err != nil || len(pair) != 2 {
			return valueErr("dictionary update sequence element #%d has wrong length", i)
		}
		if err := d.put(st, pair[0], pair[1]); err != nil {
			return err
		}
	}
	return nil
}

func builtinNamespace(st *state, a *callArgs) (Value, error) {
	ns := &Namespace{attrs: NewDict()}
	if len(a.pos) > 1 {
		return nil, typeErr("namespace expected at most 1 argument, got %d", len(a.pos))
	}
	if len(a.pos) == 1 {
		if err := fillDict(st, ns.attrs, a.pos[0]); err != nil {
			return nil, err
		}
	}
	for _, k := range a.kw {
		ns.attrs.SetString(k.name, k.val)
	}
	return ns, nil
}

// builtinRaise is transformers' raise_exception: the template rejects its
// input with exactly this message.
func builtinRaise(st *state, a *callArgs) (Value, error) {
	args, err := bind("raise_exception", a, []string{"message"}, 1)
	if err != nil {
		return nil, err
	}
	return nil, &TemplateError{Message: toStr(st, args[0])}
}

// builtinStrftimeNow is transformers' strftime_now(fmt) =
// datetime.now().strftime(fmt), reading the render's clock.
func builtinStrftimeNow(st *state, a *callArgs) (Value, error) {
	args, err := bind("strftime_now", a, []string{"format"}, 1)
	if err != nil {
		return nil, err
	}
	f, err := argStr("strftime_now", args[0])
	if err != nil {
		return nil, err
	}
	// a directive is 2 or 3 bytes and expands to at most 24 (%c)
	st.buildStr(satMul(int64(len(f)), 12), "strftime_now")
	return Strftime(st.now(), f), nil
}

type cycler struct {
	items []Value
	pos   int
}

func builtinCycler(_ *state, a *callArgs) (Value, error) {
	if len(a.pos) == 0 {
		return nil, runtimeErr("at least one item has to be provided")
	}
	return &cycler{items: a.pos}, nil
}

func (c *cycler) attr(name string) (Value, bool) {
	switch name {
	case "current":
		return c.items[c.pos], true
	case "next":
		return &Func{Name: "next", fn: func(*state, *callArgs) (Value, error) {
			v := c.items[c.pos]
			c.pos = (c.pos + 1) % len(c.items)
			return v, nil
		}}, true
	case "reset":
		return &Func{Name: "reset", fn: func(*state, *callArgs) (Value, error) {
			c.pos = 0
			return nil, nil
		}}, true
	}
	return nil, false
}

type joiner struct {
	sep   string
	fired bool
}

func builtinJoiner(st *state, a *callArgs) (Value, error) {
	args, err := bind("joiner", a, []string{"sep"}, 0)
	if err != nil {
		return nil, err
	}
	sep := ", "
	if given(args[0]) {
		sep = toStr(st, args[0])
	}
	return &joiner{sep: sep}, nil
}

func (j *joiner) call() Value {
	if !j.fired {
		j.fired = true
		return ""
	}
	return j.sep
}

var (
	weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	months   = []string{"January", "February", "March", "April", "May", "June", "July",
		"August", "September", "October", "November", "December"}
)

// Strftime formats t like Python's datetime.strftime in the C locale
// (glibc conversions, including the "-" no-padding flag as in %-d). %Z
// and %z are empty, as for the naive datetime transformers passes.
func Strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		noPad := false
		if format[i] == '-' && i+1 < len(format) {
			noPad = true
			i++
		}
		num := func(n, width int) {
			s := strconv.Itoa(n)
			if !noPad {
				for len(s) < width {
					s = "0" + s
				}
			}
			b.WriteString(s)
		}
		hour12 := t.Hour() % 12
		if hour12 == 0 {
			hour12 = 12
		}
		switch format[i] {
		case 'a':
			b.WriteString(weekdays[t.Weekday()][:3])
		case 'A':
			b.WriteString(weekdays[t.Weekday()])
		case 'b', 'h':
			b.WriteString(months[t.Month()-1][:3])
		case 'B':
			b.WriteString(months[t.Month()-1])
		case 'c':
			b.WriteString(Strftime(t, "%a %b %e %H:%M:%S %Y"))
		case 'C':
			num(t.Year()/100, 2)
		case 'd':
			num(t.Day(), 2)
		case 'D':
			b.WriteString(Strftime(t, "%m/%d/%y"))
		case 'e':
			s := strconv.Itoa(t.Day())
			if len(s) < 2 && !noPad {
				s = " " + s
			}
			b.WriteString(s)
		case 'F':
			b.WriteString(Strftime(t, "%Y-%m-%d"))
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num(hour12, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'k':
			s := strconv.Itoa(t.Hour())
			if len(s) < 2 {
				s = " " + s
			}
			b.WriteString(s)
		case 'l':
			s := strconv.Itoa(hour12)
			if len(s) < 2 {
				s = " " + s
			}
			b.WriteString(s)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'n':
			b.WriteByte('\n')
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'R':
			b.WriteString(Strftime(t, "%H:%M"))
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'S':
			num(t.Second(), 2)
		case 't':
			b.WriteByte('\t')
		case 'T':
			b.WriteString(Strftime(t, "%H:%M:%S"))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			b.WriteString(strconv.Itoa(wd))
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'x':
			b.WriteString(Strftime(t, "%m/%d/%y"))
		case 'X':
			b.WriteString(Strftime(t, "%H:%M:%S"))
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'f':
			num(t.Nanosecond()/1000, 6)
		case 'U':
			num((t.YearDay()+6-int(t.Weekday()))/7, 2)
		case 'W':
			num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2)
		case 'G', 'g', 'V':
			y, w := t.ISOWeek()
			switch format[i] {
			case 'G':
				b.WriteString(strconv.Itoa(y))
			case 'g':
				num(y%100, 2)
			default:
				num(w, 2)
			}
		case 'z', 'Z':
			// naive datetime: no zone
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if noPad {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
