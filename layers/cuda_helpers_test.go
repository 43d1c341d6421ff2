package layers

import (
	"fmt"
	"math"
	"math/rand/v2"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/quant"
)

// Helpers of the CUDA tests: weights in every stored type, shape-only
// values for the host checks at real models' sizes, and the comparisons.

// allTypes are the stored types the device products take.
var allTypes = []graphs.DType{graphs.F32, graphs.BF16, graphs.F16, graphs.Q8_0, graphs.Q4_0, graphs.Q5_0, graphs.Q4_1, graphs.Q5_1, graphs.IQ4_NL,
	graphs.Q2_K, graphs.Q3_K, graphs.Q4_K, graphs.Q5_K, graphs.Q6_K, graphs.IQ4_XS}

// fits says whether rows of cols values can be stored as d.
func fits(d graphs.DType, cols int) bool {
	f, ok := d.Quant()
	return !ok || cols%f.BlockSize() == 0
}

// storedWeight makes a random weight of logical shape [lead..., cols]
// (values of about scale) in its stored type, and the values it holds,
// widened or dequantized.
func storedWeight(r *rand.Rand, d graphs.DType, scale float64, lead []int, cols int) (*tensor.Dense, []float32) {
	rows := 1
	for _, n := range lead {
		rows *= n
	}
	vals := randVals(r, rows*cols, scale)
	shape := append(append([]int(nil), lead...), cols)
	switch d {
	case graphs.F32:
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals)), vals
	case graphs.BF16, graphs.F16:
		bits, w := stored(vals, d)
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(bits)), w
	}
	f, _ := d.Quant()
	rb := cols / f.BlockSize() * f.BlockBytes()
	raw := make([]byte, rows*rb)
	w := make([]float32, rows*cols)
	for i := 0; i < rows; i++ {
		quant.QuantizeRow(f, vals[i*cols:(i+1)*cols], raw[i*rb:(i+1)*rb])
		quant.DequantizeRow(f, raw[i*rb:(i+1)*rb], w[i*cols:(i+1)*cols])
	}
	shape[len(shape)-1] = rb
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(raw)), w
}

// shapeOnly is a value with a shape and a type and no data: the host
// checks of the device calls read nothing else, so they run at the real
// models' sizes (a 151936-row head) without allocating them.
type shapeOnly struct {
	shape tensor.Shape
	dt    tensor.Dtype
}

func (v shapeOnly) Shape() tensor.Shape               { return v.shape }
func (v shapeOnly) Size() int                         { return v.shape.TotalSize() }
func (v shapeOnly) Data() any                         { return nil }
func (v shapeOnly) Dtype() tensor.Dtype               { return v.dt }
func (v shapeOnly) Uintptr() uintptr                  { return 0 }
func (v shapeOnly) MemSize() uintptr                  { return 0 }
func (v shapeOnly) Format(s fmt.State, c rune)        { fmt.Fprintf(s, "shapeOnly%v", v.shape) }
func shaped(dt tensor.Dtype, shape ...int) G.Value    { return shapeOnly{tensor.Shape(shape), dt} }
func f32s(shape ...int) G.Value                       { return shaped(tensor.Float32, shape...) }
func weightOf(d graphs.DType, rows, cols int) G.Value { return stackOf(d, nil, rows, cols) }
func stackOf(d graphs.DType, lead []int, rows, cols int) G.Value {
	s, err := d.StoredShape(append(append([]int(nil), lead...), rows, cols))
	if err != nil {
		panic(err)
	}
	return shaped(d.Storage(), s...)
}

// absProducts is Σ_k |x[t,k]·w[n,k]| for every output, the scale that
// bounds the float32 differences of two summation orders (computed in
// float32 by the CPU's product of |x| and |w|).
func absProducts(x []float32, T, K int, w []float32, N int) []float64 {
	ax, aw := make([]float32, len(x)), make([]float32, len(w))
	for i, v := range x {
		ax[i] = float32(math.Abs(float64(v)))
	}
	for i, v := range w {
		aw[i] = float32(math.Abs(float64(v)))
	}
	y := make([]float32, T*N)
	mulT(y, ax, T, weight{dtype: graphs.F32, f32: aw, rows: N, cols: K}, N, K)
	out := make([]float64, T*N)
	for i, v := range y {
		out[i] = float64(v)
	}
	return out
}

// closeTo reports the first value of got that differs from want by more
// than tol·scale[i] (scale nil: tol·(|want| + the rms of want)).
func closeTo(got, want []float32, scale []float64, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	var rms float64
	if scale == nil {
		for _, v := range want {
			rms += float64(v) * float64(v)
		}
		rms = math.Sqrt(rms / float64(max(len(want), 1)))
	}
	for i := range got {
		s := rms + math.Abs(float64(want[i]))
		if scale != nil {
			s = scale[i]
		}
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= tol*s) {
			return fmt.Errorf("value %d: %g, want %g (diff %.3g > %.3g)", i, got[i], want[i], d, tol*s)
		}
	}
	return nil
}
