package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/ops"
)

// Gradients of the forward kernels (ops.GradKernel), for Gorgonia's
// symbolic differentiation (G.Grad). Each Grad adds backward kernels to the
// graph: plain Go loops that accumulate in float64 where a sum runs over a
// row, and internal/simd's products for the matrix products. The backward
// kernels themselves have no gradient (no second derivatives). Every
// gradient is checked against central finite differences of a float64
// reference in grad_test.go.

// node applies a backward kernel, returning Gorgonia's error rather than
// panicking: Grad runs inside G.Grad, which reports errors.
func node(k ops.Kernel, in ...*G.Node) (*G.Node, error) {
	n, err := G.ApplyOp(ops.New(k), in...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.Name(), err)
	}
	return n, nil
}

// nodes applies several backward kernels that share their inputs' errors.
func nodes(build ...func() (*G.Node, error)) (G.Nodes, error) {
	out := make(G.Nodes, len(build))
	for i, b := range build {
		if b == nil {
			continue
		}
		n, err := b()
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// ---- residual add, scale, softcap ----

func (k add) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return G.Nodes{grad, grad}, nil
}

func (k pointwise) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	switch k.kind {
	case "scale":
		// d(p·x) = p·g: the forward kernel itself, applied to the gradient.
		return nodes(func() (*G.Node, error) { return node(pointwise{kind: "scale", p: k.p, dims: k.dims}, grad) })
	case "softcap":
		return nodes(func() (*G.Node, error) { return node(softcapGrad{c: k.p, dims: k.dims}, in[0], grad) })
	}
	return nil, fmt.Errorf("%s has %w", k.kind, ops.ErrNoGrad)
}

// softcapGrad is the gradient of c·tanh(x/c): g·(1 - tanh²(x/c)).
type softcapGrad struct {
	c    float32
	dims int
}

func (k softcapGrad) Name() string { return "softcap gradient" }
func (k softcapGrad) String() string {
	return fmt.Sprintf("SoftcapGrad{%g,dims=%d}", k.c, k.dims)
}
func (k softcapGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil), ops.T(k.dims, nil)}
}
func (k softcapGrad) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k softcapGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, g, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(x))
	c := float64(k.c)
	for i, v := range x {
		t := math.Tanh(float64(v) / c)
		out[i] = float32(float64(g[i]) * (1 - t*t))
	}
	return o.Tensor(out, in[0].Shape()...), nil
}

// ---- RMSNorm ----

func (k rmsNorm) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return nodes(
		func() (*G.Node, error) {
			return node(rmsNormGrad{eps: k.eps, offset: k.offset, dims: k.dims}, in[0], in[1], grad)
		},
		func() (*G.Node, error) { return node(normWeightGrad{eps: float64(k.eps), dims: k.dims}, in[0], grad) },
	)
}

// rmsNormGrad is the gradient of RMSNorm with respect to x: with r =
// 1/sqrt(mean(x²)+eps) and s = offset + w, dx = r·g·s - x·r³/d·Σ(g·s·x).
type rmsNormGrad struct {
	eps, offset float32
	dims        int
}

// normGradInputs reads a norm gradient's inputs (x, the scale w, the
// output's gradient g) and makes its output dx, shaped as x.
func normGradInputs(o *ops.Out, in []G.Value) (x, w, g, dx []float32, err error) {
	if x, w, err = ops.Float32Pair(in); err != nil {
		return nil, nil, nil, nil, err
	}
	if g, err = ops.Float32s(in[2]); err != nil {
		return nil, nil, nil, nil, err
	}
	return x, w, g, o.Float32s(len(x)), nil
}

func (k rmsNormGrad) Name() string { return "rms norm gradient" }
func (k rmsNormGrad) String() string {
	return fmt.Sprintf("RMSNormGrad{eps=%g,offset=%g,dims=%d}", k.eps, k.offset, k.dims)
}
func (k rmsNormGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(1, nil), ops.T(k.dims, nil), ops.T(k.dims, nil)}
}
func (k rmsNormGrad) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k rmsNormGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, w, g, dx, err := normGradInputs(o, in)
	if err != nil {
		return nil, err
	}
	d := len(w)
	for r := 0; r+d <= len(x); r += d {
		row, gr := x[r:r+d], g[r:r+d]
		var ss, dot float64
		for j, v := range row {
			ss += float64(v) * float64(v)
			dot += float64(gr[j]) * (float64(k.offset) + float64(w[j])) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(d)+float64(k.eps))
		c := dot * inv * inv * inv / float64(d)
		for j, v := range row {
			dx[r+j] = float32(inv*float64(gr[j])*(float64(k.offset)+float64(w[j])) - float64(v)*c)
		}
	}
	return o.Tensor(dx, in[0].Shape()...), nil
}

// normWeightGrad is the gradient of RMSNorm or LayerNorm with respect to
// its weight (the stored w, for both w and 1 + w): Σ over rows of g·x̂,
// with x̂ = x·r for RMSNorm and (x - mean)·r for LayerNorm (centered).
type normWeightGrad struct {
	eps      float64
	dims     int
	centered bool
}

func (k normWeightGrad) Name() string { return "norm weight gradient" }
func (k normWeightGrad) String() string {
	return fmt.Sprintf("NormWeightGrad{eps=%g,dims=%d,centered=%v}", k.eps, k.dims, k.centered)
}
func (k normWeightGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil), ops.T(1, nil)}
}
func (k normWeightGrad) Shape(in []tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{in[0][len(in[0])-1]}, nil
}
func (k normWeightGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, g, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	s := in[0].Shape()
	d := s[len(s)-1]
	acc := make([]float64, d)
	for r := 0; r+d <= len(x); r += d {
		row := x[r : r+d]
		var mean, inv float64
		if k.centered {
			mean, inv = rowStats(row, k.eps)
		} else {
			var ss float64
			for _, v := range row {
				ss += float64(v) * float64(v)
			}
			inv = 1 / math.Sqrt(ss/float64(d)+k.eps)
		}
		for j, v := range row {
			acc[j] += float64(g[r+j]) * (float64(v) - mean) * inv
		}
	}
	return o.Tensor(narrow(o.Float32s(d), acc), d), nil
}

// narrow rounds float64 sums into dst.
func narrow(dst []float32, src []float64) []float32 {
	for i, v := range src {
		dst[i] = float32(v)
	}
	return dst
}

// ---- RoPE ----

func (k rope) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	// A rotation's gradient is the inverse rotation; positions take none.
	return nodes(func() (*G.Node, error) { return node(ropeGrad{k}, grad, in[1]) }, nil)
}

// ropeGrad rotates g [T, H, Dh] back by each row's angles: the forward's
// table (the dynamic one for the same positions) and cos/sin factor.
type ropeGrad struct{ fwd rope }

func (k ropeGrad) Name() string   { return "rope gradient" }
func (k ropeGrad) String() string { return "RoPEGrad{" + k.fwd.id + "}" }
func (k ropeGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(3, nil), ops.T(1, tensor.Int), ops.T(3, nil)}
}
func (k ropeGrad) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k ropeGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	g, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	pos, err := ops.Ints(in[1])
	if err != nil {
		return nil, err
	}
	s := in[0].Shape()
	inv := k.fwd.tableFor(pos)
	H, half := s[1], len(inv)
	dh := 2 * half
	out := o.Float32s(len(g))
	for t, p := range pos {
		if p < 0 {
			continue // padding rows came out zero
		}
		for i, f := range inv {
			// The forward's float32 angle, cos and sin.
			a := float64(float32(p) * f)
			c, sn := float32(math.Cos(a)), float32(math.Sin(a))
			if sc := k.fwd.scale; sc != 0 {
				c, sn = c*sc, sn*sc
			}
			for h := 0; h < H; h++ {
				off := (t*H + h) * dh
				g1, g2 := g[off+i], g[off+i+half]
				out[off+i] = g1*c + g2*sn
				out[off+i+half] = g2*c - g1*sn
			}
		}
	}
	return o.Tensor(out, s...), nil
}

// ---- activations ----

// activationGrad is the derivative of an activation, in float64.
func activationGrad(name string) (func(float64) float64, error) {
	switch name {
	case "silu":
		return func(x float64) float64 {
			s := 1 / (1 + math.Exp(-x))
			return s * (1 + x*(1-s))
		}, nil
	case "gelu_pytorch_tanh", "gelu_new":
		return func(x float64) float64 {
			const c = 0.7978845608028654 // sqrt(2/pi)
			t := math.Tanh(c * (x + 0.044715*x*x*x))
			return 0.5*(1+t) + 0.5*x*(1-t*t)*c*(1+3*0.044715*x*x)
		}, nil
	case "gelu":
		return func(x float64) float64 {
			return 0.5*(1+math.Erf(x/math.Sqrt2)) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
		}, nil
	case "relu":
		return func(x float64) float64 {
			if x > 0 {
				return 1
			}
			return 0
		}, nil
	}
	return nil, fmt.Errorf("no derivative of activation %q", name)
}

func (k gatedAct) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return nodes(
		func() (*G.Node, error) { return node(gatedActGrad{act: k.act, up: false}, in[0], in[1], grad) },
		func() (*G.Node, error) { return node(gatedActGrad{act: k.act, up: true}, in[0], in[1], grad) },
	)
}

// gatedActGrad is the gradient of act(gate)·up with respect to gate
// (g·up·act'(gate)) or, with up, to up (g·act(gate)).
type gatedActGrad struct {
	act string
	up  bool
}

func (k gatedActGrad) Name() string { return "gated activation gradient" }
func (k gatedActGrad) String() string {
	return fmt.Sprintf("GatedActGrad{%s,up=%v}", k.act, k.up)
}
func (k gatedActGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(2, nil), ops.T(2, nil), ops.T(2, nil), ops.T(2, nil)}
}
func (k gatedActGrad) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k gatedActGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	gate, up, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	g, err := ops.Float32s(in[2])
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(gate))
	if k.up {
		act, err := activation(k.act)
		if err != nil {
			return nil, err
		}
		for i, v := range gate {
			out[i] = g[i] * act(v)
		}
	} else {
		d, err := activationGrad(k.act)
		if err != nil {
			return nil, err
		}
		for i, v := range gate {
			out[i] = float32(float64(g[i]) * float64(up[i]) * d(float64(v)))
		}
	}
	return o.Tensor(out, in[0].Shape()...), nil
}

func (k activate) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return nodes(func() (*G.Node, error) { return node(activateGrad{act: k.act, dims: k.dims}, in[0], grad) })
}

// activateGrad is g·act'(x).
type activateGrad struct {
	act  string
	dims int
}

func (k activateGrad) Name() string { return k.act + " gradient" }
func (k activateGrad) String() string {
	return fmt.Sprintf("ActGrad{%s,dims=%d}", k.act, k.dims)
}
func (k activateGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil), ops.T(k.dims, nil)}
}
func (k activateGrad) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k activateGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, g, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	d, err := activationGrad(k.act)
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(x))
	for i, v := range x {
		out[i] = float32(float64(g[i]) * d(float64(v)))
	}
	return o.Tensor(out, in[0].Shape()...), nil
}

// ---- LayerNorm ----

func (k layerNorm) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return nodes(
		func() (*G.Node, error) { return node(layerNormGrad{eps: k.eps, dims: k.dims}, in[0], in[1], grad) },
		func() (*G.Node, error) {
			return node(normWeightGrad{eps: k.eps, dims: k.dims, centered: true}, in[0], grad)
		},
		func() (*G.Node, error) {
			return node(columnSum{dims: k.dims, width: in[0].Shape()[len(in[0].Shape())-1]}, grad)
		},
	)
}

// layerNormGrad is LayerNorm's gradient with respect to x: with x̂ the
// normalised row and gw = g·w, dx = inv·(gw - mean(gw) - x̂·mean(gw·x̂)).
type layerNormGrad struct {
	eps  float64
	dims int
}

func (k layerNormGrad) Name() string { return "layer norm gradient" }
func (k layerNormGrad) String() string {
	return fmt.Sprintf("LayerNormGrad{eps=%g,dims=%d}", k.eps, k.dims)
}
func (k layerNormGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(1, nil), ops.T(k.dims, nil), ops.T(k.dims, nil)}
}
func (k layerNormGrad) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k layerNormGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, w, g, dx, err := normGradInputs(o, in)
	if err != nil {
		return nil, err
	}
	d := len(w)
	xh, gw := make([]float64, d), make([]float64, d)
	for r := 0; r+d <= len(x); r += d {
		mean, inv := rowStats(x[r:r+d], k.eps)
		var sg, sgx float64
		for j := 0; j < d; j++ {
			xh[j] = (float64(x[r+j]) - mean) * inv
			gw[j] = float64(g[r+j]) * float64(w[j])
			sg += gw[j]
			sgx += gw[j] * xh[j]
		}
		sg, sgx = sg/float64(d), sgx/float64(d)
		for j := 0; j < d; j++ {
			dx[r+j] = float32(inv * (gw[j] - sg - xh[j]*sgx))
		}
	}
	return o.Tensor(dx, in[0].Shape()...), nil
}

// columnSum sums the rows of width values of g: the gradient of a bias
// (g [T, out], or [T, heads, out/heads] when the product split heads).
type columnSum struct{ dims, width int }

func (k columnSum) Name() string { return "column sum" }
func (k columnSum) String() string {
	return fmt.Sprintf("ColumnSum{dims=%d,width=%d}", k.dims, k.width)
}
func (k columnSum) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(1, nil)}
}
func (k columnSum) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if k.width <= 0 || in[0].TotalSize()%k.width != 0 {
		return nil, fmt.Errorf("%v does not split into rows of %d", in[0], k.width)
	}
	return tensor.Shape{k.width}, nil
}
func (k columnSum) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	g, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	d := k.width
	acc := make([]float64, d)
	for r := 0; r+d <= len(g); r += d {
		for j, v := range g[r : r+d] {
			acc[j] += float64(v)
		}
	}
	return o.Tensor(narrow(o.Float32s(d), acc), d), nil
}

// ---- head range (fused q | k | v) ----

func (k headRange) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return nodes(func() (*G.Node, error) {
		return node(headRangeGrad{from: k.from, count: k.count, heads: in[0].Shape()[1]}, grad)
	})
}

// headRangeGrad places g [T, count, Dh] at heads from.. of a zero
// [T, heads, Dh].
type headRangeGrad struct{ from, count, heads int }

func (k headRangeGrad) Name() string { return "head range gradient" }
func (k headRangeGrad) String() string {
	return fmt.Sprintf("HeadRangeGrad{%d,%d,of=%d}", k.from, k.count, k.heads)
}
func (k headRangeGrad) Signature() []hm.Type { return []hm.Type{ops.T(3, nil), ops.T(3, nil)} }
func (k headRangeGrad) Shape(in []tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{in[0][0], k.heads, in[0][2]}, nil
}
func (k headRangeGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	g, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	s := in[0].Shape()
	T, Dh := s[0], s[2]
	out := o.Float32s(T * k.heads * Dh)
	for t := 0; t < T; t++ {
		copy(out[(t*k.heads+k.from)*Dh:(t*k.heads+k.from+k.count)*Dh], g[t*k.count*Dh:(t+1)*k.count*Dh])
	}
	return o.Tensor(out, T, k.heads, Dh), nil
}

// ---- embedding lookup ----

func (k embeddingLookup) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if !ops.Differentiable(ops.T(2, k.dtype.Storage())) {
		return G.Nodes{nil, nil}, nil // quantized table: activations only
	}
	s := in[0].Shape()
	return nodes(func() (*G.Node, error) {
		return node(embeddingGrad{name: k.name, rows: s[0], padding: k.padding}, grad, in[1])
	}, nil)
}

// embeddingGrad index-adds the rows of g [T, D] into a zero table
// [rows, D] at ids (negative ids, padding, add nothing).
type embeddingGrad struct {
	name    string
	rows    int
	padding bool
}

func (k embeddingGrad) Name() string { return "embedding gradient " + k.name }
func (k embeddingGrad) String() string {
	return fmt.Sprintf("EmbeddingGrad{%s,rows=%d,padding=%v}", k.name, k.rows, k.padding)
}
func (k embeddingGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(2, nil), ops.T(1, tensor.Int), ops.T(2, tensor.Float32)}
}
func (k embeddingGrad) Shape(in []tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{k.rows, in[0][1]}, nil
}
func (k embeddingGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	g, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	ids, err := ops.Ints(in[1])
	if err != nil {
		return nil, err
	}
	D := in[0].Shape()[1]
	out := o.Float32s(k.rows * D)
	if err := IndexAdd(out, g, ids, D); err != nil {
		return nil, err
	}
	return o.Tensor(out, k.rows, D), nil
}

// IndexAdd adds row t of g [len(ids), D] into row ids[t] of table
// [V, D]: the lookup part of an embedding's gradient. Negative ids
// (padding) add nothing.
func IndexAdd(table, g []float32, ids []int, D int) error {
	V := len(table) / D
	for t, id := range ids {
		if id < 0 {
			continue
		}
		if id >= V {
			return fmt.Errorf("token %d at row %d is outside the vocabulary [0, %d)", id, t, V)
		}
		dst, src := table[id*D:(id+1)*D], g[t*D:(t+1)*D]
		for j, v := range src {
			dst[j] += v
		}
	}
	return nil
}

// ---- Linear ----

func (k matmulT) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	gdims := 2
	if k.heads > 0 {
		gdims = 3
	}
	var dw, db func() (*G.Node, error)
	if ops.Differentiable(ops.T(2, k.dtype.Storage())) {
		// F32 and 16-bit weights: the gradient is float32, as for the
		// widened weight. Quantized weights take none.
		dw = func() (*G.Node, error) { return node(matmulWeightGrad{name: k.name, gdims: gdims}, grad, in[0]) }
	}
	if k.bias {
		db = func() (*G.Node, error) { return node(columnSum{dims: gdims, width: in[2].Shape()[0]}, grad) }
	}
	build := []func() (*G.Node, error){
		func() (*G.Node, error) {
			return node(matmulInputGrad{dtype: k.dtype, name: k.name, gdims: gdims}, grad, in[1])
		},
		dw,
	}
	if k.bias {
		build = append(build, db)
	}
	return nodes(build...)
}

// matmulInputGrad is the gradient of x·Wᵀ with respect to x: g·W, with W
// [out, in] widened (or dequantized) to float32.
type matmulInputGrad struct {
	dtype graphs.DType
	name  string
	gdims int // 3 when the forward split its output into heads
}

func (k matmulInputGrad) Name() string { return "matmul input gradient " + k.name }
func (k matmulInputGrad) String() string {
	return fmt.Sprintf("MatMulInputGrad{%s,%s,gdims=%d}", k.name, k.dtype, k.gdims)
}
func (k matmulInputGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(k.gdims, nil), ops.T(2, k.dtype.Storage()), ops.T(2, nil)}
}
func (k matmulInputGrad) Shape(in []tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{in[0][0], logicalCols(k.dtype, in[1][1])}, nil
}
func (k matmulInputGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	g, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	w, err := weightData(in[1], k.dtype)
	if err != nil {
		return nil, err
	}
	s := in[1].Shape()
	out, inDim := s[0], logicalCols(k.dtype, s[1])
	T := len(g) / out
	// Wᵀ [in, out] in float32, so that g·W = g·(Wᵀ)ᵀ runs on the
	// x·wᵀ kernels.
	wt := make([]float32, inDim*out)
	row := make([]float32, inDim)
	for r := 0; r < out; r++ {
		for c, v := range w.row(row, r, inDim) {
			wt[c*out+r] = v
		}
	}
	dx := o.Float32s(T * inDim)
	simd.MulT(dx, g, T, simd.Weight{Kind: simd.F32, F32s: wt}, inDim, out)
	return o.Tensor(dx, T, inDim), nil
}

// matmulWeightGrad is the gradient of x·Wᵀ with respect to W: gᵀ·x
// [out, in], float32 whatever W's storage.
type matmulWeightGrad struct {
	name  string
	gdims int
}

func (k matmulWeightGrad) Name() string { return "matmul weight gradient " + k.name }
func (k matmulWeightGrad) String() string {
	return fmt.Sprintf("MatMulWeightGrad{%s,gdims=%d}", k.name, k.gdims)
}
func (k matmulWeightGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(k.gdims, nil), ops.T(2, nil), ops.T(2, tensor.Float32)}
}
func (k matmulWeightGrad) Shape(in []tensor.Shape) (tensor.Shape, error) {
	out := in[0][1]
	if k.gdims == 3 {
		out *= in[0][2]
	}
	return tensor.Shape{out, in[1][1]}, nil
}
func (k matmulWeightGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	g, x, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	T, inDim := in[1].Shape()[0], in[1].Shape()[1]
	out := len(g) / T
	dw := o.Float32s(out * inDim)
	weightGrad(dw, g, x, T, out, inDim)
	return o.Tensor(dw, out, inDim), nil
}

// weightGrad sets dw [out, in] = gᵀ·x for g [T, out] and x [T, in], on
// the x·wᵀ kernels over the transposes.
func weightGrad(dw, g, x []float32, T, out, in int) {
	gt, xt := transposed(g, T, out), transposed(x, T, in)
	simd.MulT(dw, gt, out, simd.Weight{Kind: simd.F32, F32s: xt}, in, T)
}

// transposed returns the [cols, rows] transpose of a [rows, cols] matrix.
func transposed(a []float32, rows, cols int) []float32 {
	out := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		for c, v := range a[r*cols : (r+1)*cols] {
			out[c*rows+r] = v
		}
	}
	return out
}

// Grad of a reordering is the inverse reordering of the gradient.
func (k headRows) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return nodes(func() (*G.Node, error) {
		return node(headRows{hd: k.hd, dims: k.dims, inverse: !k.inverse}, grad)
	})
}
