package graphs

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/internal/procstat"
	"github.com/gozoo/gozoo/ops"
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
}

// DefaultCapacity caps the context of a session whose options name none.
const DefaultCapacity = 8192

// DefaultBuckets are the prefill lengths compiled on demand.
var DefaultBuckets = []int{8, 16, 32, 64, 128, 256, 512}

// Session is one generation's state: its graphs, their machines and the KV
// caches. A Session is not safe for concurrent use; run one per goroutine.
// Sessions on the same model share its weights read-only.
type Session struct {
	model   Model
	opts    Options
	cache   *KVCache
	pos     int
	vocab   int
	hidden  int
	program map[programKey]*program
	capture map[string]*captured
	// arena recycles the ops' output buffers within and across runs.
	arena *ops.Arena
	// rc is the context of the append in progress, read by the
	// cancellation checks between layers (see AppendInputContext).
	rc *runContext
	// logits holds the last row's logits under Options.ReuseLogits.
	logits []float32
	// interrupted is set when a graph stopped midway on a session whose
	// sliding-window rings it may have overwritten: only Reset clears it.
	interrupted error
}

type programKey struct {
	T    int
	kind inputKind
	all  bool
}

// program is one compiled graph with its machine, and the input values it
// is fed: allocated once, refilled and bound again on every run.
type program struct {
	*graph
	tape                 *tape
	positions, ids, mask []int
	rows                 []int
	embeds               []float32
	inputs               map[*G.Node]*tensor.Dense
}

// input returns the program's value for an input node, made on first use.
func (p *program) input(n *G.Node, backing any, shape ...int) *tensor.Dense {
	if v, ok := p.inputs[n]; ok {
		return v
	}
	v := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
	p.inputs[n] = v
	return v
}

// NewSession allocates the KV caches for m. Graphs are built and compiled
// on first use and kept for the session's life.
func NewSession(m Model, opts Options) (*Session, error) {
	if opts.Capacity == 0 {
		opts.Capacity = min(m.MaxPositions(), DefaultCapacity)
	}
	if opts.Capacity <= 0 {
		return nil, fmt.Errorf("context capacity must be positive, got %d", opts.Capacity)
	}
	if opts.Capacity > m.MaxPositions() {
		return nil, fmt.Errorf("context capacity %d exceeds the model's %d positions (max_position_embeddings)", opts.Capacity, m.MaxPositions())
	}
	if opts.Buckets == nil {
		opts.Buckets = DefaultBuckets
	}
	if len(opts.Buckets) == 0 || !slices.IsSorted(opts.Buckets) || opts.Buckets[0] < 1 {
		return nil, fmt.Errorf("prefill buckets must be ascending positive lengths, got %v", opts.Buckets)
	}
	caches := m.Params().Caches()
	if len(caches) > m.NumLayers() {
		return nil, fmt.Errorf("layer %d declared a KV cache, the model has %d layers", len(caches)-1, m.NumLayers())
	}
	// The KV caches are allocated here, in full: check their size, with
	// overflow checks, against the memory available first.
	mul := func(a, b uint64) (uint64, bool) {
		hi, lo := bits.Mul64(a, b)
		return lo, hi == 0
	}
	var kv uint64
	for i, l := range caches {
		if l.Kind == NoCache {
			continue
		}
		slots := l.slots(opts.Capacity)
		if l.KVHeads <= 0 || l.KeyDim <= 0 || l.ValueDim <= 0 {
			return nil, fmt.Errorf("layer %d's KV cache has %d heads of %d and %d dimensions", i, l.KVHeads, l.KeyDim, l.ValueDim)
		}
		hs, ok1 := mul(uint64(l.KVHeads), uint64(slots))
		vals, ok2 := mul(hs, uint64(l.KeyDim)+uint64(l.ValueDim))
		b, ok3 := mul(vals, uint64(kvBytes(opts.KVCacheF16)))
		sum, carry := bits.Add64(kv, b, 0)
		if !ok1 || !ok2 || !ok3 || carry != 0 || sum > math.MaxInt64 {
			return nil, fmt.Errorf("context capacity %d: the KV cache's size overflows (%d layers)", opts.Capacity, len(caches))
		}
		kv = sum
	}
	if avail, ok := procstat.AvailableMemory(); ok && kv > uint64(avail) {
		return nil, fmt.Errorf("context capacity %d needs %d MiB of KV cache (%d layers, %d-byte keys and values), more than the %d MiB of memory available; ask for a smaller Capacity",
			opts.Capacity, kv>>20, len(caches), kvBytes(opts.KVCacheF16), avail>>20)
	}
	return &Session{
		model:   m,
		opts:    opts,
		cache:   NewKVCache(caches, opts.Capacity, opts.KVCacheF16),
		vocab:   m.VocabSize(),
		hidden:  m.HiddenSize(),
		program: map[programKey]*program{},
		capture: map[string]*captured{},
		arena:   ops.NewArena(),
		rc:      &runContext{},
	}, nil
}

// Pos is the number of positions already in context.
func (s *Session) Pos() int { return s.pos }

// Capacity is the number of positions the session holds.
func (s *Session) Capacity() int { return s.opts.Capacity }

// Cache is the session's KV cache (for inspection).
func (s *Session) Cache() *KVCache { return s.cache }

// Reset empties the context (cache contents are simply overwritten later).
func (s *Session) Reset() { s.pos, s.interrupted = 0, nil }

func (s *Session) check(in Input) (int, error) {
	if s.interrupted != nil {
		return 0, fmt.Errorf("the session's context is no longer reliable (%w): Reset it before appending", s.interrupted)
	}
	if err := in.check(s.vocab, s.hidden); err != nil {
		return 0, err
	}
	n := in.Len(s.hidden)
	if s.pos+n > s.opts.Capacity {
		return 0, fmt.Errorf("%d tokens after %d already in context exceed the context capacity of %d positions", n, s.pos, s.opts.Capacity)
	}
	return n, nil
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
	last, _, err := s.append(in, false)
	return last, err
}

// AppendAll is AppendInput returning the logits of every row,
// [rows][VocabSize]. After Reset it is the full forward Hugging Face
// computes for a sequence.
func (s *Session) AppendAll(in Input) ([][]float32, error) {
	_, rows, err := s.append(in, true)
	return rows, err
}

// append runs in and returns the logits of its last row, and with all
// those of every row.
func (s *Session) append(in Input, all bool) ([]float32, [][]float32, error) {
	n, err := s.check(in)
	if err != nil {
		return nil, nil, err
	}
	clear(s.capture)
	var out [][]float32
	var last []float32
	for done := 0; done < n; {
		if err := s.rc.err(); err != nil {
			return nil, nil, fmt.Errorf("stopped after %d of %d rows, at position %d: %w", done, n, s.pos, err)
		}
		take, T := s.chunk(n - done)
		if all && T == 1 {
			T = s.opts.Buckets[0] // the decode graph yields one row only
		}
		logits, err := s.run(in.Slice(done, done+take, s.hidden), T, all)
		if err != nil {
			return nil, nil, err
		}
		// logits is the graph's own output, which its next run
		// overwrites: the rows returned are copies.
		rows := len(logits) / s.vocab
		if all {
			for r := 0; r < rows; r++ {
				out = append(out, slices.Clone(logits[r*s.vocab:(r+1)*s.vocab]))
			}
		}
		last = logits[(rows-1)*s.vocab:]
		done += take
	}
	if all {
		return out[len(out)-1], out, nil
	}
	if s.opts.ReuseLogits {
		s.logits = append(s.logits[:0], last...)
		return s.logits, nil, nil
	}
	return slices.Clone(last), nil, nil
}

// Prepare builds and compiles every graph that Append of n ids and the
// decode steps after it will use, so that timing a generation measures
// running graphs, not building them.
func (s *Session) Prepare(n int) error {
	for rest := n; rest > 0; {
		take, T := s.chunk(rest)
		if _, err := s.compiled(programKey{T, fromIDs, false}); err != nil {
			return err
		}
		rest -= take
	}
	_, err := s.compiled(programKey{1, fromIDs, false})
	return err
}

// chunk picks how many of n remaining tokens to run next and in which graph
// length: the smallest bucket that holds them all if at most a quarter of it
// is padding, else the longest bucket that fits (the rest follows in more
// chunks), else the smallest bucket padded; one token goes through the
// one-row decode graph.
func (s *Session) chunk(n int) (take, T int) {
	if n == 1 {
		return 1, 1
	}
	b := s.opts.Buckets
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

// run feeds one chunk (at most T rows) through the T-row graph at the
// current position and advances it. It returns the logits of every real
// row when all is set, else of the last one, [rows, vocab], in the
// graph's own output, which its next run overwrites.
func (s *Session) run(in Input, T int, all bool) ([]float32, error) {
	p, err := s.compiled(programKey{T, in.kind(), all})
	if err != nil {
		return nil, err
	}
	n, D := in.Len(s.hidden), s.hidden
	for t := range p.positions {
		p.positions[t] = -1
		if t < n {
			p.positions[t] = s.pos + t
		}
	}
	var err2 error
	let := func(node *G.Node, val *tensor.Dense) {
		if err2 == nil {
			err2 = G.Let(node, val)
		}
	}
	let(p.step.Positions, p.input(p.step.Positions, p.positions, T))
	if p.ids != nil {
		clear(p.ids)
		copy(p.ids, in.IDs)
		let(p.graph.ids, p.input(p.graph.ids, p.ids, T))
	}
	if p.embeds != nil {
		clear(p.embeds)
		if p.mask == nil {
			copy(p.embeds, in.Embeds)
		} else {
			clear(p.mask)
			for k, r := range in.Replace {
				p.mask[r] = 1
				copy(p.embeds[r*D:(r+1)*D], in.Embeds[k*D:(k+1)*D])
			}
			let(p.graph.mask, p.input(p.graph.mask, p.mask, T))
		}
		let(p.graph.embeds, p.input(p.graph.embeds, p.embeds, T, D))
	}
	if p.rows != nil {
		p.rows[0] = n - 1
		let(p.graph.rows, p.input(p.graph.rows, p.rows, 1))
	}
	if err2 != nil {
		return nil, err2
	}
	s.arena.Reset()
	if err := p.tape.run(); err != nil {
		if s.rc.stopped != nil { // a cancellation check, not a failure
			err = s.rc.stopped
		}
		err = fmt.Errorf("running the %d-row graph at position %d: %w", T, s.pos, err)
		for _, k := range s.cache.K {
			if k != nil && k.Shape()[1] < s.cache.Capacity { // a sliding window's ring
				s.interrupted = err
				break
			}
		}
		return nil, err
	}
	data, err := ops.Float32s(p.tape.value(p.logits))
	if err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	R := 1
	if all {
		R = n
	}
	s.collect(p.graph, T, n)
	s.pos += n
	return data[:R*s.vocab], nil
}

func (s *Session) compiled(key programKey) (*program, error) {
	if p, ok := s.program[key]; ok {
		return p, nil
	}
	gr, err := build(s.model, key.T, key.kind, key.all, s.cache, s.opts.Capture, s.rc, s.opts.Fast)
	if err != nil {
		return nil, err
	}
	ops.Plan(gr.step.G, s.arena)
	t, err := newTape(gr.step.G)
	if err != nil {
		return nil, fmt.Errorf("ordering the %d-row graph: %w", key.T, err)
	}
	p := &program{graph: gr, tape: t, positions: make([]int, key.T), inputs: map[*G.Node]*tensor.Dense{}}
	if gr.ids != nil {
		p.ids = make([]int, key.T)
	}
	if gr.embeds != nil {
		p.embeds = make([]float32, key.T*s.hidden)
	}
	if gr.mask != nil {
		p.mask = make([]int, key.T)
	}
	if gr.rows != nil {
		p.rows = make([]int, 1)
	}
	s.program[key] = p
	return p, nil
}

// Graph returns the (built and compiled) graph for T rows of token ids,
// for inspection or export (g.ToDot()).
func (s *Session) Graph(T int, allLogits bool) (*G.ExprGraph, error) {
	p, err := s.compiled(programKey{T, fromIDs, allLogits})
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
	p, err := s.compiled(programKey{T, fromIDs, false})
	if err != nil {
		return nil, err
	}
	return p.captureNames(), nil
}

// Close releases the session's graphs. Their tapes hold nothing outside
// the Go heap, so it cannot fail; it returns an error for the io.Closer
// contract.
func (s *Session) Close() error {
	s.program = map[programKey]*program{}
	return nil
}
