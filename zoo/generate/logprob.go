package generate

import "math"

// LogSumExp is log Σ exp(logits[i]) in float64: the largest logit m
// plus log1p of the others' exp(x - m), so that no term overflows and
// the best token's share keeps its precision when the rest is tiny. A
// NaN gives NaN, a +Inf gives +Inf, and no logit or only -Inf gives -Inf.
func LogSumExp(logits []float32) float64 {
	m, best, nan := maxIndex(logits)
	switch {
	case nan:
		return math.NaN()
	case best < 0 || math.IsInf(m, 0):
		return m
	}
	return m + math.Log1p(restMass(logits, m, best))
}

// LogSoftmax writes log_softmax(logits) in float64 into dst, grown to
// len(logits), and returns it. Where logits are +Inf, those tokens share
// the whole probability; a NaN, or logits all -Inf, make every entry NaN
// (as torch's log_softmax does).
func LogSoftmax(dst []float64, logits []float32) []float64 {
	if cap(dst) < len(logits) {
		dst = make([]float64, len(logits))
	}
	dst = dst[:len(logits)]
	m, best, nan := maxIndex(logits)
	if nan || best < 0 || math.IsInf(m, -1) {
		for i := range dst {
			dst[i] = math.NaN()
		}
		return dst
	}
	if math.IsInf(m, 1) {
		share := -math.Log(float64(countInf(logits)))
		for i, x := range logits {
			dst[i] = math.Inf(-1)
			if math.IsInf(float64(x), 1) {
				dst[i] = share
			}
		}
		return dst
	}
	// Subtracting m first keeps x - m exact for the tokens that matter.
	lse := math.Log1p(restMass(logits, m, best))
	for i, x := range logits {
		dst[i] = (float64(x) - m) - lse
	}
	return dst
}

// LogProb is LogSoftmax(nil, logits)[id] without the other entries.
func LogProb(logits []float32, id int) float64 {
	m, best, nan := maxIndex(logits)
	if nan || best < 0 || math.IsInf(m, -1) || id < 0 || id >= len(logits) {
		return math.NaN()
	}
	x := float64(logits[id])
	if math.IsInf(m, 1) {
		if math.IsInf(x, 1) {
			return -math.Log(float64(countInf(logits)))
		}
		return math.Inf(-1)
	}
	return (x - m) - math.Log1p(restMass(logits, m, best))
}

// maxIndex returns the largest logit and its first index (-1 when there
// is none), and whether some logit is NaN.
func maxIndex(logits []float32) (m float64, best int, nan bool) {
	m, best = math.Inf(-1), -1
	for i, x := range logits {
		v := float64(x)
		switch {
		case v != v:
			nan = true
		case best < 0 || v > m:
			m, best = v, i
		}
	}
	return m, best, nan
}

// restMass is Σ exp(x - m) over every logit but the one at best.
func restMass(logits []float32, m float64, best int) float64 {
	var s float64
	for i, x := range logits {
		if i != best {
			s += math.Exp(float64(x) - m)
		}
	}
	return s
}

func countInf(logits []float32) int {
	n := 0
	for _, x := range logits {
		if math.IsInf(float64(x), 1) {
			n++
		}
	}
	return n
}
