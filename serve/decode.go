package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// object is a JSON object of a request, read field by field: unknown
// fields are ignored, a known field of the wrong type is a 400 naming it,
// and null is the same as absent (OpenAI's clients send null for unset
// optional fields).
type object struct {
	fields map[string]json.RawMessage
	// path prefixes the field names in errors ("messages[2]").
	path string
}

// parseObject reads data as a JSON object; param names it in errors.
func parseObject(data json.RawMessage, param string) (object, *apiError) {
	o := object{path: param}
	if err := json.Unmarshal(data, &o.fields); err != nil || o.fields == nil {
		what := "the request body"
		if param != "" {
			what = param
		}
		return o, invalid(param, "%s must be a JSON object", what)
	}
	return o, nil
}

// name is the full name of field f, for errors.
func (o object) name(f string) string {
	if o.path == "" {
		return f
	}
	return o.path + "." + f
}

// raw returns field f, and false when it is absent or null.
func (o object) raw(f string) (json.RawMessage, bool) {
	r, ok := o.fields[f]
	if !ok || isNull(r) {
		return nil, false
	}
	return r, true
}

func isNull(r json.RawMessage) bool { return string(bytes.TrimSpace(r)) == "null" }

// kind is what a JSON value is: "string", "number", "boolean", "array",
// "object" or "null".
func kind(r json.RawMessage) string {
	t := bytes.TrimSpace(r)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

func (o object) wrongType(f, want string, r json.RawMessage) *apiError {
	return invalid(o.name(f), "'%s' must be %s, got %s", o.name(f), want, kind(r))
}

// str reads a string field; ok is false when it is absent.
func (o object) str(f string) (s string, ok bool, err *apiError) {
	r, ok := o.raw(f)
	if !ok {
		return "", false, nil
	}
	if json.Unmarshal(r, &s) != nil {
		return "", false, o.wrongType(f, "a string", r)
	}
	return s, true, nil
}

func (o object) boolean(f string) (b bool, ok bool, err *apiError) {
	r, ok := o.raw(f)
	if !ok {
		return false, false, nil
	}
	if json.Unmarshal(r, &b) != nil {
		return false, false, o.wrongType(f, "a boolean", r)
	}
	return b, true, nil
}

// number reads a finite number.
func (o object) number(f string) (v float64, ok bool, err *apiError) {
	r, ok := o.raw(f)
	if !ok {
		return 0, false, nil
	}
	if json.Unmarshal(r, &v) != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false, o.wrongType(f, "a number", r)
	}
	return v, true, nil
}

// integer reads an integral number (1, 1.0 and 1e3 are integers; 1.5 is
// not) that fits an int64.
func (o object) integer(f string) (v int64, ok bool, err *apiError) {
	r, ok := o.raw(f)
	if !ok {
		return 0, false, nil
	}
	if v, err := strconv.ParseInt(string(bytes.TrimSpace(r)), 10, 64); err == nil {
		return v, true, nil
	}
	var x float64
	if json.Unmarshal(r, &x) != nil || x != math.Trunc(x) || x < -(1<<63) || x >= 1<<63 {
		return 0, false, o.wrongType(f, "an integer", r)
	}
	return int64(x), true, nil
}

// intIn reads an integer in [lo, hi].
func (o object) intIn(f string, lo, hi int64) (v int64, ok bool, err *apiError) {
	v, ok, err = o.integer(f)
	if err == nil && ok && (v < lo || v > hi) {
		return 0, false, invalid(o.name(f), "'%s' must be between %d and %d, got %d", o.name(f), lo, hi, v)
	}
	return v, ok, err
}

// numberIn reads a number in [lo, hi].
func (o object) numberIn(f string, lo, hi float64) (v float64, ok bool, err *apiError) {
	v, ok, err = o.number(f)
	if err == nil && ok && (v < lo || v > hi) {
		return 0, false, invalid(o.name(f), "'%s' must be between %g and %g, got %g", o.name(f), lo, hi, v)
	}
	return v, ok, err
}

// array reads an array field as its raw elements.
func (o object) array(f string) (items []json.RawMessage, ok bool, err *apiError) {
	r, ok := o.raw(f)
	if !ok {
		return nil, false, nil
	}
	if json.Unmarshal(r, &items) != nil {
		return nil, false, o.wrongType(f, "an array", r)
	}
	return items, true, nil
}

// obj reads an object field.
func (o object) obj(f string) (object, bool, *apiError) {
	r, ok := o.raw(f)
	if !ok {
		return object{}, false, nil
	}
	if kind(r) != "object" {
		return object{}, false, o.wrongType(f, "an object", r)
	}
	sub, err := parseObject(r, o.name(f))
	return sub, err == nil, err
}

// elem names element i of array field f.
func (o object) elem(f string, i int) string { return fmt.Sprintf("%s[%d]", o.name(f), i) }

// strings reads a string or an array of strings (stop, input).
func (o object) strings(f string) (ss []string, ok bool, err *apiError) {
	r, ok := o.raw(f)
	if !ok {
		return nil, false, nil
	}
	var s string
	if json.Unmarshal(r, &s) == nil {
		return []string{s}, true, nil
	}
	if json.Unmarshal(r, &ss) != nil {
		return nil, false, o.wrongType(f, "a string or an array of strings", r)
	}
	return ss, true, nil
}
