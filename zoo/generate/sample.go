package generate

import (
	"math"
	"math/rand/v2"
	"sort"
)

// Sampling chooses the next token from logits, as transformers' generate
// does: the repetition penalty first, then (when sampling) temperature,
// top-k, top-p and min-p, then a draw from what is left.
type Sampling struct {
	// Temperature 0 (or DoSample false) means greedy: the argmax.
	Temperature float64
	DoSample    bool
	// TopK keeps the k most likely tokens (0: off).
	TopK int
	// TopP keeps the smallest set of tokens whose probability reaches p (1: off).
	TopP float64
	// MinP drops tokens less likely than MinP times the most likely one (0: off).
	MinP float64
	// RepetitionPenalty divides the positive logits (multiplies the negative
	// ones) of every token already in the context (1: off).
	RepetitionPenalty float64
	// Seed makes sampling reproducible.
	Seed uint64
}

// Greedy reports whether the sampler takes the argmax.
func (s Sampling) Greedy() bool { return !s.DoSample || s.Temperature <= 0 }

// sampler is one generation's sampling state.
type sampler struct {
	s    Sampling
	rng  *rand.Rand
	seen map[int]bool
	cand []candidate // reused across tokens
}

type candidate struct {
	id int
	v  float64
}

func newSampler(s Sampling, context []int) *sampler {
	sm := &sampler{s: s, rng: rand.New(rand.NewPCG(s.Seed, 0x9e3779b97f4a7c15)), seen: map[int]bool{}}
	for _, id := range context {
		sm.seen[id] = true
	}
	return sm
}

// observe records a generated token for the repetition penalty.
func (sm *sampler) observe(id int) { sm.seen[id] = true }

// next picks a token. logits is modified in place.
func (sm *sampler) next(logits []float32) int {
	if p := sm.s.RepetitionPenalty; p > 0 && p != 1 {
		for id := range sm.seen {
			if id < 0 || id >= len(logits) {
				continue
			}
			if logits[id] < 0 {
				logits[id] *= float32(p)
			} else {
				logits[id] /= float32(p)
			}
		}
	}
	if sm.s.Greedy() {
		return argmax(logits)
	}
	// Candidates: every token within 40 nats of the best. Anything further
	// has probability below e^-40 relative to it, which no float32 sampler
	// can tell from zero; skipping it keeps sorting cheap on 150k vocabularies.
	t := sm.s.Temperature
	best := float64(logits[argmax(logits)]) / t
	sm.cand = sm.cand[:0]
	for id, l := range logits {
		if v := float64(l) / t; v >= best-40 {
			sm.cand = append(sm.cand, candidate{id, v})
		}
	}
	c := sm.cand
	sort.Slice(c, func(i, j int) bool { return c[i].v > c[j].v || (c[i].v == c[j].v && c[i].id < c[j].id) })
	if k := sm.s.TopK; k > 0 && k < len(c) {
		// Ties with the k-th value are kept, as HF's `< kth value` filter does.
		kth := c[k-1].v
		n := k
		for n < len(c) && c[n].v >= kth {
			n++
		}
		c = c[:n]
	}
	probs := softmax(c)
	if p := sm.s.TopP; p > 0 && p < 1 {
		// Keep the smallest prefix (by descending probability) whose mass
		// reaches p; always at least one token.
		var cum float64
		n := len(c)
		for i, q := range probs {
			cum += q
			if cum >= p {
				n = i + 1
				break
			}
		}
		c, probs = c[:n], softmax(c[:n])
	}
	if m := sm.s.MinP; m > 0 {
		limit := m * probs[0]
		n := 1
		for n < len(c) && probs[n] >= limit {
			n++
		}
		c, probs = c[:n], softmax(c[:n])
	}
	r := sm.rng.Float64()
	for i, q := range probs {
		r -= q
		if r < 0 {
			return c[i].id
		}
	}
	return c[len(c)-1].id
}

func softmax(c []candidate) []float64 {
	out := make([]float64, len(c))
	var sum float64
	for i, x := range c {
		out[i] = math.Exp(x.v - c[0].v)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
