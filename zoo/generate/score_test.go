package generate

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/gemma3"
	_ "github.com/gozoo/gozoo/zoo/gpt2"
	_ "github.com/gozoo/gozoo/zoo/llama"
)

// scoreCases are the golden cases the scoring and embedding tests run:
// full attention with a tied head, sliding windows shorter than the
// prompt (Gemma3), learned positions (GPT-2) and an untied head.
var scoreCases = []string{"qwen3_gqa_tied", "gemma3_sliding_mqa", "gemma3_pattern_softcap", "gpt2_original_bf16", "gpt2_prefixed", "llama_mha_untied"}

// goldenRef is what a golden case's golden.safetensors holds for the
// decoder: the full forward over ids and the greedy run.
type goldenRef struct {
	model          zoo.Model
	ids            []int
	logits         [][]float32 // [T][V]
	final          []float32   // the final norm's output, [T, D]
	prompt, greedy []int
	greedyLogits   [][]float32 // [steps][V]
}

func loadGoldenRef(t *testing.T, name string) *goldenRef {
	t.Helper()
	dir := testfiles.Fixture(t, "golden", name)
	m, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := loaders.OpenSafetensors(filepath.Join(dir, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ints := func(name string) []int {
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
	floats := func(name string) []float32 {
		v, _, err := f.Float32s(name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	rows := func(v []float32, width int) [][]float32 {
		var out [][]float32
		for off := 0; off+width <= len(v); off += width {
			out = append(out, v[off:off+width])
		}
		return out
	}
	g := &goldenRef{model: m, ids: ints("input_ids"), prompt: ints("greedy_prompt"), greedy: ints("greedy_ids")}
	V, D, T, L := m.VocabSize(), m.HiddenSize(), len(g.ids), m.NumLayers()
	g.logits = rows(floats("logits"), V)
	g.greedyLogits = rows(floats("greedy_logits"), V)
	hidden := floats("hidden_states") // [L+1, T, D]
	if len(g.logits) != T || len(hidden) != (L+1)*T*D || len(g.greedyLogits) != len(g.greedy) {
		t.Fatalf("%s: golden shapes: %d logit rows, %d hidden values, %d greedy rows for T=%d L=%d D=%d", name, len(g.logits), len(hidden), len(g.greedyLogits), T, L, D)
	}
	g.final = hidden[L*T*D:]
	return g
}

// want is the golden score of continuation after the rows whose logits
// predict its tokens.
func wantScore(rows [][]float32, continuation []int) Score {
	s := Score{Greedy: true}
	for j, id := range continuation {
		lp := LogSoftmax(nil, rows[j])[id]
		s.TokenLogProbs = append(s.TokenLogProbs, lp)
		s.LogProb += lp
		s.Greedy = s.Greedy && Argmax(rows[j]) == id
	}
	return s
}

// TestScorePairsGolden scores splits of each golden prompt (and the
// golden greedy continuation) against log_softmax of transformers'
// logits, batched and one pair at a time.
func TestScorePairsGolden(t *testing.T) {
	for _, name := range scoreCases {
		t.Run(name, func(t *testing.T) {
			g := loadGoldenRef(t, name)
			T := len(g.ids)
			var pairs []ScorePair
			var want []Score
			for _, k := range []int{1, 2, T / 2, T - 3, T - 1} {
				pairs = append(pairs, ScorePair{g.ids[:k], g.ids[k:]})
				want = append(want, wantScore(g.logits[k-1:], g.ids[k:]))
				// The golden argmax after the context is greedy; the
				// next id is too only if it is that argmax.
				best := Argmax(g.logits[k-1])
				pairs = append(pairs, ScorePair{g.ids[:k], []int{best}}, ScorePair{g.ids[:k], []int{(best + 1) % g.model.VocabSize()}})
				want = append(want, wantScore(g.logits[k-1:], []int{best}), wantScore(g.logits[k-1:], []int{(best + 1) % g.model.VocabSize()}))
			}
			pairs = append(pairs, ScorePair{g.prompt, g.greedy})
			want = append(want, wantScore(g.greedyLogits, g.greedy))
			if !want[len(want)-1].Greedy {
				t.Fatal("golden greedy continuation is not greedy by its own logits")
			}

			batched, err := ScorePairs(context.Background(), g.model, pairs, ScoreOptions{MaxSeqs: 8})
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range pairs {
				alone, err := ScorePairs(context.Background(), g.model, []ScorePair{p}, ScoreOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, got := range []struct {
					how string
					s   Score
				}{{"batched", batched[i]}, {"alone", alone[0]}} {
					if d := math.Abs(got.s.LogProb - want[i].LogProb); d > 1e-4 || math.IsNaN(d) {
						t.Errorf("pair %d (%d+%d tokens) %s: log-prob %.8f, golden %.8f (diff %.3g)", i, len(p.Context), len(p.Continuation), got.how, got.s.LogProb, want[i].LogProb, d)
					}
					if got.s.Greedy != want[i].Greedy {
						t.Errorf("pair %d %s: greedy %v, golden argmax says %v", i, got.how, got.s.Greedy, want[i].Greedy)
					}
					if len(got.s.TokenLogProbs) != len(p.Continuation) {
						t.Fatalf("pair %d %s: %d token log-probs for %d tokens", i, got.how, len(got.s.TokenLogProbs), len(p.Continuation))
					}
					for j, lp := range got.s.TokenLogProbs {
						if d := math.Abs(lp - want[i].TokenLogProbs[j]); d > 1e-4 {
							t.Errorf("pair %d %s token %d: log-prob %.8f, golden %.8f", i, got.how, j, lp, want[i].TokenLogProbs[j])
						}
					}
				}
				// Equal but for float32 rounding: forwards of other row
				// counts sum their products in another order.
				if d := maxDiff(batched[i].TokenLogProbs, alone[0].TokenLogProbs); d > 2e-5 {
					t.Errorf("pair %d: batched and alone differ by %.3g", i, d)
				}
			}
		})
	}
}

func maxDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

// TestScorePairsGroups runs pairs in groups smaller than their number,
// with contexts long enough for the prefix cache's whole blocks, shared
// contexts forked and a context of one token: every way must score as
// the pair alone does.
func TestScorePairsGroups(t *testing.T) {
	for _, name := range []string{"qwen3_gqa_tied", "gemma3_sliding_mqa"} {
		t.Run(name, func(t *testing.T) {
			g := loadGoldenRef(t, name)
			long := slices.Concat(g.ids, g.ids, g.ids) // 3T > one 32-position block
			pairs := []ScorePair{
				{long[:40], long[40:45]},
				{long[:40], long[40:41]},
				{long[:1], long[1:6]},
				{long[:40], long[41:44]},
				{long[:45], long[45:50]}, // the first pair's blocks, next group
				{long[:40], long[40:45]}, // the first pair again
				{long[:33], long[33:34]},
			}
			for _, seqs := range []int{1, 2, 3, 16} {
				got, err := ScorePairs(context.Background(), g.model, pairs, ScoreOptions{MaxSeqs: seqs})
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range pairs {
					alone, err := ScorePairs(context.Background(), g.model, []ScorePair{p}, ScoreOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if d := maxDiff(got[i].TokenLogProbs, alone[0].TokenLogProbs); d > 2e-5 || got[i].Greedy != alone[0].Greedy {
						t.Errorf("MaxSeqs %d pair %d: differs from alone by %.3g (greedy %v, alone %v)", seqs, i, d, got[i].Greedy, alone[0].Greedy)
					}
				}
			}
		})
	}
}

func TestScorePairsBadInput(t *testing.T) {
	m, err := zoo.Load(testfiles.Fixture(t, "golden", "gpt2_original_bf16")) // 48 positions, 512 tokens
	if err != nil {
		t.Fatal(err)
	}
	ok := ScorePair{[]int{1, 2}, []int{3}}
	long := make([]int, 40)
	for _, tc := range []struct {
		name string
		bad  ScorePair
		opts ScoreOptions
		want string
	}{
		{"empty context", ScorePair{nil, []int{1}}, ScoreOptions{}, "pair 1: empty context"},
		{"empty continuation", ScorePair{[]int{1}, nil}, ScoreOptions{}, "pair 1: empty continuation"},
		{"context outside vocabulary", ScorePair{[]int{1, 2, 512}, []int{1}}, ScoreOptions{}, "pair 1: context token 512 at index 2 is outside the vocabulary [0, 512)"},
		{"negative continuation", ScorePair{[]int{1}, []int{4, -1}}, ScoreOptions{}, "pair 1: continuation token -1 at index 1"},
		{"too long", ScorePair{long, long[:10]}, ScoreOptions{}, "pair 1: context of 40 and continuation of 10 tokens take 49 positions, more than the model's 48"},
		{"negative MaxSeqs", ok, ScoreOptions{MaxSeqs: -1}, "MaxSeqs must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ScorePairs(context.Background(), m, []ScorePair{ok, tc.bad}, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	// 48 positions exactly fit: the last continuation token is not run.
	if _, err := ScorePairs(context.Background(), m, []ScorePair{{long, long[:9]}}, ScoreOptions{}); err != nil {
		t.Errorf("48 positions: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ScorePairs(ctx, m, []ScorePair{ok}, ScoreOptions{}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("cancelled: %v", err)
	}
}

func TestLogSoftmax(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	f32 := float32(math.MaxFloat32)
	for _, tc := range []struct {
		name   string
		logits []float32
		want   []float64
		lse    float64
	}{
		{"uniform", []float32{0, 0, 0, 0}, []float64{-math.Log(4), -math.Log(4), -math.Log(4), -math.Log(4)}, math.Log(4)},
		{"shifted", []float32{1000, 999}, []float64{-math.Log1p(math.Exp(-1)), -1 - math.Log1p(math.Exp(-1))}, 1000 + math.Log1p(math.Exp(-1))},
		// log(1 + e^-40) rounds to 0 in float64; log1p keeps it.
		{"tiny rest", []float32{0, -40}, []float64{-math.Exp(-40), -40 - math.Exp(-40)}, math.Exp(-40)},
		{"extremes", []float32{f32, -f32}, []float64{0, -2 * float64(f32)}, float64(f32)},
		{"+Inf shares", []float32{float32(inf), 0, float32(inf)}, []float64{-math.Ln2, -inf, -math.Ln2}, inf},
		{"all -Inf", []float32{float32(-inf), float32(-inf)}, []float64{nan, nan}, -inf},
		{"NaN", []float32{0, float32(nan)}, []float64{nan, nan}, nan},
		{"empty", nil, []float64{}, -inf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := LogSoftmax(nil, tc.logits)
			if len(got) != len(tc.want) {
				t.Fatalf("%d entries, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !nearly(got[i], tc.want[i]) {
					t.Errorf("LogSoftmax[%d] = %g, want %g", i, got[i], tc.want[i])
				}
				if lp := LogProb(tc.logits, i); !nearly(lp, got[i]) {
					t.Errorf("LogProb(%d) = %g, LogSoftmax says %g", i, lp, got[i])
				}
			}
			if lse := LogSumExp(tc.logits); !nearly(lse, tc.lse) {
				t.Errorf("LogSumExp = %g, want %g", lse, tc.lse)
			}
		})
	}
	if lp := LogProb([]float32{0, 1}, 2); !math.IsNaN(lp) {
		t.Errorf("LogProb of an id past the vocabulary = %g, want NaN", lp)
	}
}

// nearly compares to 1e-14 relative, with NaN equal to NaN and infinities
// exact.
func nearly(a, b float64) bool {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		return math.IsNaN(a) && math.IsNaN(b)
	case math.IsInf(a, 0) || math.IsInf(b, 0):
		return a == b
	}
	return math.Abs(a-b) <= 1e-14*max(math.Abs(a), math.Abs(b), 1e-300)
}
