package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo/generate"
)

// alone runs a greedy generation of ids by itself, on a Session, with
// the model's defaults (its repetition penalty).
func alone(t testing.TB, g *generate.Generator, ids []int, maxTokens int) generate.Result {
	t.Helper()
	o := g.Defaults
	o.MaxTokens, o.Sampling.DoSample = maxTokens, false
	res, err := g.Generate(context.Background(), ids, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

const hello = `[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is Go?"}]`

// TestChatCompletion: a greedy chat completion is the checkpoint's own
// chat template rendered and tokenized, generated as alone; its shape
// is OpenAI's chat.completion.
func TestChatCompletion(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{})
	g := load(t, qwen3Tiny).g
	resp, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"model": "qwen3-tiny", "messages": %s, "max_tokens": 6, "temperature": 0, "user": "ignored", "store": false, "metadata": {"a": "b"}}`, hello))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	c := decode[completionResp](t, body)
	ids := chatIDs(t, g, hello, "")
	want := alone(t, g, ids, 6)
	if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Model != "qwen3-tiny" || c.Created == 0 || len(c.Choices) != 1 {
		t.Fatalf("completion %s", body)
	}
	ch := c.Choices[0]
	if ch.Message.Role != "assistant" || ch.Message.Content == nil || *ch.Message.Content != want.Text || ch.FinishReason != "length" || ch.Logprobs != nil {
		t.Errorf("choice %s, want content %q", body, want.Text)
	}
	if *c.Usage != (usage{len(ids), 6, len(ids) + 6}) || len(ids) != 20 {
		t.Errorf("usage %+v for a prompt of %d tokens", c.Usage, len(ids))
	}
	// The raw JSON has null logprobs and refusal, as OpenAI's does.
	var raw map[string]any
	json.Unmarshal(body, &raw)
	choice := raw["choices"].([]any)[0].(map[string]any)
	if v, ok := choice["logprobs"]; !ok || v != nil {
		t.Errorf("logprobs: %v", v)
	}
	if v, ok := choice["message"].(map[string]any)["refusal"]; !ok || v != nil {
		t.Errorf("refusal: %v", v)
	}
}

// TestChatStream: the stream's deltas add up to the whole completion;
// the first delta carries the role, the last the finish_reason, usage
// comes last with include_usage, then [DONE].
func TestChatStream(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{})
	req := fmt.Sprintf(`{"messages": %s, "max_tokens": 7, "temperature": 0}`, hello)
	_, whole := post(t, hs, "/v1/chat/completions", req)
	c := decode[completionResp](t, whole)
	resp, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 7, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}`, hello))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	s := collect(t, body)
	if s.content[0] != *c.Choices[0].Message.Content || s.role[0] != "assistant" || s.finish[0] != "length" {
		t.Errorf("streamed %q (%s, %s), whole %q", s.content[0], s.role[0], s.finish[0], *c.Choices[0].Message.Content)
	}
	if s.usage == nil || *s.usage != *c.Usage {
		t.Errorf("usage %+v, want %+v", s.usage, c.Usage)
	}
	// Every chunk but the last carries "usage": null.
	events, _ := sse(t, body)
	for _, ev := range events[:len(events)-1] {
		if !strings.Contains(string(ev), `"usage":null`) {
			t.Errorf("chunk without usage null: %s", ev)
		}
	}
	// Without include_usage there is no usage at all.
	_, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 3, "stream": true}`, hello))
	if strings.Contains(string(body), "usage") || collect(t, body).usage != nil {
		t.Errorf("usage without include_usage: %s", body)
	}
}

// TestChatN: n choices share the prompt; choice i samples with seed+i,
// so it equals a request of one choice with that seed; usage sums the
// completion tokens over the choices.
func TestChatN(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{})
	req := func(n, seed int, stream bool) string {
		return fmt.Sprintf(`{"messages": %s, "max_tokens": 5, "temperature": 1.2, "top_p": 0.9, "seed": %d, "n": %d, "stream": %v, "stream_options": {"include_usage": %v}}`, hello, seed, n, stream, stream)
	}
	_, body := post(t, hs, "/v1/chat/completions", req(3, 40, false))
	c := decode[completionResp](t, body)
	if len(c.Choices) != 3 {
		t.Fatalf("%d choices: %s", len(c.Choices), body)
	}
	total := 0
	for i, ch := range c.Choices {
		if ch.Index != i {
			t.Errorf("choice %d has index %d", i, ch.Index)
		}
		_, one := post(t, hs, "/v1/chat/completions", req(1, 40+i, false))
		o := decode[completionResp](t, one)
		if *o.Choices[0].Message.Content != *ch.Message.Content {
			t.Errorf("choice %d: %q, alone with seed %d: %q", i, *ch.Message.Content, 40+i, *o.Choices[0].Message.Content)
		}
		total += o.Usage.CompletionTokens
	}
	if c.Usage.CompletionTokens != total || c.Usage.TotalTokens != c.Usage.PromptTokens+total {
		t.Errorf("usage %+v, want %d completion tokens", c.Usage, total)
	}
	_, body = post(t, hs, "/v1/chat/completions", req(3, 40, true))
	s := collect(t, body)
	for i, ch := range c.Choices {
		if s.content[i] != *ch.Message.Content || s.role[i] != "assistant" || s.finish[i] != ch.FinishReason {
			t.Errorf("streamed choice %d: %q %q, whole %q %q", i, s.content[i], s.finish[i], *ch.Message.Content, ch.FinishReason)
		}
	}
	if s.usage == nil || *s.usage != *c.Usage {
		t.Errorf("streamed usage %+v, want %+v", s.usage, c.Usage)
	}
}

// TestChatLogprobs: every token's log-probability is the model's
// log-softmax before the penalties and the temperature, its bytes are
// the token's own (together, the content's bytes), and top_logprobs
// lists the most likely first; the stream carries the same.
func TestChatLogprobs(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{})
	g := load(t, qwen3Tiny).g
	req := fmt.Sprintf(`{"messages": %s, "max_tokens": 8, "temperature": 0, "presence_penalty": 1.5, "frequency_penalty": 2, "logprobs": true, "top_logprobs": 3}`, hello)
	_, body := post(t, hs, "/v1/chat/completions", req)
	c := decode[completionResp](t, body)
	ch := c.Choices[0]
	if ch.Logprobs == nil || len(ch.Logprobs.Content) != 8 {
		t.Fatalf("logprobs %s", body)
	}
	// The reference: the model's logits, step by step, on a Session.
	ids := chatIDs(t, g, hello, "")
	sess, err := graphs.NewSession(g.Model, graphs.Options{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	logits, err := sess.AppendInput(graphs.IDs(ids...))
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for k, lp := range ch.Logprobs.Content {
		ls := generate.LogSoftmax(nil, logits)
		best := slices.Clone(ls)
		slices.SortFunc(best, func(a, b float64) int { return -cmpFloat(a, b) })
		id := -1
		for i, v := range ls {
			if math.Abs(v-lp.Logprob) < 1e-9 && string(tokBytes(t, g, i)) == string(intsToBytes(lp.Bytes)) {
				id = i
			}
		}
		if id < 0 {
			t.Fatalf("token %d (%q, %g): no token of the model's log-softmax matches", k, lp.Token, lp.Logprob)
		}
		if len(lp.TopLogprobs) != 3 {
			t.Fatalf("token %d: %d top log-probabilities", k, len(lp.TopLogprobs))
		}
		for j, top := range lp.TopLogprobs {
			if math.Abs(top.Logprob-best[j]) > 1e-9 || top.Token != string(intsToBytes(top.Bytes)) && !strings.ContainsRune(top.Token, '\uFFFD') {
				t.Errorf("token %d top %d: %g (%q %v), want %g", k, j, top.Logprob, top.Token, top.Bytes, best[j])
			}
		}
		all = append(all, intsToBytes(lp.Bytes)...)
		if logits, err = sess.AppendInput(graphs.IDs(id)); err != nil {
			t.Fatal(err)
		}
	}
	if string(all) != *ch.Message.Content {
		t.Errorf("the tokens' bytes make %q, the content is %q", all, *ch.Message.Content)
	}
	// The penalties changed the choice: without them the greedy text differs.
	_, plain := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 8, "temperature": 0}`, hello))
	if p := decode[completionResp](t, plain); *p.Choices[0].Message.Content == *ch.Message.Content {
		t.Errorf("the penalties did not change the greedy text %q", *ch.Message.Content)
	}
	_, body = post(t, hs, "/v1/chat/completions", strings.Replace(req, `"logprobs": true`, `"logprobs": true, "stream": true`, 1))
	s := collect(t, body)
	if s.nlp[0] != 8 || string(intsToBytes(s.logprobs[0])) != *ch.Message.Content || s.content[0] != *ch.Message.Content {
		t.Errorf("stream: %d log-probabilities, bytes %q, content %q", s.nlp[0], intsToBytes(s.logprobs[0]), s.content[0])
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func intsToBytes(v []int) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

func tokBytes(t testing.TB, g *generate.Generator, id int) []byte {
	tb := tokenBytes{tok: g.Tokenizer}
	return tb.bytes(id)
}

// TestTokenBytes: a byte-level token that is half a character gives its
// byte, not U+FFFD.
func TestTokenBytes(t *testing.T) {
	g := load(t, qwen3Tiny).g
	ids, err := g.Tokenizer.Encode("𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🦫ꙮ", false)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	partial := false
	for _, id := range ids {
		b := tokBytes(t, g, id)
		all = append(all, b...)
		if s, _ := g.Tokenizer.Decode([]int{id}, false); strings.ContainsRune(s, '\uFFFD') {
			partial = true
		}
	}
	if string(all) != "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🦫ꙮ" || !partial {
		t.Errorf("bytes %q (a token split a character: %v)", all, partial)
	}
}

// TestChatStop: generation stops before a stop string, with
// finish_reason stop.
func TestChatStop(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{})
	_, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 12, "temperature": 0}`, hello))
	full := *decode[completionResp](t, body).Choices[0].Message.Content
	if len(full) < 6 {
		t.Fatalf("too short to cut: %q", full)
	}
	stop := full[3:5]
	_, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 12, "temperature": 0, "stop": [%q, "zzzz"]}`, hello, stop))
	c := decode[completionResp](t, body)
	if got := *c.Choices[0].Message.Content; got != full[:strings.Index(full, stop)] || c.Choices[0].FinishReason != "stop" {
		t.Errorf("stop %q: %q (%s), full %q", stop, got, c.Choices[0].FinishReason, full)
	}
	_, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 12, "temperature": 0, "stop": %q, "stream": true}`, hello, stop))
	if s := collect(t, body); s.content[0] != full[:strings.Index(full, stop)] || s.finish[0] != "stop" {
		t.Errorf("streamed with stop %q: %q (%s)", stop, s.content[0], s.finish[0])
	}
}

// TestChatRendering: the fine print of prompt rendering. Text parts
// concatenate; an assistant's null content beside tool_calls renders as
// ""; tool messages render; tools render through the template.
func TestChatRendering(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{})
	g := load(t, qwen3Tiny).g
	parts := `[{"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "Go?"}]}]`
	plain := `[{"role": "user", "content": "What is Go?"}]`
	_, a := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 4, "temperature": 0}`, parts))
	_, b := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 4, "temperature": 0}`, plain))
	ca, cb := decode[completionResp](t, a), decode[completionResp](t, b)
	if *ca.Choices[0].Message.Content != *cb.Choices[0].Message.Content || *ca.Usage != *cb.Usage {
		t.Errorf("text parts %s, the same text as a string %s", a, b)
	}
	tools := `[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]`
	sent := `[{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]`
	rendered := `[{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
		{"role": "tool", "content": "sunny", "tool_call_id": "call_1"}]`
	want := chatIDs(t, g, rendered, tools)
	resp, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "tools": %s, "max_tokens": 3, "temperature": 0}`, sent, tools))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	c := decode[completionResp](t, body)
	wantText := alone(t, g, want, 3).Text
	if c.Usage.PromptTokens != len(want) || *c.Choices[0].Message.Content != wantText {
		t.Errorf("prompt of %d tokens giving %q, want %d giving %q", c.Usage.PromptTokens, *c.Choices[0].Message.Content, len(want), wantText)
	}
	// tool_choice none: the tools are not rendered.
	_, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "tools": %s, "tool_choice": "none", "max_tokens": 1}`, sent, tools))
	if c := decode[completionResp](t, body); c.Usage.PromptTokens != len(chatIDs(t, g, rendered, "")) {
		t.Errorf("tool_choice none: a prompt of %d tokens, want %d", c.Usage.PromptTokens, len(chatIDs(t, g, rendered, "")))
	}
}

// TestPrefixReuse: a chat's next turn, sent with the answer of the
// first, takes the first turn's keys and values from the prefix cache.
func TestPrefixReuse(t *testing.T) {
	s, hs := newServer(t, qwen3Tiny, Options{})
	turn1 := `[{"role": "system", "content": "You are a terse assistant who answers every question in few words."}, {"role": "user", "content": "Tell me about the Go programming language and its history."}]`
	_, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 8, "temperature": 0}`, turn1))
	answer := *decode[completionResp](t, body).Choices[0].Message.Content
	before := s.Engine().Stats().CachedTokens
	turn2 := strings.TrimSuffix(turn1, "]") + fmt.Sprintf(`, {"role": "assistant", "content": %q}, {"role": "user", "content": "And Rust?"}]`, answer)
	_, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 4, "temperature": 0}`, turn2))
	c := decode[completionResp](t, body)
	if got := s.Engine().Stats().CachedTokens - before; got < 32 {
		t.Errorf("the second turn took %d of its %d prompt tokens from the cache", got, c.Usage.PromptTokens)
	}
}
