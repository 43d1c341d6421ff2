package generate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/canceltest"
	"github.com/gozoo/gozoo/internal/leaktest"
	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/internal/testmodels"
	"github.com/gozoo/gozoo/zoo"
)

// TestMain fails the package's run if any test leaves a goroutine behind
// (internal/simd's persistent workers excepted, see leaktest.Options).
func TestMain(m *testing.M) {
	testmodels.MustPrepare()
	leaktest.VerifyTestMain(m)
}

const tinyModel = "../../testdata/models/qwen3-tiny"

// openFiles counts this process's open file descriptors (-1 where /proc
// is not there to tell).
func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestLoadContextStopsMidLoad cancels loads from their progress callback
// after the first tensor: a folder and a GGUF file, through generate and
// zoo. Each stops before the next tensor with an error that wraps
// context.Canceled and names the checkpoint, closes what it opened and
// leaves no goroutine.
func TestLoadContextStopsMidLoad(t *testing.T) {
	gguf := filepath.Join(testfiles.Fixture(t, "gguf", "qwen3_f16"), "model.gguf")
	for _, c := range []struct {
		name, path string
		load       func(ctx context.Context, path string, progress func(done, total int64)) error
	}{
		{"generate folder", tinyModel, func(ctx context.Context, p string, pr func(done, total int64)) error {
			g, err := LoadContext(ctx, p, pr)
			if g != nil {
				g.Close()
			}
			return err
		}},
		{"generate gguf", gguf, func(ctx context.Context, p string, pr func(done, total int64)) error {
			g, err := LoadGGUFContext(ctx, p, pr)
			if g != nil {
				g.Close()
			}
			return err
		}},
		{"zoo folder", tinyModel, func(ctx context.Context, p string, pr func(done, total int64)) error {
			_, err := zoo.LoadContext(ctx, p, pr)
			return err
		}},
		{"zoo gguf", gguf, func(ctx context.Context, p string, pr func(done, total int64)) error {
			_, err := zoo.LoadContext(ctx, p, pr)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fds := openFiles()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			err := c.load(ctx, c.path, func(done, total int64) {
				if calls++; calls == 1 {
					cancel()
				}
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled after the first tensor: %v, want an error wrapping context.Canceled", err)
			}
			if !strings.Contains(err.Error(), filepath.Base(c.path)) || !strings.Contains(err.Error(), "stopped after 1 of") {
				t.Errorf("error %q does not name the checkpoint and how far it got", err)
			}
			if calls != 1 {
				t.Errorf("progress called %d times after the cancellation, want it stopped at once", calls-1)
			}
			if after := openFiles(); after != fds {
				t.Errorf("open files: %d before the load, %d after it was cancelled", fds, after)
			}
			// Cancelled before it starts: nothing is read.
			calls = 0
			if err := c.load(ctx, c.path, func(int64, int64) { calls++ }); !errors.Is(err, context.Canceled) || calls != 0 {
				t.Errorf("load with a cancelled context: %v after %d tensors", err, calls)
			}
			leaktest.VerifyNone(t)
		})
	}
}

// TestChatIDsContext renders a chat prompt under a cancelled context: an
// error wrapping context.Canceled, and none without one.
func TestChatIDsContext(t *testing.T) {
	g, err := Load(tinyModel, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	msgs := []chat.Message{{Role: "user", Content: "Hi"}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.ChatIDsContext(ctx, msgs, chat.RenderOptions{AddGenerationPrompt: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled chat rendering: %v", err)
	}
	ids, err := g.ChatIDsContext(context.Background(), msgs, chat.RenderOptions{AddGenerationPrompt: true})
	want, err2 := g.ChatIDs(msgs, chat.RenderOptions{AddGenerationPrompt: true})
	if err != nil || err2 != nil || !slices.Equal(ids, want) {
		t.Fatalf("ChatIDsContext %v (%v), ChatIDs %v (%v)", ids, err, want, err2)
	}
}

// tinyRandom is a random 4-layer Qwen3 (the golden case's shape with one
// more layer): fast enough to generate with many times under -race.
func tinyRandom(t testing.TB) zoo.Model {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["num_hidden_layers"] = 4
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	c, err := zoo.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := zoo.NewRandom(c, 11)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// errRecorder is a ContextRunner that keeps the errors its session
// returned, to see where a cancellation stopped it.
type errRecorder struct {
	*graphs.Session
	mu   *sync.Mutex
	errs *[]error
}

func (r errRecorder) AppendInputContext(ctx context.Context, in graphs.Input) ([]float32, error) {
	l, err := r.Session.AppendInputContext(ctx, in)
	if err != nil {
		r.mu.Lock()
		*r.errs = append(*r.errs, err)
		r.mu.Unlock()
	}
	return l, err
}

func testPrompt(n, seed int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = (i*31 + seed*17 + 5) % 500
	}
	return p
}

// TestCancelMidPrefillAndGeneration cancels one generation at every poll
// of its context in turn, over a prompt of two chunks: it stops before
// the prompt, between its chunks, between the layers of a chunk's graph
// and between decode steps (and their layers). Every run ends cleanly as
// StopCancelled with a prefix of the uncancelled tokens, nothing leaks,
// and the pooled sessions it used generate exactly as before.
func TestCancelMidPrefillAndGeneration(t *testing.T) {
	g := New(tinyRandom(t), letters{})
	g.SessionOptions.Capacity = 320
	var mu sync.Mutex
	var errs []error
	g.NewRunner = func() (Runner, error) {
		s, err := graphs.NewSession(g.Model, g.SessionOptions)
		if err != nil {
			return nil, err
		}
		return errRecorder{s, &mu, &errs}, nil
	}
	defer g.Close()
	prompt := testPrompt(prefillChunk+40, 1)
	opts := Options{MaxTokens: 6, IgnoreEOS: true, Sampling: Sampling{DoSample: true, Temperature: 0.9, TopK: 50, Seed: 5}}
	full, err := g.Generate(context.Background(), prompt, opts)
	if err != nil || full.StopReason != StopMaxTokens {
		t.Fatalf("uncancelled: %v (%v)", full.StopReason, err)
	}
	stages := map[string]int{}
	for n := 0; ; n++ {
		ctx := canceltest.After(n)
		var chunks int
		o := opts
		o.Progress = func(done, total int) { chunks++ }
		res, err := g.Generate(ctx, prompt, o)
		if err != nil {
			t.Fatalf("cancelled at poll %d: %v, want a cancelled result", n+1, err)
		}
		if res.StopReason != StopCancelled {
			if !slices.Equal(res.Tokens, full.Tokens) {
				t.Fatalf("poll budget %d: %v, want %v", n, res.Tokens, full.Tokens)
			}
			break
		}
		if !slices.Equal(res.Tokens, full.Tokens[:len(res.Tokens)]) {
			t.Fatalf("cancelled at poll %d: tokens %v are not a prefix of %v", n+1, res.Tokens, full.Tokens)
		}
		switch {
		case len(res.Tokens) > 0:
			stages["generation"]++
		case chunks == 0:
			stages["first chunk"]++
		default:
			stages["second chunk"]++
		}
		if n > 500 {
			t.Fatal("the generation never ran to its end")
		}
	}
	mu.Lock()
	for _, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("runner error %v does not wrap context.Canceled", err)
		}
		if strings.Contains(err.Error(), "stopped before layer") {
			stages["inside a graph"]++
		}
	}
	mu.Unlock()
	for _, s := range []string{"first chunk", "second chunk", "generation", "inside a graph"} {
		if stages[s] == 0 {
			t.Errorf("no cancellation stopped in the %s (%v)", s, stages)
		}
	}
	again, err := g.Generate(context.Background(), prompt, opts)
	if err != nil || !slices.Equal(again.Tokens, full.Tokens) {
		t.Fatalf("after the cancellations: %v (%v), want %v", again.Tokens, err, full.Tokens)
	}
	leaktest.VerifyNone(t)
}

// TestCancelFromAnotherGoroutine cancels generations from timers, at
// whatever point they have reached: each ends as StopCancelled with a
// prefix of the full result (or complete, if it won the race), and no
// goroutine is left.
func TestCancelFromAnotherGoroutine(t *testing.T) {
	g := New(tinyRandom(t), letters{})
	g.SessionOptions.Capacity = 320
	defer g.Close()
	prompt := testPrompt(40, 2)
	opts := Options{MaxTokens: 200, IgnoreEOS: true}
	full, err := g.Generate(context.Background(), prompt, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{0, 100 * time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(after, cancel)
		res, err := g.Generate(ctx, prompt, opts)
		timer.Stop()
		cancel()
		if err != nil {
			t.Fatalf("cancelled after %v: %v", after, err)
		}
		if !slices.Equal(res.Tokens, full.Tokens[:len(res.Tokens)]) || (res.StopReason != StopCancelled && len(res.Tokens) != len(full.Tokens)) {
			t.Fatalf("cancelled after %v: %d tokens (%s), not a prefix of the %d uncancelled", after, len(res.Tokens), res.StopReason, len(full.Tokens))
		}
	}
	leaktest.VerifyNone(t)
}
