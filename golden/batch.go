package golden

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/gozoo/gozoo/cuda"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
)

// Options choose how a case runs.
type Options struct {
	// Batch > 1 runs the case's sequence inside a graphs.Batch of that
	// many sequences: the case and Batch-1 companions of other lengths and
	// prompts, which join and leave at other steps. The case's own
	// tolerances apply: batching may only change float32 summation order.
	Batch int
	// Device runs the case on a CUDA GPU (graphs.Options.Device).
	Device cuda.Backend
	// KVCache is the KV cache type (graphs.Options.KVCache). In fast mode
	// a quantized one is checked against llama.cpp's logits and greedy
	// ids with that cache (llama_logits_kv_<type>).
	KVCache graphs.KVCacheType
	// cache, when set, is the session's cache type in place of KVCache
	// (a test that holds another cache to KVCache's references).
	cache *graphs.KVCacheType
}

// runner is what a case runs its sequence on: a graphs.Session, or the
// case's sequence in a batch with companions.
type runner interface {
	AppendInput(in graphs.Input) ([]float32, error)
	AppendAll(in graphs.Input) ([][]float32, error)
	Captured(name string) (*tensor.Dense, bool)
	Close() error
}

// newRunner makes the runner of one sequence of the case.
func newRunner(m graphs.Model, opts graphs.Options, o Options) (runner, error) {
	opts.Device = o.Device
	if opts.KVCache == graphs.KVF32 && !opts.KVCacheF16 {
		opts.KVCache = o.KVCache
	}
	if o.cache != nil {
		opts.KVCache = *o.cache
	}
	if o.Batch <= 1 {
		return graphs.NewSession(m, opts)
	}
	b, err := graphs.NewBatch(m, graphs.BatchOptions{Options: opts, BlockTokens: 8, KVBudget: 256 << 20})
	if err != nil {
		return nil, err
	}
	r := &batchRunner{b: b, seq: b.Add(), vocab: m.VocabSize(), want: o.Batch - 1, rng: rand.New(rand.NewPCG(uint64(o.Batch), 17))}
	return r, nil
}

// batchRunner runs the case's sequence beside companions: each call is
// one Run in which the case's input shares forwards with the companions'
// prefills and decode steps, at a place among the feeds that changes from
// call to call. Companions join with prompts of 1 to 24 random tokens,
// decode random tokens and leave after a few steps, so the case meets
// other lengths, positions and block layouts at every step.
type batchRunner struct {
	b     *graphs.Batch
	seq   graphs.SeqID
	vocab int
	want  int // companions
	rng   *rand.Rand
	comps []companion
	last  graphs.Output
}

type companion struct {
	id   graphs.SeqID
	left int // steps before it leaves
}

func (r *batchRunner) AppendInput(in graphs.Input) ([]float32, error) {
	out, err := r.run(in, graphs.LastLogits)
	if err != nil {
		return nil, err
	}
	return out.Logits[0], nil
}

func (r *batchRunner) AppendAll(in graphs.Input) ([][]float32, error) {
	out, err := r.run(in, graphs.AllLogits)
	if err != nil {
		return nil, err
	}
	return out.Logits, nil
}

func (r *batchRunner) Captured(name string) (*tensor.Dense, bool) { return r.last.Captured(name) }

func (r *batchRunner) Close() error { return r.b.Close() }

func (r *batchRunner) run(in graphs.Input, want graphs.Want) (graphs.Output, error) {
	// Companions leave when their time is up, or at random (a cancelled
	// request), and others join.
	kept := r.comps[:0]
	for _, c := range r.comps {
		if c.left--; c.left <= 0 || r.rng.IntN(8) == 0 {
			if err := r.b.Remove(c.id); err != nil {
				return graphs.Output{}, err
			}
			continue
		}
		kept = append(kept, c)
	}
	r.comps = kept
	var feeds []graphs.Feed
	for len(r.comps) < r.want {
		id := r.b.Add()
		r.comps = append(r.comps, companion{id: id, left: 1 + r.rng.IntN(6)})
	}
	for _, c := range r.comps {
		n := 1
		if held, err := r.b.Len(c.id); err != nil {
			return graphs.Output{}, err
		} else if held == 0 {
			n = 1 + r.rng.IntN(24)
		}
		if held, _ := r.b.Len(c.id); held+n > r.b.Capacity() {
			continue
		}
		ids := make([]int, n)
		for i := range ids {
			ids[i] = r.rng.IntN(r.vocab)
		}
		w := graphs.LastLogits
		if r.rng.IntN(3) == 0 {
			w = graphs.AllLogits
		}
		feeds = append(feeds, graphs.Feed{Seq: c.id, Input: graphs.IDs(ids...), Logits: w})
	}
	at := r.rng.IntN(len(feeds) + 1)
	feeds = append(feeds[:at], append([]graphs.Feed{{Seq: r.seq, Input: in, Logits: want}}, feeds[at:]...)...)
	outs, err := r.b.Run(context.Background(), feeds)
	if err != nil {
		return graphs.Output{}, fmt.Errorf("in a batch of %d sequences: %w", len(feeds), err)
	}
	r.last = outs[at]
	return outs[at], nil
}
