package generate

import (
	"cmp"
	"slices"
)

// tokenLogprobs are a step's log-probabilities: the chosen token's and
// the top k.
type tokenLogprobs struct {
	chosen float64
	top    []TokenLogprob
}

// logprobsOf returns the log-probability of id under logits and the k
// most likely tokens (ties by lower id), most likely first.
func logprobsOf(logits []float32, id, k int) *tokenLogprobs {
	lse := LogSumExp(logits)
	lp := &tokenLogprobs{chosen: LogProb(logits, id)}
	if k <= 0 {
		return lp
	}
	k = min(k, len(logits))
	// A partial selection: keep the k best seen so far, sorted.
	best := make([]TokenLogprob, 0, k+1)
	better := func(a, b TokenLogprob) int {
		if c := cmp.Compare(b.Logprob, a.Logprob); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	}
	for i, v := range logits {
		t := TokenLogprob{ID: i, Logprob: float64(v)}
		if len(best) == k && better(t, best[k-1]) >= 0 {
			continue
		}
		at, _ := slices.BinarySearchFunc(best, t, better)
		best = slices.Insert(best, at, t)
		if len(best) > k {
			best = best[:k]
		}
	}
	for i := range best {
		best[i].Logprob -= lse
		if best[i].ID == id {
			best[i].Logprob = lp.chosen // one value for the token, however computed
		}
	}
	lp.top = best
	return lp
}
