package serve

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gozoo/gozoo/zoo/generate"
)

// TestConcurrentClients: clients at once, more than --parallel, streaming
// and not; each greedy answer equals the same request sent alone.
func TestConcurrentClients(t *testing.T) {
	_, hs := newServer(t, qwen3Tiny, Options{Parallel: 3, MaxQueue: 20})
	questions := []string{"What is Go?", "Name a prime.", "Why is the sky blue?", "Write a haiku about the sea, please.", "2+2?", "Translate 'cat' to French.", "Hello", "What is a monad, in one long and careful sentence?"}
	body := func(q string, stream bool) string {
		return fmt.Sprintf(`{"messages": [{"role": "user", "content": %q}], "max_tokens": %d, "temperature": 0, "stream": %v}`, q, 6+len(q)%5, stream)
	}
	want := make([]string, len(questions))
	for i, q := range questions {
		_, b := post(t, hs, "/v1/chat/completions", body(q, false))
		want[i] = *decode[completionResp](t, b).Choices[0].Message.Content
	}
	got := make([]string, 2*len(questions))
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, stream := questions[i%len(questions)], i >= len(questions)
			resp, b := post(t, hs, "/v1/chat/completions", body(q, stream))
			if resp.StatusCode != 200 {
				t.Errorf("client %d: %s", i, b)
				return
			}
			if stream {
				got[i] = collect(t, b).content[0]
			} else {
				got[i] = *decode[completionResp](t, b).Choices[0].Message.Content
			}
		}()
	}
	wg.Wait()
	for i, g := range got {
		if w := want[i%len(questions)]; g != w {
			t.Errorf("client %d: %q together, %q alone", i, g, w)
		}
	}
}

// TestClientAbort: a client that goes away, streaming or not, cancels its
// sequences: they leave the batch and give their KV blocks back.
func TestClientAbort(t *testing.T) {
	s, hs := newServer(t, qwen3Tiny, Options{})
	for _, stream := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/v1/chat/completions", strings.NewReader(fmt.Sprintf(
			`{"messages": [{"role": "user", "content": "Tell me a long story."}], "max_tokens": 480, "n": 2, "stream": %v, "logit_bias": {"151645": -100, "151643": -100}}`, stream)))
		done, read := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			resp, err := hs.Client().Do(req)
			if err != nil {
				close(read)
				return
			}
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			for range 6 { // a few events, then go away
				if _, err := r.ReadString('\n'); err != nil {
					break
				}
			}
			close(read)
			<-ctx.Done()
		}()
		waitFor(t, "the samples decoding", func() bool { return s.Engine().Stats().Running == 2 })
		if stream {
			<-read
		}
		cancel()
		<-done
		waitFor(t, "the sequences ended and their blocks freed", func() bool {
			st := s.Engine().Stats()
			return st.Running == 0 && st.Waiting == 0 && st.Prefilling == 0 && st.KVInUse == 0
		})
		waitFor(t, "the admission released", func() bool {
			s.admitMu.Lock()
			defer s.admitMu.Unlock()
			return s.admitted == 0
		})
		if st := s.Engine().Stats(); st.Steps > 400 {
			t.Errorf("stream %v: %d steps: the aborted samples ran on", stream, st.Steps)
		}
		cancel()
	}
}

// TestCompletions: /v1/completions with a prompt, several prompts and n
// (choices prompt by prompt), token prompts, echo, logprobs and a stream.
func TestCompletions(t *testing.T) {
	_, hs := newServer(t, kjvTiny, Options{})
	g := load(t, kjvTiny).g
	ids, _ := g.Encode("In the beginning")
	ref := alone(t, g, ids, 8)
	resp, body := post(t, hs, "/v1/completions", `{"model": "kjv-tiny", "prompt": "In the beginning", "max_tokens": 8, "temperature": 0}`)
	c := decode[completionResp](t, body)
	if resp.StatusCode != 200 || c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") || len(c.Choices) != 1 || c.Choices[0].Text != ref.Text || c.Choices[0].FinishReason != "length" || *c.Usage != (usage{len(ids), 8, len(ids) + 8}) {
		t.Fatalf("completion %s, want %q", body, ref.Text)
	}
	// Token ids as the prompt, and echo.
	_, body = post(t, hs, "/v1/completions", fmt.Sprintf(`{"prompt": %s, "max_tokens": 8, "temperature": 0, "echo": true}`, jsonInts(ids)))
	if c := decode[completionResp](t, body); c.Choices[0].Text != "In the beginning"+ref.Text {
		t.Errorf("echo of token ids: %q", c.Choices[0].Text)
	}
	// Two prompts, two choices each.
	_, body = post(t, hs, "/v1/completions", `{"prompt": ["In the beginning", "And God said"], "n": 2, "max_tokens": 4, "temperature": 0.9, "seed": 3}`)
	c = decode[completionResp](t, body)
	if len(c.Choices) != 4 {
		t.Fatalf("%d choices: %s", len(c.Choices), body)
	}
	ids2, _ := g.Encode("And God said")
	if c.Usage.PromptTokens != len(ids)+len(ids2) || c.Usage.CompletionTokens != 16 {
		t.Errorf("usage %+v", c.Usage)
	}
	_, one := post(t, hs, "/v1/completions", `{"prompt": "And God said", "max_tokens": 4, "temperature": 0.9, "seed": 4}`)
	if o := decode[completionResp](t, one); o.Choices[0].Text != c.Choices[3].Text {
		t.Errorf("prompt 1 choice 1 %q, alone with seed 4 %q", c.Choices[3].Text, o.Choices[0].Text)
	}
	// Log-probabilities in the legacy shape.
	_, body = post(t, hs, "/v1/completions", `{"prompt": "In the beginning", "max_tokens": 5, "temperature": 0, "logprobs": 2}`)
	lp := decode[completionResp](t, body).Choices[0].Logprobs
	if lp == nil || len(lp.Tokens) != 5 || len(lp.TokenLogprobs) != 5 || len(lp.TopLogprobs) != 5 || len(lp.TextOffset) != 5 || strings.Join(lp.Tokens, "") != ref.Text[:len(strings.Join(lp.Tokens, ""))] {
		t.Fatalf("logprobs %s", body)
	}
	for i, top := range lp.TopLogprobs {
		if len(top) < 1 || top[lp.Tokens[i]] != lp.TokenLogprobs[i] || lp.TokenLogprobs[i] > 0 {
			t.Errorf("token %d: %v, top %v", i, lp.TokenLogprobs[i], top)
		}
	}
	// The stream adds up to the whole.
	_, body = post(t, hs, "/v1/completions", `{"prompt": "In the beginning", "max_tokens": 8, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}`)
	events, done := sse(t, body)
	text, finish := "", ""
	for _, ev := range events {
		ch := decode[chunkResp](t, ev)
		if ch.Object != "text_completion" {
			t.Fatalf("chunk %s", ev)
		}
		for _, c := range ch.Choices {
			text += c.Text
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if !done || text != ref.Text || finish != "length" || !strings.Contains(string(events[len(events)-1]), `"completion_tokens":8`) {
		t.Errorf("stream: %q %q, done %v: %s", text, finish, done, body)
	}
}

func jsonInts(v []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, x)
	}
	b.WriteByte(']')
	return b.String()
}

// TestEmbeddings: pooled, normalized final hidden states as floats or
// base64 little-endian float32, equal to generate.Embed; token inputs.
func TestEmbeddings(t *testing.T) {
	_, hs := newServer(t, kjvTiny, Options{EmbedNormalize: true})
	g := load(t, kjvTiny).g
	inputs := []string{"In the beginning", "And God said, Let there be light"}
	var ids [][]int
	for _, in := range inputs {
		x, _ := g.Encode(in)
		ids = append(ids, x)
	}
	want, err := generate.Embed(context.Background(), g.Model, ids, generate.EmbedOptions{Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	type embResp struct {
		Object string `json:"object"`
		Model  string `json:"model"`
		Data   []struct {
			Object    string `json:"object"`
			Index     int    `json:"index"`
			Embedding any    `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	for _, format := range []string{"float", "base64", ""} {
		extra := ""
		if format != "" {
			extra = fmt.Sprintf(`, "encoding_format": %q`, format)
		}
		resp, body := post(t, hs, "/v1/embeddings", fmt.Sprintf(`{"model": "kjv-tiny", "input": ["In the beginning", "And God said, Let there be light"]%s}`, extra))
		e := decode[embResp](t, body)
		if resp.StatusCode != 200 || e.Object != "list" || e.Model != "kjv-tiny" || len(e.Data) != 2 || e.Usage.PromptTokens != len(ids[0])+len(ids[1]) || e.Usage.TotalTokens != e.Usage.PromptTokens {
			t.Fatalf("%s: %s", format, body)
		}
		for i, d := range e.Data {
			var got []float32
			switch v := d.Embedding.(type) {
			case string:
				raw, err := base64.StdEncoding.DecodeString(v)
				if err != nil || format != "base64" {
					t.Fatalf("%s: %v", format, err)
				}
				for k := 0; k+4 <= len(raw); k += 4 {
					got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(raw[k:])))
				}
			case []any:
				for _, x := range v {
					got = append(got, float32(x.(float64)))
				}
			}
			if d.Object != "embedding" || d.Index != i || len(got) != g.Model.HiddenSize() {
				t.Fatalf("%s: item %d: %d values", format, i, len(got))
			}
			for k := range got {
				if got[k] != want[i][k] {
					t.Fatalf("%s: item %d value %d: %g, want %g", format, i, k, got[k], want[i][k])
				}
			}
		}
	}
	if resp, body := post(t, hs, "/v1/embeddings", fmt.Sprintf(`{"input": %s, "dimensions": %d}`, jsonInts(ids[0]), g.Model.HiddenSize())); resp.StatusCode != 200 {
		t.Errorf("token input: %s", body)
	}
}
