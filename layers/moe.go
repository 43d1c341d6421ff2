package layers

import (
	"fmt"
	"hash"
	"math"
	"sort"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ExpertWeights are one expert's gated MLP, each [in, out].
type ExpertWeights struct{ Gate, Up, Down *G.Node }

// SparseMoE is a mixture-of-experts MLP as Qwen3-MoE routes it: router
// logits x·router [T, E], a float32 softmax over ALL experts, the top k
// probabilities (divided by their sum when normTopK), and out = the sum of
// p_k * expert_k(x). Only the chosen experts run, each on the rows routed
// to it, so the cost is k experts per token, not all of them.
//
// Routing is data-dependent, which a static Gorgonia graph cannot express
// with stock ops, so it lives in one op; every expert's weights stay their
// own input node, bound under their checkpoint names.
func SparseMoE(x, router *G.Node, experts []ExpertWeights, topK int, normTopK bool, act string, name string) *G.Node {
	if _, err := activation(act); err != nil {
		panic(err)
	}
	if topK < 1 || topK > len(experts) {
		panic(fmt.Errorf("%s: top-k %d with %d experts", name, topK, len(experts)))
	}
	in := []*G.Node{x, router}
	for _, e := range experts {
		in = append(in, e.Gate, e.Up, e.Down)
	}
	return must(G.ApplyOp(moeOp{name: name, experts: len(experts), topK: topK, normTopK: normTopK, act: act}, in...))
}

type moeOp struct {
	opBase
	name     string
	experts  int
	topK     int
	normTopK bool
	act      string
}

func (op moeOp) Arity() int { return 2 + 3*op.experts }
func (op moeOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	ts := make([]hm.Type, op.Arity()+1)
	for i := range ts {
		ts[i] = tt(2, a)
	}
	return hm.NewFnType(ts...)
}
func (op moeOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	x, err := shapeOf(in[0])
	if err != nil {
		return nil, err
	}
	r, err := shapeOf(in[1])
	if err != nil {
		return nil, err
	}
	if len(x) != 2 || len(r) != 2 || r[0] != x[1] || r[1] != op.experts {
		return nil, fmt.Errorf("%s: x %v and router %v do not fit %d experts", op.name, x, r, op.experts)
	}
	return x.Clone(), nil
}
func (op moeOp) String() string {
	return fmt.Sprintf("SparseMoE{%s,experts=%d,top%d,norm=%v,%s}", op.name, op.experts, op.topK, op.normTopK, op.act)
}
func (op moeOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op moeOp) Hashcode() uint32      { return hashcode(op) }

func (op moeOp) Do(in ...G.Value) (G.Value, error) {
	vals := make([][]float32, len(in))
	for i, v := range in {
		var err error
		if vals[i], err = f32s(v); err != nil {
			return nil, fmt.Errorf("%s: input %d: %w", op.name, i, err)
		}
	}
	T, D := in[0].Shape()[0], in[0].Shape()[1]
	F := in[2].Shape()[1]
	x, router := vals[0], vals[1]
	E := op.experts

	logits := make([]float32, T*E)
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas32.General{Rows: T, Cols: D, Stride: D, Data: x},
		blas32.General{Rows: D, Cols: E, Stride: E, Data: router},
		0, blas32.General{Rows: T, Cols: E, Stride: E, Data: logits})
	rows, weights := route(logits, T, E, op.topK, op.normTopK)

	act, _ := activation(op.act)
	out := make([]float32, T*D)
	for e := 0; e < E; e++ {
		r := rows[e]
		if len(r) == 0 {
			continue
		}
		n := len(r)
		xe := make([]float32, n*D)
		for i, t := range r {
			copy(xe[i*D:(i+1)*D], x[t*D:(t+1)*D])
		}
		gate, up, down := vals[2+3*e], vals[3+3*e], vals[4+3*e]
		g, u, y := make([]float32, n*F), make([]float32, n*F), make([]float32, n*D)
		X := blas32.General{Rows: n, Cols: D, Stride: D, Data: xe}
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, X, blas32.General{Rows: D, Cols: F, Stride: F, Data: gate}, 0, blas32.General{Rows: n, Cols: F, Stride: F, Data: g})
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, X, blas32.General{Rows: D, Cols: F, Stride: F, Data: up}, 0, blas32.General{Rows: n, Cols: F, Stride: F, Data: u})
		for i := range g {
			g[i] = act(g[i]) * u[i]
		}
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, blas32.General{Rows: n, Cols: F, Stride: F, Data: g}, blas32.General{Rows: F, Cols: D, Stride: D, Data: down}, 0, blas32.General{Rows: n, Cols: D, Stride: D, Data: y})
		// Experts add in ascending order, as HF's index_add_ loop does.
		for i, t := range r {
			w := weights[e][i]
			o, ye := out[t*D:(t+1)*D], y[i*D:(i+1)*D]
			for j := range o {
				o[j] += ye[j] * w
			}
		}
	}
	return tensor.New(tensor.WithShape(T, D), tensor.WithBacking(out)), nil
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
