package layers

import (
	"fmt"
	"math"
	"sort"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// sparseMoE is a mixture-of-experts MLP as Qwen3-MoE routes it: router
// logits x·routerᵀ [T, E], a float32 softmax over ALL experts, the top k
// probabilities (divided by their sum when normTopK), and out = the sum of
// p_k * expert_k(x). Only the chosen experts run, each on the rows routed
// to it, so the cost is k experts per token, not all of them.
//
// Routing is data-dependent, which a static Gorgonia graph cannot express
// with stock ops, so it lives in one op. Inputs: x, the router [E, D], then
// gate [F, D], up [F, D] and down [D, F] of each expert, all in PyTorch's
// [out, in] layout and in their stored types.
type sparseMoE struct {
	name          string
	experts, topK int
	normTopK      bool
	act           string
	routerType    graphs.DType
	// expertTypes are the gate, up and down projections' storage (a
	// Q4_K_M file keeps some down projections in Q6_K or Q8_0).
	expertTypes [3]graphs.DType
	fast        bool // llama.cpp's arithmetic in the experts' products
}

func (k sparseMoE) Name() string { return "moe " + k.name }
func (k sparseMoE) String() string {
	return fmt.Sprintf("SparseMoE{%s,experts=%d,top%d,norm=%v,%s,%s,%s,fast=%v}", k.name, k.experts, k.topK, k.normTopK, k.act, k.routerType, k.expertTypes, k.fast)
}
func (k sparseMoE) Signature() []hm.Type {
	sig := []hm.Type{ops.T(2, nil), ops.T(2, k.routerType.Storage())}
	for i := 0; i < 3*k.experts; i++ {
		sig = append(sig, ops.T(2, k.expertTypes[i%3].Storage()))
	}
	return append(sig, ops.T(2, nil))
}
func (k sparseMoE) Shape(in []tensor.Shape) (tensor.Shape, error) {
	x, r := in[0], in[1]
	if len(x) != 2 || len(r) != 2 || r[1] != x[1] || r[0] != k.experts {
		return nil, fmt.Errorf("x %v and router %v do not fit %d experts", x, r, k.experts)
	}
	return x.Clone(), nil
}

func (k sparseMoE) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	T, D := in[0].Shape()[0], in[0].Shape()[1]
	E, F := k.experts, in[2].Shape()[0]
	router, err := weightData(in[1], k.routerType)
	if err != nil {
		return nil, err
	}
	logits := make([]float32, T*E)
	mulTMode(k.fast, logits, x, T, router, E, D)
	rows, weights := route(logits, T, E, k.topK, k.normTopK)

	act, err := activationFor(k.act, k.fast)
	if err != nil {
		return nil, err
	}
	out := o.Float32s(T * D)
	for e := 0; e < E; e++ {
		r := rows[e]
		if len(r) == 0 {
			continue
		}
		var w [3]weight
		for j := range w {
			if w[j], err = weightData(in[2+3*e+j], k.expertTypes[j]); err != nil {
				return nil, fmt.Errorf("expert %d: %w", e, err)
			}
		}
		n := len(r)
		xe := make([]float32, n*D)
		for i, t := range r {
			copy(xe[i*D:(i+1)*D], x[t*D:(t+1)*D])
		}
		g, u, y := make([]float32, n*F), make([]float32, n*F), make([]float32, n*D)
		mulTMode(k.fast, g, xe, n, w[0], F, D)
		mulTMode(k.fast, u, xe, n, w[1], F, D)
		for i := range g {
			g[i] = act(g[i]) * u[i]
		}
		mulTMode(k.fast, y, g, n, w[2], D, F)
		// Experts add in ascending order, as HF's index_add_ loop does.
		for i, t := range r {
			p := weights[e][i]
			o, ye := out[t*D:(t+1)*D], y[i*D:(i+1)*D]
			for j := range o {
				o[j] += ye[j] * p
			}
		}
	}
	return o.Tensor(out, T, D), nil
}

// route picks each row's top-k experts from router logits [T, E]: softmax
// over all experts, top k (lower index first on ties), optionally
// renormalised. It returns, per expert, the rows routed to it and their
// weights.
func route(logits []float32, T, E, k int, norm bool) (rows [][]int, weights [][]float32) {
	rows, weights = make([][]int, E), make([][]float32, E)
	probs := make([]float32, E)
	idx := make([]int, E)
	for t := 0; t < T; t++ {
		l := logits[t*E : (t+1)*E]
		m := l[0]
		for _, v := range l {
			m = max(m, v)
		}
		var sum float64
		for e, v := range l {
			p := math.Exp(float64(v - m))
			probs[e] = float32(p)
			sum += p
		}
		for e := range probs {
			probs[e] = float32(float64(probs[e]) / sum)
			idx[e] = e
		}
		sort.SliceStable(idx, func(i, j int) bool { return probs[idx[i]] > probs[idx[j]] })
		var top float32
		for _, e := range idx[:k] {
			top += probs[e]
		}
		for _, e := range idx[:k] {
			w := probs[e]
			if norm {
				w /= top
			}
			rows[e] = append(rows[e], t)
			weights[e] = append(weights[e], w)
		}
	}
	return rows, weights
}
