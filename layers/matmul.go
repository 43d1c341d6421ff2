package layers

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// matmulT computes y = x·Wᵀ (+ b) for x [T, in] and a weight W [out, in]
// in PyTorch's layout, stored as F32, BF16 or F16. The kernel is picked by
// the weight's stored type; model code never sees it.
type matmulT struct {
	dtype graphs.DType
	bias  bool
	name  string // the weight's name, for errors and graph dumps
	heads int    // > 0: the output is split into heads, [T, heads, out/heads]
}

func (k matmulT) Name() string { return "matmul " + k.name }
func (k matmulT) String() string {
	return fmt.Sprintf("MatMulT{%s,%s,bias=%v,heads=%d}", k.name, k.dtype, k.bias, k.heads)
}
func (k matmulT) Signature() []hm.Type {
	sig := []hm.Type{ops.T(2, nil), ops.T(2, k.dtype.Storage())}
	if k.bias {
		sig = append(sig, ops.T(1, nil))
	}
	if k.heads > 0 {
		return append(sig, ops.T(3, nil))
	}
	return append(sig, ops.T(2, nil))
}
func (k matmulT) Shape(in []tensor.Shape) (tensor.Shape, error) {
	x, w := in[0], in[1]
	if len(x) != 2 || len(w) != 2 || x[1] != w[1] {
		return nil, fmt.Errorf("x %v does not fit a weight [out, in] %v", x, w)
	}
	if k.bias && (len(in[2]) != 1 || in[2][0] != w[0]) {
		return nil, fmt.Errorf("bias %v does not fit a weight %v", in[2], w)
	}
	if k.heads > 0 {
		if w[0]%k.heads != 0 {
			return nil, fmt.Errorf("%d outputs do not split into %d heads", w[0], k.heads)
		}
		return tensor.Shape{x[0], k.heads, w[0] / k.heads}, nil
	}
	return tensor.Shape{x[0], w[0]}, nil
}
func (k matmulT) CPU(o ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	s := in[1].Shape()
	out, inDim := s[0], s[1]
	T := len(x) / inDim
	w, err := weightData(in[1], k.dtype)
	if err != nil {
		return nil, err
	}
	y := o.Float32s(T * out)
	mulT(y, x, T, w, out, inDim)
	if k.bias {
		b, err := ops.Float32s(in[2])
		if err != nil {
			return nil, err
		}
		for t := 0; t < T; t++ {
			row := y[t*out : (t+1)*out]
			for j, v := range b {
				row[j] += v
			}
		}
	}
	if k.heads > 0 {
		return ops.NewF32(y, T, k.heads, out/k.heads), nil
	}
	return ops.NewF32(y, T, out), nil
}

// weight is a matrix [rows, cols] in its stored type: f32 or 16-bit
// storage of the given dtype.
type weight struct {
	dtype graphs.DType
	f32   []float32
	u16   []uint16
}

func weightData(v G.Value, dtype graphs.DType) (weight, error) {
	w := weight{dtype: dtype}
	var err error
	if dtype == graphs.F32 {
		w.f32, err = ops.Float32s(v)
	} else {
		w.u16, err = ops.Uint16s(v)
	}
	return w, err
}

// row widens row r of width cols into dst (or returns the row itself for
// F32 storage).
func (w weight) row(dst []float32, r, cols int) []float32 {
	if w.dtype == graphs.F32 {
		return w.f32[r*cols : (r+1)*cols]
	}
	graphs.Widen(dst[:cols], w.u16[r*cols:(r+1)*cols], w.dtype)
	return dst[:cols]
}

// block returns rows [r0, r1) as float32 [r1-r0, cols], widening 16-bit
// storage into buf.
func (w weight) block(buf []float32, r0, r1, cols int) []float32 {
	if w.dtype == graphs.F32 {
		return w.f32[r0*cols : r1*cols]
	}
	graphs.Widen(buf[:(r1-r0)*cols], w.u16[r0*cols:r1*cols], w.dtype)
	return buf[:(r1-r0)*cols]
}

// mulT computes y [T, out] = x [T, in] · wᵀ through BLAS (blas32, the
// implementation Gorgonia uses), splitting the weight's rows into blocks
// spread over the CPUs: one Sgemv per block for a decode row, one Sgemm
// with a transposed operand per block for a prefill chunk. F32 blocks are
// multiplied where they lie; 16-bit blocks are first widened into a
// per-worker scratch buffer (exact, so results equal the F32 path on the
// widened values).
func mulT(y, x []float32, T int, w weight, out, in int) {
	// Blocks of about 64k values: big enough for BLAS, small enough for L2.
	rowsPer := max(1, min(out, 65536/in))
	blocks := (out + rowsPer - 1) / rowsPer
	workers := min(runtime.GOMAXPROCS(0), blocks)
	if workers == 1 {
		mulBlocks(y, x, T, w, out, in, rowsPer, 0, 1, blocks)
		return
	}
	var wg sync.WaitGroup
	for wk := 0; wk < workers; wk++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mulBlocks(y, x, T, w, out, in, rowsPer, wk, workers, blocks)
		}()
	}
	wg.Wait()
}

// mulBlocks multiplies blocks first, first+step, ... of rowsPer weight rows.
func mulBlocks(y, x []float32, T int, w weight, out, in, rowsPer, first, step, blocks int) {
	var buf []float32
	if w.dtype != graphs.F32 {
		p := scratch.Get().(*[]float32)
		defer scratch.Put(p)
		if cap(*p) < rowsPer*in {
			*p = make([]float32, rowsPer*in)
		}
		buf = (*p)[:rowsPer*in]
	}
	for b := first; b < blocks; b += step {
		r0 := b * rowsPer
		r1 := min(out, r0+rowsPer)
		gemmT(y, x, T, w.block(buf, r0, r1, in), r0, r1-r0, out, in)
	}
}

// scratch holds the widening buffers of 16-bit blocks, so that a step
// allocates none.
var scratch = sync.Pool{New: func() any { return new([]float32) }}

// gemmT writes y[:, c0:c0+n] = x [T, in] · blockᵀ for block [n, in]; y has
// ld columns.
func gemmT(y, x []float32, T int, block []float32, c0, n, ld, in int) {
	W := blas32.General{Rows: n, Cols: in, Stride: in, Data: block}
	if T == 1 {
		blas32.Gemv(blas.NoTrans, 1, W, blas32.Vector{N: in, Inc: 1, Data: x}, 0, blas32.Vector{N: n, Inc: 1, Data: y[c0:]})
		return
	}
	X := blas32.General{Rows: T, Cols: in, Stride: in, Data: x}
	Y := blas32.General{Rows: T, Cols: n, Stride: ld, Data: y[c0:]}
	blas32.Gemm(blas.NoTrans, blas.Trans, 1, X, W, 0, Y)
}

// embeddingLookup gathers rows of a table [V, D] (any stored type) by ids.
type embeddingLookup struct {
	dtype graphs.DType
	name  string
}

func (k embeddingLookup) Name() string { return "embedding " + k.name }
func (k embeddingLookup) String() string {
	return fmt.Sprintf("Embedding{%s,%s}", k.name, k.dtype)
}
func (k embeddingLookup) Signature() []hm.Type {
	return []hm.Type{ops.T(2, k.dtype.Storage()), ops.T(1, tensor.Int), ops.T(2, tensor.Float32)}
}
func (k embeddingLookup) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) != 2 || len(in[1]) != 1 {
		return nil, fmt.Errorf("table %v and ids %v: want [V, D] and [T]", in[0], in[1])
	}
	return tensor.Shape{in[1][0], in[0][1]}, nil
}
func (k embeddingLookup) CPU(o ops.Out, in []G.Value) (G.Value, error) {
	w, err := weightData(in[0], k.dtype)
	if err != nil {
		return nil, err
	}
	ids, err := ops.Ints(in[1])
	if err != nil {
		return nil, err
	}
	V, D := in[0].Shape()[0], in[0].Shape()[1]
	out := o.Float32s(len(ids) * D)
	for t, id := range ids {
		if id < 0 || id >= V {
			return nil, fmt.Errorf("token %d at row %d is outside the vocabulary [0, %d)", id, t, V)
		}
		dst := out[t*D : (t+1)*D]
		if r := w.row(dst, id, D); &r[0] != &dst[0] {
			copy(dst, r)
		}
	}
	return ops.NewF32(out, len(ids), D), nil
}
