// Command gen writes the SIMD kernels of package simd with avo:
//
//	cd internal/simd/_gen && go run . -out ../kernels_amd64.s -stubs ../kernels_amd64.go -pkg simd
//
// (go generate ./internal/simd runs it.)
//
// main lists every kernel it writes, 183 of them, family by family; each
// family's generator has a file of its own (../README.md maps them to the
// package's files):
//
//   - gen.go: the float kernels, for AVX-512 and AVX2, on F32, BF16 and
//     F16 weights widened in registers: tiles of R×C dot products
//     (prefill), matrix-vector products (decode), attention's weighted
//     rows; and exact mode's dequantizing kernels (Q8_0 and Q4_0 for
//     both, Q4_K, Q6_K and Q5_0 for AVX-512) with the Q4_K and AVX2
//     matrix-vector products.
//   - table.go: exact decode of Q4_0, Q5_0, Q8_0 and Q6_K on AVX-512,
//     by table lookups and a table of halves (GFNI for Q6_K where the
//     CPU has it).
//   - x16.go: exact decode of Q4_0, Q8_0, Q4_K and Q6_K regrouped by 16
//     rows.
//   - coded.go: decode and unpacking of BF16 and F32 matrices packed in
//     12 and 28 bits a weight (AVX-512 VBMI).
//   - fast.go: fast mode's AVX2 integer kernels (llama.cpp's vec_dot).
//   - fastgemm.go: fast mode on AVX-512 VNNI: prefill on repacked rows,
//     decode of Q4_0, Q5_0 and Q6_K, and the activation quantizers.
//   - pack.go: the gather kernels that repack rows for the VNNI prefill.
//   - exp.go: softmax's exp, SiLU, max, float64 scaling, F16 conversion.
//   - gemm.go: broadcast micro-kernels of C = A·B on B in panels of 16
//     columns: prefill attention, and float weights stored as panels.
//   - prefetch.go: the line prefetch of the decode prefetcher.
//
// The operands are contiguous along k: activations [T, in] against
// PyTorch weights [out, in]. The float and exact kernels accumulate in
// float32 lanes, reduced once at the end; fast mode's kernels sum each
// block exactly in integers and then take llama.cpp's float steps. k
// must be a multiple of the vector width or of the block; callers handle
// any tail.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

type isa struct {
	name  string
	lanes int
	vec   func() VecVirtual
	tileR int // x rows of the big tile: what the register file holds
}

type dtype struct {
	name  string
	gotyp string
	size  int
}

// avx512 is the AVX-512 instruction set; the K-quant and Q5_0 kernels
// exist only for it.
var avx512 = isa{"AVX512", 16, ZMM, 4}

// broadcast puts the constant v in every 32-bit lane of a new register.
func broadcast(is isa, v uint32) VecVirtual {
	r := is.vec()
	t := GP32()
	MOVL(U32(v), t)
	if is.lanes == 16 {
		VPBROADCASTD(t, r)
	} else {
		tx := XMM()
		VMOVD(t, tx)
		VPBROADCASTD(tx, r)
	}
	return r
}

// nextBlock advances to the next block of bsize bytes (and of floats
// values of x or dst) and loops back to name_block while nb counts down.
func nextBlock(name string, wp, nb, xp, out GPVirtual, bsize, floats int, dot bool) {
	ADDQ(U32(bsize), wp)
	if dot {
		ADDQ(U32(4*floats), xp)
	} else {
		ADDQ(U32(4*floats), out)
	}
	DECQ(nb)
	JMP(LabelRef(name + "_block"))
}

func main() {
	ConstraintExpr("!purego")
	nibbleConsts()
	tableConsts()
	iq4LevelsConsts()
	q2FieldsConsts()
	q3ValuesConsts()
	iq4LevelsU8Consts()
	fifthBitsConsts()
	codedConsts()
	q6GFNIConsts()
	isas := []isa{avx512, {"AVX2", 8, YMM, 2}}
	dtypes := []dtype{{"F32", "*float32", 4}, {"BF16", "*uint16", 2}, {"F16", "*uint16", 2}}
	for _, is := range isas {
		for _, dt := range dtypes {
			tile(is, dt, is.tileR, 4)
			if is.lanes == 8 {
				// 12 accumulators, 3 rows and a weight vector: all 16
				// YMM registers, and fewer loads per product than 2x4.
				tile(is, dt, 3, 4)
			}
			tile(is, dt, 1, 4)
			gemv(is, dt)
		}
		for _, nacc := range []int{4, 8} {
			weighRows(is, dtypes[0], nacc)
			weighRows(is, dtypes[2], nacc)
		}
		for _, q := range []string{"Q8_0", "Q4_0"} {
			switch {
			case q == "Q4_0" && is.lanes == 16:
				gemvQ4_0Table()
			case q == "Q8_0" && is.lanes == 16:
				gemvQ8_0Halves()
			default:
				quantRows(is, q, true)
			}
			quantRows(is, q, false)
		}
	}
	for _, q := range []string{"Q6_K", "Q4_K"} {
		kquantRows(q, false)
		kquantDequantAVX2(q)
		if q == "Q6_K" {
			gemvQ6_K(false)
			gemvQ6_K(true)
		} else {
			kquantRows(q, true)
		}
	}
	q5Rows()
	q5RowsAVX2()
	gemvX16("Q4_0")
	gemvX16("Q8_0")
	for R := 2; R <= 4; R++ {
		gemmQ80x16(R)
		gemmQ4Kx16(R)
	}
	gemvX16("IQ4_NL")
	gemvIQ4_XSx16()
	gemvQ2_Kx16()
	gemvQ3_Kx16()
	gemvQ5_1x16()
	gemvQ5_0x16()
	for R := 2; R <= 4; R++ {
		gemmQ50x16(R)
	}
	gemvQ5_Kx16()
	gemvQ4_Kx16()
	gemvQ6_Kx16()
	fastPack("Q4_0")
	fastPack("Q5_0")
	fastPack("Q8_0")
	fastPackX16("Q4_0")
	fastPackK("Q4_K")
	fastPackK("Q6_K")
	for _, c := range codings {
		gemvCoded(c)
		for T := 2; T <= codedRowsMax; T++ {
			gemmCoded(c, T)
		}
		unpackCoded(c)
	}
	gemvQ5_0Table()
	for R := 1; R <= 6; R++ {
		gemmF32AVX2(R, 16)
		gemmF32AVX2(R, 8)
	}
	for R := 1; R <= 8; R++ {
		gemmF32AVX512(R)
	}
	for _, dt := range dtypes {
		for R := 1; R <= 6; R++ {
			panelMul(R, 1, dt)
		}
		panelMul(1, 4, dt)
	}
	fastConsts()
	for _, q := range []string{"Q8_0", "Q4_0", "Q5_0"} {
		fastQ8(q)
		fastQ8x4(q)
	}
	scaleWordConsts()
	fastK("Q4_K")
	fastK("Q6_K")
	expShift()
	maxF32()
	scaleF64()
	prefetchLines()
	silu(false)
	silu(true)
	newExpConstsFor(avx2isa) // the constants' tables, before any TEXT uses them
	expShiftAVX2()
	maxAVX2()
	siluAVX2(false)
	siluAVX2(true)
	toF16(false)
	toF16(true)
	fastGemm16(4)
	fastGemm16(1)
	quantQ8Acts()
	fastVNNIConsts()
	quantQ8KActs()
	q8kConsts()
	quantQ8KActsAVX2()
	quantQ8_0ActsAVX2(false)
	quantQ8_0ActsAVX2(true)
	q6kConsts()
	fastQ6KVNNI()
	fastQ4VNNI("Q4_0")
	fastQ4VNNI("Q5_0")
	fastPackX16IQ4XS()
	for _, q := range []string{"Q4_K", "Q6_K", "IQ4_XS"} {
		fastGemmK(q, 2)
		fastGemmK(q, 1)
	}

	fastGemmK("Q6_K", 4)
	q4kPairConsts()
	fastX16Q4K(1, true)
	for _, R := range []int{4, 2, 1} {
		fastX16Q4K(R, false)
	}
	for _, q := range []string{"Q5_0", "Q8_0", "IQ4_NL"} {
		fastX16Q8(q, 1, true)
		for _, R := range []int{4, 2, 1} {
			fastX16Q8(q, R, false)
		}
	}
	// IQ4_NL (fastConsts holds its level table).
	fastQ8("IQ4_NL")
	fastQ8x4("IQ4_NL")
	iq4Consts()
	fastX16Consts()
	gemvX16Consts()
	gemvX16Q40Consts()
	gemvX16IQ4NLConsts()
	iq4nlRows(true)
	iq4nlRows(false)
	lowbitConsts()
	kscalesConsts()
	for _, q := range []string{"Q4_1", "Q5_1", "Q2_K", "Q3_K", "Q5_K", "IQ4_XS"} {
		lowbitDequantAVX2(q)
	}
	fastQ8_1("Q4_1")
	fastQ8_1("Q5_1")
	fastK("Q5_K")
	fastK("IQ4_XS")
	q3kConsts()
	fastK("Q2_K")
	fastK("Q3_K")
	// Exact decode fused with dequantization on AVX2.
	for _, q := range []string{"Q4_1", "Q5_1", "Q2_K", "Q3_K", "Q5_K", "IQ4_XS"} {
		lowbitGemvAVX2(q)
	}
	kquantGemvAVX2("Q4_K")
	kquantGemvAVX2("Q6_K")
	fastQ8_1x4("Q4_1")
	fastQ8_1x4("Q5_1")
	fastKx4("Q4_K")
	fastKx4("Q5_K")
	fastKx4("Q6_K")
	fastKx4("Q2_K")
	fastKx4("Q3_K")
	fastKx4("IQ4_XS")
	for _, q := range []string{"Q4_K", "Q5_K", "Q6_K", "Q2_K", "Q3_K", "IQ4_XS"} {
		fastKStage(q)
		fastKx4Rows(q, true)
	}
	for _, q := range []string{"Q8_0", "Q4_0", "Q5_0", "IQ4_NL"} {
		fastStage8(q)
	}
	fastStaged8x4()
	fastQ4_0Lanes()
	for _, q := range []string{"Q4_0", "IQ4_NL", "Q8_0"} {
		fastX16(q)
		fastStageX16(q)
	}
	fastX16("Q4_1")
	fastX16("Q5_1")
	fastX16IQ4XS()
	fastX16Q23K("Q2_K")
	fastX16Q23K("Q3_K")
	x16Gather8()
	gemvX16Q2K()
	gemvX16Q3K()
	gemvX16Q45K("Q5_K")
	gemvX16Q45K("Q4_K")
	gemvX16Q6K()
	gemvX16Q51()
	gemvX16Q80()
	x16PanelQ6K()
	x16PanelQ80()
	for _, c := range []struct {
		q              string
		n, head, words int // values, head bytes and value words of a block
	}{{"Q4_0", 32, 32, 4}, {"Q8_0", 32, 32, 8}, {"IQ4_NL", 32, 32, 4}, {"Q5_1", 32, 128, 4}, {"Q5_0", 32, 96, 4}, {"IQ4_XS", 256, 160, 32},
		{"Q2_K", 256, 64 + 256, 16}, {"Q3_K", 256, 32 + 256, 24}, {"Q5_K", 256, 64 + 192, 40}, {"Q4_K", 256, 64 + 256, 32}} {
		x16Panel(c.q, c.n, c.head, c.head+64*c.words)
	}
	gemvX16Q40()
	gemvX16IQ4NL()
	gemvX16IQ4XS()
	x16Broadcast()
	widen16("BF16")
	widen16("F16")
	Generate()
}

func tile(is isa, dt dtype, R, C int) {
	name := fmt.Sprintf("tile%dx%d%s%s", R, C, dt.name, is.name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(x *float32, ldx int, w %s, ldw int, k int, out *float32)", dt.gotyp))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes the %dx%d dot products of x rows (stride ldx) and w rows (stride ldw) over k values.", name, R, C))
	x, ldx, w, ldw, k, out := params("x", "ldx", "w", "ldw", "k", "out")

	// Row pointers.
	SHLQ(U8(2), ldx)
	if dt.size == 4 {
		SHLQ(U8(2), ldw)
	} else {
		SHLQ(U8(1), ldw)
	}
	xp := rowPointers(x, ldx, R)
	wp := rowPointers(w, ldw, C)

	acc := make([][]VecVirtual, R)
	for i := range acc {
		acc[i] = make([]VecVirtual, C)
		for j := range acc[i] {
			acc[i][j] = is.vec()
			VXORPS(acc[i][j], acc[i][j], acc[i][j])
		}
	}
	idx := GP64()
	XORQ(idx, idx)

	Label(name + "_loop")
	CMPQ(idx, k)
	JGE(LabelRef(name + "_done"))
	xv := make([]VecVirtual, R)
	for i := range xv {
		xv[i] = is.vec()
		VMOVUPS(Mem{Base: xp[i], Index: idx, Scale: 4}, xv[i])
	}
	for j := 0; j < C; j++ {
		wv := is.vec()
		loadWidened(dt, Mem{Base: wp[j], Index: idx, Scale: uint8(dt.size)}, wv)
		for i := 0; i < R; i++ {
			VFMADD231PS(wv, xv[i], acc[i][j])
		}
	}
	ADDQ(U32(is.lanes), idx)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	for i := 0; i < R; i++ {
		for j := 0; j < C; j++ {
			reduce(is, acc[i][j], Mem{Base: out, Disp: 4 * (i*C + j)})
		}
	}
	VZEROUPPER()
	RET()
}

// reduce adds the lanes of a and stores the sum at m.
func reduce(is isa, a VecVirtual, m Mem) {
	VMOVSS(fold(a, is.lanes, VADDPS), m)
}

// fold combines the lanes of a (is.lanes of them: 16 in a ZMM, 8 in a
// YMM) pairwise by op (VADDPS, VMAXPS) into the low lane of the XMM it
// returns.
func fold(a VecVirtual, lanes int, op func(...Op)) VecVirtual {
	y := a
	if lanes == 16 {
		hi := YMM()
		VEXTRACTF64X4(U8(1), a, hi)
		lo := YMM()
		op(hi, a.(Vec).AsY(), lo)
		y = lo
	}
	hx := XMM()
	if lanes == 16 {
		// EVEX forms only: the allocator may pick X16-X31.
		VEXTRACTF32X4(U8(1), y, hx)
	} else {
		VEXTRACTF128(U8(1), y, hx)
	}
	s := XMM()
	op(hx, y.(Vec).AsX(), s)
	t := XMM()
	VPERMILPS(U8(0x4e), s, t) // swap the 64-bit halves
	op(t, s, s)
	VPERMILPS(U8(0xb1), s, t) // swap neighbours
	op(t, s, s)
	return s
}

// floatPrefetchDist is how far ahead the float matrix-vector kernels
// prefetch, in bytes, past rows' ends into the rows that follow (a
// product's rows lie end to end; past the matrix's end a prefetch is
// harmless). Decode streams the weights with two threads, and the
// hardware prefetchers alone kept too few lines in flight (interleaved
// gozoo bench runs of F32 decode; figures in docs/performance.md).
const floatPrefetchDist = 8192

// gemv computes y[r] = x · w_r for rows consecutive rows of w (stride ldw):
// decode's matrix-vector product, one sequential stream through the
// weights, four accumulators deep, prefetching a line per 64 bytes, with
// the row loop in assembly so a row costs no call. With rows = 1 it is
// also the single dot product that tiles leave over.
func gemv(is isa, dt dtype) {
	name := fmt.Sprintf("gemv%s%s", dt.name, is.name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(x *float32, w %s, ldw int, k int, rows int, y *float32)", dt.gotyp))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[r] = x · w[r] over k values for rows rows of w (stride ldw).", name))
	x, w, ldw, k, rows, y := params("x", "w", "ldw", "k", "rows", "y")
	if dt.size == 4 {
		SHLQ(U8(2), ldw)
	} else {
		SHLQ(U8(1), ldw)
	}
	const U = 4
	end := GP64()
	MOVQ(k, end)
	ANDQ(I32(-U*is.lanes), end)
	acc := make([]VecVirtual, U)
	for u := range acc {
		acc[u] = is.vec()
	}
	idx := GP64()
	load := func(u int, v VecVirtual) {
		loadWidened(dt, Mem{Base: w, Index: idx, Scale: uint8(dt.size), Disp: u * is.lanes * dt.size}, v)
	}
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	for u := range acc {
		VXORPS(acc[u], acc[u], acc[u])
	}
	XORQ(idx, idx)
	Label(name + "_wide")
	CMPQ(idx, end)
	JGE(LabelRef(name + "_narrow"))
	for u := 0; u < U; u++ {
		wv := is.vec()
		load(u, wv)
		VFMADD231PS(Mem{Base: x, Index: idx, Scale: 4, Disp: u * is.lanes * 4}, wv, acc[u])
		if off := u * is.lanes * dt.size; off%64 == 0 {
			streamPrefetch(Mem{Base: w, Index: idx, Scale: uint8(dt.size), Disp: floatPrefetchDist + off})
		}
	}
	ADDQ(U32(U*is.lanes), idx)
	JMP(LabelRef(name + "_wide"))
	Label(name + "_narrow")
	CMPQ(idx, k)
	JGE(LabelRef(name + "_sum"))
	wv := is.vec()
	load(0, wv)
	VFMADD231PS(Mem{Base: x, Index: idx, Scale: 4}, wv, acc[0])
	ADDQ(U32(is.lanes), idx)
	JMP(LabelRef(name + "_narrow"))
	Label(name + "_sum")
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	reduce(is, acc[0], Mem{Base: y})
	ADDQ(ldw, w)
	ADDQ(U8(4), y)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// prefetchDist is how far ahead in its weight row a quantized decode
// kernel prefetches, in bytes. The exact kernels are compute-bound in
// cache but fell behind memory out of it, and the fast kernels, bound by
// memory, keep more loads in flight with it (a kernel timed on weights
// from DRAM, and interleaved gozoo bench runs; figures in
// docs/performance.md). The float kernels prefetch further ahead
// (floatPrefetchDist).
const prefetchDist = 2048

// streamPrefetch prefetches a line of weights that the kernel reads once
// a step. PREFETCHNTA: on Zen a non-temporal line is dropped when it
// leaves the core's caches instead of filling L3, where the weights a
// decode step has already read pushed out the graph's bookkeeping and the
// activations between products (SmolLM2-135M decode +5%, figures in
// docs/performance.md). The team's prefetcher (prefetch.go) keeps
// PREFETCHT0: its lines must wait in L3 for the kernel.
func streamPrefetch(m Mem) { PREFETCHNTA(m) }

// prefetchBlock prefetches the lines of the size bytes that lie
// prefetchDist past the block at wp: a block starting anywhere in a line
// touches at most ceil(size/64) lines, and consecutive blocks cover the
// row.
func prefetchBlock(wp GPVirtual, size int) {
	for off := 0; off < size; off += 64 {
		streamPrefetch(Mem{Base: wp, Disp: prefetchDist + off})
	}
}

// endRows closes a kernel's loop over weight rows: w steps a row (ldw
// bytes) and the loop goes again while rows are left; then the kernel
// returns.
func endRows(name string, w, ldw, rows GPVirtual) {
	ADDQ(ldw, w)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// params loads the named int and pointer arguments (up to six) into
// registers; the results past the names are nil.
func params(names ...string) (r0, r1, r2, r3, r4, r5 GPVirtual) {
	regs := make([]GPVirtual, 6)
	for i, n := range names {
		regs[i] = GP64()
		Load(Param(n), regs[i])
	}
	return regs[0], regs[1], regs[2], regs[3], regs[4], regs[5]
}

// loadWidened loads one vector of weights from src as float32 lanes.
func loadWidened(dt dtype, src Mem, v VecVirtual) {
	switch dt.name {
	case "F32":
		VMOVUPS(src, v)
	case "BF16":
		// bfloat16 is the upper half of a float32: zero-extend, shift.
		VPMOVZXWD(src, v)
		VPSLLD(U8(16), v, v)
	case "F16":
		VCVTPH2PS(src, v)
	}
}

// weighRows computes out[c] = Σ_r p[r] · v[r][c] for nacc vectors of
// columns of rows rows of v (stride ldv): attention's weighted sum of
// values for one query, with the columns held in registers across rows.
func weighRows(is isa, dt dtype, nacc int) {
	name := fmt.Sprintf("weighRows%d%s", nacc*is.lanes, is.name)
	if dt.name != "F32" {
		name = fmt.Sprintf("weighRows%d%s%s", nacc*is.lanes, dt.name, is.name)
	}
	TEXT(name, NOSPLIT, fmt.Sprintf("func(p *float32, v %s, ldv int, rows int, out *float32)", dt.gotyp))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes out[c] = Σ_r p[r]·v[r*ldv+c] for the first %d columns of %s rows.", name, nacc*is.lanes, dt.name))
	p, v, ldv, rows, out := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("p"), p)
	Load(Param("v"), v)
	Load(Param("ldv"), ldv)
	Load(Param("rows"), rows)
	Load(Param("out"), out)
	if dt.size == 4 {
		SHLQ(U8(2), ldv)
	} else {
		SHLQ(U8(1), ldv)
	}
	acc := make([]VecVirtual, nacc)
	for i := range acc {
		acc[i] = is.vec()
		VXORPS(acc[i], acc[i], acc[i])
	}
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_done"))
	b := is.vec()
	VBROADCASTSS(Mem{Base: p}, b)
	for i := range acc {
		src := Mem{Base: v, Disp: dt.size * i * is.lanes}
		if dt.size == 4 {
			VFMADD231PS(src, b, acc[i])
			continue
		}
		wv := is.vec()
		loadWidened(dt, src, wv)
		VFMADD231PS(wv, b, acc[i])
	}
	ADDQ(U8(4), p)
	ADDQ(ldv, v)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_done")
	for i := range acc {
		VMOVUPS(acc[i], Mem{Base: out, Disp: 4 * i * is.lanes})
	}
	VZEROUPPER()
	RET()
}

// quantRows handles rows of llama.cpp's 32-value blocks (Q8_0: f16 d, 32
// int8; Q4_0: f16 d, 16 bytes of nibbles, value q-8, low nibbles first):
// each block is dequantized in registers exactly as ggml does (the value
// converted to float32, times d) and then, with dot, multiplied into x
// and accumulated in float32 (y[r] = x · w_r, a matrix-vector product),
// or, without, stored (dst[r*k ...], a row of floats per weight row).
func quantRows(is isa, q string, dot bool) {
	kind := "gemv"
	sig := "func(x *float32, w *byte, ldw int, blocks int, rows int, y *float32)"
	if !dot {
		kind = "dequant"
		sig = "func(w *byte, ldw int, blocks int, rows int, dst *float32)"
	}
	name := fmt.Sprintf("%s%s%s", kind, q, is.name)
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	if dot {
		Doc(fmt.Sprintf("%s computes y[r] = x · w_r for rows %s rows of blocks blocks (stride ldw bytes).", name, q))
	} else {
		Doc(fmt.Sprintf("%s dequantizes rows %s rows of blocks blocks (stride ldw bytes) into dst, row after row.", name, q))
	}
	var x, out GPVirtual
	if dot {
		x = GP64()
		Load(Param("x"), x)
	}
	w, ldw, blocks, rows := GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("ldw"), ldw)
	Load(Param("blocks"), blocks)
	Load(Param("rows"), rows)
	out = GP64()
	if dot {
		Load(Param("y"), out)
	} else {
		Load(Param("dst"), out)
	}
	bsize := 34
	if q == "Q4_0" {
		bsize = 18
	}
	per := 32 / is.lanes // vectors per block
	acc := make([]VecVirtual, per)
	if dot {
		for i := range acc {
			acc[i] = is.vec()
		}
	}
	xp, wp, b := GP64(), GP64(), GP64()
	// Q4_0's constants: the nibble mask and the offset 8.
	var eight, mask VecVirtual
	if q == "Q4_0" {
		eight, mask = broadcast(is, 8), broadcast(is, 15)
	}
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	if dot {
		for i := range acc {
			VXORPS(acc[i], acc[i], acc[i])
		}
		MOVQ(x, xp)
	}
	MOVQ(w, wp)
	MOVQ(blocks, b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	// d, broadcast as float32 lanes.
	d := is.vec()
	if is.lanes == 16 {
		hy := YMM()
		VPBROADCASTW(Mem{Base: wp}, hy)
		VCVTPH2PS(hy, d)
	} else {
		hb := XMM()
		VPBROADCASTW(Mem{Base: wp}, hb)
		VCVTPH2PS(hb, d)
	}
	for v := 0; v < per; v++ {
		qv := is.vec()
		switch q {
		case "Q8_0":
			VPMOVSXBD(Mem{Base: wp, Disp: 2 + v*is.lanes}, qv)
		case "Q4_0":
			// Values v*lanes.. come from the low nibbles of bytes
			// (v*lanes)%16.. for the first 16 values, the high
			// nibbles after.
			VPMOVZXBD(Mem{Base: wp, Disp: 2 + (v*is.lanes)%16}, qv)
			switch {
			case v*is.lanes >= 16:
				VPSRLD(U8(4), qv, qv)
			case is.lanes == 16:
				VPANDD(mask, qv, qv)
			default:
				VPAND(mask, qv, qv)
			}
			VPSUBD(eight, qv, qv)
		}
		VCVTDQ2PS(qv, qv)
		VMULPS(d, qv, qv)
		if dot {
			VFMADD231PS(Mem{Base: xp, Disp: 4 * v * is.lanes}, qv, acc[v])
		} else {
			VMOVUPS(qv, Mem{Base: out, Disp: 4 * v * is.lanes})
		}
	}
	nextBlock(name, wp, b, xp, out, bsize, 32, dot)
	Label(name + "_rowdone")
	if dot {
		for v := 1; v < per; v++ {
			VADDPS(acc[v], acc[0], acc[0])
		}
		reduce(is, acc[0], Mem{Base: out})
		ADDQ(U8(4), out)
	}
	endRows(name, w, ldw, rows)
}

// bcastScalar broadcasts the float32 in x's low lane to a ZMM register.
func bcastScalar(x VecVirtual) VecVirtual {
	z := ZMM()
	VBROADCASTSS(x, z)
	return z
}

// halfToScalar converts the IEEE half at m to a float32 in an XMM
// register's low lane.
func halfToScalar(m Mem) VecVirtual {
	h := GP32()
	MOVWLZX(m, h)
	x := XMM()
	VMOVD(h, x)
	f := XMM()
	VCVTPH2PS(x, f)
	return f
}

// q4kScaleMins writes the scales and mins of the Q4_K super-block at
// wp+src as float32 d·sc[0..7] then dmin·m[0..7] at buf: the twelve
// packed bytes are unpacked with 32-bit operations as ggml's vec_dot_q4_K
// does (bytes 0-7 the scales, 8-15 the mins), then widened, converted and
// scaled together; d and dmin come from halfTable (the kernel's halves
// argument, loaded here: the caller's registers are all taken).
func q4kScaleMins(wp GPVirtual, src int, buf Mem) {
	halves := GP64()
	Load(Param("halves"), halves)
	// d and dmin as float32 from halfTable, broadcast by the load itself.
	hd, hm := GP64(), GP64() // first, while few registers are live
	MOVWQZX(Mem{Base: wp, Disp: src}, hd)
	MOVWQZX(Mem{Base: wp, Disp: src + 2}, hm)
	dd, dm := YMM(), YMM()
	VBROADCASTSS(Mem{Base: halves, Index: hd, Scale: 4}, dd)
	VBROADCASTSS(Mem{Base: halves, Index: hm, Scale: 4}, dm)
	u0, u1, u2, u3, aux, t := GP32(), GP32(), GP32(), GP32(), GP32(), GP32()
	MOVL(Mem{Base: wp, Disp: src + 4}, u0)
	MOVL(Mem{Base: wp, Disp: src + 8}, u1)
	MOVL(Mem{Base: wp, Disp: src + 12}, u2)
	high2 := func(b GPVirtual) { // ((b >> 6) & 0x03030303) << 4 into t
		MOVL(b, t)
		SHRL(U8(6), t)
		ANDL(U32(0x03030303), t)
		SHLL(U8(4), t)
	}
	// mins 4-7: high nibbles of bytes 8-11 and the top bits of 4-7
	MOVL(u2, u3)
	SHRL(U8(4), u3)
	ANDL(U32(0x0f0f0f0f), u3)
	high2(u1)
	ORL(t, u3)
	// mins 0-3: the low 6 bits of bytes 4-7
	MOVL(u1, aux)
	ANDL(U32(0x3f3f3f3f), aux)
	// scales 4-7: low nibbles of bytes 8-11 and the top bits of 0-3
	MOVL(u2, u1)
	ANDL(U32(0x0f0f0f0f), u1)
	high2(u0)
	ORL(t, u1)
	// scales 0-3: the low 6 bits of bytes 0-3
	ANDL(U32(0x3f3f3f3f), u0)
	// The 16 bytes go to a register, not through memory: four 4-byte
	// stores read back as one 16-byte load cannot be forwarded.
	lo, hi := GP64(), GP64()
	MOVL(u0, lo.As32())
	MOVL(u1, t)
	SHLQ(U8(32), t.As64())
	ORQ(t.As64(), lo)
	MOVL(aux, hi.As32())
	MOVL(u3, t)
	SHLQ(U8(32), t.As64())
	ORQ(t.As64(), hi)
	b := XMM()
	VMOVQ(lo, b)
	VPINSRQ(U8(1), hi, b, b)
	v := ZMM()
	VPMOVZXBD(b, v)
	VCVTDQ2PS(v, v)
	f := ZMM()
	VINSERTF64X4(U8(1), dm, dd.AsZ(), f)
	VMULPS(f, v, v)
	VMOVUPS(v, buf)
}

// parity returns the stack-slot offset, 0 or 64, of the super-block nb
// from a row's end: two super-blocks in turn use different slots.
func parity(nb GPVirtual) GPVirtual {
	r := GP64()
	MOVQ(nb, r)
	ANDQ(U8(1), r)
	SHLQ(U8(6), r)
	return r
}

// slotAt is the stack slot at offset off (a register) in slots.
func slotAt(slots Mem, off GPVirtual) Mem {
	slots.Index, slots.Scale = off, 1
	return slots
}

// kquantRows dequantizes K-quant super-blocks (Q6_K: ql[128], qh[64],
// int8 scales[16], f16 d; Q4_K: f16 d, f16 dmin, 12 bytes of 6-bit
// scales and mins, qs[128]) in registers exactly as ggml's
// dequantize_row_* does, in float32: (d * scale) * (q - 32) for Q6_K,
// (d * sc) * q - (dmin * m) for Q4_K. With dot, rows rows of blocks
// super-blocks (stride ldw bytes) are multiplied into x and accumulated
// in float32 (y[r] = x · w_r); without, blocks super-blocks are stored
// into dst. AVX-512.
func kquantRows(q string, dot bool) {
	kind := "dequant"
	sig := "func(w *byte, blocks int, dst *float32)"
	if dot {
		kind = "gemv"
		sig = "func(x *float32, w *byte, ldw int, blocks int, rows int, y *float32)"
		if q == "Q4_K" {
			sig = "func(x *float32, w *byte, ldw int, blocks int, rows int, halves *float32, y *float32)"
		}
	}
	name := kind + q + "AVX512"
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	if dot {
		Doc(name + " computes y[r] = x · w_r for rows " + q + " rows of blocks super-blocks (stride ldw bytes).")
	} else {
		Doc(name + " dequantizes blocks " + q + " super-blocks from w into dst.")
	}
	var ldw, rows, xp, wrow GPVirtual
	w, blocks, out := GP64(), GP64(), GP64()
	if dot {
		// x and blocks are read from the arguments at each row: the
		// scales' unpacking needs the registers.
		ldw, rows = GP64(), GP64()
		Load(Param("ldw"), ldw)
		Load(Param("rows"), rows)
		Load(Param("y"), out)
	} else {
		Load(Param("dst"), out)
	}
	Load(Param("w"), w)
	if !dot {
		Load(Param("blocks"), blocks)
	}
	m15 := broadcast(avx512, 15)
	var q4kIota VecVirtual
	var q4kScales Mem
	if q == "Q4_K" && dot {
		q4kIota = ZMM()
		VMOVUPS(iota16, q4kIota)
		q4kScales = AllocLocal(128) // two slots of d·sc[8], dmin·m[8]
	}
	var m3, k32 VecVirtual
	if q == "Q6_K" {
		m3, k32 = broadcast(avx512, 3), broadcast(avx512, 32)
	}
	// Four accumulators: a super-block's FMAs wait on the adds of the
	// vector before last but three, not on the last's latency.
	var acc [4]VecVirtual
	nb, wp := GP64(), GP64()
	if dot {
		xp, wrow = GP64(), GP64()
		MOVQ(w, wrow)
		Label(name + "_row")
		TESTQ(rows, rows)
		JZ(LabelRef(name + "_end"))
		for i := range acc {
			acc[i] = ZMM()
			VXORPS(acc[i], acc[i], acc[i])
		}
		Load(Param("x"), xp)
		MOVQ(wrow, wp)
	} else {
		MOVQ(w, wp)
	}
	if dot {
		Load(Param("blocks"), nb)
	} else {
		MOVQ(blocks, nb)
	}
	if q == "Q4_K" && dot {
		// The super-block's scales go to one of two stack slots by the
		// parity of the count left, so each super-block unpacks the
		// next one's while its own build the tables: the unpacking's
		// chain of latencies (scalar bit fields, a widening, a
		// conversion, a store read back by broadcasts) then overlaps
		// the products instead of heading each super-block: about 15%
		// in cache (docs/performance.md). gemvQ6_K's shorter unpacking
		// gained too little this way, and stays as it is.
		first := parity(nb)
		TESTQ(nb, nb)
		JZ(LabelRef(name + "_blocksdone"))
		q4kScaleMins(wp, 0, slotAt(q4kScales, first))
	}
	Label(name + "_block")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_blocksdone"))
	if dot {
		prefetchBlock(wp, 144)
	}
	// emit uses the 16 values in v, the values off.. of the super-block.
	nvec := 0
	emit := func(v VecVirtual, off int) {
		if dot {
			VFMADD231PS(Mem{Base: xp, Disp: 4 * off}, v, acc[nvec%len(acc)])
			nvec++
		} else {
			VMOVUPS(v, Mem{Base: out, Disp: 4 * off})
		}
	}
	if q == "Q6_K" {
		d := halfToScalar(Mem{Base: wp, Disp: 208})
		for half := 0; half < 2; half++ {
			ql, qh, sc := 64*half, 128+32*half, 192+8*half
			for l0 := 0; l0 < 32; l0 += 16 {
				is := l0 / 16
				hv := ZMM()
				VPMOVZXBD(Mem{Base: wp, Disp: qh + l0}, hv)
				for k := 0; k < 4; k++ {
					lo := ZMM()
					VPMOVZXBD(Mem{Base: wp, Disp: ql + l0 + 32*(k%2)}, lo)
					if k >= 2 {
						VPSRLD(U8(4), lo, lo)
					} else {
						VPANDD(m15, lo, lo)
					}
					hi := ZMM()
					VPSRLD(U8(2*k), hv, hi)
					VPANDD(m3, hi, hi)
					VPSLLD(U8(4), hi, hi)
					VPORD(hi, lo, lo)
					VPSUBD(k32, lo, lo)
					VCVTDQ2PS(lo, lo)
					sv := GP32()
					MOVBLSX(Mem{Base: wp, Disp: sc + is + 2*k}, sv)
					sf := XMM()
					VCVTSI2SSL(sv, sf, sf)
					VMULSS(d, sf, sf)
					VMULPS(bcastScalar(sf), lo, lo)
					emit(lo, 128*half+l0+32*k)
				}
			}
		}
	} else {
		var d, dmin VecVirtual
		if !dot {
			d = halfToScalar(Mem{Base: wp})
			dmin = halfToScalar(Mem{Base: wp, Disp: 2})
		}
		scaleMin := func(j int) (GPVirtual, GPVirtual) { return q4kScaleMin(wp, j) }
		if dot {
			// By table (table.go): the 16 values (d·sc)·q - dmin·m of
			// each sub-block of 32, looked up by nibble; the low and high
			// nibbles of 32 bytes are sub-blocks 2ch and 2ch+1. The
			// super-block's eight d·sc and dmin·m are computed at once
			// (the same float32 products as one at a time) and each table
			// takes them from the stack by broadcast.
			cur := parity(nb)
			CMPQ(nb, U8(1))
			JE(LabelRef(name + "_last"))
			next := GP64()
			MOVQ(cur, next)
			XORQ(U8(64), next)
			q4kScaleMins(wp, 144, slotAt(q4kScales, next))
			Label(name + "_last")
			scales := slotAt(q4kScales, cur)
			for ch := 0; ch < 4; ch++ {
				var tables [2]VecVirtual
				for sub := 0; sub < 2; sub++ {
					j := 2*ch + sub
					tables[sub] = ZMM()
					VMULPS_BCST(scales.Offset(4*j), q4kIota, tables[sub]) // exact: d·sc·q needs 21 bits
					VSUBPS_BCST(scales.Offset(32+4*j), tables[sub], tables[sub])
				}
				for l0 := 0; l0 < 32; l0 += 16 {
					idx := ZMM()
					VPMOVZXBD(Mem{Base: wp, Disp: 16 + 32*ch + l0}, idx)
					lo := ZMM()
					VPERMPS(tables[0], idx, lo)
					emit(lo, 64*ch+l0)
					VPSRLD(U8(4), idx, idx)
					hi := ZMM()
					VPERMPS(tables[1], idx, hi)
					emit(hi, 64*ch+32+l0)
				}
			}
		}
		for ch := 0; ch < 4 && !dot; ch++ {
			for sub := 0; sub < 2; sub++ {
				sc, m := scaleMin(2*ch + sub)
				dsc, dm := XMM(), XMM()
				VCVTSI2SSL(sc, dsc, dsc)
				VMULSS(d, dsc, dsc)
				VCVTSI2SSL(m, dm, dm)
				VMULSS(dmin, dm, dm)
				ds, ms := bcastScalar(dsc), bcastScalar(dm)
				for l0 := 0; l0 < 32; l0 += 16 {
					qv := ZMM()
					VPMOVZXBD(Mem{Base: wp, Disp: 16 + 32*ch + l0}, qv)
					if sub == 1 {
						VPSRLD(U8(4), qv, qv)
					} else {
						VPANDD(m15, qv, qv)
					}
					VCVTDQ2PS(qv, qv)
					VMULPS(ds, qv, qv)
					VSUBPS(ms, qv, qv)
					emit(qv, 64*ch+32*sub+l0)
				}
			}
		}
	}
	nextBlock(name, wp, nb, xp, out, map[string]int{"Q6_K": 210, "Q4_K": 144}[q], 256, dot)
	Label(name + "_blocksdone")
	if dot {
		VADDPS(acc[1], acc[0], acc[0])
		VADDPS(acc[3], acc[2], acc[2])
		VADDPS(acc[2], acc[0], acc[0])
		reduce(avx512, acc[0], Mem{Base: out})
		ADDQ(U8(4), out)
		ADDQ(ldw, wrow)
		DECQ(rows)
		JMP(LabelRef(name + "_row"))
		Label(name + "_end")
	}
	VZEROUPPER()
	RET()
}

// q5RowsAVX2 is dequantQ5_0AVX512 for AVX2: value i of a block (low
// nibbles then high ones) takes bit i of qh as its fifth bit, 8 values at
// a time.
func q5RowsAVX2() {
	name := "dequantQ5_0AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, blocks int, rows int, shifts *uint32, dst *float32)")
	Pragma("noescape")
	Doc(name + " dequantizes rows rows of blocks Q5_0 blocks (stride ldw bytes) into dst, row after row.")
	w, ldw, blocks, rows, sh, out := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("ldw"), ldw)
	Load(Param("blocks"), blocks)
	Load(Param("rows"), rows)
	Load(Param("shifts"), sh)
	Load(Param("dst"), out)
	m15, one, k16 := broadcast(avx2isa, 15), broadcast(avx2isa, 1), broadcast(avx2isa, 16)
	var shifts [4]VecVirtual
	for v := range shifts {
		shifts[v] = YMM()
		VMOVDQU(Mem{Base: sh, Disp: 32 * v}, shifts[v])
	}
	nb, wp := GP64(), GP64()
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	MOVQ(w, wp)
	MOVQ(blocks, nb)
	Label(name + "_block")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_rowdone"))
	d := YMM()
	h := GP32()
	MOVWLZX(Mem{Base: wp}, h)
	hx := XMM()
	VMOVD(h, hx)
	VPBROADCASTW(hx, hx)
	VCVTPH2PS(hx, d)
	qh := YMM()
	VPBROADCASTD(Mem{Base: wp, Disp: 2}, qh)
	for v := 0; v < 4; v++ {
		q := YMM()
		VPMOVZXBD(Mem{Base: wp, Disp: 6 + 8*(v%2)}, q)
		if v >= 2 {
			VPSRLD(U8(4), q, q)
		} else {
			VPAND(m15, q, q)
		}
		b := YMM()
		VPSRLVD(shifts[v], qh, b)
		VPAND(one, b, b)
		VPSLLD(U8(4), b, b)
		VPOR(b, q, q)
		VPSUBD(k16, q, q)
		VCVTDQ2PS(q, q)
		VMULPS(d, q, q)
		VMOVUPS(q, Mem{Base: out, Disp: 32 * v})
	}
	nextBlock(name, wp, nb, nil, out, 22, 32, false)
	Label(name + "_rowdone")
	endRows(name, w, ldw, rows)
}

// kquantDequantAVX2 is kquantRows' dequantizing kernel for AVX2: the same
// float32 operations on 8 values at a time, so that batched products over
// K-quant weights (widened once per step for all rows) need no AVX-512.
func kquantDequantAVX2(q string) { kquantRowsAVX2(q, false) }

// kquantGemvAVX2 is exact decode for Q4_K and Q6_K on AVX2: each
// super-block is dequantized in registers by kquantDequantAVX2's
// instructions, and each vector of 8 values goes into one of four float32
// accumulators by an FMA with x instead of being stored.
func kquantGemvAVX2(q string) { kquantRowsAVX2(q, true) }

func kquantRowsAVX2(q string, dot bool) {
	name := "dequant" + q + "AVX2"
	sig := "func(w *byte, blocks int, dst *float32)"
	if dot {
		name = "gemv" + q + "AVX2"
		sig = "func(x *float32, w *byte, ldw int, blocks int, rows int, y *float32)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	if dot {
		Doc(name + " computes y[r] = x · w_r for rows " + q + " rows of blocks super-blocks (stride ldw bytes), dequantizing as ggml does.")
	} else {
		Doc(name + " dequantizes blocks " + q + " super-blocks from w into dst.")
	}
	wp, nb, out := GP64(), GP64(), GP64()
	var w, ldw, rows, xp GPVirtual
	if dot {
		// x and blocks are read from the arguments at each row: the
		// scales' unpacking needs the registers.
		w, ldw, rows, xp = GP64(), GP64(), GP64(), GP64()
		Load(Param("w"), w)
		Load(Param("ldw"), ldw)
		Load(Param("rows"), rows)
		Load(Param("y"), out)
	} else {
		Load(Param("dst"), out)
		Load(Param("w"), wp)
		Load(Param("blocks"), nb)
	}
	var m15, b0f, b30, b32 VecVirtual
	if q == "Q6_K" {
		b0f, b30, b32 = broadcast(avx2isa, 0x0f0f0f0f), broadcast(avx2isa, 0x30303030), broadcast(avx2isa, 0x20202020)
	} else {
		m15 = broadcast(avx2isa, 15)
	}
	bsize := map[string]int{"Q6_K": 210, "Q4_K": 144}[q]
	scaleBuf := AllocLocal(64) // the super-block's scales as float32s
	var acc []VecVirtual
	if dot {
		acc = []VecVirtual{YMM(), YMM(), YMM(), YMM()}
		Label(name + "_row")
		TESTQ(rows, rows)
		JZ(LabelRef(name + "_end"))
		for _, a := range acc {
			VXORPS(a, a, a)
		}
		Load(Param("x"), xp)
		Load(Param("blocks"), nb)
		MOVQ(w, wp)
	}
	store := func(v VecVirtual, value int) {
		if dot {
			VFMADD231PS(Mem{Base: xp, Disp: 4 * value}, v, acc[(value/8)%4])
			return
		}
		VMOVUPS(v, Mem{Base: out, Disp: 4 * value})
	}
	Label(name + "_block")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_blocksdone"))
	if dot {
		prefetchBlock(wp, bsize)
	}
	if q == "Q6_K" {
		// Each group of 32 values as bytes q−32 (q6kBlock's byte moves),
		// widened signed to int32, converted, times d·sc: the float32
		// operations of ggml's dequantize_row_q6_K.
		q6kScalesAVX2(wp, scaleBuf)
		for half := 0; half < 2; half++ {
			ql, sc := 64*half, 192+8*half
			qh := YMM()
			VMOVDQU(Mem{Base: wp, Disp: 128 + 32*half}, qh)
			for k := 0; k < 4; k++ {
				qv, hb := YMM(), YMM()
				VMOVDQU(Mem{Base: wp, Disp: ql + 32*(k%2)}, qv)
				if k >= 2 {
					VPSRLW(U8(4), qv, qv)
				}
				VPAND(b0f, qv, qv)
				switch k {
				case 0:
					VPSLLW(U8(4), qh, hb)
				case 1:
					VPSLLW(U8(2), qh, hb)
				case 2:
					VMOVDQA(qh, hb)
				case 3:
					VPSRLW(U8(2), qh, hb)
				}
				VPAND(b30, hb, hb)
				VPOR(hb, qv, qv)
				VPSUBB(b32, qv, qv)
				var ss [2]VecVirtual
				for is := 0; is < 2; is++ {
					ss[is] = YMM()
					VBROADCASTSS(scaleBuf.Offset(4*(sc-192+is+2*k)), ss[is])
				}
				widenBytes(qv, true, func(x VecVirtual, j int) {
					VCVTDQ2PS(x, x)
					VMULPS(ss[j/2], x, x)
					store(x, 128*half+32*k+8*j)
				})
			}
		}
	} else {
		q4kScalesAVX2(wp, scaleBuf)
		for ch := 0; ch < 4; ch++ {
			for sub := 0; sub < 2; sub++ {
				ds, ms := YMM(), YMM()
				VBROADCASTSS(scaleBuf.Offset(4*(2*ch+sub)), ds)
				VBROADCASTSS(scaleBuf.Offset(32+4*(2*ch+sub)), ms)
				for l0 := 0; l0 < 32; l0 += 8 {
					qv := YMM()
					VPMOVZXBD(Mem{Base: wp, Disp: 16 + 32*ch + l0}, qv)
					if sub == 1 {
						VPSRLD(U8(4), qv, qv)
					} else {
						VPAND(m15, qv, qv)
					}
					VCVTDQ2PS(qv, qv)
					VFMSUB213PS(ms, ds, qv) // (d·sc)·q − dmin·m (exactProduct)
					store(qv, 64*ch+32*sub+l0)
				}
			}
		}
	}
	nextBlock(name, wp, nb, xp, out, bsize, 256, dot)
	Label(name + "_blocksdone")
	if !dot {
		VZEROUPPER()
		RET()
		return
	}
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	reduce(avx2isa, acc[0], Mem{Base: out})
	ADDQ(U8(4), out)
	endRows(name, w, ldw, rows)
}

// q4kScaleMin unpacks Q4_K sub-block j's 6-bit scale and min from the
// super-block at wp (ggml's get_scale_min_k4).
func q4kScaleMin(wp GPVirtual, j int) (GPVirtual, GPVirtual) {
	sc, m := GP32(), GP32()
	if j < 4 {
		MOVBLZX(Mem{Base: wp, Disp: 4 + j}, sc)
		ANDL(U32(63), sc)
		MOVBLZX(Mem{Base: wp, Disp: 4 + j + 4}, m)
		ANDL(U32(63), m)
		return sc, m
	}
	a, b := GP32(), GP32()
	MOVBLZX(Mem{Base: wp, Disp: 4 + j + 4}, sc)
	ANDL(U32(15), sc)
	MOVBLZX(Mem{Base: wp, Disp: 4 + j - 4}, a)
	SHRL(U8(6), a)
	SHLL(U8(4), a)
	ORL(a, sc)
	MOVBLZX(Mem{Base: wp, Disp: 4 + j + 4}, m)
	SHRL(U8(4), m)
	MOVBLZX(Mem{Base: wp, Disp: 4 + j}, b)
	SHRL(U8(6), b)
	SHLL(U8(4), b)
	ORL(b, m)
	return sc, m
}

var avx2isa = isa{"AVX2", 8, YMM, 2}

// q5Rows writes dequantQ5_0AVX512, which dequantizes rows of Q5_0 blocks
// (f16 d, u32 qh: bit i is value i's fifth bit, 16 bytes of nibbles: low
// nibbles values 0-15, high 16-31) into dst, row after row: each value
// (nibble | bit << 4) - 16, converted to float32, times d, as ggml's
// dequantize_row_q5_0. shifts holds 0..31, the per-lane shift that
// brings each value's bit down. (The matrix-vector product is
// gemvQ5_0Table's.)
func q5Rows() {
	name := "dequantQ5_0AVX512"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, blocks int, rows int, shifts *uint32, dst *float32)")
	Pragma("noescape")
	Doc(name + " dequantizes rows rows of blocks Q5_0 blocks (stride ldw bytes) into dst, row after row.")
	w, ldw, blocks, rows, sh, out := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("ldw"), ldw)
	Load(Param("blocks"), blocks)
	Load(Param("rows"), rows)
	Load(Param("shifts"), sh)
	Load(Param("dst"), out)
	m15, one, k16 := broadcast(avx512, 15), broadcast(avx512, 1), broadcast(avx512, 16)
	lo, hi := ZMM(), ZMM()
	VMOVDQU32(Mem{Base: sh}, lo)
	VMOVDQU32(Mem{Base: sh, Disp: 64}, hi)
	nb, wp := GP64(), GP64()
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	MOVQ(w, wp)
	MOVQ(blocks, nb)
	Label(name + "_block")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_rowdone"))
	d := ZMM()
	h := GP32()
	MOVWLZX(Mem{Base: wp}, h)
	hx := XMM()
	VMOVD(h, hx)
	hy := YMM()
	VPBROADCASTW(hx, hy)
	VCVTPH2PS(hy, d)
	qh := ZMM()
	VPBROADCASTD(Mem{Base: wp, Disp: 2}, qh)
	for v := 0; v < 2; v++ {
		q := ZMM()
		VPMOVZXBD(Mem{Base: wp, Disp: 6}, q)
		if v == 1 {
			VPSRLD(U8(4), q, q)
		} else {
			VPANDD(m15, q, q)
		}
		b := ZMM()
		if v == 0 {
			VPSRLVD(lo, qh, b)
		} else {
			VPSRLVD(hi, qh, b)
		}
		VPANDD(one, b, b)
		VPSLLD(U8(4), b, b)
		VPORD(b, q, q)
		VPSUBD(k16, q, q)
		VCVTDQ2PS(q, q)
		VMULPS(d, q, q)
		VMOVUPS(q, Mem{Base: out, Disp: 64 * v})
	}
	nextBlock(name, wp, nb, nil, out, 22, 32, false)
	Label(name + "_rowdone")
	endRows(name, w, ldw, rows)
}
