package jinja

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests spell out, one semantic point per row, what the reference
// corpus (python_ref_test.go) checks in bulk. Every expected value here was
// confirmed with Python's jinja2.

func mustRender(t *testing.T, src string, vars map[string]Value) string {
	t.Helper()
	got, err := render(src, vars, func() time.Time { return time.Date(2025, 7, 10, 12, 0, 0, 0, time.UTC) })
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	return got
}

func jsonValue(t *testing.T, s string) Value {
	t.Helper()
	v, err := DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRenderSemantics(t *testing.T) {
	msgs := map[string]Value{"messages": jsonValue(t, `[{"role": "system", "content": "S"}, {"role": "user", "content": " hi "}]`)}
	for _, tc := range []struct {
		name, src string
		vars      map[string]Value
		want      string
	}{
		// whitespace control as transformers configures it
		{"trim_blocks eats the newline after a tag", "{% if true %}\nx{% endif %}\n", nil, "x"},
		{"lstrip_blocks removes indentation before a tag", "a\n    {% if true %}b{% endif %}", nil, "a\nb"},
		{"lstrip_blocks only at line start", "a  {% if true %}b{% endif %}", nil, "a  b"},
		{"not before {{ }}", "  {{ 'v' }}", nil, "  v"},
		{"dash strips all whitespace", "a \n {{- 'b' -}} \n c", nil, "abc"},
		{"plus keeps indentation", "a\n  {%+ if true %}b{% endif %}", nil, "a\n  b"},
		{"one trailing newline dropped", "x\n\n", nil, "x\n"},
		{"comments trim too", "{# c #}\nx", nil, "x"},
		{"raw", "{% raw %}{{ not evaluated }}{% endraw %}", nil, "{{ not evaluated }}"},

		// Python str() and repr()
		{"None True False", "{{ none }} {{ true }} {{ false }}", nil, "None True False"},
		{"ints stay ints", "{{ 42 }} {{ 7 // 2 }} {{ 2 ** 10 }}", nil, "42 3 1024"},
		{"floats print like Python", "{{ 1.0 }} {{ 1/3 }} {{ 1e16 }} {{ 0.00001 }}", nil, "1.0 0.3333333333333333 1e+16 1e-05"},
		{"repr picks quotes", `{{ ["it's", 'say "hi"', 'a'] }}`, nil, `["it's", 'say "hi"', 'a']`},
		{"dict string keeps order", "{{ d | string }}", map[string]Value{"d": jsonValue(t, `{"z": 1, "a": [null, true, 2.5]}`)}, "{'z': 1, 'a': [None, True, 2.5]}"},
		{"tuples", "{{ (1,) }} {{ (1, 2) }} {{ () }}", nil, "(1,) (1, 2) ()"},
		{"namespace repr", "{{ namespace(a=1) }}", nil, "<Namespace {'a': 1}>"},

		// operators
		{"filters bind tighter than +", "{{ 'a' + ' b ' | trim + 'c' }}", nil, "abc"},
		{"~ stringifies", "{{ 'a' ~ 1 ~ none ~ nothing }}", nil, "a1None"},
		{"and/or return operands", "{{ 0 or 'x' }} {{ 1 and [] }}", nil, "x []"},
		{"chained comparison", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}", nil, "True False"},
		{"in", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 0} }} {{ 1 not in [1] }}", nil, "True True True False"},
		{"numeric equality across types", "{{ 1 == 1.0 }} {{ true == 1 }} {{ (1, 2) == [1, 2] }}", nil, "True True False"},
		{"inline if without else", "[{{ 'x' if false }}]", nil, "[]"},

		// variables and scopes
		{"set in if is visible after", "{% if true %}{% set x = 1 %}{% endif %}{{ x }}", nil, "1"},
		{"set in for is not", "{% set x = 0 %}{% for i in [1] %}{% set x = i %}{% endfor %}{{ x }}", nil, "0"},
		{"namespace carries state out of loops", "{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", nil, "6"},
		{"render vars shadow globals", "{{ range }}", map[string]Value{"range": "mine"}, "mine"},
		{"macro with default", "{% macro m(a, b='d') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, b=2) }}", nil, "1d12"},
		{"call block", "{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}in{% endcall %}", nil, "[in]"},

		// loops
		{"loop variables", "{% for x in 'ab' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }};{% endfor %}", nil, "10TrueFalse22;21FalseTrue21;"},
		{"loop filter counts filtered items", "{% for x in range(6) if x is even %}{{ loop.index }}{% endfor %}", nil, "123"},
		{"else on empty", "{% for x in [] %}x{% else %}none{% endfor %}", nil, "none"},
		{"break and continue", "{% for x in range(9) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", nil, "023"},
		{"reverse iteration by slice", "{% for m in messages[::-1] %}{{ m.role }} {% endfor %}", msgs, "user system "},
		{"previtem and nextitem", "{% for x in [1, 2] %}{{ loop.previtem }}/{{ loop.nextitem }} {% endfor %}", nil, "/2 1/ "},
		{"unpacking", "{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}", nil, "a=1"},

		// indexing and attribute lookup
		{"negative index and slices", "{{ 'hello'[-1] }} {{ 'hello'[1:3] }} {{ [1, 2, 3][::2] }}", nil, "o el [1, 3]"},
		{"slices count characters, not bytes", "{{ 'héllo😀'[1] }}{{ 'héllo😀'[-1] }}", nil, "é😀"},
		{"missing key or index is undefined", "[{{ d.nope }}][{{ [1][5] }}][{{ none.x }}]", map[string]Value{"d": NewDict()}, "[][][]"},
		{"attribute falls back to key", "{{ messages[0].content }}{{ messages[0]['role'] }}", msgs, "Ssystem"},
		{"dict methods win over keys for .name", "{{ d.items is defined }} {{ d['items'] }}", map[string]Value{"d": jsonValue(t, `{"items": "key"}`)}, "True key"},

		// string methods with Python semantics
		{"split without separator", "{{ ' a  b '.split() }}", nil, "['a', 'b']"},
		{"strip with chars", "{{ 'xxaxx'.strip('x') }} {{ '\\n\\nx\\n'.strip('\\n') }}", nil, "a x"},
		{"capitalize lowers the rest", "{{ 'tOOL'.capitalize() }} {{ 'tOOL' | capitalize }}", nil, "Tool Tool"},
		{"startswith tuple", "{{ 'abc'.startswith(('x', 'a')) }}", nil, "True"},
		{"format", "{{ '{}-{:>3}'.format(1, 'x') }} {{ '%s=%d' % ('a', 2) }}", nil, "1-  x a=2"},

		// filters
		{"trim stringifies", "{{ none | trim }} {{ 12345 | trim }}", nil, "None 12345"},
		{"length", "{{ 'héllo' | length }} {{ messages | length }}", msgs, "5 2"},
		{"tojson as transformers", "{{ d | tojson }}", map[string]Value{"d": jsonValue(t, `{"b": "é<>", "a": [1, 2.0, null]}`)}, `{"b": "é<>", "a": [1, 2.0, null]}`},
		{"tojson indent", "{{ [1] | tojson(indent=2) }}", nil, "[\n  1\n]"},
		{"items", "{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}", map[string]Value{"d": jsonValue(t, `{"x": 1, "y": 2}`)}, "x1y2"},
		{"default", "{{ nothing | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) }}", nil, "d None d"},
		{"selectattr map join", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | map('trim') | join(',') }}", msgs, "hi"},

		// tests
		{"type tests", "{{ 'a' is string }} {{ 1 is integer }} {{ true is integer }} {{ {} is mapping }} {{ none is none }}", nil, "True True False True True"},
		{"defined", "{{ x is defined }} {{ y is not defined }}", map[string]Value{"x": 1}, "True True"},
		{"tests with arguments", "{{ 9 is divisibleby 3 }} {{ 2 is gt(1) }} {{ 'a' is in 'abc' }}", nil, "True True True"},

		// globals
		{"raise_exception is not reached when the branch is not taken", "{% if false %}{{ raise_exception('x') }}{% endif %}ok", nil, "ok"},
		{"strftime_now reads the injected clock", "{{ strftime_now('%d %B %Y') }}", nil, "10 July 2025"},
		{"generation tag renders its body", "{% generation %}body{% endgeneration %}", nil, "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustRender(t, tc.src, tc.vars); got != tc.want {
				t.Errorf("%s\n got: %q\nwant: %q", tc.src, got, tc.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		vars      map[string]Value
		kind      string // RuntimeError kind; "TemplateError" for raise_exception
		msg       string // exact Error() text
	}{
		{"raise_exception is exactly the message", "line\n{{ raise_exception('Roles must alternate!') }}", nil, "TemplateError", "Roles must alternate!"},
		{"str + None", "{{ 'a' + x }}", map[string]Value{"x": nil}, "TypeError", `TypeError: can only concatenate str (not "NoneType") to str (t line 1)`},
		{"in None", "\n\n{{ 'x' in c }}", map[string]Value{"c": nil}, "TypeError", "TypeError: argument of type 'NoneType' is not iterable (t line 3)"},
		{"attribute of undefined", "{{ messages[0].role }}", map[string]Value{"messages": NewList()}, "UndefinedError", "UndefinedError: list object has no element 0 (t line 1)"},
		{"calling undefined", "{{ nope() }}", nil, "UndefinedError", "UndefinedError: 'nope' is undefined (t line 1)"},
		{"unsafe method", "{{ [].append(1) }}", nil, "SecurityError", "SecurityError: access to attribute 'append' of 'list' object is unsafe. (t line 1)"},
		{"division by zero", "{{ 1 / 0 }}", nil, "ZeroDivisionError", "ZeroDivisionError: division by zero (t line 1)"},
		{"set attribute on non-namespace", "{% set d = {} %}{% set d.x = 1 %}", nil, "TemplateRuntimeError", "TemplateRuntimeError: cannot assign attribute on non-namespace object (t line 1)"},
		{"unknown filter", "{{ 1 | nope }}", nil, "TemplateAssertionError", "TemplateAssertionError: No filter named 'nope'. (t line 1)"},
		{"range limit", "{{ range(200000) }}", nil, "OverflowError", "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000). (t line 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(tc.src, tc.vars, time.Now)
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.msg {
				t.Errorf("message %q, want %q", err.Error(), tc.msg)
			}
			var te *TemplateError
			var re *RuntimeError
			switch {
			case tc.kind == "TemplateError":
				if !errors.As(err, &te) {
					t.Errorf("got %T, want *TemplateError", err)
				}
			case !errors.As(err, &re) || re.Kind != tc.kind:
				t.Errorf("got %T %v, want RuntimeError of kind %s", err, err, tc.kind)
			}
		})
	}
}

func TestSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		src       string
		line, col int
		msg       string
	}{
		{"ok\n  {% if %}", 2, 9, "Expected an expression, got 'end of statement block'"},
		{"{{ 1 + }}", 1, 8, "unexpected 'end of print statement'"},
		{"{% for x in y %}\n", 1, 17, "Unexpected end of template. Jinja was looking for the following tags: 'endfor' or 'else'. The innermost block that needs to be closed is 'for'."},
		{"é {% endif %}", 1, 6, "Encountered unknown tag 'endif'."},
		{"{{ 'abc }}", 1, 4, `unexpected char "'" at 3`},
		{"{# never closed", 1, 1, "Missing end of comment tag"},
		{"{{ (1 }}", 1, 7, "unexpected '}', expected ')'"},
		{"{% include 'x' %}", 1, 4, "the 'include' tag is not supported by this engine (chat templates are self-contained)"},
	} {
		_, err := Parse("f.jinja", tc.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: got %v, want a *SyntaxError", tc.src, err)
			continue
		}
		if se.Line != tc.line || se.Col != tc.col || se.Msg != tc.msg || se.Name != "f.jinja" {
			t.Errorf("%q: got %d:%d %q, want %d:%d %q", tc.src, se.Line, se.Col, se.Msg, tc.line, tc.col, tc.msg)
		}
		if want := "f.jinja:"; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %q does not start with %q", tc.src, err, want)
		}
	}
}

func TestFloatRepr(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1, "1.0"}, {-2.5, "-2.5"}, {0.1, "0.1"},
		{1.0 / 3, "0.3333333333333333"}, {1e15, "1000000000000000.0"}, {1e16, "1e+16"},
		{1.5e-7, "1.5e-07"}, {0.0001, "0.0001"}, {0.00001, "1e-05"}, {123456789.125, "123456789.125"},
		{1e100, "1e+100"}, {math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}, {math.NaN(), "nan"},
	} {
		if got := floatRepr(tc.f); got != tc.want {
			t.Errorf("floatRepr(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestStrRepr(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "''",
		"it's":               `"it's"`,
		`say "hi"`:           `'say "hi"'`,
		`both ' and "`:       `'both \' and "'`,
		"tab\tnl\ncr\r\\":    `'tab\tnl\ncr\r\\'`,
		"\x00\x7f\u00a0":     `'\x00\x7f\xa0'`,
		"\u200b\u2028":       `'\u200b\u2028'`,
		"é日本😀":               "'é日本😀'",
		"\U000e0001":         `'\U000e0001'`,
		"Unit — °C or °F.":   "'Unit — °C or °F.'",
		"back\\slash 'q' \"": `'back\\slash \'q\' "'`,
	} {
		if got := strRepr(in); got != want {
			t.Errorf("strRepr(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	v := jsonValue(t, `{"z": 1, "a": 2.0, "m": -0, "big": 12345678901234567890, "e": 1e2, "n": null, "t": true, "l": [], "o": {}, "s": "é\u00e9"}`)
	d := v.(*Dict)
	var keys []string
	d.Range(func(k, _ Value) bool {
		keys = append(keys, k.(string))
		return true
	})
	if got := strings.Join(keys, ","); got != "z,a,m,big,e,n,t,l,o,s" {
		t.Errorf("key order %s", got)
	}
	for key, want := range map[string]Value{"z": int64(1), "a": 2.0, "m": int64(0), "big": 1.2345678901234567e19, "e": 100.0, "n": nil, "t": true, "s": "éé"} {
		if got, _ := d.Get(key); got != want {
			t.Errorf("%s = %#v, want %#v", key, got, want)
		}
	}
	dup := jsonValue(t, `{"a": 1, "b": 2, "a": 3}`)
	if got := repr(nil, dup); got != "{'a': 3, 'b': 2}" {
		t.Errorf("duplicate keys: %s (Python keeps the first position, last value)", got)
	}
	for _, bad := range []string{``, `{`, `{"a": 1} x`, `[1,]`, `{"a" 1}`} {
		if _, err := DecodeJSON([]byte(bad)); err == nil {
			t.Errorf("DecodeJSON(%q): no error", bad)
		}
	}
}

func TestValueOf(t *testing.T) {
	type part struct {
		Type string `json:"type"`
		Text string `json:"text,omitempty"`
	}
	type msg struct {
		Role    string `json:"role"`
		Content []part `json:"content"`
	}
	for _, tc := range []struct {
		in   any
		want string
	}{
		{nil, "None"},
		{42, "42"},
		{uint8(7), "7"},
		{float32(0.5), "0.5"},
		{[]any{1, "a", nil, true}, "[1, 'a', None, True]"},
		{[]string(nil), "None"},
		{map[string]any{"b": 1, "a": 2}, "{'a': 2, 'b': 1}"},
		{msg{Role: "user", Content: []part{{Type: "image"}, {Type: "text", Text: "hi"}}}, "{'role': 'user', 'content': [{'type': 'image'}, {'type': 'text', 'text': 'hi'}]}"},
		{[]msg{{Role: "a"}}, "[{'role': 'a', 'content': None}]"},
	} {
		v, err := ValueOf(tc.in)
		if err != nil {
			t.Errorf("ValueOf(%#v): %v", tc.in, err)
			continue
		}
		if got := repr(nil, v); got != tc.want {
			t.Errorf("ValueOf(%#v) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if _, err := ValueOf(func() {}); err == nil {
		t.Error("ValueOf(func): no error")
	}
}

func TestStrftime(t *testing.T) {
	tm := time.Date(2025, 7, 4, 9, 5, 3, 0, time.UTC)
	for format, want := range map[string]string{
		"%d %B %Y":       "04 July 2025",
		"%d %b %Y":       "04 Jul 2025",
		"%B %d, %Y":      "July 04, 2025",
		"%Y-%m-%d":       "2025-07-04",
		"%H:%M:%S %p %I": "09:05:03 AM 09",
		"%a %A %j %y":    "Fri Friday 185 25",
		"%-d/%-m %e":     "4/7  4",
		"100%% %Z%z":     "100% ",
	} {
		if got := Strftime(tm, format); got != want {
			t.Errorf("Strftime(%q) = %q, want %q", format, got, want)
		}
	}
}

func TestNewFunc(t *testing.T) {
	greet := NewFunc("greet", func(args []Value, kwargs map[string]Value) (Value, error) {
		return "hello " + toStr(nil, args[0]) + toStr(nil, kwargs["punct"]), nil
	})
	got := mustRender(t, "{{ greet('you', punct='!') }}", map[string]Value{"greet": greet})
	if got != "hello you!" {
		t.Errorf("got %q", got)
	}
}

// TestConcurrentRender renders one parsed template from many goroutines:
// each render has its own namespace objects and loop state.
func TestConcurrentRender(t *testing.T) {
	tmpl, err := Parse("c", "{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}{{ xs | select('odd') | list | length }}")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 1; g <= 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			items := make([]Value, g)
			for i := range items {
				items[i] = int64(1)
			}
			want := toStr(nil, int64(g)) + toStr(nil, int64(g))
			for i := 0; i < 50; i++ {
				got, err := tmpl.Render(map[string]Value{"xs": NewList(items...)}, nil)
				if err != nil || got != want {
					t.Errorf("goroutine %d: got %q %v, want %q", g, got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestSlices covers slicing by character with every sign of step, on
// ASCII and non-ASCII strings and lists (expected values from Python).
// The first row is the fuzzer's first find.
func TestSlices(t *testing.T) {
	for src, want := range map[string]string{
		"{{ ''[::-1] }}|{{ []|list|reverse|list }}":                                                                            "|[]",
		"{{ 'é'[::-1] }}|{{ ''[1:] }}|{{ 'é'[5:] }}":                                                                           "é||",
		"{{ 'abc'[::-1] }}|{{ 'abc'[::-100] }}|{{ 'abc'[5:] }}":                                                                "cba|c|",
		"{{ 'héllo'[::-2] }}|{{ 'héllo'[1:4] }}|{{ 'héllo'[3:1:-1] }}|{{ 'héllo'[-2:] }}|{{ 'héllo'[::3] }}":                   "olh|éll|ll|lo|hl",
		"{{ [1, 2, 3][::-2] }}|{{ [][::-1] }}|{{ [1, 2, 3][10:0:-1] }}|{{ (1, 2)[1:] }}":                                       "[3, 1]|[]|[3, 2]|(2,)",
		"{{ 'abc'[::9223372036854775807] }}|{{ 'abc'[::-9223372036854775807 - 1] }}|{{ 'héllo'[::-9223372036854775807 - 1] }}": "a|c|o",
		"{{ 'héllo'[-100:100] }}|{{ 'héllo'[4:-100:-1] }}|{{ 'héllo'[-1::-1] }}":                                               "héllo|olléh|olléh",
	} {
		if got := mustRender(t, src, nil); got != want {
			t.Errorf("%s = %q, want %q", src, got, want)
		}
	}
}

// TestRangeExtremes: range() counts its items without overflowing, so
// ranges over the whole int64 line are refused and huge steps work.
func TestRangeExtremes(t *testing.T) {
	for src, want := range map[string]string{
		"{{ range(0, 10, 9223372036854775807) | list }}":                              "[0]",
		"{{ range(9, -1, -9223372036854775807 - 1) | list }}":                         "[9]",
		"{{ range(-9223372036854775807 - 1, -9223372036854775807) | list }}":          "[-9223372036854775808]",
		"{{ range(9223372036854775806, 9223372036854775807) | list }}":                "[9223372036854775806]",
		"{{ range(3, 0, -1) | list }}|{{ range(0) | list }}|{{ range(5, 1) | list }}": "[3, 2, 1]|[]|[]",
	} {
		if got := mustRender(t, src, nil); got != want {
			t.Errorf("%s = %q, want %q", src, got, want)
		}
	}
	for _, src := range []string{
		"{{ range(-9223372036854775807 - 1, 9223372036854775807) }}",
		"{{ range(9223372036854775807, -9223372036854775807 - 1, -1) }}",
		"{{ range(100001) }}",
	} {
		if _, err := render(src, nil, time.Now); err == nil || !strings.Contains(err.Error(), "MAX_RANGE (100000)") {
			t.Errorf("%s: got %v, want the MAX_RANGE error", src, err)
		}
	}
}
