package layers

import (
	G "gorgonia.org/gorgonia"
)

// AttentionWeights are one self-attention block's parameters. Biases and
// QK-norm weights are optional (nil).
type AttentionWeights struct {
	Q, K, V, O                 *G.Node // [in, out]
	QBias, KBias, VBias, OBias *G.Node
	QNorm, KNorm               *G.Node // [Dh], per-head RMSNorm before RoPE
}

// AttentionConfig describes one self-attention block.
type AttentionConfig struct {
	Heads, KVHeads, HeadDim int
	// NormEps and NormOffset configure the QK-norm (offset 1 for Gemma).
	NormEps    float64
	NormOffset float32
	// InvFreq are the RoPE inverse frequencies; nil means the layer uses no
	// rotary embedding (SmolLM3's NoPE layers).
	InvFreq []float32
	RoPEID  string
	// Scale multiplies q·k (head_dim^-0.5, or Gemma's query_pre_attn_scalar^-0.5).
	Scale float64
	// Window > 0 is a sliding window of that many keys, the query included.
	Window int
	Name   string
}

// SelfAttention is the attention block of every decoder in the zoo:
// project, QK-norm per head, RoPE, write this step's keys and values into
// the cache, attend causally over the filled cache, project out.
// x is [T, D]; kcache and vcache are the layer's [Hkv, C, Dh] caches.
func SelfAttention(x, meta, kcache, vcache *G.Node, w AttentionWeights, c AttentionConfig) *G.Node {
	q := SplitHeads(Linear(x, w.Q, w.QBias), c.Heads)
	k := SplitHeads(Linear(x, w.K, w.KBias), c.KVHeads)
	v := SplitHeads(Linear(x, w.V, w.VBias), c.KVHeads)
	if w.QNorm != nil {
		q = must(G.ApplyOp(rmsNormOp{eps: float32(c.NormEps), offset: c.NormOffset, dims: 3}, q, w.QNorm))
	}
	if w.KNorm != nil {
		k = must(G.ApplyOp(rmsNormOp{eps: float32(c.NormEps), offset: c.NormOffset, dims: 3}, k, w.KNorm))
	}
	if c.InvFreq != nil {
		q = RoPE(q, meta, c.InvFreq, c.RoPEID)
		k = RoPE(k, meta, c.InvFreq, c.RoPEID)
	}
	kc := KVWrite(kcache, k, meta, c.Name+".k")
	vc := KVWrite(vcache, v, meta, c.Name+".v")
	a := CausalAttention(q, kc, vc, meta, c.Scale, c.Window, c.Name)
	return Linear(a, w.O, w.OBias)
}
