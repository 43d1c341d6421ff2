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

// panel8AVX2 writes 8 rows of dt weights (stride ldw) as float32 columns
// of a GemmPanels panel: dst[d*16+r] = w[r*ldw+d] for r < 8, d < k (k a
// multiple of 8), widened exactly. Each step loads 8 values of each row
// and transposes the 8×8 block in registers (unpack, shuffle, 128-bit
// permute).
func panel8AVX2(dt dtype) {
	name := fmt.Sprintf("panel8%sAVX2", dt.name)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(w %s, ldw int, k int, dst *float32)", dt.gotyp))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst[d*16+r] = w[r*ldw+d] for r < 8, d < k (a multiple of 8): 8 %s rows as columns of a 16-wide panel.", name, dt.name))
	w, ldw, k, dst, _, _ := params("w", "ldw", "k", "dst")
	if dt.size == 4 {
		SHLQ(U8(2), ldw)
	} else {
		SHLQ(U8(1), ldw)
	}
	rp := []GPVirtual{w}
	for i := 1; i < 8; i++ {
		p := GP64()
		MOVQ(rp[i-1], p)
		ADDQ(ldw, p)
		rp = append(rp, p)
	}
	idx := GP64()
	XORQ(idx, idx)
	Label(name + "_loop")
	CMPQ(idx, k)
	JGE(LabelRef(name + "_done"))
	r := make([]VecVirtual, 8)
	for i := range r {
		r[i] = YMM()
		loadWidened(dt, Mem{Base: rp[i], Index: idx, Scale: uint8(dt.size)}, r[i])
	}
	// t[2i], t[2i+1]: rows 2i and 2i+1 interleaved, low and high pairs
	// of each 128-bit half.
	t := make([]VecVirtual, 8)
	for i := 0; i < 4; i++ {
		t[2*i], t[2*i+1] = YMM(), YMM()
		VUNPCKLPS(r[2*i+1], r[2*i], t[2*i])
		VUNPCKHPS(r[2*i+1], r[2*i], t[2*i+1])
	}
	// s: four rows' value d of each 128-bit half, for d = 0..3 (+4).
	s := make([]VecVirtual, 8)
	for h := 0; h < 2; h++ { // rows 0-3, rows 4-7
		a, b := t[4*h], t[4*h+2]   // low pairs of rows 4h,4h+1 and 4h+2,4h+3
		c, e := t[4*h+1], t[4*h+3] // high pairs
		s[4*h+0], s[4*h+1], s[4*h+2], s[4*h+3] = YMM(), YMM(), YMM(), YMM()
		VSHUFPS(U8(0x44), b, a, s[4*h+0])
		VSHUFPS(U8(0xEE), b, a, s[4*h+1])
		VSHUFPS(U8(0x44), e, c, s[4*h+2])
		VSHUFPS(U8(0xEE), e, c, s[4*h+3])
	}
	for d := 0; d < 4; d++ {
		lo, hi := YMM(), YMM()
		VPERM2F128(U8(0x20), s[4+d], s[d], lo)
		VPERM2F128(U8(0x31), s[4+d], s[d], hi)
		VMOVUPS(lo, Mem{Base: dst, Disp: 64 * d})
		VMOVUPS(hi, Mem{Base: dst, Disp: 64 * (d + 4)})
	}
	ADDQ(U32(8), idx)
	ADDQ(U32(8*64), dst)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
