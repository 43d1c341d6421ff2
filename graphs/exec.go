package graphs

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/ops"
)

// tape runs a session's inference graph: its op nodes in Gorgonia's own
// execution order (the graph's stable topological sort, inputs first),
// each op's Do on its inputs' values. A session's graphs need nothing else
// from a machine: no gradients, no devices, and every op output comes
// from the ops' arena. Gorgonia's tape machine costs far more a step than
// that: it starts a goroutine and locks the caller's OS thread for each
// run, and loads, logs and binds every value through maps, which on
// SmolLM2-135M was about 0.8 ms of a 7 ms decode step, plus thread
// hand-offs that stall the kernels' team.
type tape struct {
	nodes []*G.Node
	args  [][]int   // per op node, the positions of its inputs in nodes
	vals  []G.Value // per node, its value in the last run
	index map[*G.Node]int
	buf   []G.Value // one op's arguments
}

func newTape(g *G.ExprGraph) (*tape, error) {
	sorted, err := G.Sort(g)
	if err != nil {
		return nil, err
	}
	t := &tape{nodes: make([]*G.Node, len(sorted)), index: map[*G.Node]int{}}
	for i, n := range sorted { // Sort lists outputs first
		t.nodes[len(sorted)-1-i] = n
	}
	for i, n := range t.nodes {
		t.index[n] = i
	}
	t.args = make([][]int, len(t.nodes))
	t.vals = make([]G.Value, len(t.nodes))
	most := 0
	for i, n := range t.nodes {
		if n.Op() == nil {
			continue
		}
		for it := g.From(n.ID()); it.Next(); {
			c := it.Node().(*G.Node)
			j, ok := t.index[c]
			if !ok || j >= i {
				return nil, fmt.Errorf("node %s reads %s, which does not run before it", n.Name(), c.Name())
			}
			t.args[i] = append(t.args[i], j)
		}
		most = max(most, len(t.args[i]))
	}
	t.buf = make([]G.Value, 0, most)
	return t, nil
}

// run runs every op once, in order.
func (t *tape) run() error {
	for i, n := range t.nodes {
		op := n.Op()
		if op == nil {
			t.vals[i] = n.Value()
			continue
		}
		in := t.buf[:0]
		for _, j := range t.args[i] {
			in = append(in, t.vals[j])
		}
		v, err := op.Do(in...)
		if err != nil {
			return fmt.Errorf("%s: %w", n.Name(), err)
		}
		t.vals[i] = v
	}
	clear(t.buf[:cap(t.buf)])
	return nil
}

// value is n's value in the last run.
func (t *tape) value(n *G.Node) G.Value { return t.vals[t.index[n]] }

// pickRows is h[rows] as an [R, D] matrix: the rows whose logits a step
// wants, chosen at run time; a row index of -1 gives a row of zeros. It
// replaces Gorgonia's ByIndices, which allocates its result every step.
type pickRows struct{}

func (pickRows) Name() string   { return "pick rows" }
func (pickRows) String() string { return "PickRows" }
func (pickRows) Signature() []hm.Type {
	return []hm.Type{ops.T(2, nil), ops.T(1, tensor.Int), ops.T(2, nil)}
}
func (pickRows) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) != 2 || len(in[1]) != 1 || in[1][0] > in[0][0] {
		return nil, fmt.Errorf("want h [T, D] and at most T row indices, got %v and %v", in[0], in[1])
	}
	return tensor.Shape{in[1][0], in[0][1]}, nil
}
func (pickRows) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	h, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	rows, err := ops.Ints(in[1])
	if err != nil {
		return nil, err
	}
	s := in[0].Shape()
	T, D := s[0], s[1]
	y := o.Float32s(len(rows) * D)
	for i, r := range rows {
		switch {
		case r == -1:
			clear(y[i*D : (i+1)*D])
		case r < 0 || r >= T:
			return nil, fmt.Errorf("row %d of %d", r, T)
		default:
			copy(y[i*D:(i+1)*D], h[r*D:(r+1)*D])
		}
	}
	return o.Tensor(y, len(rows), D), nil
}
