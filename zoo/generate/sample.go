package generate

import (
	"github.com/gozoo/gozoo/graphs"
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
	heap []float32
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
		return graphs.Argmax(logits)
	}
	// Candidates: every token within 40 nats of the best (anything further
	// has probability below e^-40 relative to it, which no float32 sampler
	// can tell from zero), and with top-k only those at or above the k-th
	// largest logit (ties kept, as HF's `< kth value` filter does). Sorting
	// only candidates keeps a step cheap on 150k-token vocabularies.
	t := sm.s.Temperature
	best := logits[graphs.Argmax(logits)]
	floor := float32(float64(best) - 40*t)
	if k := sm.s.TopK; k > 0 && k < len(logits) {
		floor = max(floor, kthLargest(logits, k, &sm.heap))
	}
	sm.cand = sm.cand[:0]
	for id, l := range logits {
		if l >= floor {
			sm.cand = append(sm.cand, candidate{id, float64(l) / t})
		}
	}
	c := sm.cand
	sort.Slice(c, func(i, j int) bool { return c[i].v > c[j].v || (c[i].v == c[j].v && c[i].id < c[j].id) })
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

// kthLargest returns the k-th largest value of x (1 <= k < len(x)) with a
// size-k min-heap: one pass, no sort of the whole vocabulary.
func kthLargest(x []float32, k int, buf *[]float32) float32 {
	h := append((*buf)[:0], x[:k]...)
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	for _, v := range x[k:] {
		if v > h[0] {
			h[0] = v
			siftDown(h, 0)
		}
	}
	*buf = h
	return h[0]
}

func siftDown(h []float32, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
