package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// kind is the JSON type of a value.
type kind uint8

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

// value is a parsed JSON value that keeps its objects' member order (a
// schema's properties are emitted in the order it lists them) and its
// numbers' text (bounds are compared digit by digit, never as floats).
type value struct {
	kind kind
	b    bool
	num  string // a JSON number's text
	str  string
	arr  []*value
	obj  []member
}

type member struct {
	key string
	val *value
}

// get returns the member named key, or nil.
func (v *value) get(key string) *value {
	if v == nil || v.kind != kObject {
		return nil
	}
	for _, m := range v.obj {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// parseValue parses one JSON text, refusing texts over maxBytes or
// nested deeper than maxDepth with errors that name the limit.
func parseValue(data []byte, maxBytes, maxDepth int) (*value, error) {
	if len(data) > maxBytes {
		return nil, &Error{Path: "", Msg: fmt.Sprintf("schema of %d bytes exceeds the limit of %d bytes (Limits.SchemaBytes)", len(data), maxBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseFrom(dec, 0, maxDepth)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, err
		}
		return nil, &Error{Msg: "schema is not valid JSON: " + err.Error()}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Msg: "schema is not valid JSON: data after the value"}
	}
	return v, nil
}

func parseFrom(dec *json.Decoder, depth, maxDepth int) (*value, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return parseTok(dec, tok, depth, maxDepth)
}

func parseTok(dec *json.Decoder, tok json.Token, depth, maxDepth int) (*value, error) {
	switch t := tok.(type) {
	case nil:
		return &value{kind: kNull}, nil
	case bool:
		return &value{kind: kBool, b: t}, nil
	case json.Number:
		return &value{kind: kNumber, num: string(t)}, nil
	case string:
		return &value{kind: kString, str: t}, nil
	case json.Delim:
		if depth >= maxDepth {
			return nil, &Error{Msg: fmt.Sprintf("schema nests deeper than the limit of %d levels (Limits.SchemaDepth)", maxDepth)}
		}
		switch t {
		case '[':
			v := &value{kind: kArray}
			for dec.More() {
				e, err := parseFrom(dec, depth+1, maxDepth)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		case '{':
			v := &value{kind: kObject}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				e, err := parseFrom(dec, depth+1, maxDepth)
				if err != nil {
					return nil, err
				}
				if seen[k] {
					return nil, &Error{Msg: fmt.Sprintf("schema has the key %q twice in one object", k)}
				}
				seen[k] = true
				v.obj = append(v.obj, member{k, e})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// writeJSON appends the compact JSON text of v (object members in order,
// numbers as written).
func (v *value) writeJSON(sb *strings.Builder) {
	switch v.kind {
	case kNull:
		sb.WriteString("null")
	case kBool:
		if v.b {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case kNumber:
		sb.WriteString(v.num)
	case kString:
		b, _ := json.Marshal(v.str)
		sb.Write(b)
	case kArray:
		sb.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				sb.WriteByte(',')
			}
			e.writeJSON(sb)
		}
		sb.WriteByte(']')
	case kObject:
		sb.WriteByte('{')
		for i, m := range v.obj {
			if i > 0 {
				sb.WriteByte(',')
			}
			b, _ := json.Marshal(m.key)
			sb.Write(b)
			sb.WriteByte(':')
			m.val.writeJSON(sb)
		}
		sb.WriteByte('}')
	}
}

func (v *value) String() string {
	var sb strings.Builder
	v.writeJSON(&sb)
	return sb.String()
}

// kindName is the JSON Schema type name of a kind.
func (k kind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}
