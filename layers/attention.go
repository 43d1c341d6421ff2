package layers

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// AttentionConfig describes one self-attention block.
type AttentionConfig struct {
	// Layer is the block's index: it picks the KV cache and names the
	// attention-probability capture ("attentions.<Layer>").
	Layer                   int
	Heads, KVHeads, HeadDim int
	Bias                    bool // biases on q, k, v and o
	QKNorm                  NormKind
	NormEps                 float64
	RoPE                    *RoPE // nil: no rotary embedding (SmolLM3's NoPE layers)
	Scale                   float64
	Window                  int // > 0: a sliding window of that many keys, the query included
	// Interleaved says llama.cpp holds this block's Q and K heads in
	// rope's interleaved order (Llama's permuted GGUF rows): a quantized
	// KV cache quantizes and rotates them in that order, as llama.cpp does.
	Interleaved bool
	// PreScale says llama.cpp multiplies Q by Scale before attention
	// (Gemma3) and scores by 1: a quantized KV cache quantizes the scaled
	// query, as llama.cpp does.
	PreScale bool
	// NoPE marks a layer without positional encoding in a model whose
	// other layers use RoPE (SmolLM3): its cached keys move unchanged in a
	// context shift. A layer with neither RoPE nor NoPE cannot be shifted.
	NoPE bool
}

// Attention is the self-attention block of every decoder in the zoo:
// project, QK-norm per head, RoPE, attend causally over the layer's KV
// cache (which the step extends), project out.
type Attention struct {
	Q, K, V, O   Linear
	QKV          Linear   // fused q | k | v rows (GPT-2's c_attn); Q, K, V unset
	QNorm, KNorm *RMSNorm // nil without QK-norm
	Config       AttentionConfig
}

// NewAttention declares p.{q,k,v,o}_proj, with QK-norm p.{q,k}_norm,
// and layer c.Layer's KV cache.
func NewAttention(p graphs.Scope, hidden int, c AttentionConfig) *Attention {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	a := &Attention{
		Q:      NewLinear(p.Sub("q_proj"), hidden, q, c.Bias),
		K:      NewLinear(p.Sub("k_proj"), hidden, kv, c.Bias),
		V:      NewLinear(p.Sub("v_proj"), hidden, kv, c.Bias),
		O:      NewLinear(p.Sub("o_proj"), q, hidden, c.Bias),
		Config: c,
	}
	if c.QKNorm != NoNorm {
		a.QNorm = NewRMSNorm(p.Sub("q_norm"), c.QKNorm, c.HeadDim, c.NormEps)
		a.KNorm = NewRMSNorm(p.Sub("k_norm"), c.QKNorm, c.HeadDim, c.NormEps)
	}
	declareCache(p, c)
	return a
}

// NewFusedAttention declares one projection p.<qkv> whose output rows are
// q, k and v in that order (GPT-2's c_attn, Phi's qkv_proj), the output
// projection p.<out> and layer c.Layer's KV cache.
func NewFusedAttention(p graphs.Scope, qkv, out string, hidden int, c AttentionConfig) *Attention {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	declareCache(p, c)
	return &Attention{
		QKV:    NewLinear(p.Sub(qkv), hidden, q+2*kv, c.Bias),
		O:      NewLinear(p.Sub(out), q, hidden, c.Bias),
		Config: c,
	}
}

// declareCache declares the KV cache the block reads and extends: the
// whole context, or a ring of Window positions.
func declareCache(p graphs.Scope, c AttentionConfig) {
	kind := graphs.FullCache
	if c.Window > 0 {
		kind = graphs.SlidingCache
	}
	p.Cache(c.Layer, graphs.LayerCache{Kind: kind, KVHeads: c.KVHeads, KeyDim: c.HeadDim, ValueDim: c.HeadDim, Window: c.Window, Shift: keyShifter(c)})
}

// Forward maps x [T, D] to [T, D]. When the step captures
// "attentions.<Layer>", the op also stores its probabilities,
// [T, heads, keys].
func (a *Attention) Forward(s *graphs.Step, x *G.Node) *G.Node {
	c := a.Config
	var q, k, v *G.Node
	if a.QKV.Weight != nil {
		qkv := a.QKV.ForwardHeads(s, x, c.Heads+2*c.KVHeads)
		q = ops.Apply(headRange{from: 0, count: c.Heads}, qkv)
		k = ops.Apply(headRange{from: c.Heads, count: c.KVHeads}, qkv)
		v = ops.Apply(headRange{from: c.Heads + c.KVHeads, count: c.KVHeads}, qkv)
	} else {
		q = a.Q.ForwardHeads(s, x, c.Heads)
		k = a.K.ForwardHeads(s, x, c.KVHeads)
		v = a.V.ForwardHeads(s, x, c.KVHeads)
	}
	if a.QNorm != nil {
		q, k = a.QNorm.Forward(s, q), a.KNorm.Forward(s, k)
	}
	if c.RoPE != nil {
		q, k = c.RoPE.Forward(s, q), c.RoPE.Forward(s, k)
	}
	if !s.HasCache() {
		// A training step: the whole sequence at once, no cache to extend.
		o := ops.Apply(causalAttention{name: fmt.Sprintf("layers.%d", c.Layer), scale: float32(c.Scale), window: c.Window}, q, k, v)
		return a.O.Forward(s, o)
	}
	name := fmt.Sprintf("%s.%d", graphs.Attentions, c.Layer)
	o := ops.Apply(cachedAttention{name: fmt.Sprintf("layers.%d", c.Layer), scale: float32(c.Scale), window: c.Window, kv: s.KV(c.Layer), sink: s.Sink(name),
		interleaved: c.Interleaved, preScale: c.PreScale},
		q, k, v, s.Positions)
	return a.O.Forward(s, o)
}
