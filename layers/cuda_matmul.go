package layers

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
)

// The device side of the products and lookups (cuda/kernels/matmul.cu).
//
// matmulT by the weight's stored type:
//   - F32: cuBLAS's pedantic sgemm (cuda.Gemm, Half 0), then add_bias;
//   - BF16 and F16 in fast mode: x rounded to the weight's type (to_half,
//     into scratch 0), cublasGemmEx with float32 accumulation, add_bias;
//   - BF16 and F16 in exact mode, and the quantized types in both modes:
//     mm_vec_* (T = 1), mm_few_* (T <= fewRows) or mm_tile_* (more rows),
//     which widen or dequantize the weights in registers as the CPU does,
//     accumulate in float32 and add the bias themselves. A quantized weight's fast mode
//     on the device is the exact arithmetic: the CPU's fast mode quantizes
//     the activations to 8 bits (llama.cpp's), which the device does not.

// fewRows is the most rows the warp-per-column kernels take; a program
// of more rows runs the tiled ones.
const fewRows = 8

// mmKernels are a stored type's device kernels.
type mmKernels struct{ vec, few, tile, embed *cuda.Kernel }

var mmByType = map[graphs.DType]mmKernels{
	graphs.F32:    {cuda.MatMulVecF32, cuda.MatMulFewF32, cuda.MatMulTileF32, cuda.EmbedF32},
	graphs.BF16:   {cuda.MatMulVecBF16, cuda.MatMulFewBF16, cuda.MatMulTileBF16, cuda.EmbedBF16},
	graphs.F16:    {cuda.MatMulVecF16, cuda.MatMulFewF16, cuda.MatMulTileF16, cuda.EmbedF16},
	graphs.Q8_0:   {cuda.MatMulVecQ8_0, cuda.MatMulFewQ8_0, cuda.MatMulTileQ8_0, cuda.EmbedQ8_0},
	graphs.Q4_0:   {cuda.MatMulVecQ4_0, cuda.MatMulFewQ4_0, cuda.MatMulTileQ4_0, cuda.EmbedQ4_0},
	graphs.Q5_0:   {cuda.MatMulVecQ5_0, cuda.MatMulFewQ5_0, cuda.MatMulTileQ5_0, cuda.EmbedQ5_0},
	graphs.Q4_K:   {cuda.MatMulVecQ4_K, cuda.MatMulFewQ4_K, cuda.MatMulTileQ4_K, cuda.EmbedQ4_K},
	graphs.Q6_K:   {cuda.MatMulVecQ6_K, cuda.MatMulFewQ6_K, cuda.MatMulTileQ6_K, cuda.EmbedQ6_K},
	graphs.Q4_1:   {cuda.MatMulVecQ4_1, cuda.MatMulFewQ4_1, cuda.MatMulTileQ4_1, cuda.EmbedQ4_1},
	graphs.Q5_1:   {cuda.MatMulVecQ5_1, cuda.MatMulFewQ5_1, cuda.MatMulTileQ5_1, cuda.EmbedQ5_1},
	graphs.IQ4_NL: {cuda.MatMulVecIQ4_NL, cuda.MatMulFewIQ4_NL, cuda.MatMulTileIQ4_NL, cuda.EmbedIQ4_NL},
	graphs.Q2_K:   {cuda.MatMulVecQ2_K, cuda.MatMulFewQ2_K, cuda.MatMulTileQ2_K, cuda.EmbedQ2_K},
	graphs.Q3_K:   {cuda.MatMulVecQ3_K, cuda.MatMulFewQ3_K, cuda.MatMulTileQ3_K, cuda.EmbedQ3_K},
	graphs.Q5_K:   {cuda.MatMulVecQ5_K, cuda.MatMulFewQ5_K, cuda.MatMulTileQ5_K, cuda.EmbedQ5_K},
	graphs.IQ4_XS: {cuda.MatMulVecIQ4_XS, cuda.MatMulFewIQ4_XS, cuda.MatMulTileIQ4_XS, cuda.EmbedIQ4_XS},
}

// deviceTypes lists the stored types with device kernels, for refusals:
// every type graphs stores (F32, BF16, F16 and all of internal/quant's
// GGUF formats) has them.
func deviceTypes() string {
	var names []string
	for d := range mmByType {
		names = append(names, d.String())
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// halfKind is the kind argument of to_half and round_half for a 16-bit
// type.
func halfKind(d graphs.DType) int {
	if d == graphs.BF16 {
		return 1
	}
	return 2
}

// deviceType is the element type a weight of dtype has on the device.
func deviceType(d graphs.DType) cuda.Type {
	switch d {
	case graphs.F32:
		return cuda.F32
	case graphs.BF16, graphs.F16:
		return cuda.U16
	}
	return cuda.Bytes
}

// weightCols checks a device weight's stored row width against dtype
// and returns its values per row.
func weightCols(d graphs.DType, stored int) (int, error) {
	if f, ok := d.Quant(); ok {
		if stored <= 0 || stored%f.BlockBytes() != 0 {
			return 0, fmt.Errorf("a %s row of %d bytes is not whole blocks of %d", d, stored, f.BlockBytes())
		}
		return stored / f.BlockBytes() * f.BlockSize(), nil
	}
	if stored <= 0 {
		return 0, fmt.Errorf("a %s weight with rows of %d values", d, stored)
	}
	return stored, nil
}

// aligned16 checks that device buffers start on 16 bytes, as the
// kernels' vector loads need (the allocator's buffers do).
func aligned16(ptrs ...cuda.Ptr) error {
	for _, p := range ptrs {
		if p%16 != 0 {
			return fmt.Errorf("device buffer %#x is not 16-byte aligned", uint64(p))
		}
	}
	return nil
}

// elementwise is the launch size of a grid-stride kernel over n values.
func elementwise(n int) (cuda.Dim3, cuda.Dim3) {
	return cuda.D1(min(cuda.Blocks(n, 256), 1<<16)), cuda.D1(256)
}

// product is one y[T, N] = x[T, K]·Wᵀ (+ bias) on the device.
type product struct {
	y, x, w, bias cuda.Ptr // bias 0: none
	T, N, K       int
	dtype         graphs.DType
	fast          bool
	scratch       int // the workspace index for fast mode's 16-bit x
	// A MoE's expert products (gather): the weight is a stack of experts
	// experts matrices wstride bytes apart, and expert e's rows are the
	// counts[e] entries list[e·T+i] (T bounds them); an entry r reads x
	// row r/inDiv and writes y row r. list 0: a dense product.
	experts      int
	wstride      int64
	list, counts cuda.Ptr
	inDiv        int
}

// calls returns the launches of the product.
func (p product) calls(ws cuda.Workspace) ([]cuda.Call, error) {
	if p.T <= 0 || p.N <= 0 || p.K <= 0 {
		return nil, fmt.Errorf("a product of [%d, %d]·[%d, %d]ᵀ", p.T, p.K, p.N, p.K)
	}
	if err := aligned16(p.y, p.x, p.w, p.bias); err != nil {
		return nil, err
	}
	if int64(p.T)*int64(p.K) > 1<<31-1 || int64(p.T)*int64(p.N) > 1<<40 {
		return nil, fmt.Errorf("a product of [%d, %d]·[%d, %d]ᵀ is too large for the kernels", p.T, p.K, p.N, p.K)
	}
	ks, ok := mmByType[p.dtype]
	if !ok {
		return nil, fmt.Errorf("no device product for %s weights (the device has %s; run this model on the CPU)", p.dtype, deviceTypes())
	}
	gather := p.list != 0
	var calls []cuda.Call
	switch {
	case gather:
	case p.dtype == graphs.F32:
		calls = append(calls, cuda.Call{Gemm: &cuda.Gemm{Y: p.y, X: p.x, W: p.w, T: p.T, N: p.N, K: p.K}})
		return append(calls, p.biasCalls()...), nil
	case p.fast && (p.dtype == graphs.BF16 || p.dtype == graphs.F16):
		n := p.T * p.K
		xh, err := ws.Scratch(p.scratch, 2*n)
		if err != nil {
			return nil, err
		}
		grid, block := elementwise(n)
		half := cuda.BF16
		if p.dtype == graphs.F16 {
			half = cuda.F16
		}
		calls = append(calls,
			cuda.Call{K: cuda.ToHalf, Grid: grid, Block: block, Args: []any{xh, p.x, int64(n), halfKind(p.dtype)}},
			cuda.Call{Gemm: &cuda.Gemm{Y: p.y, X: xh, W: p.w, T: p.T, N: p.N, K: p.K, Half: half}})
		return append(calls, p.biasCalls()...), nil
	}
	experts, inDiv := 1, 1
	if gather {
		experts, inDiv = p.experts, p.inDiv
		if experts < 1 || experts > 65535 || inDiv < 1 || p.counts == 0 {
			return nil, fmt.Errorf("a gathered product over %d experts (rows / %d)", experts, inDiv)
		}
	}
	args := []any{p.y, p.x, p.w, p.bias, p.T, p.N, p.K, p.wstride, p.list, p.counts, p.T, inDiv}
	if p.T <= fewRows {
		k := ks.few
		if p.T == 1 {
			k = ks.vec
		}
		return append(calls, cuda.Call{K: k, Grid: cuda.Dim3{X: cuda.Blocks(p.N, 8), Y: 1, Z: experts},
			Block: cuda.D1(256), Args: args}), nil
	}
	gy := cuda.Blocks(p.T, 64)
	if gy > 65535 {
		return nil, fmt.Errorf("%d rows are more than the tiled kernel's grid takes", p.T)
	}
	return append(calls, cuda.Call{K: ks.tile, Grid: cuda.Dim3{X: cuda.Blocks(p.N, 64), Y: gy, Z: experts},
		Block: cuda.D1(256), Args: args}), nil
}

// biasCalls adds the bias after a cuBLAS product.
func (p product) biasCalls() []cuda.Call {
	if p.bias == 0 {
		return nil
	}
	n := p.T * p.N
	grid, block := elementwise(n)
	return []cuda.Call{{K: cuda.AddBias, Grid: grid, Block: block, Args: []any{p.y, p.bias, int64(n), p.N}}}
}

// checkTensor checks a device tensor's type and shape.
func checkTensor(what string, t cuda.Tensor, typ cuda.Type, shape ...int) error {
	ok := t.Type == typ && len(t.Shape) == len(shape)
	for i := 0; ok && i < len(shape); i++ {
		ok = shape[i] < 0 || t.Shape[i] == shape[i]
	}
	if !ok {
		return fmt.Errorf("%s is %s %v, want %s %v (-1: any)", what, t.Type, t.Shape, typ, shape)
	}
	if t.Ptr == 0 {
		return fmt.Errorf("%s has no device memory", what)
	}
	return nil
}

// CUDA implements ops.CUDAKernel: y = x·Wᵀ (+ b) for the weight's stored
// type (see product).
func (k matmulT) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if want := 2 + btoi(k.bias); len(in) != want {
		return nil, fmt.Errorf("%d inputs, want %d", len(in), want)
	}
	x, w := in[0], in[1]
	if err := checkTensor("weight", w, deviceType(k.dtype), -1, -1); err != nil {
		return nil, err
	}
	N := w.Shape[0]
	K, err := weightCols(k.dtype, w.Shape[1])
	if err != nil {
		return nil, err
	}
	if err := checkTensor("x", x, cuda.F32, -1, K); err != nil {
		return nil, err
	}
	T := x.Shape[0]
	p := product{y: out.Ptr, x: x.Ptr, w: w.Ptr, T: T, N: N, K: K, dtype: k.dtype, fast: k.fast}
	if k.bias {
		if err := checkTensor("bias", in[2], cuda.F32, N); err != nil {
			return nil, err
		}
		p.bias = in[2].Ptr
	}
	outShape := []int{T, N}
	if k.heads > 0 {
		if N%k.heads != 0 {
			return nil, fmt.Errorf("%d outputs do not split into %d heads", N, k.heads)
		}
		outShape = []int{T, k.heads, N / k.heads}
	}
	if err := checkTensor("output", out, cuda.F32, outShape...); err != nil {
		return nil, err
	}
	if T == 0 {
		return nil, nil
	}
	return p.calls(ws)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CUDA implements ops.CUDAKernel: rows of the table by int32 ids, widened
// or dequantized. An id outside the table (a padding row's -1, or a token
// past the vocabulary, which the CPU refuses) gives a row of zeros: a
// kernel cannot fail a captured step.
func (k embeddingLookup) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%d inputs, want 2", len(in))
	}
	table, ids := in[0], in[1]
	if err := checkTensor("table", table, deviceType(k.dtype), -1, -1); err != nil {
		return nil, err
	}
	D, err := weightCols(k.dtype, table.Shape[1])
	if err != nil {
		return nil, err
	}
	if err := checkTensor("ids", ids, cuda.I32, -1); err != nil {
		return nil, err
	}
	T := ids.Shape[0]
	if err := checkTensor("output", out, cuda.F32, T, D); err != nil {
		return nil, err
	}
	if err := aligned16(table.Ptr, out.Ptr); err != nil {
		return nil, err
	}
	if T == 0 {
		return nil, nil
	}
	ks, ok := mmByType[k.dtype]
	if !ok {
		return nil, fmt.Errorf("no device lookup for a %s table (the device has %s; run this model on the CPU)", k.dtype, deviceTypes())
	}
	return []cuda.Call{{K: ks.embed, Grid: cuda.D1(T), Block: cuda.D1(128),
		Args: []any{out.Ptr, ids.Ptr, table.Ptr, T, table.Shape[0], D}}}, nil
}
