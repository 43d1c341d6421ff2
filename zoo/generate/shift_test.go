package generate

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/graphs"
)

// TestContextShift generates past a context of 16 positions with
// ContextShift{Keep: 3}: each time the context is full the generation
// drops (n_past-3)/2 positions after the first 3, as llama.cpp's server
// does, and goes on. The tokens equal a replay of the same appends and
// shifts on a bare session (the shift's arithmetic is checked against a
// recompute in graphs' TestShiftMatchesRecompute); without ContextShift
// the same generation stops at the full context.
func TestContextShift(t *testing.T) {
	g := newGen(t)
	const capacity, keep, maxTokens = 16, 3, 30
	g.SessionOptions.Capacity = capacity
	prompt, _ := goldenGreedy(t)
	res, err := g.Generate(context.Background(), prompt, Options{MaxTokens: maxTokens, IgnoreEOS: true, ContextShift: &ContextShift{Keep: keep}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tokens) != maxTokens || res.StopReason != StopMaxTokens || res.Shifts < 2 {
		t.Fatalf("%d tokens, stop %s, %d shifts: want %d tokens, max_tokens, at least 2 shifts", len(res.Tokens), res.StopReason, res.Shifts, maxTokens)
	}

	sess, err := graphs.NewSession(g.Model, graphs.Options{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	logits, err := sess.Append(prompt)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	shifts, discarded := 0, 0
	for len(want) < maxTokens {
		tok := Argmax(logits)
		want = append(want, tok)
		if len(want) == maxTokens {
			break
		}
		if sess.Pos() >= capacity {
			d := (sess.Pos() - keep) / 2
			if err := sess.Shift(keep, d); err != nil {
				t.Fatal(err)
			}
			shifts, discarded = shifts+1, discarded+d
		}
		if logits, err = sess.Append([]int{tok}); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(res.Tokens, want) || res.Shifts != shifts || res.Discarded != discarded {
		t.Errorf("generated %v with %d shifts dropping %d, replay %v with %d dropping %d", res.Tokens, res.Shifts, res.Discarded, want, shifts, discarded)
	}

	plain, err := g.Generate(context.Background(), prompt, Options{MaxTokens: maxTokens, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if plain.StopReason != StopContextFull || plain.Shifts != 0 || !slices.Equal(plain.Tokens, res.Tokens[:len(plain.Tokens)]) {
		t.Errorf("without ContextShift: %d tokens, stop %s, %d shifts", len(plain.Tokens), plain.StopReason, plain.Shifts)
	}
	for _, k := range []int{-1, capacity - 1} {
		_, err := g.Generate(context.Background(), prompt, Options{MaxTokens: 2, ContextShift: &ContextShift{Keep: k}})
		if err == nil || !strings.Contains(err.Error(), "ContextShift.Keep") {
			t.Errorf("Keep %d: %v", k, err)
		}
	}
}
