package layers

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/ops"
)

// matmulT computes y = x·Wᵀ (+ b) for x [T, in] and a weight W [out, in]
// in PyTorch's layout, stored as F32, BF16, F16 or quantized blocks. The
// kernel is picked by the weight's stored type; model code never sees it.
type matmulT struct {
	dtype graphs.DType
	bias  bool
	name  string // the weight's name, for errors and graph dumps
	heads int    // > 0: the output is split into heads, [T, heads, out/heads]
	fast  bool   // llama.cpp's arithmetic (graphs.Options.Fast)
	// pack is the weight's packing for decode (packForDecode), or nil.
	pack *simd.Packing
	// frozen: a training step takes no gradient for the weight (a base
	// under a LoRA adapter), so its backward builds none.
	frozen bool
}

func (k matmulT) Name() string { return "matmul " + k.name }
func (k matmulT) String() string {
	return fmt.Sprintf("MatMulT{%s,%s,bias=%v,heads=%d,fast=%v,frozen=%v}", k.name, k.dtype, k.bias, k.heads, k.fast, k.frozen)
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
	if len(x) != 2 || len(w) != 2 || x[1] != logicalCols(k.dtype, w[1]) {
		return nil, fmt.Errorf("x %v does not fit a %s weight [out, in] stored as %v", x, k.dtype, w)
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
func (k matmulT) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	s := in[1].Shape()
	out, inDim := s[0], logicalCols(k.dtype, s[1])
	T := len(x) / inDim
	w, err := weightData(in[1], k.dtype)
	if err != nil {
		return nil, err
	}
	w.pack = k.pack
	y := o.Float32s(T * out)
	mulTMode(k.fast, y, x, T, w, out, inDim)
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
		return o.Tensor(y, T, k.heads, out/k.heads), nil
	}
	return o.Tensor(y, T, out), nil
}

// logicalCols is a weight's values per row from its stored width: the
// bytes of a quantized row hold whole blocks.
func logicalCols(dtype graphs.DType, stored int) int {
	if f, ok := dtype.Quant(); ok {
		return stored / f.BlockBytes() * f.BlockSize()
	}
	return stored
}

// weight is a matrix [rows, cols] in its stored type: f32, 16-bit or
// block-quantized storage of the given dtype.
type weight struct {
	dtype      graphs.DType
	f32        []float32
	u16        []uint16
	u8         []byte
	rows, cols int
	pack       *simd.Packing // its packing for decode, or nil
}

func weightData(v G.Value, dtype graphs.DType) (weight, error) {
	w := weight{dtype: dtype}
	if s := v.Shape(); len(s) == 2 {
		w.rows, w.cols = s[0], logicalCols(dtype, s[1])
	}
	var err error
	switch dtype.Storage() {
	case tensor.Float32:
		w.f32, err = ops.Float32s(v)
	case tensor.Uint16:
		w.u16, err = ops.Uint16s(v)
	default:
		w.u8, err = ops.Bytes(v)
	}
	return w, err
}

// simd is w for the kernels: on its packing when it has one.
func (w weight) simd() simd.Weight {
	return w.stored().On(w.pack, w.rows, w.cols)
}

// stored is w for the kernels as the checkpoint stores it.
func (w weight) stored() simd.Weight {
	switch w.dtype {
	case graphs.F32:
		return simd.Weight{Kind: simd.F32, F32s: w.f32}
	case graphs.BF16:
		return simd.Weight{Kind: simd.BF16, U16s: w.u16}
	case graphs.F16:
		return simd.Weight{Kind: simd.F16, U16s: w.u16}
	}
	f, _ := w.dtype.Quant()
	return simd.Weight{Kind: simd.Quant, Format: f, Bytes: w.u8}
}

// row widens row r of width cols into dst (or returns the row itself for
// F32 storage); a quantized row is dequantized, only that row. A matrix
// packed for decode (a tied head's table) gives its row from the packing.
func (w weight) row(dst []float32, r, cols int) []float32 {
	if w.pack != nil && simd.Row(w.simd(), r, cols, dst) {
		return dst[:cols]
	}
	switch w.dtype {
	case graphs.F32:
		return w.f32[r*cols : (r+1)*cols]
	case graphs.BF16, graphs.F16:
		graphs.Widen(dst[:cols], w.u16[r*cols:(r+1)*cols], w.dtype)
		return dst[:cols]
	}
	f, _ := w.dtype.Quant()
	rb := cols / f.BlockSize() * f.BlockBytes()
	quant.DequantizeRow(f, w.u8[r*rb:(r+1)*rb], dst[:cols])
	return dst[:cols]
}

// cpuPacking is the key of a weight's packing for decode among its
// prepared forms (graphs.Param.Prepare).
const cpuPacking = "cpu-packing"

// packForDecode returns the weight's packing for decode, made when a graph
// first binds it, before any product reads it, so the mapping's pages of
// it are given back before they all become resident: BF16 and F32 by
// simd.PackBF16 and simd.PackF32, 4 bits a weight fewer, losslessly
// (decode reads every weight a token), where AVX-512 has the kernels, or
// on AVX2 with F16 (simd.PackF16) laid out in panels of 16 rows, whose
// products round every row alike whatever their row count; in exact mode,
// the quantized formats with regrouped kernels by simd.PackQuant,
// regrouped by 16 rows (AVX-512 and AVX2). Only weights that lie
// in a file mapping (Param.ReadOnly) are packed, so a packing never goes
// stale. In fast mode, Q4_0, IQ4_NL, Q8_0, Q4_1, Q5_1, IQ4_XS, Q2_K and
// Q3_K are regrouped the same way where fast decode has kernels for them
// (AVX2 and AVX-512, simd.PackQuantFast), and Q4_K where AVX-512 VNNI
// has them; the other quantized weights
// keep the file's layout. A weight has one
// packing, made by the mode that binds it first: the other mode reads it
// too (through rebuilt rows where its kernels do not).
func packForDecode(p *graphs.Param, fast bool) *simd.Packing {
	if p.Data == nil || len(p.Shape) != 2 || !p.ReadOnly {
		return nil
	}
	f := p.Prepare(cpuPacking, func() graphs.Form {
		w, err := weightData(p.Data, p.DType)
		if err != nil {
			return nil
		}
		if pk := packWeight(w, p.Shape[0], p.Shape[1], fast); pk != nil {
			return pk
		}
		return nil // a refusal, kept: no graph tries the weight again
	})
	pk, _ := f.(*simd.Packing)
	return pk
}

// packWeight is packForDecode's packing of a matrix [rows, cols] in
// memory: its storage's packing where the kernels have one, or nil.
func packWeight(w weight, rows, cols int, fast bool) *simd.Packing {
	switch w.dtype {
	case graphs.F32:
		return simd.PackF32(w.f32, rows, cols)
	case graphs.BF16:
		return simd.PackBF16(w.u16, rows, cols)
	case graphs.F16:
		return simd.PackF16(w.u16, rows, cols)
	}
	f, ok := w.dtype.Quant()
	switch {
	case !ok:
		return nil
	case fast:
		return simd.PackQuantFast(w.u8, f, rows, cols)
	}
	return simd.PackQuant(w.u8, f, rows, cols)
}

// Packings lists the packings graphs made of p so far: its own for
// decode, and those of a stack's experts.
func Packings(p *graphs.Param) []*simd.Packing {
	var pks []*simd.Packing
	for _, f := range p.Forms() {
		switch f := f.(type) {
		case *simd.Packing:
			pks = append(pks, f)
		case *expertPacks:
			for _, pk := range f.packs {
				if pk != nil {
					pks = append(pks, pk)
				}
			}
		}
	}
	return pks
}

// packingOf is the packing a graph made of p for decode, or nil.
func packingOf(p *graphs.Param) *simd.Packing {
	if p == nil || !p.ReadOnly {
		return nil
	}
	pk, _ := p.Prepared(cpuPacking).(*simd.Packing)
	return pk
}

// mulT computes y [T, out] = x [T, in] · wᵀ with the SIMD kernels of
// internal/simd (AVX-512 or AVX2, or plain Go), which widen 16-bit weights
// in registers and split the rows over a persistent worker pool.
func mulT(y, x []float32, T int, w weight, out, in int) {
	simd.MulT(y, x, T, w.simd(), out, in)
}

// mulTMode is mulT, or in fast mode llama.cpp's arithmetic (activations
// quantized to 8 bits for quantized weights, rounded to 16 bits for 16-bit
// ones).
func mulTMode(fast bool, y, x []float32, T int, w weight, out, in int) {
	if fast {
		simd.MulTFast(y, x, T, w.simd(), out, in)
		return
	}
	mulT(y, x, T, w, out, in)
}

// embeddingLookup gathers rows of a table [V, D] (any stored type) by ids.
type embeddingLookup struct {
	dtype   graphs.DType
	name    string
	padding bool // negative ids are padding rows: zeros
	// table is the table's parameter, whose packing for decode (a tied
	// head's, made by a graph built later) gives the rows; nil in tests.
	table *graphs.Param
}

func (k embeddingLookup) Name() string { return "embedding " + k.name }
func (k embeddingLookup) String() string {
	return fmt.Sprintf("Embedding{%s,%s,padding=%v}", k.name, k.dtype, k.padding)
}
func (k embeddingLookup) Signature() []hm.Type {
	return []hm.Type{ops.T(2, k.dtype.Storage()), ops.T(1, tensor.Int), ops.T(2, tensor.Float32)}
}
func (k embeddingLookup) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) != 2 || len(in[1]) != 1 {
		return nil, fmt.Errorf("table %v and ids %v: want [V, D] and [T]", in[0], in[1])
	}
	return tensor.Shape{in[1][0], logicalCols(k.dtype, in[0][1])}, nil
}
func (k embeddingLookup) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	w, err := weightData(in[0], k.dtype)
	if err != nil {
		return nil, err
	}
	w.pack = packingOf(k.table)
	ids, err := ops.Ints(in[1])
	if err != nil {
		return nil, err
	}
	V, D := in[0].Shape()[0], logicalCols(k.dtype, in[0].Shape()[1])
	out := o.Float32s(len(ids) * D)
	for t, id := range ids {
		if id < 0 && k.padding {
			continue // out is zeroed
		}
		if id < 0 || id >= V {
			return nil, fmt.Errorf("token %d at row %d is outside the vocabulary [0, %d)", id, t, V)
		}
		dst := out[t*D : (t+1)*D]
		if r := w.row(dst, id, D); &r[0] != &dst[0] {
			copy(dst, r)
		}
	}
	return o.Tensor(out, len(ids), D), nil
}
