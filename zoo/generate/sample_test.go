package generate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
)

var (
	inf = float32(math.Inf(1))
	nan = float32(math.NaN())
)

// ln returns the logits whose softmax is probs (which sum to 1).
func ln(probs ...float64) []float32 {
	out := make([]float32, len(probs))
	for i, p := range probs {
		out[i] = float32(math.Log(p))
	}
	return out
}

// mask returns logits with the tokens not in keep set to -Inf.
func mask(logits []float32, keep ...int) []float32 {
	out := slices.Clone(logits)
	for i := range out {
		if !slices.Contains(keep, i) {
			out[i] = -inf
		}
	}
	return out
}

// sameLogits compares exactly, with NaN equal to NaN.
func sameLogits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return x == y || x != x && y != y })
}

func TestProcessors(t *testing.T) {
	// Probabilities .15, .5, .05, .3 in a shuffled order.
	p4 := ln(.15, .5, .05, .3)
	cases := []struct {
		name    string
		p       LogitsProcessor
		logits  []float32
		context []int
		want    []float32
	}{
		// Repetition penalty: once per distinct token (0 appears twice),
		// ids outside the vocabulary ignored.
		{"penalty 2", RepetitionPenalty{2}, []float32{2, -1, 0.5, 3, -inf}, []int{0, 1, 0, 9, -1, 4}, []float32{1, -2, 0.5, 3, -inf}},
		{"penalty 0.5 encourages", RepetitionPenalty{0.5}, []float32{2, -1, 0.5}, []int{0, 1}, []float32{4, -0.5, 0.5}},
		{"penalty 1 off", RepetitionPenalty{1}, []float32{2, -1}, []int{0, 1}, []float32{2, -1}},
		{"penalty 0 off", RepetitionPenalty{0}, []float32{2, -1}, []int{0, 1}, []float32{2, -1}},
		{"penalty empty context", RepetitionPenalty{2}, []float32{2, -1}, nil, []float32{2, -1}},

		{"temperature 2", Temperature{2}, []float32{2, -1, -inf, 0}, nil, []float32{1, -0.5, -inf, 0}},
		{"temperature 0.5", Temperature{0.5}, []float32{2, -1}, nil, []float32{4, -2}},
		{"temperature 1 off", Temperature{1}, []float32{2, -1}, nil, []float32{2, -1}},
		{"temperature 0 keeps the best, ties too", Temperature{0}, []float32{1, 3, nan, 3}, nil, []float32{-inf, 3, -inf, 3}},
		{"temperature +Inf is uniform", Temperature{math.Inf(1)}, []float32{1, -inf, 5}, nil, []float32{0, -inf, 0}},

		{"top-k 1", TopK{1}, []float32{1, 3, 2, 0}, nil, []float32{-inf, 3, -inf, -inf}},
		{"top-k 2 with a tie at the top", TopK{2}, []float32{1, 3, 2, 3}, nil, []float32{-inf, 3, -inf, 3}},
		{"top-k 2 keeps ties at the k-th", TopK{2}, []float32{5, 4, 1, 4}, nil, []float32{5, 4, -inf, 4}},
		{"top-k 3 keeps ties at the k-th", TopK{3}, []float32{2, 1, 1, 1, 0}, nil, []float32{2, 1, 1, 1, -inf}},
		{"top-k past the finite ones", TopK{3}, []float32{1, -inf, -inf, 2}, nil, []float32{1, -inf, -inf, 2}},
		{"top-k drops NaN", TopK{1}, []float32{nan, 1, 2}, nil, []float32{-inf, -inf, 2}},
		{"top-k 0 off", TopK{0}, []float32{1, 2}, nil, []float32{1, 2}},
		{"top-k >= vocab off", TopK{2}, []float32{1, 2}, nil, []float32{1, 2}},

		// Top-p: a token stays while the mass before it is below p.
		{"top-p 0.45 keeps one", TopP{0.45}, p4, nil, mask(p4, 1)},
		{"top-p 0.7", TopP{0.7}, p4, nil, mask(p4, 1, 3)},
		{"top-p 0.9", TopP{0.9}, p4, nil, mask(p4, 1, 3, 0)},
		{"top-p 0.96 keeps all", TopP{0.96}, p4, nil, p4},
		{"top-p 0 keeps at least one", TopP{0}, p4, nil, mask(p4, 1)},
		{"top-p 1 off", TopP{1}, p4, nil, p4},
		{"top-p ties by id", TopP{0.3}, []float32{0, 0, 0, 0}, nil, []float32{0, 0, -inf, -inf}},
		{"top-p ties by id 2", TopP{0.3}, []float32{-1, 0, 0, 0, 0}, nil, []float32{-inf, 0, 0, -inf, -inf}},
		{"top-p with -Inf", TopP{0.5}, []float32{-inf, float32(math.Log(.6)), float32(math.Log(.4)), -inf}, nil, []float32{-inf, float32(math.Log(.6)), -inf, -inf}},
		{"top-p with -Inf 2", TopP{0.7}, []float32{-inf, float32(math.Log(.6)), float32(math.Log(.4)), -inf}, nil, []float32{-inf, float32(math.Log(.6)), float32(math.Log(.4)), -inf}},
		{"top-p all -Inf", TopP{0.5}, []float32{-inf, -inf}, nil, []float32{-inf, -inf}},
		{"top-p drops NaN", TopP{0.9}, []float32{nan, 1, 0}, nil, []float32{-inf, 1, 0}},
		{"top-p far tail", TopP{0.5}, []float32{-41, 0, -inf, -100}, nil, []float32{-inf, 0, -inf, -inf}},
		{"top-p +Inf", TopP{0.9}, []float32{1, inf, 2}, nil, []float32{-inf, inf, -inf}},

		// Min-p: drop p < P * p_max.
		{"min-p 0.25", MinP{0.25}, p4, nil, mask(p4, 0, 1, 3)},
		{"min-p 0.5", MinP{0.5}, p4, nil, mask(p4, 1, 3)},
		{"min-p 0.7", MinP{0.7}, p4, nil, mask(p4, 1)},
		{"min-p 1 keeps ties at the top", MinP{1}, []float32{1, 1, 0.99}, nil, []float32{1, 1, -inf}},
		{"min-p 0 off", MinP{0}, p4, nil, p4},
		{"min-p far below kept", MinP{1e-50}, []float32{0, -100, -inf}, nil, []float32{0, -100, -inf}},
		{"min-p far below dropped", MinP{1e-40}, []float32{0, -100, -inf}, nil, []float32{0, -inf, -inf}},
		{"min-p drops NaN", MinP{0.1}, []float32{nan, 1, 0}, nil, []float32{-inf, 1, 0}},
		{"min-p all -Inf", MinP{0.1}, []float32{-inf, -inf}, nil, []float32{-inf, -inf}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := slices.Clone(c.logits)
			c.p.Process(got, c.context)
			if !sameLogits(got, c.want) {
				t.Errorf("%#v on %v: got %v, want %v", c.p, c.logits, got, c.want)
			}
		})
	}
}

// refTopP, refMinP and refTopK are transformers' warpers written plainly:
// a full sort of the vocabulary, softmax over all of it.
func refTopP(logits []float32, p float64) []float32 {
	idx := order(logits)
	probs := softmaxAll(logits)
	out := slices.Clone(logits)
	var cum float64
	for n, i := range idx {
		if n > 0 && cum >= p {
			out[i] = -inf
		}
		cum += probs[i]
	}
	return out
}

func refMinP(logits []float32, m float64) []float32 {
	probs := softmaxAll(logits)
	top := slices.Max(probs)
	out := slices.Clone(logits)
	for i, q := range probs {
		if q < m*top {
			out[i] = -inf
		}
	}
	return out
}

func refTopK(logits []float32, k int) []float32 {
	idx := order(logits)
	kth := logits[idx[k-1]]
	out := slices.Clone(logits)
	for i, l := range out {
		if l < kth {
			out[i] = -inf
		}
	}
	return out
}

func order(logits []float32) []int {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
	return idx
}

func softmaxAll(logits []float32) []float64 {
	m := float64(slices.Max(logits))
	out := make([]float64, len(logits))
	var z float64
	for i, l := range logits {
		out[i] = math.Exp(float64(l) - m)
		z += out[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

// TestProcessorsMatchFullSort checks the fast processors against the plain
// ones on random vocabularies: peaked and flat, with ties and -Inf.
func TestProcessorsMatchFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 60 {
		n := 50 + rng.IntN(3000)
		scale := []float64{0.5, 3, 10, 40}[trial%4]
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * scale)
			switch {
			case trial%3 == 1:
				logits[i] = float32(math.Round(float64(logits[i]))) // ties
			case trial%3 == 2 && rng.IntN(10) == 0:
				logits[i] = -inf
			}
		}
		for _, p := range []float64{0.05, 0.5, 0.9, 0.99, 0.999999} {
			got := slices.Clone(logits)
			TopP{p}.Process(got, nil)
			if want := refTopP(logits, p); !sameLogits(got, want) {
				t.Errorf("trial %d top-p %g: kept %d, full sort keeps %d", trial, p, kept(got), kept(want))
			}
		}
		for _, m := range []float64{1e-6, 0.01, 0.1, 0.5, 0.9} {
			got := slices.Clone(logits)
			MinP{m}.Process(got, nil)
			if want := refMinP(logits, m); !sameLogits(got, want) {
				t.Errorf("trial %d min-p %g: kept %d, full sort keeps %d", trial, m, kept(got), kept(want))
			}
		}
		for _, k := range []int{1, 5, 50, n - 1} {
			got := slices.Clone(logits)
			TopK{k}.Process(got, nil)
			if want := refTopK(logits, k); !sameLogits(got, want) {
				t.Errorf("trial %d top-k %d: kept %d, full sort keeps %d", trial, k, kept(got), kept(want))
			}
		}
	}
}

func kept(logits []float32) int {
	n := 0
	for _, l := range logits {
		if l > -inf {
			n++
		}
	}
	return n
}

func TestArgmax(t *testing.T) {
	for _, c := range []struct {
		logits []float32
		want   int
	}{
		{[]float32{1, 3, 2}, 1},
		{[]float32{3, 1, 3}, 0},
		{[]float32{1, 3, 3}, 1},
		{[]float32{nan, 1, 2}, 2},
		{[]float32{1, nan, 0}, 0},
		{[]float32{-inf, -inf, -1}, 2},
		{[]float32{-inf, -inf}, 0},
		{[]float32{nan, nan}, 0},
		{[]float32{nan, -inf}, 1},
		{[]float32{2, inf, inf}, 1},
		{[]float32{-5}, 0},
		{nil, 0},
		{[]float32{nan, 1, nan, 4, 4}, 3},
	} {
		if got := Argmax(c.logits); got != c.want {
			t.Errorf("Argmax(%v) = %d, want %d", c.logits, got, c.want)
		}
	}
}

func TestSamplingProcessors(t *testing.T) {
	ban := banToken(3)
	for _, c := range []struct {
		name string
		s    Sampling
		want []LogitsProcessor
	}{
		{"zero", Sampling{}, nil},
		{"greedy with penalty", Sampling{RepetitionPenalty: 1.3}, []LogitsProcessor{RepetitionPenalty{1.3}}},
		{"greedy ignores warpers", Sampling{Temperature: 0.7, TopK: 5, TopP: 0.9, MinP: 0.1, RepetitionPenalty: 1.1}, []LogitsProcessor{RepetitionPenalty{1.1}}},
		{"temperature 0 is greedy", Sampling{DoSample: true, TopK: 5}, nil},
		{"all, in transformers' order", Sampling{DoSample: true, Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.2},
			[]LogitsProcessor{RepetitionPenalty{1.2}, Temperature{0.7}, TopK{40}, TopP{0.9}, MinP{0.05}}},
		{"offs skipped", Sampling{DoSample: true, Temperature: 1, TopP: 1, RepetitionPenalty: 1}, nil},
		{"config defaults", Sampling{DoSample: true, Temperature: 1, TopK: 50, TopP: 1, RepetitionPenalty: 1}, []LogitsProcessor{TopK{50}}},
		{"extra is not built in", Sampling{DoSample: true, Temperature: 2, Extra: []LogitsProcessor{ban}}, []LogitsProcessor{Temperature{2}}},
	} {
		if got := c.s.Processors(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Processors() = %#v, want %#v", c.name, got, c.want)
		}
	}
}

// banToken is a user processor: it removes one token.
type banToken int

func (b banToken) Process(logits []float32, _ []int) { logits[b] = -inf }

// recorder is a user processor that remembers what it saw.
type recorder struct {
	logits   [][]float32
	contexts [][]int
}

func (r *recorder) Process(logits []float32, context []int) {
	r.logits = append(r.logits, slices.Clone(logits))
	r.contexts = append(r.contexts, slices.Clone(context))
}

var testLogits = []float32{2, 1.9, 1.5, 0.2, 0.1, -1, -3, 1.8}

// draws runs a sampler n times on the same logits.
func draws(s Sampling, context []int, n int) map[int]int {
	counts := map[int]int{}
	sm := newSampler(s, context)
	for range n {
		counts[sm.next(slices.Clone(testLogits))]++
	}
	return counts
}

func only(t *testing.T, name string, c map[int]int, allowed ...int) {
	t.Helper()
	for id := range c {
		if !slices.Contains(allowed, id) {
			t.Errorf("%s drew token %d, allowed %v (counts %v)", name, id, allowed, c)
		}
	}
	for _, id := range allowed {
		if c[id] == 0 {
			t.Errorf("%s never drew token %d (counts %v)", name, id, c)
		}
	}
}

func TestSamplerExtra(t *testing.T) {
	ban0 := []LogitsProcessor{banToken(0)}
	only(t, "greedy, 0 banned", draws(Sampling{Extra: ban0}, nil, 50), 1)
	only(t, "greedy with penalty, 1 seen, 0 banned", draws(Sampling{RepetitionPenalty: 2, Extra: ban0}, []int{1}, 50), 7)
	only(t, "top-k 3, 0 banned", draws(Sampling{DoSample: true, Temperature: 1, TopK: 3, Extra: ban0}, nil, 2000), 1, 7)
	only(t, "two extras", draws(Sampling{DoSample: true, Temperature: 1, TopK: 3, Extra: []LogitsProcessor{banToken(0), banToken(7)}}, nil, 200), 1)

	// Extra runs after the built-ins and sees the context grow.
	rec := &recorder{}
	prompt := make([]int, 2, 10) // spare capacity: the sampler must not write into it
	prompt[0], prompt[1] = 3, 4
	sm := newSampler(Sampling{DoSample: true, Temperature: 2, TopK: 2, RepetitionPenalty: 2, Extra: []LogitsProcessor{rec}}, prompt)
	id := sm.next(slices.Clone(testLogits))
	sm.observe(id)
	sm.observe(6)
	sm.next(slices.Clone(testLogits))
	want := []float32{1, 0.95, -inf, -inf, -inf, -inf, -inf, -inf} // 3, 4 penalized, halved, top-2
	if !sameLogits(rec.logits[0], want) {
		t.Errorf("extra saw %v, want %v", rec.logits[0], want)
	}
	if want := [][]int{{3, 4}, {3, 4, id, 6}}; !reflect.DeepEqual(rec.contexts, want) {
		t.Errorf("contexts %v, want %v", rec.contexts, want)
	}
	if prompt[:3][2] != 0 {
		t.Errorf("the sampler wrote into the prompt's backing array")
	}
}

func TestSamplerSeeds(t *testing.T) {
	run := func(s Sampling) []int {
		sm := newSampler(s, []int{1})
		var out []int
		for range 200 {
			id := sm.next(slices.Clone(testLogits))
			sm.observe(id)
			out = append(out, id)
		}
		return out
	}
	for _, s := range []Sampling{
		{DoSample: true, Temperature: 1.5, Seed: 1},
		{DoSample: true, Temperature: 0.8, TopK: 5, TopP: 0.95, MinP: 0.01, RepetitionPenalty: 1.3, Seed: 5},
	} {
		a, b := run(s), run(s)
		if !slices.Equal(a, b) {
			t.Errorf("%+v: the same seed gave %v and %v", s, a, b)
		}
		s.Seed++
		if c := run(s); slices.Equal(a, c) {
			t.Errorf("%+v: seeds %d and %d gave the same tokens %v", s, s.Seed-1, s.Seed, a)
		}
	}
}

// TestSamplerDistribution checks that the draw follows softmax(logits / T).
func TestSamplerDistribution(t *testing.T) {
	const n = 20000
	for _, temp := range []float64{1, 2} {
		c := draws(Sampling{DoSample: true, Temperature: temp, Seed: 7}, nil, n)
		scaled := slices.Clone(testLogits)
		Temperature{temp}.Process(scaled, nil)
		for i, p := range softmaxAll(scaled) {
			// 5 standard deviations of a binomial count.
			if got, sd := float64(c[i])/n, math.Sqrt(p*(1-p)/n); math.Abs(got-p) > 5*sd {
				t.Errorf("T=%g: token %d drawn %.4f of the time, want %.4f", temp, i, got, p)
			}
		}
	}
}

// TestSamplerOptions checks each filter on synthetic logits over many draws.
func TestSamplerOptions(t *testing.T) {
	draw := func(s Sampling, context []int) map[int]int { return draws(s, context, 4000) }
	only(t, "greedy", draw(Sampling{}, nil), 0)
	only(t, "top-k 3", draw(Sampling{DoSample: true, Temperature: 1, TopK: 3}, nil), 0, 1, 7)
	// p(0), p(1), p(7) = .27, .245, .221 at T=1: top-p 0.6 keeps those three.
	only(t, "top-p 0.6", draw(Sampling{DoSample: true, Temperature: 1, TopP: 0.6}, nil), 0, 7, 1)
	// min-p 0.5: tokens with p >= 0.5 * p(0), i.e. logit >= 2 - ln 2 = 1.31.
	only(t, "min-p 0.5", draw(Sampling{DoSample: true, Temperature: 1, MinP: 0.5}, nil), 0, 7, 1, 2)
	// A very low temperature is as good as greedy.
	only(t, "temperature 0.005", draw(Sampling{DoSample: true, Temperature: 0.005}, nil), 0)
	// Temperature flattens: at T=3 token 6 (logit -3) appears.
	if c := draw(Sampling{DoSample: true, Temperature: 3}, nil); c[6] == 0 {
		t.Errorf("temperature 3 never drew the least likely token: %v", c)
	}
	// The repetition penalty demotes seen tokens: with 0 and 7 seen and a
	// penalty of 2, greedy picks 1.
	only(t, "repetition penalty", draw(Sampling{RepetitionPenalty: 2}, []int{0, 7}), 1)
	sm := newSampler(Sampling{RepetitionPenalty: 2}, []int{5})
	l := slices.Clone(testLogits)
	sm.next(l)
	if l[5] != -2 || l[0] != 2 {
		t.Errorf("penalty 2 on a negative logit -1 gave %g, on an unseen token %g", l[5], l[0])
	}
}

// BenchmarkSampler is one step on a Qwen-sized vocabulary.
func BenchmarkSampler(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	context := make([]int, 4096)
	for i := range context {
		context[i] = rng.IntN(len(logits))
	}
	for _, s := range []Sampling{
		{},
		{DoSample: true, Temperature: 0.7, TopK: 20, TopP: 0.95, RepetitionPenalty: 1.1},
		{DoSample: true, Temperature: 1, TopP: 0.9},
		{DoSample: true, Temperature: 1, MinP: 0.05},
	} {
		b.Run(fmt.Sprintf("k%d_p%g_minp%g_rp%g", s.TopK, s.TopP, s.MinP, s.RepetitionPenalty), func(b *testing.B) {
			sm := newSampler(s, context)
			buf := make([]float32, len(logits))
			for b.Loop() {
				copy(buf, logits)
				sm.next(buf)
			}
		})
	}
}
