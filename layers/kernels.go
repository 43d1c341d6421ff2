package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/ops"
)

// The kernels below fuse what Gorgonia v0.9.18 would otherwise spread over
// many nodes, each allocating its output on every run. Each one is checked
// against a plain-Go float64 reference in layers_test.go.

// rmsNorm normalises each row of x (the last axis) by its root mean square,
// then scales by (offset + w): offset is 0 for Llama/Qwen and 1 for Gemma,
// whose stored weights are offsets around zero. The mean is accumulated in
// float64; HF accumulates in float32, and the difference is far below a
// float32 ulp of the result.
type rmsNorm struct {
	eps    float32
	offset float32
	dims   int
}

func (k rmsNorm) Name() string { return "rms norm" }
func (k rmsNorm) String() string {
	return fmt.Sprintf("RMSNorm{eps=%g,offset=%g,dims=%d}", k.eps, k.offset, k.dims)
}
func (k rmsNorm) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(1, nil), ops.T(k.dims, nil)}
}
func (k rmsNorm) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[1]) != 1 || in[0][len(in[0])-1] != in[1][0] {
		return nil, fmt.Errorf("x %v does not end in the weight's %v", in[0], in[1])
	}
	return in[0].Clone(), nil
}
func (k rmsNorm) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, w, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(x))
	rmsNormRows(out, x, w, k.eps, k.offset)
	return o.Tensor(out, in[0].Shape()...), nil
}

func rmsNormRows(out, x, w []float32, eps, offset float32) {
	d := len(w)
	for r := 0; r+d <= len(x); r += d {
		row := x[r : r+d]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := float32(1 / math.Sqrt(float64(float32(ss/float64(d))+eps)))
		o := out[r : r+d]
		for j, v := range row {
			o[j] = (offset + w[j]) * (v * inv)
		}
	}
}

// rope rotates x [T, H, Dh] in the NeoX "rotate half" form: dimension i
// pairs with i + Dh/2. Row t sits at positions[t] (padding rows, -1, come
// out zero). Angles are float32(position) * invFreq[i] rounded to float32,
// and cos/sin are taken of that float32 angle, as HF computes them.
type rope struct {
	invFreq []float32
	scale   float32     // multiplies cos and sin (YaRN); 0: none
	dyn     *dynamicNTK // dynamic NTK: the table follows the step's positions
	id      string      // names the frequency table in hashes and graph dumps
	step    *stepAngles // nil: angles computed each call
}

func (k rope) Name() string   { return "rope" }
func (k rope) String() string { return "RoPE{" + k.id + "}" }
func (k rope) Signature() []hm.Type {
	return []hm.Type{ops.T(3, nil), ops.T(1, tensor.Int), ops.T(3, nil)}
}
func (k rope) Shape(in []tensor.Shape) (tensor.Shape, error) {
	s := in[0]
	if len(s) != 3 || s[2] != 2*len(k.invFreq) || len(in[1]) != 1 || in[1][0] != s[0] {
		return nil, fmt.Errorf("want x [T, H, %d] and positions [T], got %v and %v", 2*len(k.invFreq), s, in[1])
	}
	return s.Clone(), nil
}
func (k rope) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	pos, err := ops.Ints(in[1])
	if err != nil {
		return nil, err
	}
	s := in[0].Shape()
	out := o.Float32s(len(x))
	if table := k.tableFor(pos); k.step != nil && k.dyn == nil {
		k.step.rotate(out, x, s[1], table, k.scale, pos)
	} else {
		rotate(out, x, s[1], table, k.scale, pos)
	}
	return o.Tensor(out, s...), nil
}

// rotate applies the rotation; scale (0: none) multiplies cos and sin
// after they are rounded to float32, as HF's attention_scaling does.
func rotate(out, x []float32, H int, invFreq []float32, scale float32, positions []int) {
	half := len(invFreq)
	var cosb, sinb [128]float32 // head_dim up to 256 stays on the stack
	cos, sin := cosb[:], sinb[:]
	if half > len(cosb) {
		cos, sin = make([]float32, half), make([]float32, half)
	}
	cos, sin = cos[:half], sin[:half]
	row := H * 2 * half
	for t, p := range positions {
		if p >= 0 {
			angles(cos, sin, invFreq, scale, p)
			rotateRow(out[t*row:(t+1)*row], x[t*row:(t+1)*row], cos, sin)
		}
	}
}

// angles writes the cos and sin of position p's angles.
func angles(cos, sin, invFreq []float32, scale float32, p int) {
	for i, f := range invFreq {
		a := float64(float32(p) * f)
		cos[i] = float32(math.Cos(a))
		sin[i] = float32(math.Sin(a))
		if scale != 0 {
			cos[i] *= scale
			sin[i] *= scale
		}
	}
}

// rotateRow rotates the heads of one row of x ([H, 2·len(cos)]) into out
// by one position's cos and sin.
func rotateRow(out, x, cos, sin []float32) {
	half := len(cos)
	for off := 0; off < len(x); off += 2 * half {
		xr, or := x[off:off+2*half], out[off:off+2*half]
		for i := 0; i < half; i++ {
			x1, x2 := xr[i], xr[i+half]
			or[i] = x1*cos[i] - x2*sin[i]
			or[i+half] = x2*cos[i] + x1*sin[i]
		}
	}
}

// gatedAct computes act(gate) * up elementwise: SwiGLU (silu) for
// Llama/Qwen, GeGLU with the tanh GELU for Gemma.
type gatedAct struct {
	act  string // "silu" or "gelu_pytorch_tanh"
	fast bool   // the tanh GELU from llama.cpp's F16 table
}

func (k gatedAct) Name() string   { return "gated activation" }
func (k gatedAct) String() string { return fmt.Sprintf("GatedAct{%s,fast=%v}", k.act, k.fast) }
func (k gatedAct) Signature() []hm.Type {
	return []hm.Type{ops.T(2, nil), ops.T(2, nil), ops.T(2, nil)}
}
func (k gatedAct) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) {
		return nil, fmt.Errorf("gate %v and up %v differ", in[0], in[1])
	}
	return in[0].Clone(), nil
}
func (k gatedAct) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	g, u, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	act, err := activationFor(k.act, k.fast)
	if err != nil {
		return nil, err
	}
	out := o.Reuse(len(g), in...)
	if len(g) >= parallelMin {
		simd.Parallel(chunks(len(g)), &mapTask{out: out, x: g, y: u, act: act, silu: k.act == "silu"})
	} else {
		// Inline, as a value that does not escape: a decode step allocates
		// nothing here.
		t := mapTask{out: out, x: g, y: u, act: act, silu: k.act == "silu"}
		t.apply(0, len(g))
	}
	return o.Tensor(out, in[0].Shape()...), nil
}

// parallelMin is the size from which an elementwise op is split over the
// team: a prefill's activations, not a decode step's (which stays inline
// and allocates nothing).
const parallelMin = 1 << 15

// chunks is how many parts an elementwise op of n values is cut into.
func chunks(n int) int { return min(64, n/(parallelMin/4)) }

// mapTask applies act to x (times y, when set) over one chunk per part.
// SiLU, every Llama-shaped MLP's activation, goes through simd.SiLUMul,
// whose vector kernel gives the scalar function's float32s 20 times
// faster.
type mapTask struct {
	out, x, y []float32
	act       func(float32) float32
	silu      bool
}

func (t *mapTask) Part(i int) {
	n, parts := len(t.x), chunks(len(t.x))
	t.apply(i*n/parts, (i+1)*n/parts)
}

// apply maps the values [lo, hi).
func (t *mapTask) apply(lo, hi int) {
	if t.silu {
		var y []float32
		if t.y != nil {
			y = t.y[lo:hi]
		}
		simd.SiLUMul(t.out[lo:hi], t.x[lo:hi], y)
		return
	}
	if t.y == nil {
		for j := lo; j < hi; j++ {
			t.out[j] = t.act(t.x[j])
		}
		return
	}
	for j := lo; j < hi; j++ {
		t.out[j] = t.act(t.x[j]) * t.y[j]
	}
}

// activation returns the named function, computed exactly.
func activation(name string) (func(float32) float32, error) { return activationFor(name, false) }

// activationFor returns the named function; fast picks llama.cpp's table
// for the tanh GELU.
func activationFor(name string, fast bool) (func(float32) float32, error) {
	switch name {
	case "silu":
		return silu, nil
	case "gelu_pytorch_tanh", "gelu_new":
		if fast {
			return simd.GELUTable, nil
		}
		return geluTanh, nil
	case "gelu":
		return geluErf, nil
	case "relu":
		return relu, nil
	}
	return nil, fmt.Errorf("unsupported activation %q (supported: silu, gelu_pytorch_tanh, gelu_new, gelu, relu)", name)
}

// geluErf is the exact GELU, x·Φ(x) = 0.5·x·(1 + erf(x/√2)), with erf in
// float64 rounded once.
func geluErf(x float32) float32 {
	return float32(0.5 * float64(x) * (1 + math.Erf(float64(x)/math.Sqrt2)))
}

func relu(x float32) float32 { return max(x, 0) }

func silu(x float32) float32 { return simd.SiLU(x) }

func geluTanh(x float32) float32 {
	u := float32(math.Sqrt(2/math.Pi)) * (x + 0.044715*x*x*x)
	// tanh(u) = 1 - 2 / (e^(2u) + 1), exact at both tails.
	return 0.5 * x * (2 - 2/(exp32(2*u)+1))
}

// exp32 is simd.Exp32, the float32 exp every kernel here uses.
func exp32(x float32) float32 { return simd.Exp32(x) }

// pointwise is a one-parameter elementwise map: "scale" multiplies by p
// (Gemma's sqrt(hidden_size) embedding scale; an op rather than a graph
// constant, since Gorgonia merges constants that share a name),
// "softcap" is Gemma's p * tanh(x / p).
type pointwise struct {
	kind string
	p    float32
	dims int
}

func (k pointwise) Name() string { return k.kind }
func (k pointwise) String() string {
	return fmt.Sprintf("%s{%g,dims=%d}", k.kind, k.p, k.dims)
}
func (k pointwise) Signature() []hm.Type { return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil)} }
func (k pointwise) Shape(in []tensor.Shape) (tensor.Shape, error) {
	return in[0].Clone(), nil
}
func (k pointwise) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(x))
	switch k.kind {
	case "scale":
		for i, v := range x {
			out[i] = v * k.p
		}
	case "softcap":
		c := float64(k.p)
		for i, v := range x {
			out[i] = float32(c * math.Tanh(float64(v)/c))
		}
	default:
		return nil, fmt.Errorf("unknown pointwise op %q", k.kind)
	}
	return o.Tensor(out, in[0].Shape()...), nil
}

// add is the elementwise sum of two same-shaped tensors (the residual
// connection), an op of its own so its output is recycled like the rest.
type add struct{ dims int }

func (k add) Name() string   { return "add" }
func (k add) String() string { return fmt.Sprintf("Add{dims=%d}", k.dims) }
func (k add) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil), ops.T(k.dims, nil)}
}
func (k add) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) {
		return nil, fmt.Errorf("%v and %v differ", in[0], in[1])
	}
	return in[0].Clone(), nil
}
func (k add) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	a, b, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(a))
	for i, v := range a {
		out[i] = v + b[i]
	}
	return o.Tensor(out, in[0].Shape()...), nil
}

// headRange copies heads [from, from+count) of x [T, H, Dh] into [T,
// count, Dh]: q, k and v out of a fused projection.
type headRange struct{ from, count int }

func (k headRange) Name() string { return "head range" }
func (k headRange) String() string {
	return fmt.Sprintf("HeadRange{%d,%d}", k.from, k.count)
}
func (k headRange) Signature() []hm.Type { return []hm.Type{ops.T(3, nil), ops.T(3, nil)} }
func (k headRange) Shape(in []tensor.Shape) (tensor.Shape, error) {
	x := in[0]
	if len(x) != 3 || k.from < 0 || k.count <= 0 || k.from+k.count > x[1] {
		return nil, fmt.Errorf("heads %d..%d of %v", k.from, k.from+k.count-1, x)
	}
	return tensor.Shape{x[0], k.count, x[2]}, nil
}
func (k headRange) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	s := in[0].Shape()
	T, H, Dh := s[0], s[1], s[2]
	out := o.Float32s(T * k.count * Dh)
	for t := 0; t < T; t++ {
		copy(out[t*k.count*Dh:(t+1)*k.count*Dh], x[(t*H+k.from)*Dh:(t*H+k.from+k.count)*Dh])
	}
	return o.Tensor(out, T, k.count, Dh), nil
}

// headRows reorders the last axis of x, in groups of hd values (one
// head), from llama.cpp's order of a llama checkpoint's Q and K rows to
// Hugging Face's: out[i] = x[2i] and out[hd/2+i] = x[2i+1] for i < hd/2
// (graphs.Param.PermutedHeads); inverse goes back.
type headRows struct {
	hd, dims int
	inverse  bool
}

func (k headRows) Name() string { return "head rows" }
func (k headRows) String() string {
	return fmt.Sprintf("HeadRows{hd=%d,dims=%d,inverse=%v}", k.hd, k.dims, k.inverse)
}
func (k headRows) Signature() []hm.Type { return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil)} }
func (k headRows) Shape(in []tensor.Shape) (tensor.Shape, error) {
	x := in[0]
	if k.hd < 2 || k.hd%2 != 0 || len(x) == 0 || x[len(x)-1]%k.hd != 0 {
		return nil, fmt.Errorf("%v in heads of %d", x, k.hd)
	}
	return x.Clone(), nil
}
func (k headRows) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(x))
	half := k.hd / 2
	for g := 0; g+k.hd <= len(x); g += k.hd {
		src, dst := x[g:g+k.hd], out[g:g+k.hd]
		for i := 0; i < half; i++ {
			if k.inverse {
				dst[2*i], dst[2*i+1] = src[i], src[half+i]
			} else {
				dst[i], dst[half+i] = src[2*i], src[2*i+1]
			}
		}
	}
	return o.Tensor(out, in[0].Shape()...), nil
}
