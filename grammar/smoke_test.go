package grammar

import "testing"

func TestSmoke(t *testing.T) {
	cases := []struct {
		schema  string
		ok, bad []string
	}{
		{`{"type":"integer","minimum":-5,"maximum":120}`, []string{"0", "-5", "120", "99", " 7 ", "-0"}, []string{"121", "-6", "1.5", "007", "1e2"}},
		{`{"type":"number","exclusiveMinimum":1.5,"maximum":3}`, []string{"1.6", "2", "3", "3.0", "1.50001"}, []string{"1.5", "1.50", "3.01", "1", "-2"}},
		{`{"type":"string","maxLength":3}`, []string{`""`, `"abc"`, `"é€😀"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\n\t"`}, []string{`"abcd"`, `"\ud83d"`, `"a`, "\"\x01\""}},
		{`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"}},"required":["b"]}`, []string{`{"b":null}`, `{"a":true,"b":null}`, `{ "a" : false , "b" : null }`, "{\n  \"b\": null\n}"}, []string{`{}`, `{"a":true}`, `{"b":null,"a":true}`}},
		{`{"enum":["red","green",1,null]}`, []string{`"red"`, `"gr\u0065en"`, `1`, `null`}, []string{`"blue"`, `2`}},
		{`{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`, []string{`[1]`, `[1,2,3]`, `[ 1 , 2 ]`}, []string{`[]`, `[1,2,3,4]`, `[1,]`}},
		{`{"type":"string","pattern":"^[a-z]+\\d{2}$"}`, []string{`"ab12"`}, []string{`"ab1"`, `"12"`, `"AB12"`}},
		{`{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/n"}`,
			[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":null}}`}, []string{`{"v":1}`, `{"v":1,"next":{"v":2}}`}},
	}
	for _, tc := range cases {
		g, err := CompileSchema([]byte(tc.schema), nil)
		if err != nil {
			t.Errorf("%s: %v", tc.schema, err)
			continue
		}
		t.Logf("%s: %v", tc.schema, g)
		for _, s := range tc.ok {
			m := g.NewMatcher()
			if !m.Accept([]byte(s)) || !m.CanEnd() {
				t.Errorf("%s: refuses %q", tc.schema, s)
			}
		}
		for _, s := range tc.bad {
			m := g.NewMatcher()
			if m.Accept([]byte(s)) && m.CanEnd() {
				t.Errorf("%s: accepts %q", tc.schema, s)
			}
		}
	}
	g, err := JSONObject(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(g)
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}],"c":"x"}`} {
		m := g.NewMatcher()
		if !m.Accept([]byte(s)) || !m.CanEnd() {
			t.Errorf("json_object refuses %q", s)
		}
	}
}
