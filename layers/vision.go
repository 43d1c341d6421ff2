package layers

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// The modules below are what a ViT encoder (SigLIP, CLIP) adds to a
// decoder's besides LayerNorm (layernorm.go) and the non-gated MLP
// (mlp.go), which GPT-2 shares: bidirectional attention without a cache,
// the patch embedding and Idefics3's pixel shuffle. Rows are patches:
// an encoder's hidden states are [N·P, D] for N images of P patches each,
// and attention stays within each image's block of P rows.

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
