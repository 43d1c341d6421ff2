package layers

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// attentionOp is causal grouped-query attention over a preallocated KV
// cache. Inputs: q [T, Hq, Dh], k and v caches [Hkv, C, Dh] (already holding
// this step's rows, see kvWriteOp) and meta = {position of row 0, number of
// real rows n}. Query row t < n at position p = meta[0]+t attends to keys
// lo..p, where lo = 0 for full attention and p-window+1 for a sliding
// window; rows t >= n are padding and come out zero. Only keys up to the
// last real position are read, so a step costs what the context holds, not
// what the cache could hold. Query head h reads kv head h / (Hq/Hkv), HF's
// repeat_interleave mapping.
//
// Scores and weighted sums go through BLAS (blas32, the same implementation
// Gorgonia uses); the softmax runs in float32 output with float64 sums.
type attentionOp struct {
	opBase
	name   string
	scale  float32
	window int // 0: full causal attention
}

func (op attentionOp) Arity() int { return 4 }
func (op attentionOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(3, a), tt(3, a), tt(3, a), tt(1, tensor.Int), tt(2, a))
}
func (op attentionOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	q, err := shapeOf(in[0])
	if err != nil {
		return nil, err
	}
	k, err := shapeOf(in[1])
	if err != nil {
		return nil, err
	}
	if len(q) != 3 || len(k) != 3 || q[2] != k[2] || k[0] == 0 || q[1]%k[0] != 0 {
		return nil, fmt.Errorf("attention %s: queries %v do not fit cache %v", op.name, q, k)
	}
	return tensor.Shape{q[0], q[1] * q[2]}, nil
}
func (op attentionOp) String() string {
	return fmt.Sprintf("Attention{%s,scale=%g,window=%d}", op.name, op.scale, op.window)
}
func (op attentionOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op attentionOp) Hashcode() uint32      { return hashcode(op) }
func (op attentionOp) Do(in ...G.Value) (G.Value, error) {
	q, err := f32s(in[0])
	if err != nil {
		return nil, err
	}
	k, err := f32s(in[1])
	if err != nil {
		return nil, err
	}
	v, err := f32s(in[2])
	if err != nil {
		return nil, err
	}
	meta, err := ints(in[3])
	if err != nil {
		return nil, err
	}
	qs, ks := in[0].Shape(), in[1].Shape()
	a := attnShape{T: qs[0], Hq: qs[1], Dh: qs[2], Hkv: ks[0], C: ks[1]}
	pos, n := meta[0], meta[1]
	if pos < 0 || n < 0 || n > a.T || pos+n > a.C {
		return nil, fmt.Errorf("attention %s: rows %d..%d do not fit a cache of %d positions", op.name, pos, pos+n, a.C)
	}
	out := make([]float32, a.T*a.Hq*a.Dh)
	attend(out, q, k, v, a, pos, n, op.scale, op.window)
	return tensor.New(tensor.WithShape(a.T, a.Hq*a.Dh), tensor.WithBacking(out)), nil
}

type attnShape struct{ T, Hq, Dh, Hkv, C int }

func attend(out, q, k, v []float32, a attnShape, pos, n int, scale float32, window int) {
	if n == 0 {
		return
	}
	rep := a.Hq / a.Hkv
	last := pos + n // keys [0, last) are filled
	lo0 := 0
	if window > 0 {
		lo0 = max(0, pos-window+1)
	}
	width := last - lo0
	scores := make([]float32, n*width)
	qStride := a.Hq * a.Dh
	for h := 0; h < a.Hq; h++ {
		g := h / rep
		K := blas32.General{Rows: width, Cols: a.Dh, Stride: a.Dh, Data: k[(g*a.C+lo0)*a.Dh : (g*a.C+last)*a.Dh]}
		V := blas32.General{Rows: width, Cols: a.Dh, Stride: a.Dh, Data: v[(g*a.C+lo0)*a.Dh : (g*a.C+last)*a.Dh]}
		if n == 1 {
			// Decode: matrix-vector products (Sgemv) are several times
			// faster than one-row Sgemm.
			blas32.Gemv(blas.NoTrans, scale, K, blas32.Vector{N: a.Dh, Inc: 1, Data: q[h*a.Dh : h*a.Dh+a.Dh]}, 0, blas32.Vector{N: width, Inc: 1, Data: scores})
		} else {
			Q := blas32.General{Rows: n, Cols: a.Dh, Stride: qStride, Data: q[h*a.Dh:]}
			blas32.Gemm(blas.NoTrans, blas.Trans, scale, Q, K, 0, blas32.General{Rows: n, Cols: width, Stride: width, Data: scores})
		}
		for t := 0; t < n; t++ {
			p := pos + t
			lo := 0
			if window > 0 {
				lo = max(0, p-window+1)
			}
			softmaxRange(scores[t*width:(t+1)*width], lo-lo0, p-lo0+1)
		}
		if n == 1 {
			blas32.Gemv(blas.Trans, 1, V, blas32.Vector{N: width, Inc: 1, Data: scores}, 0, blas32.Vector{N: a.Dh, Inc: 1, Data: out[h*a.Dh : h*a.Dh+a.Dh]})
		} else {
			O := blas32.General{Rows: n, Cols: a.Dh, Stride: qStride, Data: out[h*a.Dh:]}
			blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, blas32.General{Rows: n, Cols: width, Stride: width, Data: scores}, V, 0, O)
		}
	}
}

// softmaxRange replaces row[lo:hi] by its softmax and zeroes the rest, which
// is what an additive -inf mask outside [lo, hi) gives.
func softmaxRange(row []float32, lo, hi int) {
	m := float32(math.Inf(-1))
	for _, x := range row[lo:hi] {
		m = max(m, x)
	}
	var sum float64
	for j := lo; j < hi; j++ {
		e := math.Exp(float64(row[j] - m))
		row[j] = float32(e)
		sum += e
	}
	inv := 1 / sum
	for j := range row {
		if j < lo || j >= hi {
			row[j] = 0
		} else {
			row[j] = float32(float64(row[j]) * inv)
		}
	}
}
