package graphs

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/ops"
)

// trainState is what a training step adds to a Step: the zero shift added
// to the input embeddings, whose gradient is the gradient with respect to
// the embeddings themselves.
type trainState struct {
	shift *G.Node
}

// NewTrainingStep returns the Step of a training graph over T rows, the
// whole sequence at once: positions 0..T-1 (bound), no KV cache (attention
// attends over the step's own rows with the masks inference applies), and
// the input embeddings marked by InputEmbeds. The caller builds the model
// on it (Embed, Layer, Norm, Head) and differentiates the result.
func NewTrainingStep(T int) *Step {
	g := G.NewGraph()
	s := &Step{G: g, T: T, weights: map[*Param]*G.Node{}, taps: map[string]*G.Node{}, sinks: map[string]*Sink{}, train: &trainState{}}
	pos := make([]int, T)
	for i := range pos {
		pos[i] = i
	}
	s.Positions = G.NewVector(g, tensor.Int, G.WithShape(T), G.WithName("positions"),
		G.WithValue(tensor.New(tensor.WithShape(T), tensor.WithBacking(pos))))
	return s
}

// HasCache reports whether the step runs over a KV cache (a Session's
// steps do; training steps and Programs do not).
func (s *Step) HasCache() bool { return s.cache != nil }

// InputEmbeds marks e [T, D] as the step's input embeddings, the rows the
// token lookup returns. In a training step it returns e plus a zero input
// (EmbedsShift), whose gradient is then the loss's gradient with respect
// to e; in any other step it returns e.
func (s *Step) InputEmbeds(e *G.Node) *G.Node {
	if s.train == nil {
		return e
	}
	if s.train.shift != nil {
		panic(fmt.Errorf("the input embeddings of a training step are marked twice"))
	}
	shape := e.Shape().Clone()
	zero := tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
	s.train.shift = G.NewTensor(s.G, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName("inputs_embeds_shift"), G.WithValue(zero))
	return ops.Apply(shiftAdd{dims: len(shape)}, e, s.train.shift)
}

// EmbedsShift is the zero input InputEmbeds added to the input embeddings
// of a training step (nil when the model marked none).
func (s *Step) EmbedsShift() *G.Node {
	if s.train == nil {
		return nil
	}
	return s.train.shift
}

// Bound lists the parameters bound into the step's graph so far, with
// their input nodes.
func (s *Step) Bound() map[*Param]*G.Node {
	out := make(map[*Param]*G.Node, len(s.weights))
	for p, n := range s.weights {
		out[p] = n
	}
	return out
}

// shiftAdd is e + shift; its gradient passes through to both.
type shiftAdd struct{ dims int }

func (k shiftAdd) Name() string   { return "embeddings shift" }
func (k shiftAdd) String() string { return fmt.Sprintf("ShiftAdd{dims=%d}", k.dims) }
func (k shiftAdd) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil), ops.T(k.dims, nil)}
}
func (k shiftAdd) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) {
		return nil, fmt.Errorf("%v and %v differ", in[0], in[1])
	}
	return in[0].Clone(), nil
}
func (k shiftAdd) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	a, b, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(a))
	for i, v := range a {
		out[i] = v + b[i]
	}
	return o.Tensor(out, in[0].Shape()...), nil
}
func (k shiftAdd) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return G.Nodes{grad, grad}, nil
}
