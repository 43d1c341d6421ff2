package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DecodeJSON parses one JSON value the way Python's json.loads does, which
// is what chat-template inputs go through in transformers: objects become
// *Dict in file order (observable through tojson and `| string`), integral
// numbers become int64 (42 renders as 42, not 42.0), other numbers float64,
// null becomes nil (None). Integers outside int64 fall back to float64.
func DecodeJSON(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, errors.New("invalid JSON: extra data after the value")
		}
		return nil, err
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (Value, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			l := &List{Items: []Value{}}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				l.Items = append(l.Items, v)
			}
			_, err := dec.Token() // ]
			return l, err
		case '{':
			d := NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("invalid JSON object key %v", kt)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				d.SetString(k, v)
			}
			_, err := dec.Token() // }
			return d, err
		}
		return nil, fmt.Errorf("unexpected JSON delimiter %q", t)
	case json.Number:
		return jsonNumber(t)
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func jsonNumber(n json.Number) (Value, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, err
	}
	return f, nil
}

// ValueOf converts a Go value to a template value. Template values pass
// through unchanged; Go ints, floats, strings, bools, slices and
// string-keyed maps are converted directly (map keys sorted, since Go maps
// have no order; nil slices and maps are None, as in encoding/json);
// json.RawMessage is decoded with DecodeJSON; anything else (structs,
// typically) goes through encoding/json and back, so struct fields keep
// their declaration order and json tags apply.
func ValueOf(x any) (Value, error) {
	switch v := x.(type) {
	case nil, bool, int64, float64, string, *List, *Dict, *Namespace, *Undefined, *Func, *Macro:
		return v, nil
	case int:
		return int64(v), nil
	case int8:
		return int64(v), nil
	case int16:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case uint8:
		return int64(v), nil
	case uint16:
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case uint:
		if uint64(v) <= math.MaxInt64 {
			return int64(v), nil
		}
		return float64(v), nil
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), nil
		}
		return float64(v), nil
	case float32:
		return float64(v), nil
	case json.Number:
		return jsonNumber(v)
	case json.RawMessage:
		return DecodeJSON(v)
	case []any:
		if v == nil {
			return nil, nil // like encoding/json: a nil slice is null
		}
		l := &List{Items: make([]Value, len(v))}
		for i, it := range v {
			c, err := ValueOf(it)
			if err != nil {
				return nil, err
			}
			l.Items[i] = c
		}
		return l, nil
	case []string:
		if v == nil {
			return nil, nil
		}
		l := &List{Items: make([]Value, len(v))}
		for i, it := range v {
			l.Items[i] = it
		}
		return l, nil
	case map[string]any:
		if v == nil {
			return nil, nil
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := NewDict()
		for _, k := range keys {
			c, err := ValueOf(v[k])
			if err != nil {
				return nil, err
			}
			d.SetString(k, c)
		}
		return d, nil
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, nil
		}
		l := &List{Items: make([]Value, rv.Len())}
		for i := range l.Items {
			c, err := ValueOf(rv.Index(i).Interface())
			if err != nil {
				return nil, err
			}
			l.Items[i] = c
		}
		return l, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
	}
	data, err := json.Marshal(x)
	if err != nil {
		return nil, fmt.Errorf("jinja: cannot convert %T to a template value: %w", x, err)
	}
	return DecodeJSON(data)
}

// jsonOptions are the arguments of transformers' tojson filter, which
// calls json.dumps(x, ensure_ascii=..., indent=..., separators=...,
// sort_keys=...).
type jsonOptions struct {
	ensureASCII bool
	indent      string // "" with hasIndent: newlines but no indentation
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
}

// toJSON is Python's json.dumps with the given options. st bounds the
// text by MaxOutputBytes and the nesting by MaxNesting (nil: unbounded).
func toJSON(st *state, v Value, o jsonOptions) (string, error) {
	b := st.newBuf("tojson")
	if err := writeJSON(b, v, o, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *sbuf, v Value, o jsonOptions, depth int) error {
	if depth > 500 {
		return valueErr("Circular reference detected")
	}
	b.st.tick()
	newline := func(level int) {
		if o.hasIndent {
			b.byte('\n')
			for i := 0; i < level; i++ {
				b.WriteString(o.indent)
			}
		}
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(jsonFloat(x))
	case string:
		writeJSONString(b, x, o.ensureASCII)
	case *List:
		if x.view != "" {
			return typeErr("Object of type %s is not JSON serializable", x.view)
		}
		if len(x.Items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.st.nest(depth + 1)
		b.byte('[')
		for i, it := range x.Items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			newline(depth + 1)
			if err := writeJSON(b, it, o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.byte(']')
	case *Dict:
		if x.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		b.st.nest(depth + 1)
		b.st.buildItems(2*int64(x.Len()), "tojson")
		order := make([]int, x.Len())
		keys := make([]string, x.Len())
		for i, k := range x.keys {
			order[i] = i
			switch kk := k.(type) {
			case string:
				keys[i] = kk
			case nil:
				keys[i] = "null"
			case bool:
				keys[i] = strconv.FormatBool(kk)
			case int64:
				keys[i] = strconv.FormatInt(kk, 10)
			case float64:
				keys[i] = jsonFloat(kk)
			default:
				return typeErr("keys must be str, int, float, bool or None, not %s", typeName(k))
			}
		}
		if o.sortKeys {
			sort.SliceStable(order, func(i, j int) bool { return keys[order[i]] < keys[order[j]] })
		}
		b.byte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteString(o.itemSep)
			}
			newline(depth + 1)
			writeJSONString(b, keys[i], o.ensureASCII)
			b.WriteString(o.keySep)
			if err := writeJSON(b, x.vals[i], o, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.byte('}')
	default:
		return typeErr("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// jsonFloat is json.dumps for a float: repr, with Python's names for the
// non-finite values.
func jsonFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	return floatRepr(f)
}

// writeJSONString escapes as Python's json module does: the short escapes
// for \" \\ \n \r \t \b \f, \u00XX for other control characters, and with
// ensure_ascii every non-ASCII character as \uXXXX (surrogate pairs above
// the BMP). Nothing else is escaped: no HTML escaping of < > & '.
func writeJSONString(b *sbuf, s string, ensureASCII bool) {
	b.byte('"')
	plain := 0 // start of the run of characters written as they are
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x20 && r != '"' && r != '\\' && (r < 0x7f || (!ensureASCII && r != utf8.RuneError)) {
			i += size
			continue
		}
		b.WriteString(s[plain:i])
		i += size
		plain = i
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				b.WriteString(`\u` + hexN(int(r), 4))
			case ensureASCII && r > 0x7e:
				if r > 0xffff {
					r -= 0x10000
					b.WriteString(`\u` + hexN(0xd800+int(r>>10), 4))
					b.WriteString(`\u` + hexN(0xdc00+int(r&0x3ff), 4))
				} else {
					b.WriteString(`\u` + hexN(int(r), 4))
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteString(s[plain:])
	b.byte('"')
}
