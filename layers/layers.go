// Package layers holds the graph fragments every zoo model is assembled
// from: Embedding, Linear, RMSNorm, per-head QK-norm, RoPE, causal GQA
// attention over a KV cache, and gated MLPs. Each is a function that adds
// nodes to a Gorgonia graph and returns the output node.
//
// Fragments panic on impossible shapes (graph construction errors are
// programming or config errors); graphs.Build recovers those panics and
// returns them as errors naming the graph being built.
//
// Row layout: hidden states are [T, D] (T rows, one per token); attention
// heads are [T, H, Dh]; KV caches are [Hkv, C, Dh].
package layers

import (
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func must(n *G.Node, err error) *G.Node {
	if err != nil {
		panic(err)
	}
	return n
}

func reshape(x *G.Node, s ...int) *G.Node { return must(G.Reshape(x, tensor.Shape(s))) }

// Embedding looks rows of table [V, D] up by ids [T] (Go ints) and returns
// [T, D].
func Embedding(table, ids *G.Node) *G.Node {
	return must(G.ByIndices(table, ids, 0))
}

// Linear computes x·W + b for x [T, in] and W [in, out] (the loader stores
// PyTorch's [out, in] weights transposed once). b may be nil. A single row
// goes through the vector path: Gorgonia lowers vector·matrix to Sgemv,
// 3-10x faster than a one-row Sgemm.
func Linear(x, w, b *G.Node) *G.Node {
	T, out := x.Shape()[0], w.Shape()[1]
	var y *G.Node
	if T == 1 {
		y = reshape(must(G.Mul(reshape(x, x.Shape()[1]), w)), 1, out)
	} else {
		y = must(G.Mul(x, w))
	}
	if b != nil {
		y = must(G.BroadcastAdd(y, reshape(b, 1, out), nil, []byte{0}))
	}
	return y
}

// RMSNorm normalises each row of x [.., D] and scales it by w [D].
func RMSNorm(x, w *G.Node, eps float64) *G.Node {
	return must(G.ApplyOp(rmsNormOp{eps: float32(eps), dims: x.Dims()}, x, w))
}

// OffsetRMSNorm is Gemma's variant: it scales by (1 + w), in float32.
func OffsetRMSNorm(x, w *G.Node, eps float64) *G.Node {
	return must(G.ApplyOp(rmsNormOp{eps: float32(eps), offset: 1, dims: x.Dims()}, x, w))
}

// SplitHeads reshapes [T, H*Dh] to [T, H, Dh].
func SplitHeads(x *G.Node, heads int) *G.Node {
	T, hd := x.Shape()[0], x.Shape()[1]
	return reshape(x, T, heads, hd/heads)
}

// RoPEFrequencies returns HF's default inverse frequencies
// 1/theta^(2i/dim) for i < dim/2, computed as HF does in float32 (exponent
// in float32, power rounded to float32), divided by factor for linear
// scaling (factor 1: none).
func RoPEFrequencies(dim int, theta, factor float64) []float32 {
	inv := make([]float32, dim/2)
	for i := range inv {
		e := float32(2*i) / float32(dim)
		p := float32(math.Pow(theta, float64(e)))
		inv[i] = 1 / p
		if factor != 1 {
			inv[i] = float32(float64(inv[i]) / factor)
		}
	}
	return inv
}

// RoPE rotates x [T, H, Dh] by the positions meta[0]+t (NeoX rotate-half
// form). id names the frequency table in graph dumps and node hashes.
func RoPE(x, meta *G.Node, invFreq []float32, id string) *G.Node {
	return must(G.ApplyOp(ropeOp{invFreq: invFreq, id: id}, x, meta))
}

// KVWrite stores the real rows of x [T, Hkv, Dh] into cache [Hkv, C, Dh] at
// positions meta[0].., in place, and returns the cache node to read from.
func KVWrite(cache, x, meta *G.Node, name string) *G.Node {
	return must(G.ApplyOp(kvWriteOp{name: name}, cache, x, meta))
}

// CausalAttention attends q [T, Hq, Dh] over the filled part of the k and v
// caches (outputs of KVWrite) and returns [T, Hq*Dh]. window > 0 restricts
// each query to the last window keys, itself included.
func CausalAttention(q, k, v, meta *G.Node, scale float64, window int, name string) *G.Node {
	return must(G.ApplyOp(attentionOp{name: name, scale: float32(scale), window: window}, q, k, v, meta))
}

// GatedMLP is down(act(x·gate) * (x·up)): SwiGLU with act "silu", GeGLU with
// "gelu_pytorch_tanh".
func GatedMLP(x, gate, up, down *G.Node, act string) *G.Node {
	return GatedMLPBias(x, gate, up, down, nil, nil, nil, act)
}

// GatedMLPBias is GatedMLP with biases on the three projections (Llama's
// mlp_bias).
func GatedMLPBias(x, gate, up, down, gateBias, upBias, downBias *G.Node, act string) *G.Node {
	if _, err := activation(act); err != nil {
		panic(err)
	}
	g, u := Linear(x, gate, gateBias), Linear(x, up, upBias)
	h := must(G.ApplyOp(gatedActOp{act: act, dims: 2}, g, u))
	return Linear(h, down, downBias)
}

// Add is the residual connection.
func Add(a, b *G.Node) *G.Node { return must(G.Add(a, b)) }

// LastRow picks row idx[0] of x [T, D] and returns it as [1, D]: prefill
// graphs keep only the last real token before the (large) vocabulary
// projection.
func LastRow(x, idx *G.Node) *G.Node {
	return reshape(must(G.ByIndices(x, idx, 0)), 1, x.Shape()[1])
}

// LMHead projects x [T, D] onto the vocabulary with table [V, D] (the tied
// embedding or an untied lm_head, both kept in PyTorch's [V, D] layout so
// they share the embedding's memory when tied). One row gives [V] through
// Sgemv; several rows give [T, V].
func LMHead(x, table *G.Node) *G.Node {
	T, D := x.Shape()[0], x.Shape()[1]
	if T == 1 {
		return must(G.Mul(table, reshape(x, D)))
	}
	return must(G.Transpose(must(G.Mul(table, must(G.Transpose(x)))), 1, 0))
}
