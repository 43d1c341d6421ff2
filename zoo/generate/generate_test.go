package generate

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/internal/leaktest"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/qwen3"
)

// letters is a stand-in tokenizer: token id i decodes to one letter, so
// tests can reason about text without a real vocabulary.
type letters struct{}

func (letters) Encode(text string, _ bool) ([]int, error) {
	ids := make([]int, len(text))
	for i, c := range text {
		ids[i] = int(c - 'a')
	}
	return ids, nil
}
func (letters) Decode(ids []int, _ bool) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		b.WriteByte(byte('a' + id%26))
	}
	return b.String(), nil
}

const goldenDir = "../../testdata/golden/qwen3_gqa_tied"

func goldenGreedy(t *testing.T) (prompt, want []int) {
	t.Helper()
	f, err := loaders.OpenSafetensors(filepath.Join(goldenDir, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	read := func(name string) []int {
		v, _, err := f.ReadInt64(name)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = int(x)
		}
		return out
	}
	return read("greedy_prompt"), read("greedy_ids")
}

func newGen(t *testing.T) *Generator {
	t.Helper()
	m, err := zoo.Load(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	g := New(m, letters{})
	g.SessionOptions.Capacity = 64
	t.Cleanup(func() { g.Close() })
	return g
}

func TestGreedyEqualsGolden(t *testing.T) {
	g := newGen(t)
	prompt, want := goldenGreedy(t)
	res, err := g.Generate(context.Background(), prompt, Options{MaxTokens: len(want), IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, want) || res.StopReason != StopMaxTokens {
		t.Fatalf("greedy %v (%s), golden %v", res.Tokens, res.StopReason, want)
	}
	if res.PrefillTokS() <= 0 || res.DecodeTokS() <= 0 || res.DecodeSteps != len(want)-1 {
		t.Errorf("timings: prefill %g tok/s, decode %g tok/s over %d steps", res.PrefillTokS(), res.DecodeTokS(), res.DecodeSteps)
	}
	// top-k 1 is greedy however hot the temperature.
	res2, err := g.Generate(context.Background(), prompt, Options{MaxTokens: len(want), IgnoreEOS: true, Sampling: Sampling{DoSample: true, Temperature: 5, TopK: 1, Seed: 9}})
	if err != nil || !slices.Equal(res2.Tokens, want) {
		t.Fatalf("top-k 1: %v %v, want %v", res2.Tokens, err, want)
	}
}

func TestSeedsReproduce(t *testing.T) {
	g := newGen(t)
	prompt, _ := goldenGreedy(t)
	run := func(s Sampling) []int {
		res, err := g.Generate(context.Background(), prompt, Options{MaxTokens: 16, IgnoreEOS: true, Sampling: s})
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens
	}
	for _, s := range []Sampling{
		{DoSample: true, Temperature: 1.5, Seed: 1},
		{DoSample: true, Temperature: 1, TopK: 20, Seed: 2},
		{DoSample: true, Temperature: 1, TopP: 0.9, Seed: 3},
		{DoSample: true, Temperature: 1, MinP: 0.05, Seed: 4},
		{DoSample: true, Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.01, RepetitionPenalty: 1.3, Seed: 5},
	} {
		a, b := run(s), run(s)
		if !slices.Equal(a, b) {
			t.Errorf("%+v: same seed gave %v and %v", s, a, b)
		}
		s.Seed += 100
		if slices.Equal(a, run(s)) {
			t.Errorf("%+v: a different seed gave the same 16 tokens", s)
		}
	}
}

func TestCancelStopsWithinOneToken(t *testing.T) {
	g := newGen(t)
	prompt, _ := goldenGreedy(t)
	// Warm the pool so the measurement sees no graph building.
	if _, err := g.Generate(context.Background(), prompt, Options{MaxTokens: 2}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := g.Stream(ctx, prompt, Options{MaxTokens: 40, IgnoreEOS: true})
	n := 0
	for range s.Tokens() {
		n++
		if n == 3 {
			cancel()
		}
	}
	res, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != StopCancelled || len(res.Tokens) != 3 {
		t.Fatalf("cancelled after token 3: got %d tokens, reason %s", len(res.Tokens), res.StopReason)
	}
	// Leaving the loop early stops it too.
	s = g.Stream(context.Background(), prompt, Options{MaxTokens: 40, IgnoreEOS: true})
	for tok := range s.Tokens() {
		_ = tok
		break
	}
	if res, _ := s.Result(); res.StopReason != StopCaller || len(res.Tokens) != 1 {
		t.Fatalf("break after one token: %d tokens, reason %s", len(res.Tokens), res.StopReason)
	}
	leaktest.VerifyNone(t)
}

func TestStopStringAcrossTokens(t *testing.T) {
	g := newGen(t)
	prompt, want := goldenGreedy(t)
	full, _ := letters{}.Decode(want, true)
	// A stop string made of the last letter of token 4 and the first of token 5.
	stop := full[3:5]
	if strings.Index(full, stop) != 3 {
		t.Skipf("golden letters %q repeat %q earlier; pick another span", full, stop)
	}
	s := g.Stream(context.Background(), prompt, Options{MaxTokens: 12, IgnoreEOS: true, Stop: []string{"zzzzzz", stop}})
	var streamed strings.Builder
	for tok := range s.Tokens() {
		streamed.WriteString(tok.Text)
	}
	res, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != StopString || res.Text != full[:3] || streamed.String() != full[:3] || len(res.Tokens) != 5 {
		t.Fatalf("stop %q in %q: reason %s, text %q, streamed %q, %d tokens", stop, full, res.StopReason, res.Text, streamed.String(), len(res.Tokens))
	}
}

func TestEOSStops(t *testing.T) {
	g := newGen(t)
	prompt, want := goldenGreedy(t)
	g.EOS = []int{want[4]}
	res, err := g.Generate(context.Background(), prompt, Options{MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != StopEOS || !slices.Equal(res.Tokens, want[:5]) {
		t.Fatalf("EOS %d: %v (%s)", want[4], res.Tokens, res.StopReason)
	}
}

func TestBadPrompts(t *testing.T) {
	g := newGen(t)
	long := make([]int, 64)
	for _, c := range []struct {
		prompt []int
		errHas string
	}{
		{nil, "empty prompt"},
		{[]int{1, 9999}, "9999"},
		{long, "does not fit the context of 64"},
	} {
		if _, err := g.Generate(context.Background(), c.prompt, Options{MaxTokens: 2}); err == nil || !strings.Contains(err.Error(), c.errHas) {
			t.Errorf("prompt %d tokens: got %v, want an error mentioning %q", len(c.prompt), err, c.errHas)
		}
	}
}

func TestConcurrentGenerations(t *testing.T) {
	g := newGen(t)
	prompt, want := goldenGreedy(t)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := g.Generate(context.Background(), prompt, Options{MaxTokens: len(want), IgnoreEOS: true})
			if err != nil || !slices.Equal(res.Tokens, want) {
				t.Errorf("concurrent greedy: %v %v", res.Tokens, err)
			}
		}()
	}
	wg.Wait()
}

func TestLoadBundledModelWithChat(t *testing.T) {
	g, err := Load("../../testdata/models/qwen3-tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// generation_config.json: sampling defaults and both EOS ids.
	if s := g.Defaults.Sampling; !s.DoSample || s.Temperature != 0.6 || s.TopK != 20 || s.TopP != 0.95 {
		t.Errorf("defaults from generation_config.json: %+v", s)
	}
	if !slices.Contains(g.EOS, 151645) || !slices.Contains(g.EOS, 151643) {
		t.Errorf("EOS %v, want 151645 and 151643", g.EOS)
	}
	ids, err := g.ChatIDs([]chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is Go?"}}, chat.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := g.Tokenizer.Decode(ids, false)
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is Go?<|im_end|>\n<|im_start|>assistant\n"
	if text != want || ids[0] != 151644 {
		t.Fatalf("chat prompt %v decodes to %q, want %q", ids, text, want)
	}
	s := g.Stream(context.Background(), ids, Options{MaxTokens: 5, Sampling: Sampling{DoSample: true, Temperature: 0.7, Seed: 1}})
	var streamed strings.Builder
	for tok := range s.Tokens() {
		streamed.WriteString(tok.Text)
	}
	res, err := s.Result()
	if err != nil || streamed.String() != res.Text || len(res.Tokens) == 0 {
		t.Fatalf("stream %q, result %q, %v", streamed.String(), res.Text, err)
	}
	if dec, _ := g.Tokenizer.Decode(res.Tokens, true); dec != res.Text && res.StopReason != StopEOS {
		t.Errorf("streamed text %q differs from decoding the tokens %q", res.Text, dec)
	}
}
