package serve

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestToolParser: the hermes parser splits text into content and calls,
// the same however the text is cut into pieces.
func TestToolParser(t *testing.T) {
	type call struct{ name, args string }
	for _, c := range []struct {
		name, text, content string
		calls               []call
	}{
		{"no call", "Hello, world.\n\n", "Hello, world.\n\n", nil},
		{"one call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", []call{{"get_weather", `{"city": "Paris"}`}}},
		{"text then calls", "Let me look.\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>",
			"Let me look.", []call{{"a", "{}"}, {"b", `{"x": [1, 2]}`}}},
		{"arguments as a string", `<tool_call>{"name": "f", "arguments": "{\"k\": 1}"}</tool_call>`, "", []call{{"f", `{"k": 1}`}}},
		{"parameters", `<tool_call>{"name": "f", "parameters": {"k": 1}}</tool_call>`, "", []call{{"f", `{"k": 1}`}}},
		{"no arguments", `<tool_call>{"name": "f"}</tool_call>`, "", []call{{"f", "{}"}}},
		{"not JSON stays content", "<tool_call>oops</tool_call> then", "<tool_call>oops</tool_call> then", nil},
		{"no name stays content", `<tool_call>{"arguments": {}}</tool_call>`, `<tool_call>{"arguments": {}}</tool_call>`, nil},
		{"unclosed but whole", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n", "", []call{{"f", `{"a": 1}`}}},
		{"unclosed and cut", "<tool_call>\n{\"name\": \"f\", \"argu", "<tool_call>\n{\"name\": \"f\", \"argu", nil},
		{"a tag's start that is not one", "a <tool or <tool_cal", "a <tool or <tool_cal", nil},
		{"text after a call", "<tool_call>{\"name\": \"f\"}</tool_call>\nDone.", "Done.", []call{{"f", "{}"}}},
	} {
		for _, step := range []int{1, 2, 3, 7, 1000} {
			p := newToolParser(hermesFormat)
			var content strings.Builder
			var calls []toolCall
			for i := 0; i < len(c.text); i += step {
				text, cs := p.push(c.text[i:min(len(c.text), i+step)])
				content.WriteString(text)
				calls = append(calls, cs...)
			}
			text, cs := p.finish()
			content.WriteString(text)
			calls = append(calls, cs...)
			if content.String() != c.content {
				t.Errorf("%s, pieces of %d: content %q, want %q", c.name, step, content.String(), c.content)
			}
			if len(calls) != len(c.calls) {
				t.Errorf("%s, pieces of %d: %d calls, want %d", c.name, step, len(calls), len(c.calls))
				continue
			}
			for i, got := range calls {
				if got.Name != c.calls[i].name || got.Arguments != c.calls[i].args || !strings.HasPrefix(got.ID, "call_") || len(got.ID) != 29 {
					t.Errorf("%s, pieces of %d: call %d is %+v, want %+v", c.name, step, i, got, c.calls[i])
				}
			}
		}
	}
	if detectToolFormat("{{ '<tool_call>' }} ... {{ '</tool_call>' }}") != hermesFormat || detectToolFormat("{{ messages }}") != nil {
		t.Error("detectToolFormat")
	}
}

const weatherTools = `[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
	{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}]`

// TestToolCalls: tool calls in the model's output become
// message.tool_calls (content null, finish_reason tool_calls), and in a
// stream OpenAI's deltas: the first of each call with its index, id,
// type and name, the later ones with its index and arguments. The model
// is made to call by a stand-in grammar behind tool_choice "required",
// which also checks the constraint the seam hands over.
func TestToolCalls(t *testing.T) {
	m := load(t, qwen3Tiny)
	calls := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>"
	gr := &forcing{t: t, g: m.g, text: func(Constraint) string { return calls }}
	_, hs := newServer(t, qwen3Tiny, Options{Grammar: gr})
	msgs := `[{"role": "user", "content": "Weather and time in Paris?"}]`
	_, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "tools": %s, "tool_choice": "required", "max_tokens": 100}`, msgs, weatherTools))
	c := decode[completionResp](t, body)
	msg := c.Choices[0].Message
	if msg.Content != nil || c.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 2 {
		t.Fatalf("completion %s", body)
	}
	for i, want := range [][2]string{{"get_weather", `{"city": "Paris"}`}, {"get_time", `{"zone": "CET"}`}} {
		tc := msg.ToolCalls[i]
		if tc.Type != "function" || !strings.HasPrefix(tc.ID, "call_") || tc.Function.Name != want[0] || tc.Function.Arguments != want[1] {
			t.Errorf("call %d: %+v, want %v", i, tc, want)
		}
	}
	// The constraint: a tool call of either tool, in the template's format.
	c0 := gr.asked[0]
	var schema struct {
		AnyOf []struct {
			Properties struct {
				Name      struct{ Const string } `json:"name"`
				Arguments json.RawMessage        `json:"arguments"`
			} `json:"properties"`
			Required []string `json:"required"`
		} `json:"anyOf"`
	}
	if err := json.Unmarshal(c0.Schema, &schema); err != nil || c0.Field != "tool_choice" || c0.Kind != "tool_call" || c0.Prefix != "<tool_call>\n" || c0.Suffix != "\n</tool_call>" ||
		len(schema.AnyOf) != 2 || schema.AnyOf[1].Properties.Name.Const != "get_time" || !strings.Contains(string(schema.AnyOf[0].Properties.Arguments), `"city"`) {
		t.Errorf("constraint %+v (%s): %v", c0, c0.Schema, err)
	}
	// A named function: its schema alone.
	post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "tools": %s, "tool_choice": {"type": "function", "function": {"name": "get_time"}}, "max_tokens": 100}`, msgs, weatherTools))
	if c1 := gr.asked[1]; c1.Name != "get_time" || strings.Count(string(c1.Schema), `"const"`) != 1 {
		t.Errorf("named constraint %+v %s", c1, c1.Schema)
	}
	// The stream, with two choices: each its own processor.
	made := gr.made
	_, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "tools": %s, "tool_choice": "required", "max_tokens": 100, "stream": true, "n": 2}`, msgs, weatherTools))
	s := collect(t, body)
	if gr.made-made != 2 {
		t.Errorf("%d processors made for 2 choices", gr.made-made)
	}
	for i := range 2 {
		cs := s.calls[i]
		if s.finish[i] != "tool_calls" || s.content[i] != "" || len(cs) != 2 || cs[0].name != "get_weather" || cs[0].args != `{"city": "Paris"}` || cs[1].name != "get_time" || cs[1].args != `{"zone": "CET"}` {
			t.Errorf("choice %d streamed %+v, content %q, finish %s", i, cs, s.content[i], s.finish[i])
		}
	}
	// parallel_tool_calls false keeps the first call.
	_, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "tools": %s, "tool_choice": "required", "parallel_tool_calls": false, "max_tokens": 100}`, msgs, weatherTools))
	if c := decode[completionResp](t, body); len(c.Choices[0].Message.ToolCalls) != 1 {
		t.Errorf("parallel_tool_calls false: %s", body)
	}
	// Text before a call is content.
	calls = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"
	_, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "tools": %s, "tool_choice": "required", "max_tokens": 100}`, msgs, weatherTools))
	if c := decode[completionResp](t, body); c.Choices[0].Message.Content == nil || *c.Choices[0].Message.Content != "Let me check." || len(c.Choices[0].Message.ToolCalls) != 1 {
		t.Errorf("content and a call: %s", body)
	}
}

// TestGrammarSeam: without a grammar, the requests that need one are
// refused naming the field; with one, response_format reaches it and
// its output is the content.
func TestGrammarSeam(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{})
	msgs := `[{"role": "user", "content": "Give me JSON."}]`
	for _, c := range []struct{ extra, param string }{
		{`"response_format": {"type": "json_object"}`, "response_format"},
		{`"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}, "strict": true}}`, "response_format"},
		{`"tools": ` + weatherTools + `, "tool_choice": "required"`, "tool_choice"},
		{`"tools": ` + weatherTools + `, "tool_choice": {"type": "function", "function": {"name": "get_time"}}`, "tool_choice"},
	} {
		resp, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, %s}`, msgs, c.extra))
		if e := wantError(t, resp, body, 400, c.param); e.Error.Code == nil || *e.Error.Code != "unsupported_parameter" {
			t.Errorf("%s: %s", c.extra, body)
		}
	}
	for _, extra := range []string{`"response_format": {"type": "text"}`, `"tools": ` + weatherTools + `, "tool_choice": "auto"`, `"tools": ` + weatherTools} {
		if resp, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, %s, "max_tokens": 2}`, msgs, extra)); resp.StatusCode != 200 {
			t.Errorf("%s: %s", extra, body)
		}
	}
	m := load(t, qwen3Tiny)
	gr := &forcing{t: t, g: m.g, text: func(c Constraint) string { return `{"answer": 42}` }}
	_, hs = newServer(t, qwen3Tiny, Options{Grammar: gr})
	_, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object", "properties": {"answer": {"type": "integer"}}}, "strict": true}}, "max_tokens": 50}`, msgs))
	c := decode[completionResp](t, body)
	if *c.Choices[0].Message.Content != `{"answer": 42}` || c.Choices[0].FinishReason != "stop" {
		t.Errorf("json_schema: %s", body)
	}
	if a := gr.asked[0]; a.Field != "response_format" || a.Kind != "json_schema" || a.Name != "answer" || !a.Strict || !strings.Contains(string(a.Schema), `"integer"`) {
		t.Errorf("constraint %+v", a)
	}
}

// TestToolChoiceNone: the opening tag cannot be drawn.
func TestToolChoiceNone(t *testing.T) {
	s, _ := newServer(t, qwen3Tiny, Options{})
	if s.openID != 151657 {
		t.Fatalf("the <tool_call> token is %d", s.openID)
	}
}

// TestSchemaGrammar: with package grammar plugged in (as gozoo serve
// does), a random-weight model's json_schema answer validates, and a
// forced tool call names an allowed function with arguments that fit
// its parameters.
func TestSchemaGrammar(t *testing.T) {
	m := load(t, qwen3Tiny)
	_, hs := newServer(t, qwen3Tiny, Options{Grammar: SchemaGrammar(m.g)})
	msgs := `[{"role": "user", "content": "Give me JSON."}]`
	schema := `{"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 99}, "tag": {"enum": ["a", "b"]}}, "required": ["answer", "tag"]}`
	resp, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": %s, "strict": true}}, "max_tokens": 200}`, msgs, schema))
	if resp.StatusCode != 200 {
		t.Fatalf("json_schema: %s", body)
	}
	c := decode[completionResp](t, body)
	var got struct {
		Answer *int    `json:"answer"`
		Tag    *string `json:"tag"`
	}
	if err := json.Unmarshal([]byte(*c.Choices[0].Message.Content), &got); err != nil || got.Answer == nil || *got.Answer < 0 || *got.Answer > 99 || got.Tag == nil || (*got.Tag != "a" && *got.Tag != "b") {
		t.Errorf("json_schema content %q (finish %s): %v", *c.Choices[0].Message.Content, c.Choices[0].FinishReason, err)
	}
	// A random model writes strings until it is cut: the city is an enum.
	tools := `[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"]}}},
		{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]`
	resp, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "tools": %s, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "max_tokens": 300}`, msgs, tools))
	if resp.StatusCode != 200 {
		t.Fatalf("tool_choice: %s", body)
	}
	c = decode[completionResp](t, body)
	calls := c.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "get_weather" || c.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("tool_choice: %s", body)
	}
	var args struct {
		City *string `json:"city"`
	}
	if err := json.Unmarshal([]byte(calls[0].Function.Arguments), &args); err != nil || args.City == nil || (*args.City != "Paris" && *args.City != "Rome") {
		t.Errorf("arguments %q: %v", calls[0].Function.Arguments, err)
	}
}
