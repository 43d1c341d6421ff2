package generate

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
)

// Pooling is how Embed reduces a sequence's final hidden states to one
// vector.
type Pooling int

const (
	// PoolMean averages the rows of every token.
	PoolMean Pooling = iota
	// PoolLast takes the last token's row (a causal model's summary of
	// the whole sequence).
	PoolLast
)

// ParsePooling reads a pooling's name: "mean" or "last".
func ParsePooling(name string) (Pooling, error) {
	switch name {
	case "mean":
		return PoolMean, nil
	case "last":
		return PoolLast, nil
	}
	return 0, fmt.Errorf("unknown pooling %q: want mean or last", name)
}

func (p Pooling) String() string {
	switch p {
	case PoolMean:
		return "mean"
	case PoolLast:
		return "last"
	}
	return fmt.Sprintf("Pooling(%d)", int(p))
}

// EmbedOptions tune Embed.
type EmbedOptions struct {
	Pool Pooling
	// Normalize scales each embedding to unit L2 norm (as
	// torch.nn.functional.normalize, dividing by at least 1e-12).
	Normalize bool
	// MaxSeqs is the most inputs run together, each its own sequence of
	// one graphs.Batch (0: DefaultScoreSeqs).
	MaxSeqs int
	// Fast and KVCacheF16 are graphs.Options' (not exact).
	Fast, KVCacheF16 bool
	// KVCache is graphs.Options.KVCache.
	KVCache graphs.KVCacheType
	// Adapter names the LoRA adapter the inputs run with, as
	// Options.Adapter does ("": the model's first, NoAdapter: none).
	Adapter string
	// Progress, when set, is called after each group of inputs with the
	// number embedded so far and the total.
	Progress func(done, total int)
}

// Embed returns, per input, its pooled final hidden states: the final
// norm's output, Hugging Face's last_hidden_state (the tap
// hidden_states.<NumLayers>), [HiddenSize] each. Up to MaxSeqs inputs
// run at once as sequences of one graphs.Batch.
func Embed(ctx context.Context, m zoo.Model, inputs [][]int, opts EmbedOptions) ([][]float32, error) {
	if opts.Pool != PoolMean && opts.Pool != PoolLast {
		return nil, fmt.Errorf("unknown pooling %v", opts.Pool)
	}
	if opts.MaxSeqs < 0 {
		return nil, fmt.Errorf("MaxSeqs must not be negative, got %d", opts.MaxSeqs)
	}
	if opts.MaxSeqs == 0 {
		opts.MaxSeqs = DefaultScoreSeqs
	}
	if len(inputs) == 0 {
		return nil, nil
	}
	need, V := 0, m.VocabSize()
	for i, ids := range inputs {
		if len(ids) == 0 {
			return nil, fmt.Errorf("input %d: no tokens", i)
		}
		for k, id := range ids {
			if id < 0 || id >= V {
				return nil, fmt.Errorf("input %d: token %d at index %d is outside the vocabulary [0, %d)", i, id, k, V)
			}
		}
		if len(ids) > m.MaxPositions() {
			return nil, fmt.Errorf("input %d: %d tokens, more than the model's %d positions (max_position_embeddings)", i, len(ids), m.MaxPositions())
		}
		need = max(need, len(ids))
	}
	slot, err := AdapterSlot(m.Params(), opts.Adapter)
	if err != nil {
		return nil, err
	}
	last := fmt.Sprintf("%s.%d", graphs.HiddenStates, m.NumLayers())
	b, err := graphs.NewBatch(m, graphs.BatchOptions{
		Options:  graphs.Options{Capacity: need, Capture: []string{last}, Fast: opts.Fast, KVCacheF16: opts.KVCacheF16, KVCache: opts.KVCache},
		KVBudget: kvBudget(m, need, min(opts.MaxSeqs, len(inputs)), opts.KVCacheF16),
	})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	D := m.HiddenSize()
	out := make([][]float32, len(inputs))
	for start := 0; start < len(inputs); start += opts.MaxSeqs {
		end := min(start+opts.MaxSeqs, len(inputs))
		rows, err := embedGroup(ctx, b, inputs[start:end], last, slot)
		if err != nil {
			return nil, fmt.Errorf("embedding inputs %d to %d: %w", start, end-1, err)
		}
		for i, h := range rows {
			if len(h) != len(inputs[start+i])*D {
				return nil, fmt.Errorf("input %d: captured %d values of %s, want %d x %d", start+i, len(h), last, len(inputs[start+i]), D)
			}
			out[start+i] = pool(h, D, opts.Pool, opts.Normalize)
		}
		if opts.Progress != nil {
			opts.Progress(end, len(inputs))
		}
	}
	return out, nil
}

// embedGroup runs inputs as sequences of b and returns each one's
// captured rows of name, [len(input), D] row-major.
func embedGroup(ctx context.Context, b *graphs.Batch, inputs [][]int, name string, adapter int) ([][]float32, error) {
	feeds := make([]graphs.Feed, len(inputs))
	for i, ids := range inputs {
		feeds[i] = graphs.Feed{Seq: b.Add(), Input: graphs.IDs(ids...), Logits: graphs.NoLogits}
		_ = b.SetAdapter(feeds[i].Seq, adapter) // a fresh sequence, a checked slot
	}
	defer func() {
		for _, f := range feeds {
			_ = b.Remove(f.Seq) // added above
		}
	}()
	outs, err := b.Run(ctx, feeds)
	if err != nil {
		return nil, err
	}
	rows := make([][]float32, len(inputs))
	for i := range outs {
		h, ok := outs[i].Captured(name)
		if !ok {
			return nil, fmt.Errorf("input %d: %s was not captured", i, name)
		}
		data, ok := h.Data().([]float32)
		if !ok {
			return nil, errors.New(name + " was captured as something else than float32")
		}
		rows[i] = data
	}
	return rows, nil
}

// pool reduces rows [n, D] to one vector, in float64.
func pool(rows []float32, D int, how Pooling, normalize bool) []float32 {
	n := len(rows) / D
	acc := make([]float64, D)
	if how == PoolLast {
		for d, v := range rows[(n-1)*D:] {
			acc[d] = float64(v)
		}
	} else {
		for r := 0; r < n; r++ {
			for d, v := range rows[r*D : (r+1)*D] {
				acc[d] += float64(v)
			}
		}
		for d := range acc {
			acc[d] /= float64(n)
		}
	}
	if normalize {
		var ss float64
		for _, v := range acc {
			ss += v * v
		}
		norm := max(math.Sqrt(ss), 1e-12)
		for d := range acc {
			acc[d] /= norm
		}
	}
	out := make([]float32, D)
	for d, v := range acc {
		out[d] = float32(v)
	}
	return out
}
