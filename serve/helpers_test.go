package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/internal/testmodels"
	"github.com/gozoo/gozoo/jinja"
	"github.com/gozoo/gozoo/zoo/generate"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

// TestMain writes the generated test models (qwen3-tiny's weights).
func TestMain(m *testing.M) {
	testmodels.MustPrepare()
	os.Exit(m.Run())
}

const (
	qwen3Tiny = "../testdata/models/qwen3-tiny" // random weights, Qwen3's tokenizer and template
	kjvTiny   = "../testdata/models/kjv-tiny"   // trained, no chat template
)

// The generators are loaded once and shared: each test server runs its
// own engine on them.
var (
	loadMu sync.Mutex
	loaded = map[string]*loadedModel{}
)

type loadedModel struct {
	g *generate.Generator
	p *idefics3.Pipeline
}

func load(t testing.TB, path string) *loadedModel {
	t.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if m, ok := loaded[path]; ok {
		return m
	}
	g, p, err := LoadModel(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	m := &loadedModel{g, p}
	loaded[path] = m
	return m
}

// newServer serves path with opts (Name defaults to the model's base
// name) on an httptest server.
func newServer(t testing.TB, path string, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	m := load(t, path)
	if opts.Name == "" {
		opts.Name = ModelID(path)
	}
	if opts.Context == 0 {
		opts.Context = 512
	}
	opts.Pipeline = m.p
	s, err := New(m.g, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		s.Close()
	})
	return s, hs
}

// post sends a JSON body and returns the response with its body read.
func post(t testing.TB, hs *httptest.Server, path string, body any) (*http.Response, []byte) {
	t.Helper()
	return do(t, hs, http.MethodPost, path, body, nil)
}

func do(t testing.TB, hs *httptest.Server, method, path string, body any, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, hs.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// decode unmarshals data into v, failing the test on error.
func decode[T any](t testing.TB, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return v
}

// sse splits a stream's body into its data events; done reports a final
// [DONE].
func sse(t testing.TB, body []byte) (events []json.RawMessage, done bool) {
	t.Helper()
	for _, block := range strings.Split(strings.TrimRight(string(body), "\n"), "\n\n") {
		data, ok := strings.CutPrefix(block, "data: ")
		if !ok {
			t.Fatalf("not a data event: %q", block)
		}
		if done {
			t.Fatalf("an event after [DONE]: %q", block)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if !json.Valid([]byte(data)) {
			t.Fatalf("event is not JSON: %q", data)
		}
		events = append(events, json.RawMessage(data))
	}
	return events, done
}

// errorResponse is an OpenAI error body.
type errorResponse struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// wantError checks a response is an OpenAI error of status naming param
// ("" for null).
func wantError(t testing.TB, resp *http.Response, body []byte, status int, param string) errorResponse {
	t.Helper()
	e := decode[errorResponse](t, body)
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	got := ""
	if e.Error.Param != nil {
		got = *e.Error.Param
	}
	if got != param || e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("error %s: want param %q, a message and a type", body, param)
	}
	return e
}

// Response shapes, as a client reads them.
type (
	completionResp struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			Text     string `json:"text"`
			Logprobs *struct {
				Content []struct {
					Token       string  `json:"token"`
					Logprob     float64 `json:"logprob"`
					Bytes       []int   `json:"bytes"`
					TopLogprobs []struct {
						Token   string  `json:"token"`
						Logprob float64 `json:"logprob"`
						Bytes   []int   `json:"bytes"`
					} `json:"top_logprobs"`
				} `json:"content"`
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []float64            `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
				TextOffset    []int                `json:"text_offset"`
			} `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *usage `json:"usage"`
	}
	chunkResp struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string  `json:"name"`
						Arguments *string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			Text     string `json:"text"`
			Logprobs *struct {
				Content []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
					Bytes   []int   `json:"bytes"`
				} `json:"content"`
			} `json:"logprobs"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
)

// streamed is a chat stream put back together, choice by choice.
type streamed struct {
	content  map[int]string
	finish   map[int]string
	role     map[int]string
	logprobs map[int][]int // bytes, concatenated
	nlp      map[int]int
	calls    map[int][]streamedCall
	usage    *usage
	chunks   int
}

type streamedCall struct {
	id, typ, name, args string
}

// collect reads a chat stream's events as openai-node's accumulation
// does, checking the chunk format on the way.
func collect(t testing.TB, body []byte) streamed {
	t.Helper()
	events, done := sse(t, body)
	if !done {
		t.Fatalf("the stream did not end with [DONE]: %s", body)
	}
	s := streamed{content: map[int]string{}, finish: map[int]string{}, role: map[int]string{}, logprobs: map[int][]int{}, nlp: map[int]int{}, calls: map[int][]streamedCall{}}
	for _, ev := range events {
		c := decode[chunkResp](t, ev)
		s.chunks++
		if c.Object != "chat.completion.chunk" || c.ID == "" || c.Model == "" {
			t.Fatalf("chunk %s", ev)
		}
		if len(c.Choices) == 0 {
			s.usage = new(usage)
			if err := json.Unmarshal(c.Usage, s.usage); err != nil || s.usage.TotalTokens == 0 {
				t.Fatalf("usage chunk %s", ev)
			}
			continue
		}
		for _, ch := range c.Choices {
			if _, ok := s.finish[ch.Index]; ok {
				t.Fatalf("choice %d: a chunk after its finish_reason: %s", ch.Index, ev)
			}
			if ch.Delta.Role != "" {
				s.role[ch.Index] = ch.Delta.Role
			}
			if ch.Delta.Content != nil {
				s.content[ch.Index] += *ch.Delta.Content
			}
			if ch.Logprobs != nil {
				for _, lp := range ch.Logprobs.Content {
					s.logprobs[ch.Index] = append(s.logprobs[ch.Index], lp.Bytes...)
					s.nlp[ch.Index]++
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				calls := s.calls[ch.Index]
				switch {
				case tc.Index == len(calls):
					if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" {
						t.Fatalf("the first delta of call %d lacks its id, type or name: %s", tc.Index, ev)
					}
					calls = append(calls, streamedCall{id: tc.ID, typ: tc.Type, name: tc.Function.Name})
				case tc.Index == len(calls)-1:
					if tc.ID != "" || tc.Function.Name != "" {
						t.Fatalf("a later delta of call %d repeats its id or name: %s", tc.Index, ev)
					}
				default:
					t.Fatalf("tool call index %d out of order: %s", tc.Index, ev)
				}
				if tc.Function.Arguments != nil {
					calls[tc.Index].args += *tc.Function.Arguments
				}
				s.calls[ch.Index] = calls
			}
			if ch.FinishReason != nil {
				s.finish[ch.Index] = *ch.FinishReason
			}
		}
	}
	return s
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// forcing is a stand-in Grammar: whatever the constraint, each sample
// writes text, then ends. It checks the seam: the constraint reaches
// the grammar, its processor runs before sampling, one per sample.
type forcing struct {
	t     testing.TB
	g     *generate.Generator
	text  func(c Constraint) string
	mu    sync.Mutex
	asked []Constraint
	made  int
}

func (f *forcing) Compile(c Constraint) (func(int) generate.LogitsProcessor, error) {
	f.mu.Lock()
	f.asked = append(f.asked, c)
	f.mu.Unlock()
	ids, err := f.g.Tokenizer.Encode(f.text(c), false)
	if err != nil {
		return nil, err
	}
	return func(promptLen int) generate.LogitsProcessor {
		f.mu.Lock()
		f.made++
		f.mu.Unlock()
		return forcer{ids: ids, promptLen: promptLen, eos: f.g.EOS[0]}
	}, nil
}

type forcer struct {
	ids       []int
	promptLen int
	eos       int
}

func (f forcer) Process(logits []float32, context []int) {
	k := len(context) - f.promptLen
	want := f.eos
	if k < len(f.ids) {
		want = f.ids[k]
	}
	for i := range logits {
		if i != want {
			logits[i] = float32(math.Inf(-1))
		}
	}
}

// chatIDs renders (JSON messages and tools, as transformers gets them)
// and tokenizes as the server should, for comparisons.
func chatIDs(t testing.TB, g *generate.Generator, msgs, tools string) []int {
	t.Helper()
	m, err := jinja.DecodeJSON([]byte(msgs))
	if err != nil {
		t.Fatal(err)
	}
	var tl any
	if tools != "" {
		if tl, err = jinja.DecodeJSON([]byte(tools)); err != nil {
			t.Fatal(err)
		}
	}
	text, err := g.Template.Render(m, chat.RenderOptions{AddGenerationPrompt: true, Tools: tl})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := g.Tokenizer.Encode(text, false)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
