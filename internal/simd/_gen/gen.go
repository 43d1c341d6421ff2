// Command gen writes the SIMD kernels of package simd with avo:
//
//	cd internal/simd/_gen && go run . -out ../kernels_amd64.s -stubs ../kernels_amd64.go -pkg simd
//
// (go generate ./internal/simd runs it.)
//
// Each kernel computes a tile of dot products out[i*C+j] = x_i · w_j over k
// values, for R rows of x (float32) and C rows of w (float32, bfloat16 or
// float16 storage, widened in registers), both contiguous along k: the
// layout of activations [T, in] against PyTorch weights [out, in]. Every
// product accumulates in float32 lanes, reduced once at the end. k must be
// a multiple of the vector width; callers handle any tail.
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

func main() {
	ConstraintExpr("!purego")
	isas := []isa{
		{"AVX512", 16, ZMM, 4},
		{"AVX2", 8, YMM, 2},
	}
	dtypes := []dtype{{"F32", "*float32", 4}, {"BF16", "*uint16", 2}, {"F16", "*uint16", 2}}
	for _, is := range isas {
		for _, dt := range dtypes {
			tile(is, dt, is.tileR, 4)
			tile(is, dt, 1, 4)
			gemv(is, dt)
		}
		for _, nacc := range []int{4, 8} {
			weighRows(is, nacc)
		}
	}
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
	xp := []GPVirtual{x}
	for i := 1; i < R; i++ {
		p := GP64()
		MOVQ(xp[i-1], p)
		ADDQ(ldx, p)
		xp = append(xp, p)
	}
	wp := []GPVirtual{w}
	for j := 1; j < C; j++ {
		p := GP64()
		MOVQ(wp[j-1], p)
		ADDQ(ldw, p)
		wp = append(wp, p)
	}

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
	y := a
	if is.lanes == 16 {
		hi := YMM()
		VEXTRACTF64X4(U8(1), a, hi)
		lo := YMM()
		VADDPS(hi, a.(Vec).AsY(), lo)
		y = lo
	}
	hx := XMM()
	if is.lanes == 16 {
		// EVEX forms only: the allocator may pick X16-X31.
		VEXTRACTF32X4(U8(1), y, hx)
	} else {
		VEXTRACTF128(U8(1), y, hx)
	}
	s := XMM()
	VADDPS(hx, y.(Vec).AsX(), s)
	t := XMM()
	VPERMILPS(U8(0x4e), s, t) // swap the 64-bit halves
	VADDPS(t, s, s)
	VPERMILPS(U8(0xb1), s, t) // swap neighbours
	VADDPS(t, s, s)
	VMOVSS(s, m)
}

// gemv computes y[r] = x · w_r for rows consecutive rows of w (stride ldw):
// decode's matrix-vector product, one sequential stream through the
// weights, four accumulators deep, with the row loop in assembly so a row
// costs no call. With rows = 1 it is also the single dot product that
// tiles leave over.
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

// params loads the named int and pointer arguments into registers.
func params(names ...string) (r0, r1, r2, r3, r4, r5 GPVirtual) {
	regs := make([]GPVirtual, len(names))
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
func weighRows(is isa, nacc int) {
	name := fmt.Sprintf("weighRows%d%s", nacc*is.lanes, is.name)
	TEXT(name, NOSPLIT, "func(p *float32, v *float32, ldv int, rows int, out *float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes out[c] = Σ_r p[r]·v[r*ldv+c] for the first %d columns.", name, nacc*is.lanes))
	p, v, ldv, rows, out := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("p"), p)
	Load(Param("v"), v)
	Load(Param("ldv"), ldv)
	Load(Param("rows"), rows)
	Load(Param("out"), out)
	SHLQ(U8(2), ldv)
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
		VFMADD231PS(Mem{Base: v, Disp: 4 * i * is.lanes}, b, acc[i])
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
