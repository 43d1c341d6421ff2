package grammar

import (
	"errors"
	"strings"
	"testing"
)

// validSchemas compile; each is also a property-test schema (walk_test.go).
var validSchemas = []struct{ name, schema string }{
	{"true", `true`},
	{"empty", `{}`},
	{"annotations only", `{"title":"t","description":"d","default":1,"examples":[1],"$comment":"c","deprecated":false,"readOnly":true,"writeOnly":false}`},
	{"null", `{"type":"null"}`},
	{"boolean", `{"type":"boolean"}`},
	{"integer", `{"type":"integer"}`},
	{"integer bounds", `{"type":"integer","minimum":-17,"maximum":1234}`},
	{"integer exclusive", `{"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":3}`},
	{"integer fractional bounds", `{"type":"integer","minimum":-2.5,"maximum":7.25}`},
	{"integer big bounds", `{"type":"integer","minimum":-99999999999999999999,"maximum":123456789012345678901234567890}`},
	{"integer draft4 exclusive", `{"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":10,"exclusiveMaximum":true}`},
	{"number", `{"type":"number"}`},
	{"number bounds", `{"type":"number","minimum":-1.5,"maximum":2.25}`},
	{"number exclusive", `{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":0.001}`},
	{"number exponent bound", `{"type":"number","minimum":1e-2,"maximum":1E2}`},
	{"string", `{"type":"string"}`},
	{"string lengths", `{"type":"string","minLength":2,"maxLength":5}`},
	{"string pattern", `{"type":"string","pattern":"^[A-Z][a-z]+(-[A-Z][a-z]+)?$"}`},
	{"string pattern search", `{"type":"string","pattern":"ab+c","maxLength":8}`},
	{"string pattern classes", `{"type":"string","pattern":"^\\d{3}-\\w{2,4}[^x-z]\\.?$"}`},
	{"pattern alternation anchors", `{"type":"string","pattern":"^a|b$"}`},
	{"format date", `{"type":"string","format":"date"}`},
	{"format time", `{"type":"string","format":"time"}`},
	{"format date-time", `{"type":"string","format":"date-time"}`},
	{"format uuid", `{"type":"string","format":"uuid"}`},
	{"format ipv4", `{"type":"string","format":"ipv4"}`},
	{"enum", `{"enum":["red","green","blue",1,2.5,null,true,{"a":[1,"x"]},["y"]]}`},
	{"enum unicode", `{"enum":["é","😀 smile","\u0000","quote\"back\\slash"]}`},
	{"enum with type", `{"type":"string","enum":["a",1,"b"]}`},
	{"const", `{"const":"fixed"}`},
	{"type array", `{"type":["string","null","integer"]}`},
	{"array", `{"type":"array","items":{"type":"integer"}}`},
	{"array bounds", `{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":4}`},
	{"array any", `{"type":"array","maxItems":3}`},
	{"prefixItems", `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false}`},
	{"prefixItems rest", `{"type":"array","prefixItems":[{"const":"x"}],"items":{"type":"null"},"minItems":1,"maxItems":3}`},
	{"draft4 tuple", `{"type":"array","items":[{"type":"integer"}],"additionalItems":{"type":"boolean"}}`},
	{"uniqueItems false", `{"type":"array","uniqueItems":false}`},
	{"object", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]}`},
	{"object all optional", `{"type":"object","properties":{"x":{"type":"null"},"y":{"type":"null"}}}`},
	{"object strict", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`},
	{"object required outside properties", `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a","zz"]}`},
	{"object false property", `{"type":"object","properties":{"a":false,"b":{"type":"integer"}}}`},
	{"object any", `{"type":"object"}`},
	{"object empty strict", `{"type":"object","additionalProperties":false}`},
	{"map", `{"type":"object","additionalProperties":{"type":"integer","minimum":0}}`},
	{"keys with escapes", `{"type":"object","properties":{"a\"b":{"type":"integer"},"ü/~":{"type":"integer"}},"required":["a\"b","ü/~"]}`},
	{"anyOf", `{"anyOf":[{"type":"string","maxLength":3},{"type":"integer","minimum":5},{"type":"null"}]}`},
	{"oneOf by type", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`},
	{"oneOf by const", `{"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"]},{"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"string"}},"required":["kind","y"]}]}`},
	{"allOf single", `{"allOf":[{"$ref":"#/$defs/c"}],"description":"x","$defs":{"c":{"enum":["r","g"]}}}`},
	{"ref defs", `{"$defs":{"p":{"type":"object","properties":{"n":{"type":"string"}},"required":["n"]}},"type":"array","items":{"$ref":"#/$defs/p"},"maxItems":2}`},
	{"ref definitions", `{"definitions":{"i":{"type":"integer"}},"properties":{"v":{"$ref":"#/definitions/i"}},"type":"object"}`},
	{"ref pointer", `{"type":"object","properties":{"a":{"type":"integer","maximum":3},"b":{"$ref":"#/properties/a"}}}`},
	{"recursive tree", `{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},"required":["value"]}},"$ref":"#/$defs/node"}`},
	{"recursive root", `{"type":"object","properties":{"name":{"type":"string","maxLength":4},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["name","next"]}`},
	{"untyped constraints", `{"properties":{"a":{"type":"integer"}},"required":["a"],"minimum":3,"maxLength":2}`},
	{"big array of objects", `{"type":"array","items":{"type":"object","properties":{"a":{"type":"string","maxLength":10},"b":{"enum":["x","y","z"]},"c":{"type":"integer","minimum":0,"maximum":999}},"required":["a","b","c"]},"minItems":1,"maxItems":30}`},
}

func TestCompileValid(t *testing.T) {
	for _, tc := range validSchemas {
		g, err := CompileSchema([]byte(tc.schema), nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if g.States() == 0 {
			t.Errorf("%s: no states", tc.name)
		}
	}
}

func TestCompileRefused(t *testing.T) {
	cases := []struct {
		schema, keyword, path, msg string
	}{
		// Every keyword outside the subset, by name and path.
		{`{"not":{"type":"string"}}`, "not", "/not", `keyword "not" is not supported`},
		{`{"if":{},"then":{},"else":{}}`, "if", "/if", "not supported"},
		{`{"type":"object","dependentRequired":{"a":["b"]}}`, "dependentRequired", "/dependentRequired", "not supported"},
		{`{"type":"object","dependentSchemas":{}}`, "dependentSchemas", "/dependentSchemas", "not supported"},
		{`{"type":"object","patternProperties":{"^a":{}}}`, "patternProperties", "/patternProperties", "not supported"},
		{`{"type":"object","propertyNames":{"maxLength":3}}`, "propertyNames", "/propertyNames", "not supported"},
		{`{"type":"object","minProperties":1}`, "minProperties", "/minProperties", "not supported"},
		{`{"type":"object","maxProperties":1}`, "maxProperties", "/maxProperties", "not supported"},
		{`{"type":"object","properties":{"n":{"type":"number","multipleOf":0.5}}}`, "multipleOf", "/properties/n/multipleOf", "not supported"},
		{`{"type":"array","contains":{"type":"integer"}}`, "contains", "/contains", "not supported"},
		{`{"type":"array","minContains":1}`, "minContains", "/minContains", "not supported"},
		{`{"type":"array","maxContains":1}`, "maxContains", "/maxContains", "not supported"},
		{`{"type":"object","unevaluatedProperties":false}`, "unevaluatedProperties", "/unevaluatedProperties", "not supported"},
		{`{"type":"array","unevaluatedItems":false}`, "unevaluatedItems", "/unevaluatedItems", "not supported"},
		{`{"$anchor":"x"}`, "$anchor", "/$anchor", "not supported"},
		{`{"$dynamicRef":"#x"}`, "$dynamicRef", "/$dynamicRef", "not supported"},
		{`{"$recursiveRef":"#"}`, "$recursiveRef", "/$recursiveRef", "not supported"},
		{`{"type":"string","nullable":true}`, "nullable", "/nullable", "not supported"},
		{`{"oneOf":[{"type":"object"}],"discriminator":{"propertyName":"k"}}`, "discriminator", "/discriminator", "not supported"},
		{`{"type":"string","contentEncoding":"base64"}`, "contentEncoding", "/contentEncoding", "not supported"},
		{`{"type":"array","items":{"type":"object","properties":{"deep":{"type":"array","items":{"maxProperties":2}}}}}`, "maxProperties", "/items/properties/deep/items/maxProperties", "not supported"},
		{`{"$defs":{"x":{"frobnicate":1}},"$ref":"#/$defs/x"}`, "frobnicate", "/$defs/x/frobnicate", "not supported"},
		// Supported keywords with values outside the subset.
		{`{"type":"array","uniqueItems":true}`, "uniqueItems", "/uniqueItems", "true is not supported"},
		{`{"type":"string","format":"email"}`, "format", "/format", `format "email" is not supported`},
		{`{"allOf":[{"type":"string"},{"maxLength":3}]}`, "allOf", "/allOf", "more than one"},
		{`{"oneOf":[{"type":"integer"},{"type":"number"}]}`, "oneOf", "/oneOf", "may"},
		{`{"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]}`, "oneOf", "/oneOf", "may"},
		{`{"type":"string","pattern":"a(?=b)"}`, "pattern", "/pattern", "lookahead"},
		{`{"type":"string","pattern":"(?<=a)b"}`, "pattern", "/pattern", "lookbehind"},
		{`{"type":"string","pattern":"(a)\\1"}`, "pattern", "/pattern", "backreference"},
		{`{"type":"string","pattern":"\\bword"}`, "pattern", "/pattern", "word boundary"},
		{`{"type":"string","pattern":"\\p{L}"}`, "pattern", "/pattern", "Unicode property"},
		{`{"type":"string","pattern":"a^b"}`, "pattern", "/pattern", "anchor ^"},
		{`{"type":"string","pattern":"(a$)"}`, "pattern", "/pattern", "anchor $"},
		{`{"type":"string","pattern":"a{2000}"}`, "pattern", "/pattern", "limit"},
		{`{"type":"string","pattern":"(a"}`, "pattern", "/pattern", "missing )"},
		{`{"type":"string","pattern":"a**"}`, "pattern", "/pattern", "quantifier"},
		{`{"$ref":"http://example.com/s.json"}`, "$ref", "/$ref", "only references inside"},
		{`{"$ref":"#foo"}`, "$ref", "/$ref", "anchors"},
		{`{"$ref":"#/$defs/missing"}`, "$ref", "/$ref", "points at nothing"},
		{`{"$ref":"#/$defs/a","maxLength":3,"$defs":{"a":{"type":"string"}}}`, "maxLength", "/maxLength", "beside $ref"},
		{`{"type":"object","anyOf":[{"required":["a"]}]}`, "type", "/type", "beside anyOf"},
		{`{"properties":{"x":{"$id":"x"}}}`, "$id", "/properties/x/$id", "only supported at the schema's root"},
		{`{"type":"stringg"}`, "type", "/type", "unknown type"},
		{`{"type":"string","maxLength":-1}`, "maxLength", "/maxLength", "non-negative integer"},
		{`{"type":"string","minLength":"3"}`, "minLength", "/minLength", "non-negative integer"},
		{`{"type":"number","minimum":"3"}`, "minimum", "/minimum", "must be a number"},
		{`{"enum":[]}`, "enum", "/enum", "non-empty"},
		// Unsatisfiable schemas.
		{`false`, "", "", "accepts no value"},
		{`{"type":"integer","minimum":5,"maximum":4}`, "", "", "no number"},
		{`{"type":"integer","minimum":1.5,"maximum":1.9}`, "", "", "no number"},
		{`{"type":"string","minLength":3,"maxLength":2}`, "", "", "no string"},
		{`{"type":"string","pattern":"^a$","minLength":2}`, "", "", "no string"},
		{`{"type":"string","enum":[1,2]}`, "", "/enum", "no value"},
		{`{"type":"array","minItems":3,"maxItems":2}`, "", "", "minItems"},
		{`{"type":"object","properties":{"a":false},"required":["a"]}`, "", "/properties/a", "schema false"},
		{`{"type":"object","required":["a"],"additionalProperties":false}`, "required", "/required", "not in properties"},
		// Recursion that reads nothing first.
		{`{"$ref":"#"}`, "", "", "accepts no JSON value"},
		{`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"},{"type":"null"}]},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "", "", "left recursion"},
		// Limits.
		{`{"type":"string","maxLength":1000000}`, "maxLength", "/maxLength", "limit"},
		{`{"type":"array","items":{"type":"array","items":{"type":"array","items":{"type":"string","maxLength":500},"minItems":500},"minItems":500},"minItems":500}`, "", "", "limit"},
		{strings.Repeat(`{"items":`, 70) + `{}` + strings.Repeat(`}`, 70), "", "", "Limits.SchemaDepth"},
		// Not a schema.
		{`{"type":`, "", "", "not valid JSON"},
		{`[1]`, "", "", "must be an object or a boolean"},
		{`{"a":1,"a":2}`, "", "", "twice"},
	}
	for _, tc := range cases {
		_, err := CompileSchema([]byte(tc.schema), nil)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: error %v, want an *Error", tc.schema, err)
			continue
		}
		if e.Keyword != tc.keyword || (tc.path != "" && e.Path != tc.path) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s:\n got keyword %q path %q: %v\nwant keyword %q path %q, %q", tc.schema, e.Keyword, e.Path, err, tc.keyword, tc.path, tc.msg)
		}
	}
}

func TestSchemaSizeLimit(t *testing.T) {
	big := `{"enum":[` + strings.Repeat(`"x",`, 300000) + `"y"]}`
	_, err := CompileSchema([]byte(big), nil)
	if err == nil || !strings.Contains(err.Error(), "Limits.SchemaBytes") {
		t.Fatalf("got %v", err)
	}
	_, err = CompileSchema([]byte(`{"type":"string","maxLength":300}`), &Options{Limits: Limits{DFAStates: 1000}})
	if err == nil || !strings.Contains(err.Error(), "Limits.DFAStates") {
		t.Fatalf("got %v", err)
	}
}
