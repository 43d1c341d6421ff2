package generate

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/zoo"
)

// wantEmbedding pools golden final hidden states [T, D] in float64.
func wantEmbedding(final []float32, D int, how Pooling, normalize bool) []float64 {
	T := len(final) / D
	out := make([]float64, D)
	for t := 0; t < T; t++ {
		if how == PoolLast && t < T-1 {
			continue
		}
		for d := 0; d < D; d++ {
			out[d] += float64(final[t*D+d])
		}
	}
	if how == PoolMean {
		for d := range out {
			out[d] /= float64(T)
		}
	}
	if normalize {
		var ss float64
		for _, v := range out {
			ss += v * v
		}
		for d := range out {
			out[d] /= math.Sqrt(ss)
		}
	}
	return out
}

// TestEmbedGolden pools the final norm's output over golden prompts and
// their prefixes against transformers' last hidden states, batched and
// one input at a time.
func TestEmbedGolden(t *testing.T) {
	for _, name := range scoreCases {
		t.Run(name, func(t *testing.T) {
			g := loadGoldenRef(t, name)
			D, T := g.model.HiddenSize(), len(g.ids)
			// A prefix's hidden states are the prompt's first rows (causal).
			lens := []int{T, 1, T / 2, T - 1}
			inputs := make([][]int, len(lens))
			for i, n := range lens {
				inputs[i] = g.ids[:n]
			}
			for _, how := range []Pooling{PoolMean, PoolLast} {
				for _, normalize := range []bool{false, true} {
					opts := EmbedOptions{Pool: how, Normalize: normalize, MaxSeqs: 3}
					batched, err := Embed(context.Background(), g.model, inputs, opts)
					if err != nil {
						t.Fatal(err)
					}
					for i, n := range lens {
						want := wantEmbedding(g.final[:n*D], D, how, normalize)
						alone, err := Embed(context.Background(), g.model, inputs[i:i+1], EmbedOptions{Pool: how, Normalize: normalize})
						if err != nil {
							t.Fatal(err)
						}
						for _, got := range []struct {
							how string
							v   []float32
						}{{"batched", batched[i]}, {"alone", alone[0]}} {
							if len(got.v) != D {
								t.Fatalf("%s %v input %d: %d values, want %d", got.how, how, i, len(got.v), D)
							}
							worst := 0.0
							for d := range got.v {
								worst = max(worst, math.Abs(float64(got.v[d])-want[d]))
							}
							// Our final rows are within 3e-6 of transformers'
							// (2e-5 for Gemma3, whose rows reach 8 and whose
							// hidden_states_atol is 5e-4); pooling adds none.
							if worst > 3e-5 || math.IsNaN(worst) {
								t.Errorf("%s pool=%v normalize=%v input %d (%d tokens): differs from golden by %.3g", got.how, how, normalize, i, n, worst)
							}
						}
						// Equal but for float32 rounding (see TestScorePairsGolden).
						if d := maxAbs32(batched[i], alone[0]); d > 2e-5 {
							t.Errorf("pool=%v normalize=%v input %d: batched and alone differ by %.3g", how, normalize, i, d)
						}
					}
				}
			}
		})
	}
}

func maxAbs32(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

func TestEmbedBadInput(t *testing.T) {
	m, err := zoo.Load(testfiles.Fixture(t, "golden", "gpt2_original_bf16")) // 48 positions, 512 tokens
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		input []int
		opts  EmbedOptions
		want  string
	}{
		{"empty", nil, EmbedOptions{}, "input 1: no tokens"},
		{"outside vocabulary", []int{3, 512}, EmbedOptions{}, "input 1: token 512 at index 1 is outside the vocabulary [0, 512)"},
		{"too long", make([]int, 49), EmbedOptions{}, "input 1: 49 tokens, more than the model's 48 positions"},
		{"unknown pooling", []int{1}, EmbedOptions{Pool: 7}, "unknown pooling Pooling(7)"},
		{"negative MaxSeqs", []int{1}, EmbedOptions{MaxSeqs: -2}, "MaxSeqs must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Embed(context.Background(), m, [][]int{{1, 2}, tc.input}, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ParsePooling("max"); err == nil || !strings.Contains(err.Error(), `unknown pooling "max": want mean or last`) {
		t.Errorf("ParsePooling(max): %v", err)
	}
}
