package jinja

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"testing"
	"time"
)

// fuzzLimits keep every fuzz input to milliseconds and a few megabytes,
// while leaving the real templates (seeds) room to render in full.
var fuzzLimits = Limits{
	MaxSteps:          100_000,
	MaxLoopIterations: 10_000,
	MaxOutputBytes:    256 << 10,
	MaxAllocBytes:     4 << 20,
	MaxDepth:          32,
	MaxNesting:        64,
}

// fuzzHang is how long one input may run before FuzzRender calls it a
// hang. Under fuzzLimits an input takes milliseconds; the guard is minutes
// so that a loaded machine or -race never trips it.
const fuzzHang = 2 * time.Minute

// fuzzVars are the render variables FuzzRender chooses from, so that
// mutated templates find values to work on: every kind of message the
// reference templates handle. Templates disagree on the form of content
// (Qwen3 concatenates it as a string, SmolVLM iterates over its parts),
// hence three conversations.
var fuzzVars = []string{
	// plain alternating turns
	`{"messages": [
		{"role": "user", "content": "Hello, how are you?"},
		{"role": "assistant", "content": "Fine, thanks. 😀"},
		{"role": "user", "content": "  Tell me a joke  "}
	]}`,
	// system prompt, tools, tool calls and responses, thinking
	`{"messages": [
		{"role": "system", "content": "You are helpful. /think"},
		{"role": "user", "content": "What's the weather in Paris?"},
		{"role": "assistant", "content": "<think>\nCall the tool.\n</think>\n\n", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
		{"role": "tool", "content": "{\"temperature\": 21}", "tool_call_id": "call_1", "name": "get_weather"},
		{"role": "assistant", "content": "It is 21 °C.", "reasoning_content": "The tool said 21."},
		{"role": "user", "content": "Thanks! é"}
	],
	"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}],
	"xml_tools": [{"name": "get_weather", "description": "Current weather"}],
	"enable_thinking": false}`,
	// content as a list of parts, with images
	`{"messages": [
		{"role": "system", "content": [{"type": "text", "text": "Describe images."}]},
		{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]},
		{"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}
	]}`,
}

// fuzzCommon are variables every render gets (the reference snippets'
// variables among them).
const fuzzCommon = `{"add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
	"s": "aXb ab", "n": null, "l": [3, 1, 2], "d": {"k": 1, "b": [1, "x"]}, "f": 1.5, "i": 7, "t": "Tab\tline\nx"}`

// FuzzRender parses and renders arbitrary templates with fuzzLimits: the
// lexer, parser and renderer must never panic, must fail only with the
// package's error types, must respect the output limit, must stop with
// the LimitError of any limit whose counter it went past, and must not
// hang. The committed corpus (testdata/fuzz/FuzzRender)
// holds the vendored reference chat templates, hostile templates and the
// inputs that once failed; the hand-written reference snippets
// (testdata/python_ref.jsonl) are added as seeds too.
func FuzzRender(f *testing.F) {
	if file, err := os.Open("testdata/python_ref.jsonl"); err == nil {
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			v, err := DecodeJSON(sc.Bytes())
			if err != nil {
				f.Fatal(err)
			}
			src, _ := v.(*Dict).Get("template")
			f.Add(src.(string), byte(0))
		}
		file.Close()
	}
	var varSets []map[string]Value
	for _, js := range fuzzVars {
		vars := map[string]Value{}
		for _, src := range []string{fuzzCommon, js} {
			v, err := DecodeJSON([]byte(src))
			if err != nil {
				f.Fatal(err)
			}
			v.(*Dict).Range(func(k, v Value) bool {
				vars[k.(string)] = v
				return true
			})
		}
		varSets = append(varSets, vars)
	}
	clock := func() time.Time { return time.Date(2025, 7, 10, 12, 0, 0, 0, time.UTC) }
	f.Fuzz(func(t *testing.T, src string, which byte) {
		// fuzzLimits bound the work of every input to milliseconds; one
		// still running after fuzzHang is a hang (a limit that does not
		// trip): crash the worker, with every goroutine's stack, so the
		// fuzzer keeps the input. How long an input takes is not
		// checked: the limits are, through the counters below.
		watchdog := time.AfterFunc(fuzzHang, func() {
			debug.SetTraceback("all")
			panic(fmt.Sprintf("FuzzRender: input still running after %v: %q", fuzzHang, src))
		})
		defer watchdog.Stop()
		out, st, err := fuzzRender(src, varSets[int(which)%len(varSets)], clock)
		var le *LimitError
		if over := st.overLimits(); len(over) > 0 && (!errors.As(err, &le) || len(over) > 1 || over[0] != le.Limit) {
			t.Errorf("the render counted past %v, but stopped with %v", over, err)
		}
		if err == nil {
			if int64(len(out)) > fuzzLimits.MaxOutputBytes {
				t.Errorf("rendered %d bytes, more than MaxOutputBytes", len(out))
			}
			return
		}
		var se *SyntaxError
		var re *RuntimeError
		var te *TemplateError
		switch {
		case errors.As(err, &se), errors.As(err, &re), errors.As(err, &te):
		case errors.As(err, &le):
			if le.Limit == "" || le.Max <= 0 || le.Name != "fuzz.jinja" {
				t.Errorf("malformed limit error %+v", le)
			}
		default:
			t.Errorf("error of type %T: %v", err, err)
		}
	})
}

func fuzzRender(src string, vars map[string]Value, clock func() time.Time) (string, *state, error) {
	tmpl, err := ParseWithLimits("fuzz.jinja", src, fuzzLimits)
	if err != nil {
		return "", nil, err
	}
	return tmpl.render(context.Background(), vars, &RenderOptions{Now: clock})
}
