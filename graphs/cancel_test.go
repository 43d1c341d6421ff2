package graphs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/canceltest"
	"github.com/gozoo/gozoo/internal/leaktest"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/gemma3"
	_ "github.com/gozoo/gozoo/zoo/qwen3"
)

// randomModel builds a random model from a golden case's config.json with
// the given keys changed.
func randomModel(t *testing.T, golden string, set map[string]any) zoo.Model {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "golden", golden, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		cfg[k] = v
	}
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	c, err := zoo.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := zoo.NewRandom(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ids(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i*37 + 11) % 500
	}
	return out
}

// TestAppendContextStopsBetweenLayers cancels a prefill at every poll of
// its context in turn: it stops before the run, or inside the graph
// before each of the layers after the first, with an error wrapping
// context.Canceled that says where; nothing is counted in context; and
// the session, once Reset, computes the same logits as before.
func TestAppendContextStopsBetweenLayers(t *testing.T) {
	const layers = 4
	m := randomModel(t, "qwen3_gqa_tied", map[string]any{"num_hidden_layers": layers})
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prompt := ids(12)
	want, err := s.AppendInput(graphs.IDs(prompt...))
	if err != nil {
		t.Fatal(err)
	}
	stoppedAt := map[string]bool{}
	for n := 0; ; n++ {
		s.Reset()
		ctx := canceltest.After(n)
		got, err := s.AppendInputContext(ctx, graphs.IDs(prompt...))
		if err == nil {
			if n < 2+layers-1 {
				t.Fatalf("cancelled at poll %d: the prefill ran to its end (%d polls), want it stopped", n+1, ctx.Polls())
			}
			if !slices.Equal(got, want) {
				t.Fatalf("uncancelled run %d: logits differ from AppendInput's", n)
			}
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("poll %d: %v does not wrap context.Canceled", n+1, err)
		}
		if s.Pos() != 0 {
			t.Fatalf("poll %d: a stopped prefill left %d positions in context", n+1, s.Pos())
		}
		where := "before the run"
		for l := 1; l < layers; l++ {
			if strings.Contains(err.Error(), fmt.Sprintf("stopped before layer %d:", l)) {
				where = fmt.Sprintf("layer %d", l)
			}
		}
		stoppedAt[where] = true
		// Reset and run again, uncancelled: the same logits.
		s.Reset()
		again, err := s.AppendInputContext(context.Background(), graphs.IDs(prompt...))
		if err != nil || !slices.Equal(again, want) {
			t.Fatalf("after a prefill stopped %s (%v): logits differ from before (%v)", where, err, err)
		}
		if n > 50 {
			t.Fatal("the prefill never ran to its end")
		}
	}
	for _, w := range []string{"before the run", "layer 1", "layer 2", "layer 3"} {
		if !stoppedAt[w] {
			t.Errorf("no cancellation stopped %s (stopped at %v)", w, stoppedAt)
		}
	}
	// A decode step stops between layers too.
	s.Reset()
	if _, err := s.AppendInput(graphs.IDs(prompt...)); err != nil {
		t.Fatal(err)
	}
	_, err = s.AppendInputContext(canceltest.After(3), graphs.IDs(7))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped before layer 2") || s.Pos() != len(prompt) {
		t.Fatalf("decode step cancelled at the 4th poll: %v, position %d", err, s.Pos())
	}
	leaktest.VerifyNone(t)
}

// TestAppendContextBetweenChunks cancels a prompt fed in three chunks
// after the first: the first stays in context, the error says how far it
// got.
func TestAppendContextBetweenChunks(t *testing.T) {
	m := randomModel(t, "qwen3_gqa_tied", nil)
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 32, Buckets: []int{8}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Polls: the call's own check, chunk 1's, the checks before layers 1
	// and 2 inside its graph; chunk 2's check is cancelled.
	cd := canceltest.After(4)
	_, err = s.AppendAllContext(cd, graphs.IDs(ids(20)...))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped after 8 of 20 rows") {
		t.Fatalf("cancelled after the first chunk: %v", err)
	}
	if s.Pos() != 8 {
		t.Fatalf("position %d after one chunk of 8, want 8", s.Pos())
	}
	// Already cancelled: nothing runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.AppendInputContext(ctx, graphs.IDs(1)); !errors.Is(err, context.Canceled) || s.Pos() != 8 {
		t.Fatalf("cancelled context: %v, position %d", err, s.Pos())
	}
}

// TestInterruptedSlidingSessionGoesOn stops a graph midway on a model
// with sliding-window layers: the stopped chunk's keys went only into
// blocks past the sequence's end, so appending the chunk again computes
// what a fresh session does.
func TestInterruptedSlidingSessionGoesOn(t *testing.T) {
	m := randomModel(t, "gemma3_sliding_mqa", nil)
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prompt := ids(10)
	if _, err := s.AppendInput(graphs.IDs(prompt[:5]...)); err != nil {
		t.Fatal(err)
	}
	_, err = s.AppendInputContext(canceltest.After(3), graphs.IDs(prompt[5:]...))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "before layer") {
		t.Fatalf("stopped inside the graph: %v", err)
	}
	if s.Pos() != 5 {
		t.Fatalf("position %d after a stopped chunk, want 5", s.Pos())
	}
	got, err := s.AppendInput(graphs.IDs(prompt[5:]...))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := graphs.NewSession(m, graphs.Options{Capacity: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.AppendInput(graphs.IDs(prompt[:5]...)); err != nil {
		t.Fatal(err)
	}
	want, err := fresh.AppendInput(graphs.IDs(prompt[5:]...))
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("after the stopped chunk: logits differ from a fresh session's (%v)", err)
	}
}
