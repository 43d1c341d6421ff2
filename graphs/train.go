package graphs

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// trainState is what a training step adds to a Step: the zero shift added
// to the input embeddings, whose gradient is the gradient with respect to
// the embeddings themselves.
type trainState struct {
	shift *G.Node
	// only, when set, are the parameters that take gradients (TrainOnly).
	only map[*Param]bool
}

// TrainOnly restricts a training step's gradients to ps (a LoRA
// adapter's factors): the layers build no gradient for any other weight,
// so a frozen base costs no gradient buffers. Call it before the model
// is built on the step.
func (s *Step) TrainOnly(ps []*Param) {
	s.train.only = map[*Param]bool{}
	for _, p := range ps {
		s.train.only[p] = true
	}
}

// Frozen says whether a training step takes no gradient for p (see
// TrainOnly); outside training steps nothing is frozen.
func (s *Step) Frozen(p *Param) bool {
	return s.train != nil && s.train.only != nil && !s.train.only[p]
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
func (s *Step) HasCache() bool { return s.kv != nil }

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
	// Gorgonia's own Add: differentiable, and a training graph recycles no
	// buffers, so no op of ours is needed.
	sum, err := G.Add(e, s.train.shift)
	if err != nil {
		panic(fmt.Errorf("marking the input embeddings: %w", err))
	}
	return sum
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
