package grammar

import (
	"strings"
	"testing"
)

// acceptCases: texts accepted and refused, read byte by byte.
var acceptCases = []struct {
	schema  string
	ok, bad []string
}{
	{`{"type":"integer","minimum":-5,"maximum":120}`,
		[]string{"0", "-5", "120", "99", " 7 ", "-0", "\n  42\n"},
		[]string{"121", "-6", "1.5", "007", "1e2", "+1", "", "  ", "1 2", "\n\n1", "   1"}},
	{`{"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":100}`,
		[]string{"10", "99", "50"}, []string{"9", "100", "0", "-10"}},
	{`{"type":"integer","minimum":-2.5,"maximum":7.25}`,
		[]string{"-2", "7", "0", "-0"}, []string{"-3", "8", "7.25"}},
	{`{"type":"integer","minimum":12345678901234567890}`,
		[]string{"12345678901234567890", "99999999999999999999", "123456789012345678901"}, []string{"12345678901234567889", "1"}},
	{`{"type":"number","exclusiveMinimum":1.5,"maximum":3}`,
		[]string{"1.6", "2", "3", "3.0", "3.000", "1.50001", "2.9999999999999999999"},
		[]string{"1.5", "1.50", "1.500000", "3.01", "3.0000001", "1", "-2", "2e0", "01.6"}},
	{`{"type":"number","minimum":-0.5,"maximum":0}`,
		[]string{"0", "-0", "-0.5", "-0.25", "0.0", "-0.0"}, []string{"0.1", "-0.51", "-1"}},
	{`{"type":"number"}`,
		[]string{"0", "-1.5e+10", "2E-3", "1e5", "-0.0", "123.456"}, []string{"1.", ".5", "1e", "--1", "0x1", "NaN", "Infinity", "00"}},
	{`{"type":"string","maxLength":3}`,
		[]string{`""`, `"abc"`, `"é€😀"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\uD83D\uDE00ab"`, `"\n\t"`, `"\"\\/"`, `"\b\f\r"`, `"a\u0000"`},
		[]string{`"abcd"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"a`, "\"\x01\"", `"\x"`, `"\u12"`, "\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xe0\x80\x80\"", "\"\xc0\xaf\"", "\"\xf4\x90\x80\x80\"", `"😀😀😀😀"`}},
	{`{"type":"string","minLength":2}`,
		[]string{`"ab"`, `"\u00e9\u00e9"`, `"😀😀"`}, []string{`"a"`, `"😀"`, `""`}},
	{`{"type":"string","pattern":"^[a-z]+\\d{2}$"}`,
		[]string{`"ab12"`, `"\u0061b12"`, `"z\u00399"`}, []string{`"ab1"`, `"12"`, `"AB12"`, `"ab123"`}},
	{`{"type":"string","pattern":"é+"}`,
		[]string{`"é"`, `"xéy"`, `"\u00e9"`, `"\u00E9\u00e9"`}, []string{`"e"`, `""`}},
	{`{"type":"string","pattern":"^.$"}`,
		[]string{`"a"`, `"😀"`, `"\ud83d\ude00"`, `"\t"`}, []string{`"\n"`, `"ab"`, `""`, `"\u2028"`}},
	{`{"type":"string","pattern":"^[\\u0100-\\u01FF]{2}$"}`,
		[]string{`"ĀǿW"[:0]`, `"Āǿ"`, `"\u0100\u01ff"`, `"\u01FFĀ"`}, []string{`"\u0200a"`, `"ĀĀĀ"`, `"aa"`}},
	{`{"type":"string","format":"date"}`,
		[]string{`"2024-02-29"`, `"2000-02-29"`, `"2023-12-31"`, `"0000-01-01"`}, []string{`"2023-02-29"`, `"1900-02-29"`, `"2023-04-31"`, `"2023-13-01"`, `"23-01-01"`}},
	{`{"type":"string","format":"date-time"}`,
		[]string{`"2024-01-15T10:20:30Z"`, `"2024-01-15t10:20:30.123+05:30"`}, []string{`"2024-01-15 10:20:30Z"`, `"2024-01-15T24:00:00Z"`, `"2024-01-15T10:20:30"`}},
	{`{"type":"string","format":"uuid"}`,
		[]string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`}},
	{`{"type":"string","format":"ipv4"}`,
		[]string{`"192.168.0.1"`, `"0.0.0.0"`, `"255.255.255.255"`}, []string{`"256.1.1.1"`, `"01.1.1.1"`, `"1.1.1"`}},
	{`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"}},"required":["b"]}`,
		[]string{`{"b":null}`, `{"a":true,"b":null}`, `{ "a" : false , "b" : null }`, "{\n  \"b\": null\n}", `{"\u0062":null}`, "{\n\t\"a\":true,\n\t\"b\":null}"},
		[]string{`{}`, `{"a":true}`, `{"b":null,"a":true}`, `{"b":null,}`, `{"c":1,"b":null}`, `{"b":null,"b":null}`}},
	{`{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"},"z":{"type":"integer"}}}`,
		[]string{`{}`, `{"x":1}`, `{"y":2}`, `{"x":1,"z":3}`, `{"x":1,"y":2,"z":3}`, `{"z":3}`},
		[]string{`{,}`, `{"x":1,}`, `{"y":1,"x":2}`, `{"x":1"y":2}`}},
	{`{"enum":["red","green",1,null,{"k":[1,2]}]}`,
		[]string{`"red"`, `"gr\u0065en"`, `1`, `null`, `{"k":[1,2]}`, `{ "k" : [ 1 , 2 ] }`}, []string{`"blue"`, `2`, `1.0`, `{"k":[2,1]}`, `"Red"`}},
	{`{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`,
		[]string{`[1]`, `[1,2,3]`, `[ 1 , 2 ]`, "[\n  1,\n  2\n]"}, []string{`[]`, `[1,2,3,4]`, `[1,]`, `[,1]`}},
	{`{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false}`,
		[]string{`[]`, `[1]`, `[1,"a"]`}, []string{`["a"]`, `[1,"a",2]`}},
	{`{"anyOf":[{"type":"string","maxLength":1},{"type":"integer","minimum":5}]}`,
		[]string{`"a"`, `5`, `100`}, []string{`"ab"`, `4`, `null`}},
	{`{"type":"object","additionalProperties":{"type":"integer"}}`,
		[]string{`{}`, `{"a":1}`, `{"a":1,"b":2,"a":3}`}, []string{`{"a":"x"}`, `{"a":1,}`}},
	{`{"type":"object","properties":{"name":{"type":"string","maxLength":4},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["name","next"]}`,
		[]string{`{"name":"a","next":null}`, `{"name":"a","next":{"name":"bb","next":{"name":"c","next":null}}}`},
		[]string{`{"name":"a"}`, `{"name":"a","next":{"name":"toolong","next":null}}`, `{"name":"a","next":{}}`}},
	{`{}`,
		[]string{`1`, `"x"`, `[1,[2,[3,{"a":[]}]]]`, `{"a":{"b":{"c":null}}}`, `true`, `false`, `null`, `-1.5e3`},
		[]string{`{a:1}`, `[1,]`, `tru`, `'x'`, `{"a" 1}`}},
}

func TestAcceptBytes(t *testing.T) {
	for _, tc := range acceptCases {
		g, err := CompileSchema([]byte(tc.schema), nil)
		if err != nil {
			t.Errorf("%s: %v", tc.schema, err)
			continue
		}
		for _, s := range tc.ok {
			if strings.HasSuffix(s, "[:0]") {
				continue
			}
			m := g.NewMatcher()
			for i := 0; i < len(s); i++ {
				if !m.AcceptByte(s[i]) {
					t.Errorf("%s: refuses byte %d (%q) of %q", tc.schema, i, s[i], s)
					break
				}
				// Every prefix of an accepted text is a live state.
			}
			if !m.CanEnd() {
				t.Errorf("%s: %q does not end", tc.schema, s)
			}
		}
		for _, s := range tc.bad {
			m := g.NewMatcher()
			if m.Accept([]byte(s)) && m.CanEnd() {
				t.Errorf("%s: accepts %q", tc.schema, s)
			}
		}
	}
}

func TestJSONObjectMode(t *testing.T) {
	g, err := JSONObject(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}],"c":"x"}`, ` { "k" : { "k" : { } } } `} {
		m := g.NewMatcher()
		if !m.Accept([]byte(s)) || !m.CanEnd() {
			t.Errorf("json_object refuses %q", s)
		}
	}
	for _, s := range []string{`[]`, `1`, `"x"`, `{"a"}`, `{"a":1,}`} {
		m := g.NewMatcher()
		if m.Accept([]byte(s)) && m.CanEnd() {
			t.Errorf("json_object accepts %q", s)
		}
	}
}

func TestWhitespaceBounded(t *testing.T) {
	g, err := CompileSchema([]byte(`{"type":"array","items":{"type":"integer"}}`), &Options{MaxIndent: 4})
	if err != nil {
		t.Fatal(err)
	}
	ok := []string{"[1, 2]", "[\n    1\n]", "[\n\t\t1]", " [1] "}
	bad := []string{"[1,  2]", "[\n     1]", "[\n\n1]", "[1 ,\n 2]x", "  [1]"}
	for _, s := range ok {
		m := g.NewMatcher()
		if !m.Accept([]byte(s)) || !m.CanEnd() {
			t.Errorf("refuses %q", s)
		}
	}
	for _, s := range bad {
		m := g.NewMatcher()
		if m.Accept([]byte(s)) && m.CanEnd() {
			t.Errorf("accepts %q", s)
		}
	}
	compact, err := CompileSchema([]byte(`{"type":"array","items":{"type":"integer"}}`), &Options{Compact: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := compact.NewMatcher(); m.Accept([]byte("[1, 2]")) {
		t.Error("compact grammar accepts a space")
	}
}

func TestPrefixSuffix(t *testing.T) {
	g, err := CompileSchema([]byte(`{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},"required":["name","arguments"]}`),
		&Options{Prefix: "<tool_call>\n", Suffix: "\n</tool_call>"})
	if err != nil {
		t.Fatal(err)
	}
	ok := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	if m := g.NewMatcher(); !m.Accept([]byte(ok)) || !m.CanEnd() {
		t.Errorf("refuses %q", ok)
	}
	for _, bad := range []string{`{"name":"get_weather","arguments":{"city":"x"}}`, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"x\"}}"} {
		if m := g.NewMatcher(); m.Accept([]byte(bad)) && m.CanEnd() {
			t.Errorf("accepts %q", bad)
		}
	}
}
