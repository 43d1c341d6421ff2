package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// gemmF32AVX2 writes the broadcast micro-kernel of a float32 product
// C[R×N] (+)= alpha · A[R×k] · B[k×N] with B's rows contiguous along N:
// for each d, N/8 vectors of B's row d are loaded once and each of A's R
// values a[i][d] is broadcast into them, so the R·N/8 accumulators need no
// horizontal sums (the dot-product tiles' form pays one per output). With
// R=6, N=16 the accumulators, two B vectors and a broadcast fill the 16
// YMM registers.
func gemmF32AVX2(R, N int) {
	name := fmt.Sprintf("gemm%dx%dF32AVX2", R, N)
	TEXT(name, NOSPLIT, "func(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha float32, add int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets (add=0) or adds to (add=1) c[i*ldc+j] alpha·Σ_d a[i*lda+d]·b[d*ldb+j] for i < %d, j < %d, d < k.", name, R, N))
	a, lda, b, ldb, k, _ := params("a", "lda", "b", "ldb", "k")
	SHLQ(U8(2), lda)
	SHLQ(U8(2), ldb)
	ap := rowPointers(a, lda, R)
	nv := N / 8
	acc := zeroed(R, nv)
	idx := GP64()
	XORQ(idx, idx)
	Label(name + "_loop")
	CMPQ(idx, k)
	JGE(LabelRef(name + "_done"))
	bv := make([]VecVirtual, nv)
	for j := range bv {
		bv[j] = YMM()
		VMOVUPS(Mem{Base: b, Disp: 32 * j}, bv[j])
	}
	for i := 0; i < R; i++ {
		t := YMM()
		VBROADCASTSS(Mem{Base: ap[i], Index: idx, Scale: 4}, t)
		for j := range bv {
			VFMADD231PS(bv[j], t, acc[i][j])
		}
	}
	ADDQ(ldb, b)
	INCQ(idx)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	gemmStore(name, acc)
}

// gemmStore ends a broadcast micro-kernel: C's rows (stride ldc) get
// alpha times the accumulators acc[i] (each row's vectors side by side),
// or, with add set, have that added.
func gemmStore(name string, acc [][]VecVirtual) {
	vec := YMM
	if acc[0][0].Size() == 64 {
		vec = ZMM
	}
	size := int(acc[0][0].Size())
	c, ldc, add := GP64(), GP64(), GP64()
	Load(Param("c"), c)
	Load(Param("ldc"), ldc)
	Load(Param("add"), add)
	SHLQ(U8(2), ldc)
	alpha := vec()
	al, err := Param("alpha").Resolve()
	if err != nil {
		panic(err)
	}
	VBROADCASTSS(al.Addr, alpha)
	TESTQ(add, add)
	JNZ(LabelRef(name + "_add"))
	R := len(acc)
	for i := 0; i < R; i++ {
		for j := range acc[i] {
			VMULPS(alpha, acc[i][j], acc[i][j])
			VMOVUPS(acc[i][j], Mem{Base: c, Disp: size * j})
		}
		if i+1 < R {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
	Label(name + "_add")
	for i := 0; i < R; i++ {
		for j := range acc[i] {
			v := vec()
			VMOVUPS(Mem{Base: c, Disp: size * j}, v)
			VFMADD231PS(alpha, acc[i][j], v)
			VMOVUPS(v, Mem{Base: c, Disp: size * j})
		}
		if i+1 < R {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}

// gemmF32AVX512 writes gemm{R}x16F32AVX512, gemmF32AVX2's product on
// 512-bit vectors: B's 16 values of row d in one register and each of
// A's R values broadcast from memory into its multiply-add. Up to 8 rows
// fit, so a batch of 8 rows (or 32) runs in whole tiles where the 6-row
// AVX2 tile left 2-row passes that the FMA's latency bounds. Each output
// sums its products in d's order, as the AVX2 kernels do.
func gemmF32AVX512(R int) {
	name := fmt.Sprintf("gemm%dx16F32AVX512", R)
	TEXT(name, NOSPLIT, "func(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha float32, add int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets (add=0) or adds to (add=1) c[i*ldc+j] alpha·Σ_d a[i*lda+d]·b[d*ldb+j] for i < %d, j < 16, d < k.", name, R))
	a, lda, b, ldb, k, _ := params("a", "lda", "b", "ldb", "k")
	SHLQ(U8(2), lda)
	SHLQ(U8(2), ldb)
	ap := rowPointers(a, lda, R)
	acc := make([]VecVirtual, R)
	for i := range acc {
		acc[i] = ZMM()
		VPXORD(acc[i], acc[i], acc[i])
	}
	idx := GP64()
	XORQ(idx, idx)
	Label(name + "_loop")
	CMPQ(idx, k)
	JGE(LabelRef(name + "_done"))
	bv := ZMM()
	VMOVUPS(Mem{Base: b}, bv)
	for i := 0; i < R; i++ {
		VFMADD231PS_BCST(Mem{Base: ap[i], Index: idx, Scale: 4}, bv, acc[i])
	}
	ADDQ(ldb, b)
	INCQ(idx)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	rows := make([][]VecVirtual, R)
	for i := range rows {
		rows[i] = acc[i : i+1]
	}
	gemmStore(name, rows)
}

// panelMul writes the products of a weight stored as panels (panels.go):
// y[i*ldy+c] = Σ_d x[i*ldx+d] · P[c/16][d][c%16] for R rows of x and the
// 16·NP columns of NP panels (stride ps values) of dt weights, widened
// exactly. Each output sums its k products in order, one FMA each, for
// every R: a row's result does not depend on the rows beside it. One row
// (decode) takes 4 panels at once, 8 independent accumulators to cover
// the FMA's latency.
func panelMul(R, NP int, dt dtype) {
	name := fmt.Sprintf("panelMul%dx%d%sAVX2", R, NP, dt.name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(x *float32, ldx int, w %s, ps int, k int, y *float32, ldy int)", dt.gotyp))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets y[i*ldy+c] = Σ_d x[i*ldx+d]·w[(c/16)*ps+d*16+c%%16] for i < %d, c < %d, d < k (%s panels).", name, R, 16*NP, dt.name))
	x, ldx, w, ps, k, _ := params("x", "ldx", "w", "ps", "k")
	SHLQ(U8(2), ldx)
	if dt.size == 4 {
		SHLQ(U8(2), ps)
	} else {
		SHLQ(U8(1), ps)
	}
	xp := rowPointers(x, ldx, R)
	wp := rowPointers(w, ps, NP)
	acc := zeroed(R, 2*NP)
	idx := GP64()
	XORQ(idx, idx)
	Label(name + "_loop")
	CMPQ(idx, k)
	JGE(LabelRef(name + "_done"))
	if R == 1 {
		bc := YMM()
		VBROADCASTSS(Mem{Base: xp[0], Index: idx, Scale: 4}, bc)
		for p := 0; p < NP; p++ {
			for h := 0; h < 2; h++ {
				t := YMM()
				loadWidened(dt, Mem{Base: wp[p], Disp: 8 * h * dt.size}, t)
				VFMADD231PS(t, bc, acc[0][2*p+h])
			}
		}
	} else {
		t := make([]VecVirtual, 2*NP)
		for p := 0; p < NP; p++ {
			for h := 0; h < 2; h++ {
				t[2*p+h] = YMM()
				loadWidened(dt, Mem{Base: wp[p], Disp: 8 * h * dt.size}, t[2*p+h])
			}
		}
		for i := 0; i < R; i++ {
			bc := YMM()
			VBROADCASTSS(Mem{Base: xp[i], Index: idx, Scale: 4}, bc)
			for j := range t {
				VFMADD231PS(t[j], bc, acc[i][j])
			}
		}
	}
	for p := 0; p < NP; p++ {
		ADDQ(U32(16*dt.size), wp[p])
	}
	INCQ(idx)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	y, ldy := GP64(), GP64()
	Load(Param("y"), y)
	Load(Param("ldy"), ldy)
	SHLQ(U8(2), ldy)
	for i := 0; i < R; i++ {
		for j := range acc[i] {
			VMOVUPS(acc[i][j], Mem{Base: y, Disp: 32 * j})
		}
		if i+1 < R {
			ADDQ(ldy, y)
		}
	}
	VZEROUPPER()
	RET()
}

// rowPointers is base and n-1 more pointers, each stride bytes past the
// one before: a kernel's row pointers.
func rowPointers(base, stride GPVirtual, n int) []GPVirtual {
	ps := []GPVirtual{base}
	for i := 1; i < n; i++ {
		p := GP64()
		MOVQ(ps[i-1], p)
		ADDQ(stride, p)
		ps = append(ps, p)
	}
	return ps
}

// zeroed is R rows of n zeroed YMM accumulators.
func zeroed(R, n int) [][]VecVirtual {
	acc := make([][]VecVirtual, R)
	for i := range acc {
		acc[i] = make([]VecVirtual, n)
		for j := range acc[i] {
			acc[i][j] = YMM()
			VXORPS(acc[i][j], acc[i][j], acc[i][j])
		}
	}
	return acc
}
