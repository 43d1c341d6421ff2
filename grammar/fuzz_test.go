package grammar

import (
	"errors"
	"testing"
)

// FuzzCompile: any input compiles or is refused with an *Error, never a
// panic, within small limits; a compiled grammar runs over the input's
// own bytes without panicking.
func FuzzCompile(f *testing.F) {
	for _, s := range validSchemas {
		f.Add([]byte(s.schema))
	}
	for _, s := range []string{
		`{"type":"string","pattern":"(a|b)*a(a|b){12}"}`,
		`{"$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/b"}},"b":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"}`,
		`{"type":"string","pattern":"[^\\x00-\\uFFFF]{3}","maxLength":4}`,
		`{"enum":[{"a":[1,{"b":"\u00e9"}]},[[]],""]}`,
		`{"type":"number","minimum":-1e-5,"exclusiveMaximum":1e5}`,
		`{"type":"object","properties":{"a":{"$ref":"#/properties/b"},"b":{"$ref":"#/properties/a"}}}`,
	} {
		f.Add([]byte(s))
	}
	opts := &Options{MaxIndent: 2, Limits: Limits{SchemaBytes: 1 << 14, SchemaDepth: 32, States: 1 << 15, DFAStates: 1 << 12, Work: 1 << 22}}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := CompileSchema(data, opts)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			return
		}
		m := g.NewMatcher()
		for _, b := range data {
			m.AcceptByte(b)
		}
		m.CanEnd()
	})
}
