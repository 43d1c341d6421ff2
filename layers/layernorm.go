package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// LayerNorm with a bias, the norm of ViT encoders (SigLIP, CLIP) and of
// GPT-2, and its kernel; the gradient is layerNormGrad (grad_kernels.go).

// LayerNorm is PyTorch's nn.LayerNorm over the last axis, with weight and
// bias.
type LayerNorm struct {
	Weight, Bias *graphs.Param
	Eps          float64
}

// NewLayerNorm declares p.weight and p.bias [dim].
func NewLayerNorm(p graphs.Scope, dim int, eps float64) *LayerNorm {
	return &LayerNorm{Weight: p.Param("weight", graphs.Norm, dim), Bias: p.Param("bias", graphs.Bias, dim), Eps: eps}
}

// Forward normalises x [.., D].
func (n *LayerNorm) Forward(s *graphs.Step, x *G.Node) *G.Node {
	return ops.Apply(layerNorm{eps: n.Eps, dims: x.Dims()}, x, s.Bind(n.Weight), s.Bind(n.Bias))
}

// layerNorm normalises each row of x by its mean and (biased) variance,
// then scales by w and shifts by b. The statistics accumulate in float64;
// PyTorch accumulates in float32, far below a float32 ulp of the result.
type layerNorm struct {
	eps  float64
	dims int
}

func (k layerNorm) Name() string { return "layer norm" }
func (k layerNorm) String() string {
	return fmt.Sprintf("LayerNorm{eps=%g,dims=%d}", k.eps, k.dims)
}
func (k layerNorm) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(1, nil), ops.T(1, nil), ops.T(k.dims, nil)}
}
func (k layerNorm) Shape(in []tensor.Shape) (tensor.Shape, error) {
	d := in[0][len(in[0])-1]
	if len(in[1]) != 1 || len(in[2]) != 1 || in[1][0] != d || in[2][0] != d {
		return nil, fmt.Errorf("x %v does not end in the weight's %v and bias's %v", in[0], in[1], in[2])
	}
	return in[0].Clone(), nil
}
func (k layerNorm) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, w, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	b, err := ops.Float32s(in[2])
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(x))
	layerNormRows(out, x, w, b, k.eps)
	return o.Tensor(out, in[0].Shape()...), nil
}

// rowStats is a row's mean and 1/sqrt(variance + eps), in float64: what
// LayerNorm's forward and its gradients normalise by.
func rowStats(row []float32, eps float64) (mean, inv float64) {
	var sum float64
	for _, v := range row {
		sum += float64(v)
	}
	mean = sum / float64(len(row))
	var ss float64
	for _, v := range row {
		e := float64(v) - mean
		ss += e * e
	}
	return mean, 1 / math.Sqrt(ss/float64(len(row))+eps)
}

func layerNormRows(out, x, w, b []float32, eps float64) {
	d := len(w)
	for r := 0; r+d <= len(x); r += d {
		row := x[r : r+d]
		mean, inv := rowStats(row, eps)
		o := out[r : r+d]
		for j, v := range row {
			o[j] = float32((float64(v)-mean)*inv)*w[j] + b[j]
		}
	}
}
