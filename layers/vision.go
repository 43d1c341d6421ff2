package layers

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// The modules below are what a ViT encoder (SigLIP, CLIP) adds to a
// decoder's: LayerNorm with a bias, a non-gated MLP, bidirectional
// attention without a cache, and the patch embedding. Rows are patches:
// an encoder's hidden states are [N·P, D] for N images of P patches each,
// and attention stays within each image's block of P rows.

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

// MLP is the non-gated feed-forward of ViT encoders: fc2(act(fc1(x))),
// both projections with biases.
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

// EncoderAttention is bidirectional multi-head self-attention with biases
// on every projection, within blocks of rows (one image's patches each),
// as SigLIP's and CLIP's encoders compute it: no cache, no mask, no RoPE.
type EncoderAttention struct {
	Q, K, V, Out Linear
	Heads        int
	HeadDim      int
}

// NewEncoderAttention declares p.{q,k,v}_proj and p.out_proj, all with
// biases (SigLIP's names).
func NewEncoderAttention(p graphs.Scope, hidden, heads int) *EncoderAttention {
	if heads <= 0 || hidden%heads != 0 {
		panic(fmt.Errorf("%s: hidden size %d does not split into %d heads", p.Prefix(), hidden, heads))
	}
	return &EncoderAttention{
		Q:       NewLinear(p.Sub("q_proj"), hidden, hidden, true),
		K:       NewLinear(p.Sub("k_proj"), hidden, hidden, true),
		V:       NewLinear(p.Sub("v_proj"), hidden, hidden, true),
		Out:     NewLinear(p.Sub("out_proj"), hidden, hidden, true),
		Heads:   heads,
		HeadDim: hidden / heads,
	}
}

// Forward maps x [N·block, D] to [N·block, D]: each block of rows attends
// to itself only, every row to every row of its block.
func (a *EncoderAttention) Forward(s *graphs.Step, x *G.Node, block int) *G.Node {
	q := a.Q.ForwardHeads(s, x, a.Heads)
	k := a.K.ForwardHeads(s, x, a.Heads)
	v := a.V.ForwardHeads(s, x, a.Heads)
	o := ops.Apply(blockAttention{block: block, scale: float32(1 / math.Sqrt(float64(a.HeadDim)))}, q, k, v)
	return a.Out.Forward(s, o)
}

// PatchEmbedding is a ViT's patch embedding: PyTorch's Conv2d with
// kernel = stride = patch, no padding, and a bias. Pixels that do not fill
// a whole patch at the right and bottom edges are dropped, as the
// convolution drops them.
type PatchEmbedding struct {
	Weight, Bias *graphs.Param // [D, C, patch, patch], [D]
	Patch        int
}

// NewPatchEmbedding declares p.weight [dim, channels, patch, patch] and
// p.bias [dim].
func NewPatchEmbedding(p graphs.Scope, channels, patch, dim int) *PatchEmbedding {
	return &PatchEmbedding{
		Weight: p.Param("weight", graphs.Matrix, dim, channels, patch, patch),
		Bias:   p.Param("bias", graphs.Bias, dim),
		Patch:  patch,
	}
}

// Forward maps pixels [N, C, H, W] to patch embeddings [N·P, D], P =
// (H/patch)·(W/patch) patches per image in row-major order.
func (e *PatchEmbedding) Forward(s *graphs.Step, pixels *G.Node) *G.Node {
	return ops.Apply(patchEmbed{patch: e.Patch, dtype: e.Weight.DType, name: e.Weight.Name}, pixels, s.Bind(e.Weight), s.Bind(e.Bias))
}

// PixelShuffle is Idefics3's space-to-depth of an image's patch grid: x
// [N·side², D] becomes [N·(side/scale)², D·scale²], each output row the
// scale×scale block of patches it covers, concatenated in row-major
// (dy, dx) order.
func PixelShuffle(x *G.Node, side, scale int) *G.Node {
	return ops.Apply(pixelShuffle{side: side, scale: scale}, x)
}
