package generate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gozoo/gozoo/cuda"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/procstat"
	"github.com/gozoo/gozoo/zoo"
)

// ScorePair is one likelihood request (lm-evaluation-harness's
// loglikelihood): the continuation's tokens scored after the context's.
type ScorePair struct {
	Context, Continuation []int
}

// Score is how likely a continuation is after its context.
type Score struct {
	// LogProb is log P(continuation | context): the sum of TokenLogProbs.
	LogProb float64
	// Greedy reports whether greedy decoding from the context produces
	// the continuation: every row's argmax is the next token.
	Greedy bool
	// TokenLogProbs[j] is log P(continuation[j] | context,
	// continuation[:j]), from a float64 log_softmax of the logits.
	TokenLogProbs []float64
}

// ScoreOptions tune ScorePairs.
type ScoreOptions struct {
	// MaxSeqs is the most pairs run together, each its own sequence of
	// one graphs.Batch: it bounds the KV memory (0: DefaultScoreSeqs).
	MaxSeqs int
	// Fast and KVCacheF16 are graphs.Options' (not exact).
	Fast, KVCacheF16 bool
	// KVCache is graphs.Options.KVCache.
	KVCache graphs.KVCacheType
	// Device runs the pairs on a CUDA GPU (graphs.Options.Device).
	Device cuda.Backend
	// Progress, when set, is called after each group of pairs with the
	// number of pairs scored so far and the total.
	Progress func(done, total int)
}

// DefaultScoreSeqs is ScoreOptions.MaxSeqs when it is 0.
const DefaultScoreSeqs = 16

// ScorePairs scores each pair's continuation after its context, up to
// MaxSeqs pairs at a time through one graphs.Batch: first the contexts
// but their last token, without logits (pairs with the same context
// share one sequence, forked per pair, and the prefix cache reuses whole
// blocks of contexts seen before), then each pair's last context token
// and its continuation but the last token, with the logits of every row.
// Row j's logits predict continuation[j], so the head runs only on the
// rows scored.
func ScorePairs(ctx context.Context, m zoo.Model, pairs []ScorePair, opts ScoreOptions) ([]Score, error) {
	if opts.MaxSeqs < 0 {
		return nil, fmt.Errorf("MaxSeqs must not be negative, got %d", opts.MaxSeqs)
	}
	if opts.MaxSeqs == 0 {
		opts.MaxSeqs = DefaultScoreSeqs
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	need := 0
	for i, p := range pairs {
		n, err := checkPair(m, p)
		if err != nil {
			return nil, fmt.Errorf("pair %d: %w", i, err)
		}
		need = max(need, n)
	}
	b, err := graphs.NewBatch(m, graphs.BatchOptions{
		Options:     graphs.Options{Capacity: need, Fast: opts.Fast, KVCacheF16: opts.KVCacheF16, KVCache: opts.KVCache, Device: opts.Device},
		KVBudget:    kvBudget(m, need, 2*min(opts.MaxSeqs, len(pairs)), opts.KVCacheF16),
		PrefixCache: true,
	})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	out := make([]Score, len(pairs))
	for start := 0; start < len(pairs); start += opts.MaxSeqs {
		end := min(start+opts.MaxSeqs, len(pairs))
		if err := scoreGroup(ctx, b, pairs[start:end], out[start:end]); err != nil {
			return nil, fmt.Errorf("scoring pairs %d to %d: %w", start, end-1, err)
		}
		if opts.Progress != nil {
			opts.Progress(end, len(pairs))
		}
	}
	return out, nil
}

// checkPair validates a pair against the model and returns the positions
// it takes (the continuation's last token is scored, never run).
func checkPair(m zoo.Model, p ScorePair) (int, error) {
	switch {
	case len(p.Context) == 0:
		return 0, errors.New("empty context: the first continuation token needs a token before it (lm-evaluation-harness puts end-of-text there)")
	case len(p.Continuation) == 0:
		return 0, errors.New("empty continuation: nothing to score")
	}
	V := m.VocabSize()
	for _, f := range []struct {
		name string
		ids  []int
	}{{"context", p.Context}, {"continuation", p.Continuation}} {
		for k, id := range f.ids {
			if id < 0 || id >= V {
				return 0, fmt.Errorf("%s token %d at index %d is outside the vocabulary [0, %d)", f.name, id, k, V)
			}
		}
	}
	n := len(p.Context) + len(p.Continuation) - 1
	if n > m.MaxPositions() {
		return 0, fmt.Errorf("context of %d and continuation of %d tokens take %d positions, more than the model's %d (max_position_embeddings)",
			len(p.Context), len(p.Continuation), n, m.MaxPositions())
	}
	return n, nil
}

// scoreGroup scores pairs as sequences of b, into out. When the KV pool
// cannot hold them all, it scores each half in turn.
func scoreGroup(ctx context.Context, b *graphs.Batch, pairs []ScorePair, out []Score) error {
	var live []graphs.SeqID
	defer func() {
		for _, id := range live {
			_ = b.Remove(id) // every id in live is in b
		}
	}()
	add := func() graphs.SeqID {
		id := b.Add()
		live = append(live, id)
		return id
	}
	// 1. The contexts but their last token, each distinct one once.
	prefixOf := make([]int, len(pairs)) // index in prefixes, -1: none
	var prefixes []graphs.SeqID
	var feeds []graphs.Feed
	seen := map[string]int{}
	for i, p := range pairs {
		head := p.Context[:len(p.Context)-1]
		prefixOf[i] = -1
		if len(head) == 0 {
			continue
		}
		key := idsKey(head)
		k, ok := seen[key]
		if !ok {
			k = len(prefixes)
			seen[key] = k
			prefixes = append(prefixes, add())
			feeds = append(feeds, graphs.Feed{Seq: prefixes[k], Input: graphs.IDs(head...), Logits: graphs.NoLogits})
		}
		prefixOf[i] = k
	}
	if len(feeds) > 0 {
		if _, err := b.Run(ctx, feeds); err != nil {
			return splitOnFull(ctx, b, pairs, out, err, &live)
		}
	}
	// 2. Each pair's scored rows, on a fork of its context.
	feeds = feeds[:0]
	for i, p := range pairs {
		var id graphs.SeqID
		if k := prefixOf[i]; k < 0 {
			id = add()
		} else {
			forked, err := b.Fork(prefixes[k])
			if err != nil {
				return err
			}
			id = forked
			live = append(live, id)
		}
		rows := make([]int, 0, len(p.Continuation))
		rows = append(rows, p.Context[len(p.Context)-1])
		rows = append(rows, p.Continuation[:len(p.Continuation)-1]...)
		feeds = append(feeds, graphs.Feed{Seq: id, Input: graphs.IDs(rows...), Logits: graphs.AllLogits})
	}
	// The forks hold the contexts now; a fork alone on its context's last
	// block then writes it in place instead of copying it.
	for _, id := range prefixes {
		_ = b.Remove(id)
	}
	live = live[len(prefixes):]
	outs, err := b.Run(ctx, feeds)
	if err != nil {
		return splitOnFull(ctx, b, pairs, out, err, &live)
	}
	for i, p := range pairs {
		if got := len(outs[i].Logits); got != len(p.Continuation) {
			return fmt.Errorf("pair %d: %d rows of logits for a continuation of %d tokens", i, got, len(p.Continuation))
		}
		out[i] = scoreRows(outs[i].Logits, p.Continuation)
	}
	return nil
}

// splitOnFull scores each half of pairs in turn after a run failed for
// want of KV blocks, and returns any other error as it is.
func splitOnFull(ctx context.Context, b *graphs.Batch, pairs []ScorePair, out []Score, err error, live *[]graphs.SeqID) error {
	if !errors.Is(err, graphs.ErrPoolFull) || len(pairs) < 2 {
		return err
	}
	for _, id := range *live {
		_ = b.Remove(id)
	}
	*live = nil
	h := len(pairs) / 2
	if err := scoreGroup(ctx, b, pairs[:h], out[:h]); err != nil {
		return err
	}
	return scoreGroup(ctx, b, pairs[h:], out[h:])
}

// scoreRows scores continuation from the logits of the rows that predict
// each of its tokens.
func scoreRows(rows [][]float32, continuation []int) Score {
	s := Score{Greedy: true, TokenLogProbs: make([]float64, len(continuation))}
	for j, id := range continuation {
		lp := LogProb(rows[j], id)
		s.TokenLogProbs[j] = lp
		s.LogProb += lp
		if Argmax(rows[j]) != id {
			s.Greedy = false
		}
	}
	return s
}

// idsKey is a map key for a token sequence.
func idsKey(ids []int) string {
	buf := make([]byte, 0, 2*len(ids))
	for _, id := range ids {
		buf = binary.AppendUvarint(buf, uint64(id))
	}
	return string(buf)
}

// kvBudget is the KV memory of seqs sequences of n positions (with a
// block of slack at each end, as the pool lays them out), capped at half
// the memory available: more than the pool will take is only a bound,
// since blocks are made as sequences grow.
func kvBudget(m zoo.Model, n, seqs int, f16 bool) int64 {
	var perPos float64
	for _, c := range m.Params().Caches() {
		if c.Kind != graphs.NoCache {
			perPos += float64(c.KVHeads * (c.KeyDim + c.ValueDim))
		}
	}
	elem := 4.0
	if f16 {
		elem = 2
	}
	B := graphs.DefaultBlockTokens
	budget := float64(((n+B-1)/B+2)*B) * perPos * elem * float64(seqs)
	if avail, ok := procstat.AvailableMemory(); ok {
		budget = min(budget, float64(avail)/2)
	}
	return max(int64(budget), 1)
}
