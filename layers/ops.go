package layers

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The custom ops below fuse what Gorgonia v0.9.18 would otherwise spread
// over many nodes, each allocating its output on every run. They exist for
// speed and, for attention, to read only the filled part of a preallocated
// KV cache, which no stock op can do with static shapes. Each one is checked
// against a plain-Go reference in ops_test.go.

// opBase supplies the bookkeeping methods every op shares. An op's String
// must spell out every parameter: Gorgonia hash-conses nodes by op hash and
// children, so two ops that differ only in a parameter must hash apart.
type opBase struct{}

func (opBase) CallsExtern() bool     { return false }
func (opBase) ReturnsPtr() bool      { return false }
func (opBase) OverwritesInput() int  { return -1 }
func writeHash(h hash.Hash, op G.Op) { fmt.Fprint(h, op.String()) }
func hashcode(op G.Op) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

func tt(dims int, of hm.Type) hm.Type { return G.TensorType{Dims: dims, Of: of} }

// dense returns a value as a contiguous *tensor.Dense.
func dense(v G.Value) (*tensor.Dense, error) {
	d, ok := v.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("expected *tensor.Dense, got %T", v)
	}
	if d.IsView() {
		d = d.Materialize().(*tensor.Dense)
	}
	return d, nil
}

func f32s(v G.Value) ([]float32, error) {
	d, err := dense(v)
	if err != nil {
		return nil, err
	}
	s, ok := d.Data().([]float32)
	if !ok {
		return nil, fmt.Errorf("expected float32 data, got %T", d.Data())
	}
	return s, nil
}

func ints(v G.Value) ([]int, error) {
	d, err := dense(v)
	if err != nil {
		return nil, err
	}
	s, ok := d.Data().([]int)
	if !ok {
		return nil, fmt.Errorf("expected int data, got %T", d.Data())
	}
	return s, nil
}

func shapeOf(ds G.DimSizer) (tensor.Shape, error) {
	s, ok := ds.(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("expected a shape, got %T", ds)
	}
	return s, nil
}

// ---------------------------------------------------------------------------

// rmsNormOp normalises each row of x (the last axis) by its root mean
// square, then scales by (offset + w): offset is 0 for Llama/Qwen and 1 for
// Gemma, whose stored weights are offsets around zero. The mean is
// accumulated in float64; HF accumulates in float32, and the difference is
// far below a float32 ulp of the result.
type rmsNormOp struct {
	opBase
	eps    float32
	offset float32
	dims   int
}

func (op rmsNormOp) Arity() int { return 2 }
func (op rmsNormOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(op.dims, a), tt(1, a), tt(op.dims, a))
}
func (op rmsNormOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(in[0])
	if err != nil {
		return nil, err
	}
	return s.Clone(), nil
}
func (op rmsNormOp) String() string {
	return fmt.Sprintf("RMSNorm{eps=%g,offset=%g,dims=%d}", op.eps, op.offset, op.dims)
}
func (op rmsNormOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op rmsNormOp) Hashcode() uint32      { return hashcode(op) }
func (op rmsNormOp) Do(in ...G.Value) (G.Value, error) {
	x, err := f32s(in[0])
	if err != nil {
		return nil, err
	}
	w, err := f32s(in[1])
	if err != nil {
		return nil, err
	}
	d := len(w)
	if d == 0 || len(x)%d != 0 {
		return nil, fmt.Errorf("RMSNorm: %d inputs do not split into rows of %d", len(x), d)
	}
	out := make([]float32, len(x))
	rmsNorm(out, x, w, op.eps, op.offset)
	return tensor.New(tensor.WithShape(in[0].Shape().Clone()...), tensor.WithBacking(out)), nil
}

func rmsNorm(out, x, w []float32, eps, offset float32) {
	d := len(w)
	for r := 0; r < len(x); r += d {
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

// ---------------------------------------------------------------------------

// ropeOp rotates x [T, H, Dh] in the NeoX "rotate half" form: dimension i
// pairs with i + Dh/2. Row t sits at position meta[0] + t. Angles are
// float32(position) * invFreq[i] rounded to float32, and cos/sin are taken
// of that float32 angle, as HF computes them in float32.
type ropeOp struct {
	opBase
	invFreq []float32
	id      string // names the frequency table in hashes and graph dumps
}

func (op ropeOp) Arity() int { return 2 }
func (op ropeOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(3, a), tt(1, tensor.Int), tt(3, a))
}
func (op ropeOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := shapeOf(in[0])
	if err != nil {
		return nil, err
	}
	if len(s) != 3 || s[2] != 2*len(op.invFreq) {
		return nil, fmt.Errorf("RoPE: want x [T, H, %d], got %v", 2*len(op.invFreq), s)
	}
	return s.Clone(), nil
}
func (op ropeOp) String() string        { return "RoPE{" + op.id + "}" }
func (op ropeOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op ropeOp) Hashcode() uint32      { return hashcode(op) }
func (op ropeOp) Do(in ...G.Value) (G.Value, error) {
	x, err := f32s(in[0])
	if err != nil {
		return nil, err
	}
	meta, err := ints(in[1])
	if err != nil {
		return nil, err
	}
	s := in[0].Shape()
	out := make([]float32, len(x))
	rope(out, x, s[0], s[1], op.invFreq, meta[0])
	return tensor.New(tensor.WithShape(s.Clone()...), tensor.WithBacking(out)), nil
}

func rope(out, x []float32, T, H int, invFreq []float32, pos0 int) {
	half := len(invFreq)
	dh := 2 * half
	cos := make([]float32, half)
	sin := make([]float32, half)
	for t := 0; t < T; t++ {
		p := float32(pos0 + t)
		for i, f := range invFreq {
			a := float64(p * f)
			cos[i] = float32(math.Cos(a))
			sin[i] = float32(math.Sin(a))
		}
		for h := 0; h < H; h++ {
			off := (t*H + h) * dh
			xr, or := x[off:off+dh], out[off:off+dh]
			for i := 0; i < half; i++ {
				x1, x2 := xr[i], xr[i+half]
				or[i] = x1*cos[i] - x2*sin[i]
				or[i+half] = x2*cos[i] + x1*sin[i]
			}
		}
	}
}

// ---------------------------------------------------------------------------

// kvWriteOp copies the first meta[1] rows of x [T, Hkv, Dh] into the cache
// [Hkv, C, Dh] at rows meta[0]..., in place, and returns the cache. Padded
// rows past meta[1] are never written, so a bucketed prefill leaves no
// garbage behind.
type kvWriteOp struct {
	opBase
	name string
}

func (op kvWriteOp) Arity() int { return 3 }
func (op kvWriteOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(3, a), tt(3, a), tt(1, tensor.Int), tt(3, a))
}
func (op kvWriteOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	c, err := shapeOf(in[0])
	if err != nil {
		return nil, err
	}
	x, err := shapeOf(in[1])
	if err != nil {
		return nil, err
	}
	if len(c) != 3 || len(x) != 3 || c[0] != x[1] || c[2] != x[2] {
		return nil, fmt.Errorf("KVWrite %s: cache %v does not fit rows %v", op.name, c, x)
	}
	return c.Clone(), nil
}
func (op kvWriteOp) ReturnsPtr() bool      { return true }
func (op kvWriteOp) OverwritesInput() int  { return 0 }
func (op kvWriteOp) String() string        { return "KVWrite{" + op.name + "}" }
func (op kvWriteOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op kvWriteOp) Hashcode() uint32      { return hashcode(op) }
func (op kvWriteOp) Do(in ...G.Value) (G.Value, error) {
	cd, ok := in[0].(*tensor.Dense)
	if !ok || cd.IsView() {
		return nil, fmt.Errorf("KVWrite %s: cache must be a contiguous *tensor.Dense", op.name)
	}
	cache := cd.Data().([]float32)
	x, err := f32s(in[1])
	if err != nil {
		return nil, err
	}
	meta, err := ints(in[2])
	if err != nil {
		return nil, err
	}
	cs, xs := cd.Shape(), in[1].Shape()
	hkv, capacity, dh := cs[0], cs[1], cs[2]
	pos, n := meta[0], meta[1]
	if pos < 0 || n < 0 || n > xs[0] || pos+n > capacity {
		return nil, fmt.Errorf("KVWrite %s: rows %d..%d do not fit a cache of %d positions", op.name, pos, pos+n, capacity)
	}
	for t := 0; t < n; t++ {
		for g := 0; g < hkv; g++ {
			copy(cache[(g*capacity+pos+t)*dh:][:dh], x[(t*hkv+g)*dh:][:dh])
		}
	}
	return cd, nil
}

// ---------------------------------------------------------------------------

// gatedActOp computes act(gate) * up elementwise: SwiGLU (silu) for
// Llama/Qwen, GeGLU with the tanh GELU for Gemma.
type gatedActOp struct {
	opBase
	act  string // "silu" or "gelu_pytorch_tanh"
	dims int
}

func (op gatedActOp) Arity() int { return 2 }
func (op gatedActOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(op.dims, a), tt(op.dims, a), tt(op.dims, a))
}
func (op gatedActOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	a, err := shapeOf(in[0])
	if err != nil {
		return nil, err
	}
	b, err := shapeOf(in[1])
	if err != nil {
		return nil, err
	}
	if !a.Eq(b) {
		return nil, fmt.Errorf("%s: gate %v and up %v differ", op, a, b)
	}
	return a.Clone(), nil
}
func (op gatedActOp) String() string        { return fmt.Sprintf("GatedAct{%s,dims=%d}", op.act, op.dims) }
func (op gatedActOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op gatedActOp) Hashcode() uint32      { return hashcode(op) }
func (op gatedActOp) Do(in ...G.Value) (G.Value, error) {
	g, err := f32s(in[0])
	if err != nil {
		return nil, err
	}
	u, err := f32s(in[1])
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(g))
	act, err := activation(op.act)
	if err != nil {
		return nil, err
	}
	for i, v := range g {
		out[i] = act(v) * u[i]
	}
	return tensor.New(tensor.WithShape(in[0].Shape().Clone()...), tensor.WithBacking(out)), nil
}

func activation(name string) (func(float32) float32, error) {
	switch name {
	case "silu":
		return silu, nil
	case "gelu_pytorch_tanh":
		return geluTanh, nil
	}
	return nil, fmt.Errorf("unsupported activation %q (supported: silu, gelu_pytorch_tanh)", name)
}

func silu(x float32) float32 { return x * float32(1/(1+math.Exp(-float64(x)))) }

func geluTanh(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
}
