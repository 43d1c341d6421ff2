package graphs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gozoo/gozoo/cuda"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/internal/procstat"
)

// Options tune a Session.
type Options struct {
	// Capacity is the number of positions the session holds. 0 means the
	// model's MaxPositions, capped at DefaultCapacity.
	Capacity int
	// Buckets are the prefill graph lengths, ascending. A prompt is fed in
	// chunks of these lengths, the last one padded (see Session.chunk).
	// nil means DefaultBuckets.
	Buckets []int
	// Capture lists the names (path.Match patterns) of nodes whose values
	// are kept after each run: taps such as "hidden_states.*" and
	// "attentions.3", or any named node of the graph. Attention
	// probabilities are computed only when captured.
	Capture []string
	// Fast computes as llama.cpp's CPU backend does instead of exactly:
	// products with block-quantized weights quantize their activations to
	// 8 bits and take integer dot products, products with F16 or BF16
	// weights round their activations to that type, and the tanh GELU
	// comes from an F16 table. It is faster on quantized weights, and its
	// results follow llama.cpp's logits rather than transformers'.
	Fast bool
	// ReuseLogits makes Append and AppendInput return the logits in a
	// buffer of the session that the next append overwrites, instead of
	// a fresh slice each time: a decode loop that is done with a step's
	// logits before the next step then leaves the garbage collector
	// nothing of its own (a vocabulary of 151936 is 608 KB a token, and
	// every collection takes a share of the cores the kernels run on).
	ReuseLogits bool
	// KVCacheF16 keeps the KV cache in F16, as llama.cpp does by default:
	// half the memory, and half the bytes each decode step's attention
	// reads. Keys and values are rounded to F16 (to nearest, ties to
	// even) as they are stored and widened exactly as they are read, so
	// results differ from transformers' float32 forward by that rounding.
	KVCacheF16 bool
	// KVCache is how keys and values are stored: KVF32, KVF16 (as
	// KVCacheF16), or llama.cpp's quantized KVQ8_0 / KVQ4_0 blocks (CPU
	// only; a head's dimension must be a multiple of 32). With a
	// quantized cache attention computes as llama.cpp's flash attention
	// does on one: Q and K (and V and the output) rotated by a Hadamard
	// matrix when a head's dimension is a multiple of 64, the query
	// quantized to Q8_0, integer dot products, an online softmax.
	KVCache KVCacheType
	// Device runs the graphs on a CUDA GPU (cuda.Open) instead of the
	// CPU: weights are copied to it once and shared by every session on
	// it, the KV pool lives in its memory, and each step sends up only its
	// inputs and brings down only the logits rows and captures asked for.
	// Training steps and Programs run on the CPU.
	Device cuda.Backend
}

// DefaultCapacity caps the context of a session whose options name none.
const DefaultCapacity = 8192

// DefaultBuckets are the prefill lengths compiled on demand.
var DefaultBuckets = []int{8, 16, 32, 64, 128, 256, 512}

// Session is one sequence's generation state: a Batch that runs a single
// sequence, with that sequence's API. A Session is not safe for concurrent
// use; run one per goroutine. Sessions on the same model share its
// weights read-only.
type Session struct {
	batch *Batch
	seq   SeqID
	last  Output
	// reuse is Options.ReuseLogits: logits holds the last row's logits.
	reuse  bool
	logits []float32
}

// NewSession makes a session whose KV pool holds Capacity positions.
// Graphs are built and compiled on first use and kept for the session's
// life.
func NewSession(m Model, opts Options) (*Session, error) {
	if opts.Capacity == 0 {
		opts.Capacity = min(m.MaxPositions(), DefaultCapacity)
	}
	if opts.Capacity <= 0 {
		return nil, fmt.Errorf("context capacity must be positive, got %d", opts.Capacity)
	}
	typ, err := opts.kvType()
	if err != nil {
		return nil, err
	}
	pool, err := newKVPool(m.Params().Caches(), DefaultBlockTokens, typ, 0)
	if err != nil {
		return nil, err
	}
	budget, ok := pool.seqBytesChecked(opts.Capacity)
	if !ok {
		return nil, fmt.Errorf("context capacity %d: the KV cache's size overflows (%d layers)", opts.Capacity, len(m.Params().Caches()))
	}
	if avail, ok := procstat.AvailableMemory(); ok && budget > int64(avail) {
		return nil, fmt.Errorf("context capacity %d needs %d MiB of KV cache (%d layers, %s keys and values), more than the %d MiB of memory available; ask for a smaller Capacity",
			opts.Capacity, budget>>20, len(m.Params().Caches()), typ, avail>>20)
	}
	reuse := opts.ReuseLogits
	opts.ReuseLogits = false
	b, err := NewBatch(m, BatchOptions{Options: opts, KVBudget: max(budget, 1)})
	if err != nil {
		return nil, err
	}
	return &Session{batch: b, seq: b.Add(), reuse: reuse}, nil
}

// Pos is the number of positions already in context.
func (s *Session) Pos() int { return s.batch.seqs[s.seq].pos }

// Capacity is the number of positions the session holds.
func (s *Session) Capacity() int { return s.batch.opts.Capacity }

// Pool is the session's KV pool (for inspection).
func (s *Session) Pool() *KVPool { return s.batch.pool }

// Held is the number of positions whose keys and values layer keeps: all
// of them, or about its window for a sliding layer.
func (s *Session) Held(layer int) (int, error) { return s.batch.Held(s.seq, layer) }

// SetAdapter makes the session run with the LoRA adapter in slot
// (Params.Adapters; -1: the bare base) instead of the first one, while
// it holds no positions (after Reset, say). See Batch.SetAdapter.
func (s *Session) SetAdapter(slot int) error { return s.batch.SetAdapter(s.seq, slot) }

// Reset empties the context and returns its blocks to the pool.
func (s *Session) Reset() {
	if err := s.batch.Truncate(s.seq, 0); err != nil {
		panic(err) // rewinding to 0 needs no block
	}
}

// Append runs token ids at the current position, stores their keys and
// values, and returns the logits of the last one (a fresh slice of
// VocabSize, or with Options.ReuseLogits the session's buffer). It is
// AppendInput(IDs(ids...)).
func (s *Session) Append(ids []int) ([]float32, error) { return s.AppendInput(Input{IDs: ids}) }

// AppendInput runs an input (ids, embeddings, or ids with rows replaced by
// embeddings) at the current position and returns the logits of its last
// row.
func (s *Session) AppendInput(in Input) ([]float32, error) {
	last, _, err := s.append(context.Background(), in, false)
	return last, err
}

// AppendAll is AppendInput returning the logits of every row,
// [rows][VocabSize]. After Reset it is the full forward Hugging Face
// computes for a sequence.
func (s *Session) AppendAll(in Input) ([][]float32, error) {
	_, rows, err := s.append(context.Background(), in, true)
	return rows, err
}

// append runs in and returns the logits of its last row, and with all
// those of every row.
func (s *Session) append(ctx context.Context, in Input, all bool) ([]float32, [][]float32, error) {
	want := LastLogits
	if all {
		want = AllLogits
	}
	b := s.batch
	b.opts.ReuseLogits = !all // the one row returned is copied below
	defer func() { b.opts.ReuseLogits = false }()
	pos := s.Pos()
	outs, err := b.Run(ctx, []Feed{{Seq: s.seq, Input: in, Logits: want}})
	if len(outs) == 1 {
		s.last = outs[0]
	}
	if err != nil {
		if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
			return nil, nil, fmt.Errorf("at position %d: %w", pos, err)
		}
		return nil, nil, err
	}
	rows := outs[0].Logits
	last := rows[len(rows)-1]
	if all {
		return last, rows, nil
	}
	if s.reuse {
		s.logits = append(s.logits[:0], last...)
		return s.logits, nil, nil
	}
	return slices.Clone(last), nil, nil
}

// Prepare builds and compiles every graph that Append of n ids and the
// decode steps after it will use, so that timing a generation measures
// running graphs, not building them.
func (s *Session) Prepare(n int) error { return s.batch.Prepare(n) }

// chunk picks how many of n remaining tokens to run next and in which graph
// length: the smallest bucket that holds them all if at most a quarter of it
// is padding, else the longest bucket that fits (the rest follows in more
// chunks), else the smallest bucket padded; one token goes through the
// one-row decode graph.
func chunk(b []int, n int) (take, T int) {
	if n == 1 {
		return 1, 1
	}
	for _, size := range b {
		if size >= n {
			if 4*n >= 3*size {
				return n, size
			}
			break
		}
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] <= n {
			return b[i], b[i]
		}
	}
	return n, b[0]
}

// Graph returns the (built and compiled) graph for T rows of token ids,
// for inspection or export (g.ToDot()).
func (s *Session) Graph(T int, allLogits bool) (*G.ExprGraph, error) {
	R := 1
	if allLogits {
		R = T
	}
	p, err := s.batch.compiled(programKey{T, R, fromIDs})
	if err != nil {
		return nil, err
	}
	return p.step.G, nil
}

// CaptureNames lists what the T-row graph of token ids can capture: its
// taps ("hidden_states.0", ...), the attention sinks asked for in
// Options.Capture, and every named node (weights are named after their
// tensors).
func (s *Session) CaptureNames(T int) ([]string, error) {
	p, err := s.batch.compiled(programKey{T, 1, fromIDs})
	if err != nil {
		return nil, err
	}
	return p.captureNames(), nil
}

// Captured returns the value a capture name took in the last Append: for
// row-shaped values ([rows, ...], such as hidden states [rows, D] and
// attention probabilities [rows, heads, keys]) the real rows of every chunk
// of that Append, concatenated; for others the last value. A trailing axis
// that grew between chunks (the keys of attention) is padded with zeros.
func (s *Session) Captured(name string) (*tensor.Dense, bool) { return s.last.Captured(name) }

// CapturedNames lists the names captured in the last Append.
func (s *Session) CapturedNames() []string { return s.last.CapturedNames() }

// DeviceBusy is Batch.DeviceBusy of the session's batch.
func (s *Session) DeviceBusy() time.Duration { return s.batch.DeviceBusy() }

// Close releases the session's graphs and KV blocks. Their tapes hold
// nothing outside the Go heap, so it cannot fail; it returns an error for
// the io.Closer contract.
func (s *Session) Close() error { return s.batch.Close() }
