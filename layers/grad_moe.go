package layers

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// The mixture of experts' gradient follows torch's autograd of HF's
// Qwen3MoeSparseMoeBlock: through each selected expert and through the
// routing weights of the selected experts (their renormalisation when
// normTopK, the softmax over all experts, the router), none through the
// top-k choice itself, which is piecewise constant. A stacked expert
// weight's gradient is stacked too, [E, out, in]; the slice of an expert
// no token selected is zero.

func (k sparseMoE) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if k.sliced != nil {
		return nil, fmt.Errorf("%s: experts read from their slices take no gradient (a training step binds them stacked)", k.name)
	}
	bk := sparseMoEGrad{k: k}
	packed, err := node(bk, append(G.Nodes{grad}, in...)...)
	if err != nil {
		return nil, err
	}
	res := make(G.Nodes, len(in))
	off := 0
	for i, n := range in {
		if !bk.diff(i) {
			continue
		}
		s := n.Shape().Clone()
		if i >= 1 {
			// A weight's gradient has its logical (float32) shape.
			s[len(s)-1] = logicalCols(k.inputType(i), s[len(s)-1])
		}
		what := fmt.Sprintf("input %d of %s", i, k.name)
		if res[i], err = node(unpack{from: off, shape: []int(s.Clone()), what: what}, packed); err != nil {
			return nil, err
		}
		off += s.TotalSize()
	}
	return res, nil
}

// inputType is the stored type of the MoE's input i (x, 0, is float32).
func (k sparseMoE) inputType(i int) graphs.DType {
	switch {
	case i == 1:
		return k.routerType
	case i >= 2:
		return k.expertTypes[i-2]
	}
	return graphs.F32
}

// sparseMoEGrad computes every gradient of sparseMoE at once, packed in
// the order of the MoE's inputs (x, router, then the stacked gate, up and
// down), skipping quantized weights, which take none. Inputs: the
// output's gradient, then the MoE's inputs.
type sparseMoEGrad struct{ k sparseMoE }

func (b sparseMoEGrad) Name() string { return "moe gradient " + b.k.name }
func (b sparseMoEGrad) String() string {
	return "SparseMoEGrad" + b.k.String()
}

// diff says whether MoE input i takes a gradient.
func (b sparseMoEGrad) diff(i int) bool {
	if i == 0 {
		return true
	}
	return !b.k.frozen && ops.Differentiable(ops.T(2, b.k.inputType(i).Storage()))
}

// Constant says a frozen MoE's router and experts take no gradient.
func (k sparseMoE) Constant(i int) bool { return k.frozen && i >= 1 }

func (b sparseMoEGrad) Signature() []hm.Type {
	sig := b.k.Signature()
	return append([]hm.Type{ops.T(2, nil)}, append(sig[:len(sig)-1:len(sig)-1], ops.T(1, nil))...)
}
func (b sparseMoEGrad) Shape(in []tensor.Shape) (tensor.Shape, error) {
	n := 0
	for i, s := range in[1:] {
		if !b.diff(i) {
			continue
		}
		n += s[:len(s)-1].TotalSize() * logicalCols(b.k.inputType(i), s[len(s)-1])
	}
	return tensor.Shape{n}, nil
}

func (b sparseMoEGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	k := b.k
	g, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	m, err := k.inputs(in[1:])
	if err != nil {
		return nil, err
	}
	x, T, D, E, F, router := m.x, m.T, m.D, m.E, m.F, m.router
	act, err := activation(k.act)
	if err != nil {
		return nil, err
	}
	dact, err := activationGrad(k.act)
	if err != nil {
		return nil, err
	}

	// The forward's routing, recomputed: the same logits, the same top-k
	// (route), and the full softmax in float64 for its gradient.
	logits := make([]float32, T*E)
	mulT(logits, x, T, router, E, D)
	rows, weights := route(logits, T, E, k.topK, k.normTopK)
	probs := make([]float64, T*E)
	for t := 0; t < T; t++ {
		p := probs[t*E : (t+1)*E]
		sum := softmaxExps(logits[t*E:(t+1)*E], p)
		for e := range p {
			p[e] /= sum
		}
	}

	dx := make([]float32, T*D)
	dWeight := make([]float64, T*E) // dLoss/d(routing weight), selected experts only
	// The stacked gradients [E, F, D], [E, F, D] and [E, D, F]: expert e
	// writes its slice; unselected experts' slices stay zero.
	stackedGrads := [3][]float32{make([]float32, E*F*D), make([]float32, E*F*D), make([]float32, E*D*F)}
	for e := 0; e < E; e++ {
		var w [3]weight
		var expertGrads [3][]float32
		for j := range w {
			w[j] = m.expert(j, e)
			expertGrads[j] = stackedGrads[j][e*F*D : (e+1)*F*D]
		}
		r := rows[e]
		n := len(r)
		if n == 0 {
			continue
		}
		xe := make([]float32, n*D)
		for i, t := range r {
			copy(xe[i*D:(i+1)*D], x[t*D:(t+1)*D])
		}
		gp, up, h, y := make([]float32, n*F), make([]float32, n*F), make([]float32, n*F), make([]float32, n*D)
		mulT(gp, xe, n, w[0], F, D)
		mulT(up, xe, n, w[1], F, D)
		for i := range gp {
			h[i] = act(gp[i]) * up[i]
		}
		mulT(y, h, n, w[2], D, F)
		// out_t += p·y: dp = <g_t, y>, dy = p·g_t.
		dy := make([]float32, n*D)
		for i, t := range r {
			p := weights[e][i]
			var dp float64
			for j := 0; j < D; j++ {
				dp += float64(g[t*D+j]) * float64(y[i*D+j])
				dy[i*D+j] = g[t*D+j] * p
			}
			dWeight[t*E+e] = dp
		}
		// y = h·Wdᵀ; h = act(gp)·up; gp = xe·Wgᵀ; up = xe·Wuᵀ.
		weightGrad(expertGrads[2], dy, h, n, D, F)
		dh := matmulInput(dy, n, w[2], D, F)
		dgp, dup := make([]float32, n*F), make([]float32, n*F)
		for i := range dh {
			dgp[i] = float32(float64(dh[i]) * float64(up[i]) * dact(float64(gp[i])))
			dup[i] = dh[i] * act(gp[i])
		}
		weightGrad(expertGrads[0], dgp, xe, n, F, D)
		weightGrad(expertGrads[1], dup, xe, n, F, D)
		dxg, dxu := matmulInput(dgp, n, w[0], F, D), matmulInput(dup, n, w[1], F, D)
		for i, t := range r {
			for j := 0; j < D; j++ {
				dx[t*D+j] += dxg[i*D+j] + dxu[i*D+j]
			}
		}
	}

	// Routing: weights w_e = P_e (or P_e / Σ_sel P when normTopK) of the
	// selected experts; back through the renormalisation and the softmax
	// to the router logits.
	selected := make([][]int, T) // each row's experts, ascending
	for e := 0; e < E; e++ {
		for _, t := range rows[e] {
			selected[t] = append(selected[t], e)
		}
	}
	dLogits := make([]float32, T*E)
	dP := make([]float64, E)
	for t := 0; t < T; t++ {
		P := probs[t*E : (t+1)*E]
		clear(dP)
		sel := selected[t]
		if k.normTopK {
			var z, dot float64
			for _, e := range sel {
				z += P[e]
			}
			for _, e := range sel {
				dot += dWeight[t*E+e] * P[e] / z
			}
			for _, e := range sel {
				dP[e] = (dWeight[t*E+e] - dot) / z
			}
		} else {
			for _, e := range sel {
				dP[e] = dWeight[t*E+e]
			}
		}
		var dot float64
		for e := range dP {
			dot += P[e] * dP[e]
		}
		for e := range dP {
			dLogits[t*E+e] = float32(P[e] * (dP[e] - dot))
		}
	}
	dRouter := make([]float32, E*D)
	weightGrad(dRouter, dLogits, x, T, E, D)
	dxr := matmulInput(dLogits, T, router, E, D)
	for i := range dx {
		dx[i] += dxr[i]
	}

	var out []float32
	add := func(i int, v []float32) {
		if b.diff(i) {
			out = append(out, v...)
		}
	}
	add(0, dx)
	add(1, dRouter)
	for j, g := range stackedGrads {
		add(2+j, g)
	}
	return o.Tensor(out, len(out)), nil
}

// matmulInput returns g·W for g [n, out] and W [out, in] in its stored
// type: the gradient of x·Wᵀ with respect to x.
func matmulInput(g []float32, n int, w weight, out, in int) []float32 {
	dx := make([]float32, n*in)
	row := make([]float32, in)
	for r := 0; r < out; r++ {
		wr := w.row(row, r, in)
		for i := 0; i < n; i++ {
			gv := g[i*out+r]
			if gv == 0 {
				continue
			}
			d := dx[i*in : (i+1)*in]
			for c, v := range wr {
				d[c] += gv * v
			}
		}
	}
	return dx
}
