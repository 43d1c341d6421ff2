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
	ap := []GPVirtual{a}
	for i := 1; i < R; i++ {
		p := GP64()
		MOVQ(ap[i-1], p)
		ADDQ(lda, p)
		ap = append(ap, p)
	}
	nv := N / 8
	acc := make([][]VecVirtual, R)
	for i := range acc {
		acc[i] = make([]VecVirtual, nv)
		for j := range acc[i] {
			acc[i][j] = YMM()
			VXORPS(acc[i][j], acc[i][j], acc[i][j])
		}
	}
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
	c, ldc, add := GP64(), GP64(), GP64()
	Load(Param("c"), c)
	Load(Param("ldc"), ldc)
	Load(Param("add"), add)
	SHLQ(U8(2), ldc)
	alpha := YMM()
	al, err := Param("alpha").Resolve()
	if err != nil {
		panic(err)
	}
	VBROADCASTSS(al.Addr, alpha)
	TESTQ(add, add)
	JNZ(LabelRef(name + "_add"))
	for i := 0; i < R; i++ {
		for j := range acc[i] {
			VMULPS(alpha, acc[i][j], acc[i][j])
			VMOVUPS(acc[i][j], Mem{Base: c, Disp: 32 * j})
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
			v := YMM()
			VMOVUPS(Mem{Base: c, Disp: 32 * j}, v)
			VFMADD231PS(alpha, acc[i][j], v)
			VMOVUPS(v, Mem{Base: c, Disp: 32 * j})
		}
		if i+1 < R {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}
