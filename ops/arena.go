package ops

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Out hands a kernel the memory for its output.
type Out interface {
	// Float32s returns a zeroed buffer of n values for the op's output.
	Float32s(n int) []float32
}

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
	free map[int][][]float32
	live map[*float32]*buffer
}

type buffer struct {
	data []float32
	refs int
}

// NewArena makes an empty arena.
func NewArena() *Arena {
	return &Arena{free: map[int][][]float32{}, live: map[*float32]*buffer{}}
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
		a.live[&d[0]] = &buffer{data: d, refs: refs}
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
	s := d.Data().([]float32)
	if len(s) == 0 {
		return
	}
	b, ok := a.live[&s[0]]
	if !ok {
		return
	}
	if b.refs--; b.refs == 0 {
		delete(a.live, &s[0])
		a.free[len(b.data)] = append(a.free[len(b.data)], b.data)
	}
}

// state is what graphs tells an op about its node once the graph is
// built: the arena, and how many edges read the node's value.
type state struct {
	arena     *Arena
	consumers int
	pinned    bool
	own       []float32 // a pinned node's buffer
}

// Float32s implements Out.
func (st *state) Float32s(n int) []float32 {
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

// Buffers is the number of buffers the arena holds, free or in use.
func (a *Arena) Buffers() int {
	n := len(a.live)
	for _, f := range a.free {
		n += len(f)
	}
	return n
}
