package generate

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// LogitsProcessor changes next-token logits before the draw, as a
// transformers LogitsProcessor or an mlx-lm logits processor does. Process
// modifies logits in place; a token it removes gets -Inf. context is the
// prompt followed by the tokens generated so far; it must not be modified
// or retained.
type LogitsProcessor interface {
	Process(logits []float32, context []int)
}

// SequenceProcessor is a LogitsProcessor that keeps state for one
// sequence and constrains it, such as a grammar's automaton (Grammar).
// Each generation calls NewSequence once for every sequence it samples
// (each of an Engine request's N samples gets its own) and uses what it
// returns in its place; a preempted and resumed sample keeps its own.
// SequenceProcessors in Sampling.Extra run first, before the built-in
// processors, so that top-k, top-p and min-p choose among the tokens
// they allow (run after them, a constraint could be left no token).
type SequenceProcessor interface {
	LogitsProcessor
	NewSequence() LogitsProcessor
}

// Sampling chooses the next token from logits, as transformers' generate
// does: the processors of [Sampling.Processors] (the repetition penalty,
// then when sampling temperature, top-k, top-p and min-p), then Extra, then
// the argmax (greedy) or a draw from softmax(logits).
type Sampling struct {
	// Temperature 0 (or DoSample false) means greedy: the argmax.
	Temperature float64
	DoSample    bool
	// TopK keeps the k most likely tokens (0: off).
	TopK int
	// TopP keeps the smallest set of tokens whose probability reaches p
	// (0 or 1: off).
	TopP float64
	// MinP drops tokens less likely than MinP times the most likely one (0: off).
	MinP float64
	// RepetitionPenalty divides the positive logits (multiplies the negative
	// ones) of every token already in the context (0 or 1: off).
	RepetitionPenalty float64
	// Seed makes sampling reproducible.
	Seed uint64
	// Extra are the caller's processors, applied in order after the
	// built-in ones and before the draw, in greedy mode too; a
	// SequenceProcessor (a constraint) is replaced by its NewSequence for
	// each sequence and runs before the built-in ones.
	Extra []LogitsProcessor
}

// Greedy reports whether the sampler takes the argmax.
func (s Sampling) Greedy() bool { return !s.DoSample || s.Temperature <= 0 }

// Processors returns the built-in processors that s turns on, in
// transformers' order: the repetition penalty, then, when sampling,
// temperature, top-k, top-p and min-p. Extra is not included; the sampler
// applies it after these.
func (s Sampling) Processors() []LogitsProcessor {
	var ps []LogitsProcessor
	if p := s.RepetitionPenalty; p > 0 && p != 1 {
		ps = append(ps, RepetitionPenalty{p})
	}
	if s.Greedy() {
		return ps
	}
	if s.Temperature != 1 {
		ps = append(ps, Temperature{s.Temperature})
	}
	if s.TopK > 0 {
		ps = append(ps, TopK{s.TopK})
	}
	if p := s.TopP; p > 0 && p < 1 {
		ps = append(ps, TopP{p})
	}
	if s.MinP > 0 {
		ps = append(ps, MinP{s.MinP})
	}
	return ps
}

// RepetitionPenalty divides the positive logits and multiplies the
// negative ones of every distinct token in the context by Penalty
// (transformers' RepetitionPenaltyLogitsProcessor). Penalty > 1 discourages
// repeats; Penalty <= 0 or 1 changes nothing.
type RepetitionPenalty struct{ Penalty float64 }

func (r RepetitionPenalty) Process(logits []float32, context []int) {
	p := r.Penalty
	if !(p > 0) || p == 1 || len(context) == 0 {
		return
	}
	sc := getScratch()
	defer scratchPool.Put(sc)
	n := (len(logits) + 63) / 64
	if cap(sc.bits) < n {
		sc.bits = make([]uint64, n)
	}
	seen := sc.bits[:n]
	clear(seen)
	for _, id := range context {
		if id < 0 || id >= len(logits) || seen[id/64]&(1<<(id%64)) != 0 {
			continue
		}
		seen[id/64] |= 1 << (id % 64)
		if l := float64(logits[id]); l < 0 {
			logits[id] = float32(l * p)
		} else {
			logits[id] = float32(l / p)
		}
	}
}

// Temperature divides the logits by T (transformers'
// TemperatureLogitsWarper): T < 1 sharpens the distribution, T > 1
// flattens it. T <= 0 is the limit T -> 0: only the largest logits (ties
// kept) remain; T = +Inf leaves every remaining token equally likely.
type Temperature struct{ T float64 }

func (t Temperature) Process(logits []float32, _ []int) {
	switch {
	case t.T == 1:
	case math.IsInf(t.T, 1):
		// Uniform over the tokens not removed.
		for i, l := range logits {
			if l > negInf {
				logits[i] = 0
			}
		}
	case t.T > 0:
		if tf := float32(t.T); tf > 0 && !math.IsInf(float64(tf), 1) {
			for i, l := range logits {
				logits[i] = l / tf
			}
			return
		}
		for i, l := range logits {
			logits[i] = float32(float64(l) / t.T)
		}
	default:
		m, ok := maxLogit(logits)
		if !ok {
			return
		}
		for i, l := range logits {
			if float64(l) != m {
				logits[i] = negInf
			}
		}
	}
}

// TopK keeps the K largest logits and every logit tied with the K-th
// (transformers' TopKLogitsWarper removes those below the K-th value).
// K <= 0 or K >= the vocabulary changes nothing, except that NaN logits are
// removed when K < the vocabulary. It takes one pass with a size-K heap.
type TopK struct{ K int }

func (t TopK) Process(logits []float32, _ []int) {
	if t.K <= 0 || t.K >= len(logits) {
		return
	}
	sc := getScratch()
	defer scratchPool.Put(sc)
	kth := kthLargest(logits, t.K, &sc.heap)
	for i, l := range logits {
		if !(l >= kth) {
			logits[i] = negInf
		}
	}
}

// TopP keeps the smallest set of tokens, by descending probability
// (softmax of the logits; ties by token id), whose cumulative probability
// reaches P, and always at least one (transformers' TopPLogitsWarper: a
// token stays while the mass of the tokens before it is below P). P >= 1
// changes nothing; P <= 0 keeps only the most likely token. NaN logits are
// removed.
//
// It never sorts the vocabulary: tokens within 40 nats of the best fall in
// quarter-nat bands (the rest have probability below e^-40 relative to it
// and lie past any P < 1), whole bands are kept or dropped by their mass,
// and only the band where the mass crosses P is sorted.
type TopP struct{ P float64 }

func (t TopP) Process(logits []float32, _ []int) {
	p := t.P
	if !(p < 1) {
		return
	}
	m, ok := maxLogit(logits)
	if !ok {
		return
	}
	sc := getScratch()
	defer scratchPool.Put(sc)
	cut, found, outside := topPCut(logits, m, p, 40, sc)
	if !found && outside {
		// Every token within 40 nats is kept: rounding, or a P within
		// e^-40 of 1. Order the whole vocabulary.
		cut, found, _ = topPCut(logits, m, p, math.Inf(1), sc)
	}
	if !found {
		for i, l := range logits {
			if l != l {
				logits[i] = negInf
			}
		}
		return
	}
	// Keep what comes before cut: a larger logit, or the same with a
	// smaller id.
	cv := float32(cut.v)
	for i, l := range logits {
		if !(l > cv || l == cv && i < cut.id) {
			logits[i] = negInf
		}
	}
}

// topPCut finds the first token top-p removes among the finite tokens
// within window nats of the best logit m (found is false when it keeps
// them all); outside reports finite tokens beyond the window.
func topPCut(logits []float32, m, p, window float64, sc *scratch) (cut candidate, found, outside bool) {
	const perNat = 4
	nb := 1 // an infinite window is one band
	if !math.IsInf(window, 1) {
		nb = int(window*perNat) + 1
	}
	band := func(v float64) int {
		if v == m || nb == 1 {
			return 0
		}
		return min(int((m-v)*perNat), nb-1)
	}
	floor := below(m, window)
	mass := append(sc.mass[:0], make([]float64, nb)...)
	all := sc.cand[:0]
	var z float64
	for id, l := range logits {
		v := float64(l)
		if !(v > math.Inf(-1)) {
			continue // -Inf, NaN
		}
		if v < floor {
			outside = true
			continue
		}
		w := weight(v, m)
		all = append(all, candidate{id, v, w})
		mass[band(v)] += w
		z += w
	}
	sc.mass, sc.cand = mass, all
	var cum float64
	kept := false
	for b, mb := range mass {
		if mb == 0 {
			continue
		}
		if cum+mb/z < p {
			cum += mb / z
			kept = true
			continue
		}
		// The mass crosses p in this band: order it.
		c := sc.band[:0]
		for _, x := range all {
			if band(x.v) == b {
				c = append(c, x)
			}
		}
		sc.band = c
		slices.SortFunc(c, byDescending)
		for _, x := range c {
			if kept && cum >= p {
				return x, true, outside
			}
			cum += x.w / z
			kept = true
		}
	}
	return candidate{}, false, outside
}

// MinP removes the tokens whose probability is below P times the most
// likely token's (transformers' MinPLogitsWarper), keeping at least the
// most likely. P <= 0 changes nothing; P > 1 acts as 1. NaN logits are
// removed. It takes one pass and no sort.
type MinP struct{ P float64 }

func (t MinP) Process(logits []float32, _ []int) {
	if !(t.P > 0) {
		return
	}
	m, ok := maxLogit(logits)
	if !ok {
		return
	}
	// p_i / p_max = exp(l_i - m): compare in the exponent and evaluate exp
	// only near the boundary.
	lnP := math.Log(t.P)
	for i, l := range logits {
		v := float64(l)
		switch {
		case v == m:
		case v != v || v-m < lnP-1:
			logits[i] = negInf
		case v-m > lnP+1:
		case weight(v, m) < t.P:
			logits[i] = negInf
		}
	}
}

// Argmax returns the index of the largest logit, the first on ties; NaN
// never wins. It is 0 when no logit is a number.
func Argmax(logits []float32) int {
	// The best value stays in a register: one compare a logit, where
	// reading logits[best] back cost a decode step 1% (SmolLM2's 49152).
	i := 0
	for i < len(logits) && logits[i] != logits[i] {
		i++
	}
	if i == len(logits) {
		return 0
	}
	best, top := i, logits[i]
	for j := i + 1; j < len(logits); j++ {
		if v := logits[j]; v > top {
			best, top = j, v
		}
	}
	return best
}

// sampler is one generation's sampling state.
type sampler struct {
	procs   []LogitsProcessor
	greedy  bool
	rng     *rand.Rand
	context []int       // prompt + generated tokens
	cand    []candidate // reused across tokens
}

type candidate struct {
	id int
	v  float64 // logit
	w  float64 // exp(v - max)
}

func newSampler(s Sampling, context []int) *sampler {
	var procs, extra []LogitsProcessor
	for _, p := range s.Extra {
		if sp, ok := p.(SequenceProcessor); ok {
			procs = append(procs, sp.NewSequence())
		} else {
			extra = append(extra, p)
		}
	}
	procs = append(append(procs, s.Processors()...), extra...)
	return &sampler{
		procs:   procs,
		greedy:  s.Greedy(),
		rng:     rand.New(rand.NewPCG(s.Seed, 0x9e3779b97f4a7c15)),
		context: slices.Clone(context),
	}
}

// observe appends a generated token to the context the processors see.
func (sm *sampler) observe(id int) { sm.context = append(sm.context, id) }

// next runs the processors over logits (in place) and picks a token: the
// argmax when greedy, else a draw from softmax(logits).
func (sm *sampler) next(logits []float32) int {
	for _, p := range sm.procs {
		p.Process(logits, sm.context)
	}
	if sm.greedy {
		return Argmax(logits)
	}
	return sm.draw(logits)
}

// draw picks a token with probability softmax(logits). Tokens more than 40
// nats below the best (probability below e^-40 relative to it, which a
// float64 draw cannot tell from zero) are skipped. With no finite logit, or
// an infinite one, it takes the argmax.
func (sm *sampler) draw(logits []float32) int {
	m, ok := maxLogit(logits)
	if !ok || math.IsInf(m, 0) {
		return Argmax(logits)
	}
	c := sm.cand[:0]
	var z float64
	for id, l := range logits {
		if v := float64(l); v >= m-40 {
			w := weight(v, m)
			c = append(c, candidate{id, v, w})
			z += w
		}
	}
	sm.cand = c
	r := sm.rng.Float64() * z
	for _, x := range c {
		r -= x.w
		if r < 0 {
			return x.id
		}
	}
	return Argmax(logits)
}

var negInf = float32(math.Inf(-1))

// maxLogit returns the largest logit that is not NaN; ok is false when
// there is none or it is -Inf (no token left).
func maxLogit(logits []float32) (m float64, ok bool) {
	m = math.Inf(-1)
	for _, l := range logits {
		if v := float64(l); v > m {
			m = v
		}
	}
	return m, m > math.Inf(-1)
}

// below returns m - d, and -Inf (not NaN) when d is +Inf.
func below(m, d float64) float64 {
	if math.IsInf(d, 1) {
		return math.Inf(-1)
	}
	return m - d
}

// weight is exp(v - m), the probability of logit v relative to the best,
// m: 1 at the best, also when m is +Inf.
func weight(v, m float64) float64 {
	if v == m {
		return 1
	}
	return math.Exp(v - m)
}

// before orders candidates by descending logit, ties by ascending id.
func before(a, b candidate) bool { return a.v > b.v || a.v == b.v && a.id < b.id }

func byDescending(a, b candidate) int {
	switch {
	case before(a, b):
		return -1
	case before(b, a):
		return 1
	}
	return 0
}

// scratch holds buffers the processors reuse across calls.
type scratch struct {
	cand []candidate // within the window
	band []candidate // in one band
	mass []float64   // per band
	heap []float32
	bits []uint64
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// kthLargest returns the k-th largest value of x (1 <= k < len(x)) with a
// size-k min-heap: one pass, no sort of the whole vocabulary. NaN counts as
// -Inf.
func kthLargest(x []float32, k int, buf *[]float32) float32 {
	h := (*buf)[:0]
	for _, v := range x[:k] {
		if v != v {
			v = negInf
		}
		h = append(h, v)
	}
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
