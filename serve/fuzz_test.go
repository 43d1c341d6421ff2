package serve

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecodeRequest: no request body makes the decoder, the prompt's
// rendering or the sampling options panic, and every refusal is a 4xx
// with a message.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model": "qwen3-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "temperature": 0.7, "top_p": 0.9, "n": 2, "stream": true, "stream_options": {"include_usage": true}}`,
		`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "stop": ["x", "y"], "seed": -3, "logprobs": true, "top_logprobs": 4, "logit_bias": {"12": -100}}`,
		`{"messages": [{"role": "user", "content": "w"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "r"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": "auto"}`,
		`{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}, "strict": true}}, "tool_choice": {"type": "function", "function": {"name": "f"}}}`,
		`{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}], "presence_penalty": 1, "frequency_penalty": -1, "max_completion_tokens": 3}`,
		`{"messages": []}`, `[]`, `{"messages": [{"role": 1}]}`, `{"n": 1e400}`, `{"seed": 1.0e3, "n": 2.0}`,
	} {
		f.Add([]byte(seed))
	}
	m := load(f, qwen3Tiny)
	s := &Server{g: m.g, opts: Options{Name: "qwen3-tiny", Parallel: 8, Context: 512}, format: hermesFormat, openID: -1, bytes: tokenBytes{tok: m.g.Tokenizer}}
	check := func(t *testing.T, what string, e *apiError) {
		if e != nil && (e.Status < 400 || e.Status >= 500 || e.Message == "" || e.Type == "") {
			t.Fatalf("%s: error %+v", what, e)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		o, err := parseObject(data, "")
		if check(t, "parse", err); err != nil {
			return
		}
		_, _, err = o.str("model")
		check(t, "model", err)
		sp, err := readSampling(o, 8, "max_tokens")
		check(t, "sampling", err)
		if err == nil {
			_, err = s.options(sp, 3)
			check(t, "options", err)
		}
		req, err := s.readChat(o)
		if check(t, "chat", err); err != nil {
			return
		}
		_, err = constraintFor(req.responseFormat, req.toolChoice, req.tools, s.format)
		check(t, "constraint", err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		in, err := s.chatPrompt(ctx, req)
		check(t, "prompt", err)
		if err == nil && len(in.IDs) == 0 {
			t.Fatal("an empty prompt rendered without error")
		}
		if req.N < 1 || req.N > 8 || req.TopLogprobs > maxTopLogprobs || len(req.Stop) > maxStops {
			t.Fatalf("out of bounds: %+v", req.sampling)
		}
	})
}

// FuzzToolParser: any text, cut anywhere, gives the same content and
// calls, and every call's arguments are JSON.
func FuzzToolParser(f *testing.F) {
	f.Add("Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n</tool_call>\n<tool_call>{\"name\": \"g\"}</tool_call> tail", 3)
	f.Add("<tool_call><tool_call></tool_call>{\"name\":\"x\",\"arguments\":\"{}\"}</tool_call>", 1)
	f.Fuzz(func(t *testing.T, text string, step int) {
		step = 1 + abs(step)%17
		run := func(step int) (string, []toolCall) {
			p := newToolParser(hermesFormat)
			var content string
			var calls []toolCall
			for i := 0; i < len(text); i += step {
				c, cs := p.push(text[i:min(len(text), i+step)])
				content += c
				calls = append(calls, cs...)
			}
			c, cs := p.finish()
			return content + c, append(calls, cs...)
		}
		c1, k1 := run(len(text) + 1)
		c2, k2 := run(step)
		if c1 != c2 || len(k1) != len(k2) {
			t.Fatalf("whole: %q %d calls; in pieces of %d: %q %d calls", c1, len(k1), step, c2, len(k2))
		}
		for i := range k1 {
			if k1[i].Name != k2[i].Name || k1[i].Arguments != k2[i].Arguments {
				t.Fatalf("call %d: %+v vs %+v", i, k1[i], k2[i])
			}
		}
	})
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
