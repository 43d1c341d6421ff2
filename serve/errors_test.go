package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/zoo/generate"
)

// TestRequestErrors: every invalid request is a 400 (or 404, 405, 413)
// in OpenAI's error shape naming the field; unknown fields are ignored.
func TestRequestErrors(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{Parallel: 4, MaxBody: 64 << 10})
	user := `[{"role": "user", "content": "hi"}]`
	chat := func(extra string) string { return fmt.Sprintf(`{"messages": %s, "max_tokens": 2%s}`, user, extra) }
	for _, c := range []struct {
		name, path, body string
		status           int
		param            string
	}{
		{"not JSON", "/v1/chat/completions", `{"messages": `, 400, ""},
		{"not an object", "/v1/chat/completions", `[1, 2]`, 400, ""},
		{"no messages", "/v1/chat/completions", `{"model": "qwen3-tiny"}`, 400, "messages"},
		{"empty messages", "/v1/chat/completions", `{"messages": []}`, 400, "messages"},
		{"messages not an array", "/v1/chat/completions", `{"messages": "hi"}`, 400, "messages"},
		{"message not an object", "/v1/chat/completions", `{"messages": ["hi"]}`, 400, "messages[0]"},
		{"unknown role", "/v1/chat/completions", `{"messages": [{"role": "wizard", "content": "hi"}]}`, 400, "messages[0].role"},
		{"content a number", "/v1/chat/completions", `{"messages": [{"role": "user", "content": 7}]}`, 400, "messages[0].content"},
		{"user content null", "/v1/chat/completions", `{"messages": [{"role": "user", "content": null}]}`, 400, "messages[0].content"},
		{"part without text", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "text"}]}]}`, 400, "messages[0].content[0].text"},
		{"audio part", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}`, 400, "messages[0].content[0].type"},
		{"image to a text model", "/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}`, 400, "messages[0].content[0].image_url.url"},
		{"image in a system message", "/v1/chat/completions", `{"messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, 400, "messages[0].content[0]"},
		{"tool message without id", "/v1/chat/completions", `{"messages": [{"role": "tool", "content": "x"}]}`, 400, "messages[0].tool_call_id"},
		{"tool_calls not an array", "/v1/chat/completions", `{"messages": [{"role": "assistant", "content": null, "tool_calls": {}}]}`, 400, "messages[0].tool_calls"},
		{"tool call without function", "/v1/chat/completions", `{"messages": [{"role": "assistant", "tool_calls": [{"id": "1", "type": "function"}]}]}`, 400, "messages[0].tool_calls[0].function"},
		{"temperature a string", "/v1/chat/completions", chat(`, "temperature": "hot"`), 400, "temperature"},
		{"temperature too high", "/v1/chat/completions", chat(`, "temperature": 3`), 400, "temperature"},
		{"top_p above 1", "/v1/chat/completions", chat(`, "top_p": 1.5`), 400, "top_p"},
		{"n zero", "/v1/chat/completions", chat(`, "n": 0`), 400, "n"},
		{"n over --parallel", "/v1/chat/completions", chat(`, "n": 5`), 400, "n"},
		{"n fractional", "/v1/chat/completions", chat(`, "n": 1.5`), 400, "n"},
		{"max_tokens zero", "/v1/chat/completions", chat(`, "max_tokens": 0`), 400, "max_tokens"},
		{"max_completion_tokens a string", "/v1/chat/completions", chat(`, "max_completion_tokens": "9"`), 400, "max_completion_tokens"},
		{"seed a string", "/v1/chat/completions", chat(`, "seed": "1"`), 400, "seed"},
		{"stop a number", "/v1/chat/completions", chat(`, "stop": 5`), 400, "stop"},
		{"too many stops", "/v1/chat/completions", chat(`, "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]`), 400, "stop"},
		{"stream a string", "/v1/chat/completions", chat(`, "stream": "yes"`), 400, "stream"},
		{"stream_options not an object", "/v1/chat/completions", chat(`, "stream": true, "stream_options": true`), 400, "stream_options"},
		{"include_usage a string", "/v1/chat/completions", chat(`, "stream": true, "stream_options": {"include_usage": "y"}`), 400, "stream_options.include_usage"},
		{"presence_penalty out of range", "/v1/chat/completions", chat(`, "presence_penalty": -3`), 400, "presence_penalty"},
		{"frequency_penalty a string", "/v1/chat/completions", chat(`, "frequency_penalty": "x"`), 400, "frequency_penalty"},
		{"logprobs a number", "/v1/chat/completions", chat(`, "logprobs": 1`), 400, "logprobs"},
		{"top_logprobs without logprobs", "/v1/chat/completions", chat(`, "top_logprobs": 2`), 400, "top_logprobs"},
		{"top_logprobs over 20", "/v1/chat/completions", chat(`, "logprobs": true, "top_logprobs": 21`), 400, "top_logprobs"},
		{"logit_bias key not an id", "/v1/chat/completions", chat(`, "logit_bias": {"abc": 1}`), 400, "logit_bias"},
		{"logit_bias out of range", "/v1/chat/completions", chat(`, "logit_bias": {"5": 101}`), 400, "logit_bias.5"},
		{"logit_bias outside the vocabulary", "/v1/chat/completions", chat(`, "logit_bias": {"99999999": 1}`), 400, "logit_bias"},
		{"tools not an array", "/v1/chat/completions", chat(`, "tools": {}`), 400, "tools"},
		{"tool without a name", "/v1/chat/completions", chat(`, "tools": [{"type": "function", "function": {}}]`), 400, "tools[0].function.name"},
		{"tool of another type", "/v1/chat/completions", chat(`, "tools": [{"type": "retrieval"}]`), 400, "tools[0].type"},
		{"tool parameters not a schema", "/v1/chat/completions", chat(`, "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]`), 400, "tools[0].function.parameters"},
		{"tool_choice without tools", "/v1/chat/completions", chat(`, "tool_choice": "auto"`), 400, "tool_choice"},
		{"tool_choice unknown", "/v1/chat/completions", chat(`, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "always"`), 400, "tool_choice"},
		{"tool_choice of no tool", "/v1/chat/completions", chat(`, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}`), 400, "tool_choice.function.name"},
		{"response_format unknown", "/v1/chat/completions", chat(`, "response_format": {"type": "yaml"}`), 400, "response_format.type"},
		{"json_schema without name", "/v1/chat/completions", chat(`, "response_format": {"type": "json_schema", "json_schema": {"schema": {}}}`), 400, "response_format.json_schema.name"},
		{"unknown model", "/v1/chat/completions", `{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}`, 404, "model"},
		{"model not a string", "/v1/chat/completions", `{"model": 4, "messages": [{"role": "user", "content": "hi"}]}`, 400, "model"},
		{"body over --max-body", "/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": %q}]}`, strings.Repeat("x", 70<<10)), 413, ""},
		{"prompt over --ctx", "/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": %q}]}`, strings.Repeat("word ", 600)), 400, "messages"},
		{"completion without prompt", "/v1/completions", `{"max_tokens": 2}`, 400, "prompt"},
		{"prompt a number", "/v1/completions", `{"prompt": 3}`, 400, "prompt"},
		{"prompt empty", "/v1/completions", `{"prompt": ""}`, 400, "prompt"},
		{"prompt token outside the vocabulary", "/v1/completions", `{"prompt": [1, -2]}`, 400, "prompt"},
		{"suffix", "/v1/completions", `{"prompt": "a", "suffix": "b"}`, 400, "suffix"},
		{"completion logprobs a bool", "/v1/completions", `{"prompt": "a", "logprobs": true}`, 400, "logprobs"},
		{"echo with logprobs", "/v1/completions", `{"prompt": "a", "echo": true, "logprobs": 1}`, 400, "echo"},
		{"best_of", "/v1/completions", `{"prompt": "a", "best_of": 3}`, 400, "best_of"},
		{"more sequences than ever held", "/v1/completions", `{"prompt": ["a", "b", "c", "d", "e", "f", "g", "h", "i"], "n": 4, "max_tokens": 1}`, 400, "n"},
		{"embedding without input", "/v1/embeddings", `{}`, 400, "input"},
		{"embedding input empty", "/v1/embeddings", `{"input": [""]}`, 400, "input"},
		{"embedding format", "/v1/embeddings", `{"input": "a", "encoding_format": "hex"}`, 400, "encoding_format"},
		{"embedding dimensions", "/v1/embeddings", `{"input": "a", "dimensions": 8}`, 400, "dimensions"},
		{"embedding model", "/v1/embeddings", `{"input": "a", "model": "text-embedding-3-small"}`, 404, "model"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, hs, c.path, c.body)
			wantError(t, resp, body, c.status, c.param)
		})
	}
	// Unknown fields, and null for optional ones, are fine.
	if resp, body := post(t, hs, "/v1/chat/completions", chat(`, "user": "u", "store": true, "service_tier": "auto", "reasoning_effort": "low", "temperature": null, "stop": null, "n": null`)); resp.StatusCode != 200 {
		t.Errorf("unknown and null fields: %s", body)
	}
	resp, body := do(t, hs, http.MethodGet, "/v1/chat/completions", nil, nil)
	wantError(t, resp, body, 405, "")
	resp, body = do(t, hs, http.MethodPost, "/v1/nothing", `{}`, nil)
	wantError(t, resp, body, 404, "")
	resp, body = do(t, hs, http.MethodGet, "/v1/models/gpt-4o", nil, nil)
	wantError(t, resp, body, 404, "model")
}

// TestNoChatTemplate: chat with a model that ships no template is a 400
// that says so; completions work.
func TestNoChatTemplate(t *testing.T) {
	_, hs := newServer(t, kjvTiny, Options{})
	resp, body := post(t, hs, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`)
	if e := wantError(t, resp, body, 400, "messages"); !strings.Contains(e.Error.Message, "no chat template") {
		t.Errorf("message %q", e.Error.Message)
	}
	if resp, body := post(t, hs, "/v1/completions", `{"prompt": "In the beginning", "max_tokens": 3}`); resp.StatusCode != 200 {
		t.Errorf("completion: %s", body)
	}
}

// TestAuth: with a key, /v1 needs it as a Bearer token; /health and
// /metrics stay open.
func TestAuth(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{APIKey: "s3cret"})
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}, {"Authorization": "Bearer s3cre"}, {"Authorization": "Basic czNjcmV0"}} {
		resp, body := do(t, hs, http.MethodGet, "/v1/models", nil, h)
		if e := wantError(t, resp, body, 401, ""); *e.Error.Code != "invalid_api_key" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%v: %s", h, body)
		}
		resp, body = do(t, hs, http.MethodPost, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`, h)
		wantError(t, resp, body, 401, "")
	}
	if resp, body := do(t, hs, http.MethodGet, "/v1/models", nil, map[string]string{"Authorization": "Bearer s3cret"}); resp.StatusCode != 200 {
		t.Errorf("the right key: %s", body)
	}
	for _, p := range []string{"/health", "/metrics"} {
		if resp, body := do(t, hs, http.MethodGet, p, nil, nil); resp.StatusCode != 200 {
			t.Errorf("%s without a key: %d %s", p, resp.StatusCode, body)
		}
	}
}

// TestModels: the model list and the model by id; a GGUF model's id is
// taken with or without .gguf.
func TestModels(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{})
	resp, body := do(t, hs, http.MethodGet, "/v1/models", nil, nil)
	type model struct {
		ID, Object, OwnedBy string
		Created             int64
	}
	list := decode[struct {
		Object string
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		}
	}](t, body)
	if resp.StatusCode != 200 || list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "qwen3-tiny" || list.Data[0].Object != "model" || list.Data[0].Created == 0 || list.Data[0].OwnedBy == "" {
		t.Errorf("models: %s", body)
	}
	if resp, body := do(t, hs, http.MethodGet, "/v1/models/qwen3-tiny", nil, nil); resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"qwen3-tiny"`) {
		t.Errorf("model: %s", body)
	}
	s := &Server{opts: Options{Name: "qwen3-0.6b-q4_k_m.gguf"}}
	for id, want := range map[string]bool{"qwen3-0.6b-q4_k_m.gguf": true, "qwen3-0.6b-q4_k_m": true, "qwen3-0.6b": false, "": false} {
		if s.isModel(id) != want {
			t.Errorf("isModel(%q) = %v", id, !want)
		}
	}
	if ModelID("/models/qwen3-tiny/") != "qwen3-tiny" || ModelID("a/b/m.gguf") != "m.gguf" {
		t.Error("ModelID")
	}
}

// TestHealthAndMetrics: /health is 200, then 503 once draining; /metrics
// has the request, token, queue, latency and KV-pool figures.
func TestHealthAndMetrics(t *testing.T) {
	s, hs := newServer(t, qwen3Tiny, Options{})
	if resp, body := do(t, hs, http.MethodGet, "/health", nil, nil); resp.StatusCode != 200 || !strings.Contains(string(body), "ok") {
		t.Errorf("health: %d %s", resp.StatusCode, body)
	}
	post(t, hs, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": true}`)
	post(t, hs, "/v1/chat/completions", `{"messages": []}`)
	// The engine's loop publishes its state after the step that ended the
	// request, which may come after the answer: wait for it to settle.
	var m string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, body := do(t, hs, http.MethodGet, "/metrics", nil, nil)
		m = string(body)
		if strings.Contains(m, "gozoo_sequences_running 0") && strings.Contains(m, `gozoo_kv_pool_bytes{state="in_use"} 0`) || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []string{
		`gozoo_requests_total{endpoint="/v1/chat/completions",code="200"} 1`,
		`gozoo_requests_total{endpoint="/v1/chat/completions",code="400"} 1`,
		`gozoo_request_duration_seconds_count{endpoint="/v1/chat/completions"} 2`,
		"gozoo_time_to_first_token_seconds_count 1", "gozoo_inter_token_latency_seconds_count 2",
		"gozoo_generation_tokens_total 3", "gozoo_prompt_tokens_total 9",
		"gozoo_queue_length 0", "gozoo_sequences_running 0", "gozoo_sequences_limit 40",
		`gozoo_kv_pool_bytes{state="in_use"} 0`, `gozoo_kv_pool_bytes{state="budget"}`, "gozoo_kv_preemptions_total 0",
		"# TYPE gozoo_time_to_first_token_seconds histogram", `gozoo_time_to_first_token_seconds_bucket{le="+Inf"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	s.Drain()
	resp, body := do(t, hs, http.MethodGet, "/health", nil, nil)
	wantError(t, resp, body, 503, "")
	resp, body = post(t, hs, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`)
	if wantError(t, resp, body, 503, ""); resp.Header.Get("Retry-After") == "" {
		t.Error("503 without retry-after")
	}
}

// TestQueueFull: beyond --parallel + --max-queue sequences, requests get
// 429 with retry-after; a request's n counts.
func TestQueueFull(t *testing.T) {
	release := make(chan struct{})
	s, hs := newServer(t, qwen3Tiny, Options{Parallel: 2, MaxQueue: 1, Grammar: blocking(release)})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the server's: a failed test does not hold the engine
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Two streams hold three sequences: the first holds the engine in its
	// processor until released.
	for _, n := range []int{2, 1} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat/completions",
			strings.NewReader(fmt.Sprintf(`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": true, "n": %d, "response_format": {"type": "json_object"}}`, n)))
		go func() { // the headers come with the first token
			if resp, err := hs.Client().Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	waitFor(t, "three sequences admitted", func() bool {
		s.admitMu.Lock()
		defer s.admitMu.Unlock()
		return s.admitted == 3
	})
	resp, body := post(t, hs, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}`)
	if wantError(t, resp, body, 429, ""); resp.Header.Get("Retry-After") != "1" {
		t.Errorf("429 retry-after %q", resp.Header.Get("Retry-After"))
	}
	resp, body = post(t, hs, "/v1/embeddings", `{"input": "hi"}`)
	wantError(t, resp, body, 429, "")
	free()
	cancel()
	waitFor(t, "the sequences released", func() bool {
		s.admitMu.Lock()
		defer s.admitMu.Unlock()
		return s.admitted == 0
	})
	if resp, body := post(t, hs, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}`); resp.StatusCode != 200 {
		t.Errorf("after the others ended: %s", body)
	}
}

// TestStreamErrors: a stream that fails before its first token is a
// plain HTTP error (here a prompt that fits the context but not the KV
// memory); a stream cut after its first token ends with one error event.
func TestStreamErrors(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{Context: 512, KVMemory: 1})
	resp, body := post(t, hs, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "stream": true, "max_tokens": 3}`)
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		t.Fatalf("an event stream for a request that failed before its first token: %s", body)
	}
	wantError(t, resp, body, 400, "messages")

	// After the first token: the engine stops under the stream.
	s, hs := newServer(t, qwen3Tiny, Options{})
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/chat/completions", strings.NewReader(`{"messages": [{"role": "user", "content": "hi"}], "stream": true, "max_tokens": 300}`))
	r, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	buf := make([]byte, 1)
	if _, err := io.ReadFull(r.Body, buf); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	s.Engine().Close()
	rest, _ := io.ReadAll(r.Body)
	events, done := sse(t, append(buf, rest...))
	last := string(events[len(events)-1])
	if done || !strings.HasPrefix(last, `{"error":{"message":`) || !strings.Contains(last, "engine stopped") {
		t.Errorf("the stream's end: %s (done %v)", last, done)
	}
}

// blocking is a Grammar whose processors hold the engine until release
// is closed.
type blocking chan struct{}

func (b blocking) Compile(Constraint) (func(int) generate.LogitsProcessor, error) {
	return func(int) generate.LogitsProcessor { return b }, nil
}

func (b blocking) Process([]float32, []int) { <-b }

// TestGGUF: a GGUF file is served under its file name, taken with or
// without .gguf.
func TestGGUF(t *testing.T) {
	file := filepath.Join(testfiles.Fixture(t, "gguf", "llama_q4_0"), "model.gguf")
	_, hs := newServer(t, file, Options{Context: 128})
	for _, id := range []string{"model.gguf", "model"} {
		resp, body := post(t, hs, "/v1/completions", fmt.Sprintf(`{"model": %q, "prompt": "Hello", "max_tokens": 3, "temperature": 0}`, id))
		if c := decode[completionResp](t, body); resp.StatusCode != 200 || c.Model != "model.gguf" || c.Usage.CompletionTokens != 3 {
			t.Errorf("model %q: %s", id, body)
		}
	}
	resp, body := post(t, hs, "/v1/completions", `{"model": "model.bin", "prompt": "Hello"}`)
	wantError(t, resp, body, 404, "model")
}

// TestTemplateRefusal: a template's own raise_exception is a 400 with
// its message (Mistral's template, on the trained tiny model's weights).
func TestTemplateRefusal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kjv-mistral")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json"} {
		data, err := os.ReadFile(filepath.Join(kjvTiny, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "testdata", "chat_templates", "mistral", "template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := json.Marshal(map[string]any{"chat_template": string(tmpl), "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), tc, 0o644); err != nil {
		t.Fatal(err)
	}
	_, hs := newServer(t, dir, Options{})
	resp, body := post(t, hs, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}`)
	if e := wantError(t, resp, body, 400, "messages"); !strings.Contains(e.Error.Message, "Conversation roles must alternate user/assistant/user/assistant/...") {
		t.Errorf("message %q", e.Error.Message)
	}
	resp, body = post(t, hs, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": "f"}}]}`)
	wantError(t, resp, body, 400, "tools")
	if resp, body := post(t, hs, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "In the beginning"}], "max_tokens": 3}`); resp.StatusCode != 200 {
		t.Errorf("a conversation the template takes: %s", body)
	}
}
