package ops

import (
	"reflect"
	"slices"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Arena recycles the output buffers of a session's ops. Gorgonia's machine
// keeps every node's value until the run ends, so a prefill over T rows
// would hold every intermediate [T, ...] activation of every layer at
// once; instead each op takes its output from the arena and gives its
// inputs back as it consumes them, so a buffer is reused as soon as every
// op that reads it has run (reference counts, independent of the order the
// machine picks). Once the first run has filled the pools, a run allocates
// no activations at all.
//
// A node read by anything but these ops (a stock Gorgonia op, the caller
// reading the logits) is pinned: it keeps a buffer of its own, reused
// from run to run. An arena belongs to one session; sessions are not
// shared between goroutines.
type Arena struct {
	free   map[int][][]float32
	live   map[*float32]buffer
	shared map[reflect.Type]any // see Shared
}

type buffer struct {
	data []float32
	refs int
}

// NewArena makes an empty arena.
func NewArena() *Arena {
	return &Arena{free: map[int][][]float32{}, live: map[*float32]buffer{}}
}

// Reset takes every buffer back, at the start of a run.
func (a *Arena) Reset() {
	for _, b := range a.live {
		a.free[len(b.data)] = append(a.free[len(b.data)], b.data)
	}
	clear(a.live)
}

func (a *Arena) get(n, refs int) []float32 {
	var d []float32
	if f := a.free[n]; len(f) > 0 {
		d, a.free[n] = f[len(f)-1], f[:len(f)-1]
		clear(d)
	} else {
		d = make([]float32, n)
	}
	if n > 0 {
		a.live[&d[0]] = buffer{data: d, refs: refs}
	}
	return d
}

// release gives back one reference to the buffer holding v, if the arena
// handed it out.
func (a *Arena) release(v G.Value) {
	d, ok := v.(*tensor.Dense)
	if !ok || d.Dtype() != tensor.Float32 {
		return
	}
	s := d.Float32s()
	if len(s) == 0 {
		return
	}
	b, ok := a.live[&s[0]]
	if !ok {
		return
	}
	if b.refs--; b.refs > 0 {
		a.live[&s[0]] = b
		return
	}
	delete(a.live, &s[0])
	a.free[len(b.data)] = append(a.free[len(b.data)], b.data)
}

// takeOver hands the buffer holding v, of n values, to a node read by
// consumers edges when the reader calling it holds v's last reference;
// nil otherwise. Op.Do releases each input once the kernel returns, so
// the buffer keeps one reference more until then.
func (a *Arena) takeOver(v G.Value, n, consumers int) []float32 {
	d, ok := v.(*tensor.Dense)
	if !ok || d.Dtype() != tensor.Float32 {
		return nil
	}
	s := d.Float32s()
	if len(s) != n || n == 0 {
		return nil
	}
	b, ok := a.live[&s[0]]
	if !ok || b.refs != 1 {
		return nil
	}
	a.live[&s[0]] = buffer{data: b.data, refs: consumers + 1}
	return b.data
}

// Out is what an op knows about its node: where its output memory comes
// from (the arena, and how many edges read the node's value, which graphs
// tells it once the graph is built) and its type. A concrete type, not an
// interface, so that the compiler sees a kernel's arguments stay put.
type Out struct {
	arena     *Arena
	consumers int
	pinned    bool
	own       []float32 // a pinned node's buffer
	last      *tensor.Dense
	arity     int

	// State is the kernel's own, kept from run to run of its node: scratch
	// buffers a kernel reuses instead of allocating (a node runs one run
	// at a time; sessions do not share nodes). Nil for an Out of nil.
	State any
}

// Shared returns kernel state of type T that every node of o's session
// shares, made by make on first use: scratch a kernel needs only while it
// runs. A session runs one node at a time, so one copy serves all of its
// nodes, where Stash keeps one per node: an attention's score blocks, one
// set per layer and per graph, came to 22 MB of a 144 MB SmolLM2 (heap
// profile of a 128-token prefill). The state must not carry anything from
// one call to the next. Without an arena (a kernel called outside a
// graph) it is Stash's.
func Shared[T any](o *Out, make func() *T) *T {
	if o == nil || o.arena == nil {
		return Stash(o, make)
	}
	key := reflect.TypeFor[T]()
	if s, ok := o.arena.shared[key].(*T); ok {
		return s
	}
	if o.arena.shared == nil {
		o.arena.shared = map[reflect.Type]any{}
	}
	s := make()
	o.arena.shared[key] = s
	return s
}

// Stash returns the kernel state of o, made by make on first use (or on
// every call when o is nil, as in a kernel called outside a graph).
func Stash[T any](o *Out, make func() *T) *T {
	if o == nil {
		return make()
	}
	if s, ok := o.State.(*T); ok {
		return s
	}
	s := make()
	o.State = s
	return s
}

// Tensor wraps data as the op's output value, reusing the previous
// run's header when it wraps the same memory and shape.
func (st *Out) Tensor(data []float32, shape ...int) *tensor.Dense {
	if st == nil {
		return NewF32(data, shape...)
	}
	if l := st.last; l != nil && len(data) > 0 && l.Len() == len(data) && &l.Float32s()[0] == &data[0] && sameShape(l.Shape(), shape) {
		return l
	}
	st.last = tensor.New(tensor.WithShape(slices.Clone(shape)...), tensor.WithBacking(data))
	return st.last
}

func sameShape(a tensor.Shape, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Float32s returns a zeroed buffer of n values for the op's output.
func (st *Out) Float32s(n int) []float32 {
	switch {
	case st == nil || st.arena == nil:
		return make([]float32, n)
	case st.pinned || st.consumers == 0:
		if len(st.own) != n {
			st.own = make([]float32, n)
		} else {
			clear(st.own)
		}
		return st.own
	}
	return st.arena.get(n, st.consumers)
}

// Reuse returns a buffer of n values for the op's output: the buffer of
// one of the inputs when this op is the last to read it (an elementwise op
// then runs in place, and a prefill holds one activation fewer), else a
// zeroed one as Float32s. The kernel must read each element of its
// inputs before it writes that element of the output, and set every
// element.
func (st *Out) Reuse(n int, in ...G.Value) []float32 {
	if st != nil && st.arena != nil && !st.pinned && st.consumers > 0 {
		for _, v := range in {
			if d := st.arena.takeOver(v, n, st.consumers); d != nil {
				return d
			}
		}
	}
	return st.Float32s(n)
}

// Plan gives the ops of a built graph their arena: it counts, for each
// node of one of these ops, the edges that read it, and pins the nodes
// that something else reads. Call it once per graph, after building.
func Plan(g *G.ExprGraph, arena *Arena) {
	nodes := g.AllNodes()
	for _, n := range nodes {
		if op, ok := n.Op().(Op); ok && op.st != nil {
			op.st.arena, op.st.consumers, op.st.pinned = arena, 0, false
		}
	}
	for _, n := range nodes {
		_, reader := n.Op().(Op)
		for it := g.From(n.ID()); it.Next(); {
			c := it.Node().(*G.Node)
			op, ok := c.Op().(Op)
			if !ok || op.st == nil {
				continue
			}
			op.st.consumers++
			if !reader {
				op.st.pinned = true
			}
		}
	}
}

// Pin gives node n, when one of these ops computes it, a buffer of its
// own, kept from run to run, as Plan gives a node that something else
// reads: for a node the caller reads after the run (a Program's output,
// the logits) that ops read too, whose arena buffer would otherwise go
// back to the pool once they have, for later ops to overwrite. Call it
// after Plan.
func Pin(n *G.Node) {
	if op, ok := n.Op().(Op); ok && op.st != nil {
		op.st.pinned = true
	}
}

// Buffers is the number of buffers the arena holds, free or in use.
func (a *Arena) Buffers() int {
	n := len(a.live)
	for _, f := range a.free {
		n += len(f)
	}
	return n
}
