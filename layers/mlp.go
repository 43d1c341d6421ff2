package layers

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/ops"
)

// The non-gated MLP of ViT encoders (SigLIP, CLIP) and of GPT-2, and the
// elementwise activation between its projections.

// MLP is the non-gated feed-forward of ViT encoders and GPT-2:
// fc2(act(fc1(x))), both projections with biases.
type MLP struct {
	FC1, FC2 Linear
	Act      string
}

// NewMLP declares p.fc1 [inter, hidden] and p.fc2 [hidden, inter] with
// biases (SigLIP's names). act is "gelu_pytorch_tanh" (SigLIP), "gelu_new"
// (GPT-2), "gelu", "relu" or "silu".
func NewMLP(p graphs.Scope, hidden, inter int, act string) *MLP {
	return NewMLPNamed(p, "fc1", "fc2", hidden, inter, act)
}

// NewMLPNamed is NewMLP with the projections' names (GPT-2: c_fc, c_proj).
func NewMLPNamed(p graphs.Scope, up, down string, hidden, inter int, act string) *MLP {
	if _, err := activation(act); err != nil {
		panic(err)
	}
	return &MLP{FC1: NewLinear(p.Sub(up), hidden, inter, true), FC2: NewLinear(p.Sub(down), inter, hidden, true), Act: act}
}

// Forward maps x [T, D] to [T, D].
func (m *MLP) Forward(s *graphs.Step, x *G.Node) *G.Node {
	h := m.FC1.Forward(s, x)
	return m.FC2.Forward(s, ops.Apply(activate{act: m.Act, dims: h.Dims(), fast: s.Fast}, h))
}

// activate applies an activation elementwise (a non-gated MLP's).
type activate struct {
	act  string
	dims int
	fast bool // the tanh GELU from llama.cpp's F16 table
}

func (k activate) Name() string { return k.act }
func (k activate) String() string {
	return fmt.Sprintf("Act{%s,dims=%d,fast=%v}", k.act, k.dims, k.fast)
}
func (k activate) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil)}
}
func (k activate) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k activate) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	act, err := activationFor(k.act, k.fast)
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(x))
	if len(x) >= parallelMin {
		simd.Parallel(chunks(len(x)), &mapTask{out: out, x: x, act: act, silu: k.act == "silu"})
	} else {
		t := mapTask{out: out, x: x, act: act, silu: k.act == "silu"}
		t.apply(0, len(x))
	}
	return o.Tensor(out, in[0].Shape()...), nil
}
