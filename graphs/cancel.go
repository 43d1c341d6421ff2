package graphs

import (
	"context"
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/ops"
)

// runContext is the context of the run a session has in progress, read by
// the cancellation checks compiled into its graphs; ctx is nil outside
// AppendInputContext and AppendAllContext. stopped is the error of the
// check that stopped the run: Gorgonia's machine does not keep an op's
// error unwrappable, so the session reports this one. A session runs one
// graph at a time in one goroutine, so no lock guards them.
type runContext struct {
	ctx     context.Context
	stopped error
}

// err returns the run's context error, nil when the run has no context.
func (rc *runContext) err() error {
	if rc == nil || rc.ctx == nil {
		return nil
	}
	return rc.ctx.Err()
}

// cancelCheck sits between decoder layers: it passes the positions
// vector through, after the previous layer's output is computed (its
// second input, read only for the ordering), and fails when the run's
// context is done. The layer after it reads its positions from this op,
// so the machine cannot start that layer's attention before the check.
// The cost is one context poll and a copy of T ints per layer.
type cancelCheck struct {
	layer int
	rc    *runContext
}

func (k cancelCheck) Name() string   { return "cancellation check" }
func (k cancelCheck) String() string { return fmt.Sprintf("CancelCheck{before layer %d}", k.layer) }
func (k cancelCheck) Signature() []hm.Type {
	return []hm.Type{ops.T(1, tensor.Int), ops.T(2, nil), ops.T(1, tensor.Int)}
}
func (k cancelCheck) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) != 1 {
		return nil, fmt.Errorf("positions have shape %v, want a vector", in[0])
	}
	return in[0].Clone(), nil
}

// cancelState is a check's output, kept from run to run.
type cancelState struct{ out *tensor.Dense }

func (k cancelCheck) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	if err := k.rc.err(); err != nil {
		k.rc.stopped = fmt.Errorf("stopped before layer %d: %w", k.layer, err)
		return nil, k.rc.stopped
	}
	pos, err := ops.Ints(in[0])
	if err != nil {
		return nil, err
	}
	st := ops.Stash(o, func() *cancelState { return &cancelState{} })
	if st.out == nil || st.out.Len() != len(pos) {
		st.out = tensor.New(tensor.WithShape(len(pos)), tensor.WithBacking(make([]int, len(pos))))
	}
	copy(st.out.Ints(), pos)
	return st.out, nil
}

// positionsAfter returns the positions layer i reads: the step's
// positions passed through a cancellation check that runs once h, the
// previous layer's output, is computed. Layer 0 reads them directly
// (only the embedding ran before it).
func positionsAfter(rc *runContext, base *G.Node, i int, h *G.Node) *G.Node {
	if rc == nil || i == 0 || len(h.Shape()) != 2 {
		return base
	}
	return ops.Apply(cancelCheck{layer: i, rc: rc}, base, h)
}

// AppendInputContext is AppendInput that stops when ctx is done: between
// the chunks a long input is split into, and inside a chunk's graph
// between decoder layers. The error then wraps ctx.Err(). Chunks run
// before the cancellation stay in context (Pos counts them); a chunk
// stopped midway is not counted, and the next append runs from where
// the last whole chunk ended.
func (s *Session) AppendInputContext(ctx context.Context, in Input) ([]float32, error) {
	last, _, err := s.appendContext(ctx, in, false)
	return last, err
}

// AppendAllContext is AppendAll that stops when ctx is done, as
// AppendInputContext does.
func (s *Session) AppendAllContext(ctx context.Context, in Input) ([][]float32, error) {
	_, rows, err := s.appendContext(ctx, in, true)
	return rows, err
}

func (s *Session) appendContext(ctx context.Context, in Input, all bool) ([]float32, [][]float32, error) {
	return s.append(ctx, in, all)
}

// Checkpoint passes h through a cancellation check in a Program's graph:
// when the Program runs under RunContext and the context is done, the run
// stops there with an error that wraps ctx.Err() and names the
// checkpoint. Models put one between encoder layers. It costs a copy of
// h. In a Session's graph it returns h: a Session checks between decoder
// layers by itself.
func (s *Step) Checkpoint(name string, h *G.Node) *G.Node {
	if s.rc == nil {
		return h
	}
	return ops.Apply(checkpoint{name: name, dims: len(h.Shape()), rc: s.rc}, h)
}

// checkpoint is Step.Checkpoint's op: a copy that first polls the run's
// context.
type checkpoint struct {
	name string
	dims int
	rc   *runContext
}

func (k checkpoint) Name() string   { return "cancellation check " + k.name }
func (k checkpoint) String() string { return fmt.Sprintf("Checkpoint{%s, %dd}", k.name, k.dims) }
func (k checkpoint) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil)}
}
func (k checkpoint) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k checkpoint) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	if err := k.rc.err(); err != nil {
		k.rc.stopped = fmt.Errorf("stopped at %s: %w", k.name, err)
		return nil, k.rc.stopped
	}
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(x))
	copy(out, x)
	return o.Tensor(out, in[0].Shape()...), nil
}

// RunContext is Run that stops when ctx is done: before the run, and
// inside it at each Checkpoint of the graph, with an error that wraps
// ctx.Err().
func (p *Program) RunContext(ctx context.Context, feeds map[string]any) (*tensor.Dense, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run stopped before it started: %w", err)
	}
	p.rc.ctx, p.rc.stopped = ctx, nil
	defer func() { p.rc.ctx, p.rc.stopped = nil, nil }()
	return p.Run(feeds)
}
