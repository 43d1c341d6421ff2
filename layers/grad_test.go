package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/ops"
)

// Every kernel's gradient against central finite differences of a float64
// reference forward, written here from the HF modeling code and sharing
// nothing with the kernels: loss = Σ R ∘ op(inputs) for a random R, the
// analytic gradient from G.Grad on the float32 graph, the numeric one
// (L(x+h) - L(x-h)) / 2h in float64 for every element of every input that
// takes a gradient.

// fdInput is one input of a case: float values (stored as dtype), or ints
// (no gradient).
type fdInput struct {
	name  string
	shape []int
	vals  []float32
	ints  []int
	dtype graphs.DType
}

type fdCase struct {
	name string
	in   []fdInput
	// op builds the forward on the inputs' nodes.
	op func(in []*G.Node) *G.Node
	// ref is the forward in float64 on the inputs' values (ints as given).
	ref func(in [][]float64, ints [][]int) []float64
	// tol bounds max|analytic - numeric| relative to max|numeric| per input.
	tol float64
}

func f32(r *rand.Rand, n int, scale float64) []float32 { return randVals(r, n, scale) }

// runFD checks one case.
func runFD(t *testing.T, c fdCase) {
	t.Helper()
	g := G.NewGraph()
	var nodesIn []*G.Node
	var wrt []*G.Node
	var wrtIdx []int
	values := make([][]float64, len(c.in))
	ints := make([][]int, len(c.in))
	for i, in := range c.in {
		var v *tensor.Dense
		dt := tensor.Float32
		switch {
		case in.ints != nil:
			v, dt = tensor.New(tensor.WithShape(in.shape...), tensor.WithBacking(append([]int(nil), in.ints...))), tensor.Int
			ints[i] = in.ints
		case in.dtype == graphs.F32:
			v = tensor.New(tensor.WithShape(in.shape...), tensor.WithBacking(append([]float32(nil), in.vals...)))
		case in.dtype == graphs.BF16 || in.dtype == graphs.F16:
			data, widened := stored(in.vals, in.dtype)
			c.in[i].vals = widened
			v, dt = tensor.New(tensor.WithShape(in.shape...), tensor.WithBacking(data)), tensor.Uint16
		default:
			// Rows of the last axis, whatever the rank (a stack of
			// experts is [E, rows, cols]).
			f, _ := in.dtype.Quant()
			storedShape, err := in.dtype.StoredShape(in.shape)
			if err != nil {
				t.Fatal(err)
			}
			cols, rb := in.shape[len(in.shape)-1], storedShape[len(storedShape)-1]
			rows := len(in.vals) / cols
			data := make([]byte, rows*rb)
			widened := make([]float32, len(in.vals))
			for r := 0; r < rows; r++ {
				quant.QuantizeRow(f, in.vals[r*cols:(r+1)*cols], data[r*rb:(r+1)*rb])
				quant.DequantizeRow(f, data[r*rb:(r+1)*rb], widened[r*cols:(r+1)*cols])
			}
			c.in[i].vals = widened
			v, dt = tensor.New(tensor.WithShape(storedShape...), tensor.WithBacking(data)), tensor.Uint8
		}
		n := G.NewTensor(g, dt, v.Dims(), G.WithShape(v.Shape().Clone()...), G.WithName(in.name), G.WithValue(v))
		nodesIn = append(nodesIn, n)
		if in.ints == nil {
			values[i] = widen64(c.in[i].vals)
			if ops.Differentiable(G.TensorType{Dims: 2, Of: dt}) {
				wrt = append(wrt, n)
				wrtIdx = append(wrtIdx, i)
			}
		}
	}
	out := c.op(nodesIn)
	r := rand.New(rand.NewPCG(7, uint64(len(c.name))))
	var R []float64
	loss := out
	if !out.IsScalar() {
		rv := f32(r, out.Shape().TotalSize(), 1)
		R = widen64(rv)
		rn := G.NewTensor(g, tensor.Float32, out.Dims(), G.WithShape(out.Shape().Clone()...), G.WithName("R"),
			G.WithValue(tensor.New(tensor.WithShape(out.Shape().Clone()...), tensor.WithBacking(rv))))
		loss = ops.Apply(dotLoss{dims: out.Dims()}, out, rn)
	}
	grads, err := G.Grad(loss, wrt...)
	if err != nil {
		t.Fatalf("G.Grad: %v", err)
	}
	got := make([][]float32, len(grads))
	for i, gn := range grads {
		ops.Apply(keepValue{i: i, dims: gn.Dims(), dst: got}, gn)
	}
	m := G.NewTapeMachine(g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	lossOf := func(vals [][]float64) float64 {
		y := c.ref(vals, ints)
		if R == nil {
			return y[0]
		}
		var s float64
		for i, v := range y {
			s += v * R[i]
		}
		return s
	}
	checked := 0
	defer func() {
		if checked == 0 {
			t.Errorf("%s: the loss depends on none of the inputs: a useless check", c.name)
		}
	}()
	for gi, i := range wrtIdx {
		x := values[i]
		num := make([]float64, len(x))
		var scale float64
		for j := range x {
			h := 1e-4 * max(1, math.Abs(x[j]))
			orig := x[j]
			x[j] = orig + h
			lp := lossOf(values)
			x[j] = orig - h
			lm := lossOf(values)
			x[j] = orig
			num[j] = (lp - lm) / (2 * h)
			scale = max(scale, math.Abs(num[j]))
		}
		if len(got[gi]) != len(num) {
			t.Fatalf("%s: gradient of %s has %d values, want %d", c.name, c.in[i].name, len(got[gi]), len(num))
		}
		var worst float64
		for j := range num {
			worst = max(worst, math.Abs(float64(got[gi][j])-num[j]))
		}
		if scale == 0 {
			// An input the loss does not depend on (an expert no row
			// selected) must get an exact zero.
			if worst != 0 {
				t.Errorf("%s: d/d%s should be zero, is up to %.3g", c.name, c.in[i].name, worst)
			}
			continue
		}
		checked++
		if !(worst <= c.tol*scale) {
			t.Errorf("%s: d/d%s max |analytic - numeric| = %.3g, %.3g of max |grad| %.3g (tol %g)", c.name, c.in[i].name, worst, worst/scale, scale, c.tol)
		}
	}
}

func widen64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// dotLoss is Σ out ∘ R, a scalar.
type dotLoss struct{ dims int }

func (k dotLoss) Name() string   { return "dot loss" }
func (k dotLoss) String() string { return fmt.Sprintf("DotLoss{%d}", k.dims) }
func (k dotLoss) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil), hm.TypeVariable('a')}
}
func (k dotLoss) Shape(in []tensor.Shape) (tensor.Shape, error) { return tensor.ScalarShape(), nil }
func (k dotLoss) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	a, b, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return G.NewF32(float32(s)), nil
}
func (k dotLoss) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return nodes(
		func() (*G.Node, error) { return node(scaleBy{dims: k.dims}, in[1], grad) },
		func() (*G.Node, error) { return node(scaleBy{dims: k.dims}, in[0], grad) },
	)
}

// scaleBy is R·g for a scalar g.
type scaleBy struct{ dims int }

func (k scaleBy) Name() string   { return "scale by" }
func (k scaleBy) String() string { return fmt.Sprintf("ScaleBy{%d}", k.dims) }
func (k scaleBy) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), hm.TypeVariable('a'), ops.T(k.dims, nil)}
}
func (k scaleBy) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k scaleBy) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	r, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	g, err := scalar(in[1])
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(r))
	for i, v := range r {
		out[i] = float32(float64(v) * g)
	}
	return o.Tensor(out, in[0].Shape()...), nil
}

// keepValue copies a gradient out as the run computes it (the machine may
// later reuse the node's memory).
type keepValue struct {
	i, dims int
	dst     [][]float32
}

func (k keepValue) Name() string   { return "keep" }
func (k keepValue) String() string { return fmt.Sprintf("Keep{%d}", k.i) }
func (k keepValue) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), hm.TypeVariable('a')}
}
func (k keepValue) Shape(in []tensor.Shape) (tensor.Shape, error) { return tensor.ScalarShape(), nil }
func (k keepValue) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	k.dst[k.i] = append([]float32(nil), x...)
	return G.NewF32(0), nil
}

// ---- float64 references ----

func refLinear(x []float64, T, in int, w []float64, out int, b []float64) []float64 {
	y := make([]float64, T*out)
	for t := 0; t < T; t++ {
		for o := 0; o < out; o++ {
			s := 0.0
			if b != nil {
				s = b[o]
			}
			for i := 0; i < in; i++ {
				s += x[t*in+i] * w[o*in+i]
			}
			y[t*out+o] = s
		}
	}
	return y
}

func refRMS(x, w []float64, eps, offset float64) []float64 {
	d := len(w)
	out := make([]float64, len(x))
	for r := 0; r < len(x); r += d {
		var ss float64
		for _, v := range x[r : r+d] {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(d)+eps)
		for j := 0; j < d; j++ {
			out[r+j] = x[r+j] * inv * (offset + w[j])
		}
	}
	return out
}

func refLayerNorm(x, w, b []float64, eps float64) []float64 {
	d := len(w)
	out := make([]float64, len(x))
	for r := 0; r < len(x); r += d {
		var mean, v float64
		for _, e := range x[r : r+d] {
			mean += e
		}
		mean /= float64(d)
		for _, e := range x[r : r+d] {
			v += (e - mean) * (e - mean)
		}
		inv := 1 / math.Sqrt(v/float64(d)+eps)
		for j := 0; j < d; j++ {
			out[r+j] = (x[r+j]-mean)*inv*w[j] + b[j]
		}
	}
	return out
}

func refAct(name string, x float64) float64 {
	switch name {
	case "silu":
		return x / (1 + math.Exp(-x))
	case "gelu_pytorch_tanh", "gelu_new":
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	case "gelu":
		return 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
	case "relu":
		return max(x, 0)
	}
	panic(name)
}

func refRope(x []float64, T, H, dh int, invFreq []float32, pos []int) []float64 {
	out := make([]float64, len(x))
	half := dh / 2
	for t := 0; t < T; t++ {
		if pos[t] < 0 {
			continue
		}
		for h := 0; h < H; h++ {
			o := (t*H + h) * dh
			for i := 0; i < half; i++ {
				a := float64(pos[t]) * float64(invFreq[i])
				c, s := math.Cos(a), math.Sin(a)
				out[o+i] = x[o+i]*c - x[o+i+half]*s
				out[o+i+half] = x[o+i+half]*c + x[o+i]*s
			}
		}
	}
	return out
}

// refSeqAttention is eager attention over a whole sequence (positions
// 0..T-1), causal or within a sliding window.
func refSeqAttention(q, k, v []float64, T, hq, hkv, dk, dv int, scale float64, window int) []float64 {
	out := make([]float64, T*hq*dv)
	rep := hq / hkv
	for h := 0; h < hq; h++ {
		g := h / rep
		for t := 0; t < T; t++ {
			lo := 0
			if window > 0 {
				lo = max(0, t-window+1)
			}
			s := make([]float64, t+1)
			m := math.Inf(-1)
			for j := lo; j <= t; j++ {
				var d float64
				for c := 0; c < dk; c++ {
					d += q[(t*hq+h)*dk+c] * k[(j*hkv+g)*dk+c]
				}
				s[j] = d * scale
				m = max(m, s[j])
			}
			var z float64
			for j := lo; j <= t; j++ {
				s[j] = math.Exp(s[j] - m)
				z += s[j]
			}
			for j := lo; j <= t; j++ {
				for c := 0; c < dv; c++ {
					out[(t*hq+h)*dv+c] += s[j] / z * v[(j*hkv+g)*dv+c]
				}
			}
		}
	}
	return out
}

// refMoE is Qwen3MoeSparseMoeBlock in float64, routing chosen on the
// float64 probabilities (the cases keep clear margins between experts).
// unstack splits the stacked gate, up and down values of E experts into
// each expert's three matrices.
func unstack(stacked [][]float64, E int) [][3][]float64 {
	ex := make([][3][]float64, E)
	for e := range ex {
		for j, v := range stacked {
			n := len(v) / E
			ex[e][j] = v[e*n : (e+1)*n]
		}
	}
	return ex
}

func refMoE(x, router []float64, experts [][3][]float64, T, D, F, topK int, norm bool, act string) []float64 {
	E := len(experts)
	out := make([]float64, T*D)
	for t := 0; t < T; t++ {
		xt := x[t*D : (t+1)*D]
		l := refLinear(xt, 1, D, router, E, nil)
		m := math.Inf(-1)
		for _, v := range l {
			m = max(m, v)
		}
		var z float64
		p := make([]float64, E)
		for e, v := range l {
			p[e] = math.Exp(v - m)
			z += p[e]
		}
		idx := make([]int, E)
		for e := range p {
			p[e] /= z
			idx[e] = e
		}
		for a := 0; a < E; a++ { // selection sort, higher first, lower index on ties
			for b := a + 1; b < E; b++ {
				if p[idx[b]] > p[idx[a]] {
					idx[a], idx[b] = idx[b], idx[a]
				}
			}
		}
		var top float64
		for _, e := range idx[:topK] {
			top += p[e]
		}
		for _, e := range idx[:topK] {
			w := p[e]
			if norm {
				w /= top
			}
			gp := refLinear(xt, 1, D, experts[e][0], F, nil)
			up := refLinear(xt, 1, D, experts[e][1], F, nil)
			for i := range gp {
				gp[i] = refAct(act, gp[i]) * up[i]
			}
			y := refLinear(gp, 1, F, experts[e][2], D, nil)
			for j := range y {
				out[t*D+j] += w * y[j]
			}
		}
	}
	return out
}

// ---- the cases ----

func TestGradientsMatchFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const T, in, out = 3, 5, 4
	var cases []fdCase

	// Linear on every weight storage; heads; bias.
	for _, dtype := range []graphs.DType{graphs.F32, graphs.BF16, graphs.F16} {
		for _, bias := range []bool{false, true} {
			for _, heads := range []int{0, 2} {
				ins := []fdInput{{name: "x", shape: []int{T, in}, vals: f32(r, T*in, 1), dtype: graphs.F32}, {name: "w", shape: []int{out, in}, vals: f32(r, out*in, 0.5), dtype: dtype}}
				if bias {
					ins = append(ins, fdInput{name: "b", shape: []int{out}, vals: f32(r, out, 1), dtype: graphs.F32})
				}
				cases = append(cases, fdCase{
					name: fmt.Sprintf("linear %s bias=%v heads=%d", dtype, bias, heads), in: ins, tol: 1e-5,
					op: func(n []*G.Node) *G.Node {
						return ops.Apply(matmulT{dtype: dtype, bias: bias, name: "w", heads: heads}, n...)
					},
					ref: func(v [][]float64, _ [][]int) []float64 {
						var b []float64
						if bias {
							b = v[2]
						}
						return refLinear(v[0], T, in, v[1], out, b)
					},
				})
			}
		}
	}
	// Linear on a quantized weight: the gradient reaches x only.
	cases = append(cases, fdCase{
		name: "linear Q8_0", tol: 1e-5,
		in:  []fdInput{{name: "x", shape: []int{T, 32}, vals: f32(r, T*32, 1), dtype: graphs.F32}, {name: "w", shape: []int{out, 32}, vals: f32(r, out*32, 0.5), dtype: graphs.Q8_0}},
		op:  func(n []*G.Node) *G.Node { return ops.Apply(matmulT{dtype: graphs.Q8_0, name: "w"}, n...) },
		ref: func(v [][]float64, _ [][]int) []float64 { return refLinear(v[0], T, 32, v[1], out, nil) },
	})

	// Embedding lookup (repeated ids index-add) and padded positions.
	for _, dtype := range []graphs.DType{graphs.F32, graphs.BF16} {
		ids := []int{3, 0, 3, 5}
		cases = append(cases, fdCase{
			name: "embedding " + dtype.String(), tol: 1e-6,
			in: []fdInput{{name: "table", shape: []int{6, 4}, vals: f32(r, 24, 1), dtype: dtype}, {name: "ids", shape: []int{4}, ints: ids}},
			op: func(n []*G.Node) *G.Node { return ops.Apply(embeddingLookup{dtype: dtype, name: "e"}, n...) },
			ref: func(v [][]float64, iv [][]int) []float64 {
				var o []float64
				for _, id := range iv[1] {
					o = append(o, v[0][id*4:(id+1)*4]...)
				}
				return o
			},
		})
	}
	cases = append(cases, fdCase{
		name: "position embedding with padding", tol: 1e-6,
		in: []fdInput{{name: "table", shape: []int{5, 3}, vals: f32(r, 15, 1), dtype: graphs.F32}, {name: "pos", shape: []int{3}, ints: []int{2, 3, -1}}},
		op: func(n []*G.Node) *G.Node {
			return ops.Apply(embeddingLookup{dtype: graphs.F32, name: "wpe", padding: true}, n...)
		},
		ref: func(v [][]float64, iv [][]int) []float64 {
			o := make([]float64, 9)
			for t, id := range iv[1] {
				if id >= 0 {
					copy(o[t*3:], v[0][id*3:(id+1)*3])
				}
			}
			return o
		},
	})

	// RMSNorm, plain and Gemma's (1 + w); over [T, D] and per head [T, H, Dh] (QK-norm).
	for _, offset := range []float32{0, 1} {
		for _, shape := range [][]int{{T, 6}, {T, 2, 4}} {
			n := 1
			for _, s := range shape {
				n *= s
			}
			D := shape[len(shape)-1]
			cases = append(cases, fdCase{
				name: fmt.Sprintf("rms norm offset=%g %v", offset, shape), tol: 1e-5,
				in: []fdInput{{name: "x", shape: shape, vals: f32(r, n, 1.5), dtype: graphs.F32}, {name: "w", shape: []int{D}, vals: f32(r, D, 1), dtype: graphs.F32}},
				op: func(nn []*G.Node) *G.Node {
					return ops.Apply(rmsNorm{eps: 1e-6, offset: offset, dims: len(shape)}, nn...)
				},
				ref: func(v [][]float64, _ [][]int) []float64 { return refRMS(v[0], v[1], 1e-6, float64(offset)) },
			})
		}
	}

	// RoPE over positions that do not start at 0, with a padding row.
	rp := NewRoPE(6, 100, 2)
	pos := []int{4, 5, 6, -1}
	cases = append(cases, fdCase{
		name: "rope", tol: 1e-5,
		in:  []fdInput{{name: "x", shape: []int{4, 2, 6}, vals: f32(r, 48, 1), dtype: graphs.F32}, {name: "pos", shape: []int{4}, ints: pos}},
		op:  func(n []*G.Node) *G.Node { return ops.Apply(rope{invFreq: rp.InvFreq, id: rp.id}, n...) },
		ref: func(v [][]float64, iv [][]int) []float64 { return refRope(v[0], 4, 2, 6, rp.InvFreq, iv[1]) },
	})

	// Scaled RoPE: yarn's factor on cos and sin, and dynamic NTK past its
	// threshold (the gradient must rotate back by the grown base's table).
	yarn, err := NewScaledRoPE(6, loaders.RoPE{Type: "yarn", Theta: 100, Factor: 4, OriginalMaxPositions: 64, BetaFast: 32, BetaSlow: 1, Truncate: true, AttentionFactor: 1.3})
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, fdCase{
		name: "rope yarn", tol: 1e-5,
		in: []fdInput{{name: "x", shape: []int{4, 2, 6}, vals: f32(r, 48, 1), dtype: graphs.F32}, {name: "pos", shape: []int{4}, ints: pos}},
		op: func(n []*G.Node) *G.Node { return ops.Apply(yarn.kernel(), n...) },
		ref: func(v [][]float64, iv [][]int) []float64 {
			out := refRope(v[0], 4, 2, 6, yarn.InvFreq, iv[1])
			for i := range out {
				out[i] *= float64(yarn.Scale)
			}
			return out
		},
	})
	dyn, err := NewScaledRoPE(6, loaders.RoPE{Type: "dynamic", Theta: 100, Factor: 2, MaxPositions: 5})
	if err != nil {
		t.Fatal(err)
	}
	grown := dyn.kernel().tableFor(pos)
	if grown[1] == dyn.InvFreq[1] {
		t.Fatal("dynamic NTK: positions past the threshold kept the default table")
	}
	cases = append(cases, fdCase{
		name: "rope dynamic", tol: 1e-5,
		in:  []fdInput{{name: "x", shape: []int{4, 2, 6}, vals: f32(r, 48, 1), dtype: graphs.F32}, {name: "pos", shape: []int{4}, ints: pos}},
		op:  func(n []*G.Node) *G.Node { return ops.Apply(dyn.kernel(), n...) },
		ref: func(v [][]float64, iv [][]int) []float64 { return refRope(v[0], 4, 2, 6, grown, iv[1]) },
	})

	// Gated activations and plain ones.
	for _, act := range []string{"silu", "gelu_pytorch_tanh"} {
		cases = append(cases, fdCase{
			name: "gated " + act, tol: 1e-5,
			in: []fdInput{{name: "gate", shape: []int{T, 4}, vals: f32(r, T*4, 2), dtype: graphs.F32}, {name: "up", shape: []int{T, 4}, vals: f32(r, T*4, 1), dtype: graphs.F32}},
			op: func(n []*G.Node) *G.Node { return ops.Apply(gatedAct{act: act}, n...) },
			ref: func(v [][]float64, _ [][]int) []float64 {
				o := make([]float64, len(v[0]))
				for i := range o {
					o[i] = refAct(act, v[0][i]) * v[1][i]
				}
				return o
			},
		})
	}
	for _, act := range []string{"gelu_new", "gelu", "silu", "relu"} {
		x := f32(r, T*4, 2)
		for i := range x {
			if math.Abs(float64(x[i])) < 0.01 { // keep relu's kink out of the differences
				x[i] = 0.5
			}
		}
		cases = append(cases, fdCase{
			name: "activation " + act, tol: 1e-5,
			in: []fdInput{{name: "x", shape: []int{T, 4}, vals: x, dtype: graphs.F32}},
			op: func(n []*G.Node) *G.Node { return ops.Apply(activate{act: act, dims: 2}, n...) },
			ref: func(v [][]float64, _ [][]int) []float64 {
				o := make([]float64, len(v[0]))
				for i := range o {
					o[i] = refAct(act, v[0][i])
				}
				return o
			},
		})
	}

	// LayerNorm.
	cases = append(cases, fdCase{
		name: "layer norm", tol: 1e-5,
		in: []fdInput{{name: "x", shape: []int{T, 6}, vals: f32(r, T*6, 1.5), dtype: graphs.F32},
			{name: "w", shape: []int{6}, vals: f32(r, 6, 1), dtype: graphs.F32}, {name: "b", shape: []int{6}, vals: f32(r, 6, 1), dtype: graphs.F32}},
		op:  func(n []*G.Node) *G.Node { return ops.Apply(layerNorm{eps: 1e-5, dims: 2}, n...) },
		ref: func(v [][]float64, _ [][]int) []float64 { return refLayerNorm(v[0], v[1], v[2], 1e-5) },
	})

	// Residual add, scale, softcap, head range.
	cases = append(cases,
		fdCase{
			name: "add", tol: 1e-6,
			in: []fdInput{{name: "a", shape: []int{T, 3}, vals: f32(r, T*3, 1), dtype: graphs.F32},
				{name: "b", shape: []int{T, 3}, vals: f32(r, T*3, 1), dtype: graphs.F32}},
			op: func(n []*G.Node) *G.Node { return Add(n[0], n[1]) },
			ref: func(v [][]float64, _ [][]int) []float64 {
				o := make([]float64, len(v[0]))
				for i := range o {
					o[i] = v[0][i] + v[1][i]
				}
				return o
			},
		},
		fdCase{
			name: "scale", tol: 1e-6,
			in: []fdInput{{name: "x", shape: []int{T, 3}, vals: f32(r, T*3, 1), dtype: graphs.F32}},
			op: func(n []*G.Node) *G.Node { return Scale(n[0], 7.5) },
			ref: func(v [][]float64, _ [][]int) []float64 {
				o := make([]float64, len(v[0]))
				for i := range o {
					o[i] = v[0][i] * 7.5
				}
				return o
			},
		},
		fdCase{
			name: "softcap", tol: 1e-5,
			in: []fdInput{{name: "x", shape: []int{T, 5}, vals: f32(r, T*5, 10), dtype: graphs.F32}},
			op: func(n []*G.Node) *G.Node { return Softcap(n[0], 8) },
			ref: func(v [][]float64, _ [][]int) []float64 {
				o := make([]float64, len(v[0]))
				for i := range o {
					o[i] = 8 * math.Tanh(v[0][i]/8)
				}
				return o
			},
		},
		fdCase{
			name: "head range", tol: 1e-6,
			in: []fdInput{{name: "x", shape: []int{T, 4, 2}, vals: f32(r, T*8, 1), dtype: graphs.F32}},
			op: func(n []*G.Node) *G.Node { return ops.Apply(headRange{from: 1, count: 2}, n[0]) },
			ref: func(v [][]float64, _ [][]int) []float64 {
				var o []float64
				for t := 0; t < T; t++ {
					o = append(o, v[0][(t*4+1)*2:(t*4+3)*2]...)
				}
				return o
			},
		},
		fdCase{
			// GGUF llama Q/K rows back in HF's order: within each head of
			// 4 columns, [x0 x1 x2 x3] becomes [x0 x2 x1 x3].
			name: "head rows", tol: 1e-6,
			in: []fdInput{{name: "x", shape: []int{T, 8}, vals: f32(r, T*8, 1), dtype: graphs.F32}},
			op: func(n []*G.Node) *G.Node { return ops.Apply(headRows{hd: 4, dims: 2}, n[0]) },
			ref: func(v [][]float64, _ [][]int) []float64 {
				o := make([]float64, len(v[0]))
				for g := 0; g < len(o); g += 4 {
					o[g], o[g+1], o[g+2], o[g+3] = v[0][g], v[0][g+2], v[0][g+1], v[0][g+3]
				}
				return o
			},
		},
	)

	// Attention over a whole sequence: MHA, GQA, MQA, sliding windows.
	for _, a := range []struct {
		hq, hkv, dk, dv, window int
	}{{2, 2, 4, 4, 0}, {4, 2, 4, 3, 0}, {3, 1, 4, 4, 3}, {4, 2, 2, 2, 2}} {
		const T = 5
		cases = append(cases, fdCase{
			name: fmt.Sprintf("attention hq=%d hkv=%d window=%d", a.hq, a.hkv, a.window), tol: 1e-5,
			in: []fdInput{{name: "q", shape: []int{T, a.hq, a.dk}, vals: f32(r, T*a.hq*a.dk, 1), dtype: graphs.F32},
				{name: "k", shape: []int{T, a.hkv, a.dk}, vals: f32(r, T*a.hkv*a.dk, 1), dtype: graphs.F32},
				{name: "v", shape: []int{T, a.hkv, a.dv}, vals: f32(r, T*a.hkv*a.dv, 1), dtype: graphs.F32}},
			op: func(n []*G.Node) *G.Node {
				return ops.Apply(causalAttention{name: "t", scale: 0.6, window: a.window}, n...)
			},
			ref: func(v [][]float64, _ [][]int) []float64 {
				return refSeqAttention(v[0], v[1], v[2], T, a.hq, a.hkv, a.dk, a.dv, float64(float32(0.6)), a.window)
			},
		})
	}

	// Mixture of experts, with and without renormalised top-k weights.
	for _, norm := range []bool{true, false} {
		const T, D, F, E, K = 4, 4, 3, 4, 2
		ins := []fdInput{{name: "x", shape: []int{T, D}, vals: f32(r, T*D, 1), dtype: graphs.F32},
			{name: "router", shape: []int{E, D}, vals: f32(r, E*D, 1), dtype: graphs.F32},
			{name: "gate", shape: []int{E, F, D}, vals: f32(r, E*F*D, 0.7), dtype: graphs.F32},
			{name: "up", shape: []int{E, F, D}, vals: f32(r, E*F*D, 0.7), dtype: graphs.F32},
			{name: "down", shape: []int{E, D, F}, vals: f32(r, E*D*F, 0.7), dtype: graphs.F32}}
		cases = append(cases, fdCase{
			name: fmt.Sprintf("moe norm=%v", norm), tol: 1e-5, in: ins,
			op: func(n []*G.Node) *G.Node {
				return ops.Apply(sparseMoE{name: "moe", experts: E, topK: K, normTopK: norm, act: "silu", routerType: graphs.F32, expertTypes: [3]graphs.DType{}}, n...)
			},
			ref: func(v [][]float64, _ [][]int) []float64 {
				return refMoE(v[0], v[1], unstack(v[2:5], E), T, D, F, K, norm, "silu")
			},
		})
	}

	// Experts in 16-bit storage (differentiated as their float32 values)
	// and quantized gate projections (no gradient of their own).
	{
		const T, D, F, E, K = 3, 32, 3, 3, 2
		ins := []fdInput{{name: "x", shape: []int{T, D}, vals: f32(r, T*D, 1), dtype: graphs.F32},
			{name: "router", shape: []int{E, D}, vals: f32(r, E*D, 1), dtype: graphs.F32},
			{name: "gate", shape: []int{E, F, D}, vals: f32(r, E*F*D, 0.3), dtype: graphs.Q8_0},
			{name: "up", shape: []int{E, F, D}, vals: f32(r, E*F*D, 0.3), dtype: graphs.BF16},
			{name: "down", shape: []int{E, D, F}, vals: f32(r, E*D*F, 0.3), dtype: graphs.F16}}
		cases = append(cases, fdCase{
			name: "moe Q8_0, BF16 and F16 experts", tol: 1e-5, in: ins,
			op: func(n []*G.Node) *G.Node {
				return ops.Apply(sparseMoE{name: "moe", experts: E, topK: K, normTopK: true, act: "silu", routerType: graphs.F32,
					expertTypes: [3]graphs.DType{graphs.Q8_0, graphs.BF16, graphs.F16}}, n...)
			},
			ref: func(v [][]float64, _ [][]int) []float64 {
				return refMoE(v[0], v[1], unstack(v[2:5], E), T, D, F, K, true, "silu")
			},
		})
	}

	// The loss itself, with an ignored row.
	cases = append(cases, fdCase{
		name: "cross entropy", tol: 1e-5,
		in: []fdInput{{name: "logits", shape: []int{4, 6}, vals: f32(r, 24, 3), dtype: graphs.F32}, {name: "targets", shape: []int{4}, ints: []int{2, 5, 0, -1}}},
		op: func(n []*G.Node) *G.Node { return CrossEntropy(n[0], n[1]) },
		ref: func(v [][]float64, iv [][]int) []float64 {
			var s float64
			for t, id := range iv[1][:3] {
				row := v[0][t*6 : (t+1)*6]
				var z float64
				for _, x := range row {
					z += math.Exp(x)
				}
				s += math.Log(z) - row[id]
			}
			return []float64{s / 3}
		},
	})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runFD(t, c) })
	}
}
