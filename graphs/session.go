package graphs

import (
	"errors"
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Options tune a Session.
type Options struct {
	// Capacity is the number of positions the KV cache holds. 0 means the
	// model's MaxPositions, capped at DefaultCapacity.
	Capacity int
	// Buckets are the prefill graph lengths, ascending. A prompt is fed in
	// chunks of these lengths, the last one padded (see Session.chunk).
	// nil means DefaultBuckets.
	Buckets []int
}

// DefaultCapacity caps the KV cache of a session whose options name none.
const DefaultCapacity = 8192

// DefaultBuckets are the prefill lengths compiled on demand.
var DefaultBuckets = []int{8, 16, 32, 64, 128, 256, 512}

// Session is one generation's state: its graphs, their machines and the KV
// cache. A Session is not safe for concurrent use; run one per goroutine.
// Sessions on the same model share its weights read-only.
type Session struct {
	model   Model
	opts    Options
	cache   *KVCache
	pos     int
	vocab   int
	program map[programKey]*program
}

type programKey struct {
	T   int
	all bool
}

// program is one compiled graph with its machine.
type program struct {
	step   *Step
	logits *G.Node
	vm     G.VM
}

// NewSession allocates a KV cache for m. Graphs are built and compiled on
// first use and kept for the session's life.
func NewSession(m Model, opts Options) (*Session, error) {
	if opts.Capacity == 0 {
		opts.Capacity = min(m.MaxPositions(), DefaultCapacity)
	}
	if opts.Capacity <= 0 {
		return nil, fmt.Errorf("KV cache capacity must be positive, got %d", opts.Capacity)
	}
	if opts.Capacity > m.MaxPositions() {
		return nil, fmt.Errorf("KV cache capacity %d exceeds the model's %d positions (max_position_embeddings)", opts.Capacity, m.MaxPositions())
	}
	if opts.Buckets == nil {
		opts.Buckets = DefaultBuckets
	}
	if len(opts.Buckets) == 0 || !slices.IsSorted(opts.Buckets) || opts.Buckets[0] < 1 {
		return nil, fmt.Errorf("prefill buckets must be ascending positive lengths, got %v", opts.Buckets)
	}
	return &Session{
		model:   m,
		opts:    opts,
		cache:   NewKVCache(m.CacheSpec(), opts.Capacity),
		vocab:   m.VocabSize(),
		program: map[programKey]*program{},
	}, nil
}

// Pos is the number of positions filled in the KV cache.
func (s *Session) Pos() int { return s.pos }

// Capacity is the number of positions the KV cache holds.
func (s *Session) Capacity() int { return s.opts.Capacity }

// Reset empties the KV cache (its contents are simply overwritten later).
func (s *Session) Reset() { s.pos = 0 }

// Rewind drops every position from pos on, e.g. to reuse a shared prefix.
func (s *Session) Rewind(pos int) error {
	if pos < 0 || pos > s.pos {
		return fmt.Errorf("cannot rewind to position %d: the cache holds %d", pos, s.pos)
	}
	s.pos = pos
	return nil
}

func (s *Session) checkIDs(ids []int) error {
	if len(ids) == 0 {
		return errors.New("no tokens to run")
	}
	for i, id := range ids {
		if id < 0 || id >= s.vocab {
			return fmt.Errorf("token %d at index %d is outside the vocabulary [0, %d)", id, i, s.vocab)
		}
	}
	if s.pos+len(ids) > s.opts.Capacity {
		return fmt.Errorf("%d tokens after %d already in context exceed the context capacity of %d positions", len(ids), s.pos, s.opts.Capacity)
	}
	return nil
}

// Append runs ids at the current position, stores their keys and values,
// and returns the logits of the last one (a fresh slice of VocabSize).
func (s *Session) Append(ids []int) ([]float32, error) {
	if err := s.checkIDs(ids); err != nil {
		return nil, err
	}
	var last []float32
	for rest := ids; len(rest) > 0; {
		n, T := s.chunk(len(rest))
		out, err := s.run(rest[:n], T, false)
		if err != nil {
			return nil, err
		}
		last = out
		rest = rest[n:]
	}
	return last, nil
}

// Logits runs ids from position 0 (after Reset) and returns the logits of
// every position, [len(ids)][VocabSize]. It is the full forward HF computes
// for a sequence, and leaves the cache filled with ids.
func (s *Session) Logits(ids []int) ([][]float32, error) {
	s.Reset()
	if err := s.checkIDs(ids); err != nil {
		return nil, err
	}
	rows := make([][]float32, 0, len(ids))
	for rest := ids; len(rest) > 0; {
		n, T := s.chunk(len(rest))
		if T == 1 {
			T = s.opts.Buckets[0] // the decode graph yields one row only
		}
		out, err := s.run(rest[:n], T, true)
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			rows = append(rows, out[i*s.vocab:(i+1)*s.vocab:(i+1)*s.vocab])
		}
		rest = rest[n:]
	}
	return rows, nil
}

// Prepare builds and compiles every graph that Append(ids) with len(ids) ==
// n and the decode steps after it will use, so that timing a generation
// measures running graphs, not building them.
func (s *Session) Prepare(n int) error {
	for rest := n; rest > 0; {
		take, T := s.chunk(rest)
		if _, err := s.compiled(T, false); err != nil {
			return err
		}
		rest -= take
	}
	_, err := s.compiled(1, false)
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

// run feeds ids (len <= T) through the T-row graph at the current position
// and advances it.
func (s *Session) run(ids []int, T int, all bool) ([]float32, error) {
	p, err := s.compiled(T, all)
	if err != nil {
		return nil, err
	}
	padded := make([]int, T)
	copy(padded, ids)
	if err := G.Let(p.step.IDs, tensor.New(tensor.WithShape(T), tensor.WithBacking(padded))); err != nil {
		return nil, err
	}
	if err := G.Let(p.step.Meta, tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{s.pos, len(ids)}))); err != nil {
		return nil, err
	}
	if err := G.Let(p.step.Last, tensor.New(tensor.WithShape(1), tensor.WithBacking([]int{len(ids) - 1}))); err != nil {
		return nil, err
	}
	// Without Reset the next RunAll silently returns stale values.
	defer p.vm.Reset()
	if err := p.vm.RunAll(); err != nil {
		return nil, fmt.Errorf("running the %d-row graph at position %d: %w", T, s.pos, err)
	}
	v, ok := p.logits.Value().(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("logits node holds %T, want *tensor.Dense", p.logits.Value())
	}
	if v.IsView() {
		v = v.Materialize().(*tensor.Dense)
	}
	data := v.Data().([]float32)
	out := make([]float32, len(data))
	copy(out, data)
	s.pos += len(ids)
	return out, nil
}

func (s *Session) compiled(T int, all bool) (*program, error) {
	key := programKey{T, all}
	if p, ok := s.program[key]; ok {
		return p, nil
	}
	step, logits, err := Build(s.model, T, all, s.cache)
	if err != nil {
		return nil, err
	}
	p := &program{step: step, logits: logits, vm: G.NewTapeMachine(step.G)}
	s.program[key] = p
	return p, nil
}

// Graph returns the (built and compiled) graph for T rows, for inspection
// or export (g.ToDot()).
func (s *Session) Graph(T int, allLogits bool) (*G.ExprGraph, error) {
	p, err := s.compiled(T, allLogits)
	if err != nil {
		return nil, err
	}
	return p.step.G, nil
}

// Close releases the session's machines.
func (s *Session) Close() error {
	var errs []error
	for _, p := range s.program {
		errs = append(errs, p.vm.Close())
	}
	s.program = map[programKey]*program{}
	return errors.Join(errs...)
}

// Argmax returns the index of the largest logit (the first on ties):
// greedy decoding.
func Argmax(logits []float32) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return best
}
