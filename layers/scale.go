package layers

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Scale multiplies x by a constant (Gemma's sqrt(hidden_size) embedding
// scale). An op rather than a graph constant: Gorgonia merges constants
// that share a name, and this keeps the factor visible in graph dumps.
func Scale(x *G.Node, by float32) *G.Node {
	return must(G.ApplyOp(pointwiseOp{kind: "scale", p: by, dims: x.Dims()}, x))
}

// Softcap is Gemma's final-logit cap: c * tanh(x / c).
func Softcap(x *G.Node, c float32) *G.Node {
	return must(G.ApplyOp(pointwiseOp{kind: "softcap", p: c, dims: x.Dims()}, x))
}

type pointwiseOp struct {
	opBase
	kind string
	p    float32
	dims int
}

func (op pointwiseOp) Arity() int { return 1 }
func (op pointwiseOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(op.dims, a), tt(op.dims, a))
}
func (op pointwiseOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(in[0])
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}
func (op pointwiseOp) String() string {
	return fmt.Sprintf("%s{%g,dims=%d}", op.kind, op.p, op.dims)
}
func (op pointwiseOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op pointwiseOp) Hashcode() uint32      { return hashcode(op) }
func (op pointwiseOp) Do(in ...G.Value) (G.Value, error) {
	x, err := f32s(in[0])
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(x))
	switch op.kind {
	case "scale":
		for i, v := range x {
			out[i] = v * op.p
		}
	case "softcap":
		c := float64(op.p)
		for i, v := range x {
			out[i] = float32(c * math.Tanh(float64(v)/c))
		}
	default:
		return nil, fmt.Errorf("unknown pointwise op %q", op.kind)
	}
	return tensor.New(tensor.WithShape(in[0].Shape().Clone()...), tensor.WithBacking(out)), nil
}
