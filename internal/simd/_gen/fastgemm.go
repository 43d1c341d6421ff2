package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// fastGemm16 writes fastGemm16x{R}VNNI, fast mode's prefill kernel for
// weights whose 32-value blocks pair with Q8_0 activations (Q8_0, Q4_0,
// Q5_0): sixteen weight rows, repacked so that each 64-byte vector holds
// four unsigned weight bytes of each of the sixteen rows (simd.pack with
// width 16), against R rows of activations at a time. VPDPBUSD multiplies
// a vector by four activation bytes broadcast, so a lane sums one weight
// row's products and the sixteen lanes are sixteen output columns: a
// block's exact integer dot products take eight VPDPBUSD, and the float
// work (conversion, scale, accumulation) is shared by the sixteen columns
// instead of done per column. The weights' offset to unsigned (8 for
// Q4_0, 16 for Q5_0, 128 for Q8_0) is taken off with the activation
// block's sum times it (corr). Per row t and column c:
//
//	y[t·ldy + c] = Σ_b float32(Σ_i w_cbi·x_tbi) · (dw[b·16+c] · xd[t·blocks+b])
//
// AVX-512 VNNI on 512-bit vectors: each broadcast activation word feeds
// sixteen columns, which measured 25% faster than eight on 256-bit ones
// (BenchmarkMulTFast, T=64).
func fastGemm16(R int) {
	name := fmt.Sprintf("fastGemm16x%dVNNI", R)
	TEXT(name, NOSPLIT, "func(packed *byte, dw *float32, blocks int, xq *int8, ldx int, xd *float32, corr *int32, rows int, y *float32, ldy int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes sixteen columns of y for rows rows of activations (a multiple of %d) against sixteen repacked weight rows.", name, R))
	xrow, ldx, srow, crow, rows, yrow := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("xq"), xrow)
	Load(Param("ldx"), ldx)
	Load(Param("xd"), srow)
	Load(Param("corr"), crow)
	Load(Param("rows"), rows)
	Load(Param("y"), yrow)
	// Row strides: activations ldx bytes, scales and sums 4·blocks bytes.
	lds := GP64()
	Load(Param("blocks"), lds)
	SHLQ(U8(2), lds)
	var ldx3, lds3 GPVirtual
	if R == 4 {
		ldx3, lds3 = GP64(), GP64()
		LEAQ(Mem{Base: ldx, Index: ldx, Scale: 2}, ldx3)
		LEAQ(Mem{Base: lds, Index: lds, Scale: 2}, lds3)
	}
	// row r of a [rows, ·] array at base p, stride ld (ld3 = 3·ld).
	facc := make([]VecVirtual, R)
	ia := make([][2]VecVirtual, R)
	for r := range facc {
		facc[r] = ZMM()
		ia[r] = [2]VecVirtual{ZMM(), ZMM()}
	}
	pp, dp, nb, xp, sp, cp := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Label(name + "_rows")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	Load(Param("packed"), pp)
	Load(Param("dw"), dp)
	Load(Param("blocks"), nb)
	MOVQ(xrow, xp)
	MOVQ(srow, sp)
	MOVQ(crow, cp)
	for r := range facc {
		VPXORD(facc[r], facc[r], facc[r])
	}
	Label(name + "_block")
	for r := range ia {
		VPXORD(ia[r][0], ia[r][0], ia[r][0])
		VPXORD(ia[r][1], ia[r][1], ia[r][1])
	}
	for j := 0; j < 8; j++ {
		wv := ZMM()
		VMOVDQU32(Mem{Base: pp, Disp: 64 * j}, wv)
		for r := range ia {
			VPDPBUSD_BCST(rowAt(xp, ldx, ldx3, r, 4*j), wv, ia[r][j%2])
		}
	}
	dwv := ZMM()
	VMOVUPS(Mem{Base: dp}, dwv)
	for r := range ia {
		VPADDD(ia[r][1], ia[r][0], ia[r][0])
		VPSUBD_BCST(rowAt(cp, lds, lds3, r, 0), ia[r][0], ia[r][0])
		VCVTDQ2PS(ia[r][0], ia[r][0])
		s := ZMM()
		VMULPS_BCST(rowAt(sp, lds, lds3, r, 0), dwv, s)
		VFMADD231PS(s, ia[r][0], facc[r])
	}
	ADDQ(U32(512), pp)
	ADDQ(U8(64), dp)
	ADDQ(U8(32), xp)
	ADDQ(U8(4), sp)
	ADDQ(U8(4), cp)
	DECQ(nb)
	JNZ(LabelRef(name + "_block"))
	// Store the R rows of eight columns; advance R rows.
	yp, ldy := GP64(), GP64()
	Load(Param("ldy"), ldy)
	SHLQ(U8(2), ldy)
	MOVQ(yrow, yp)
	for r := range facc {
		VMOVUPS(facc[r], Mem{Base: yp})
		ADDQ(ldy, yp)
	}
	MOVQ(yp, yrow)
	for r := 0; r < R; r++ {
		ADDQ(ldx, xrow)
		ADDQ(lds, srow)
		ADDQ(lds, crow)
	}
	SUBQ(U8(R), rows)
	JMP(LabelRef(name + "_rows"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// quantQ8Acts writes quantQ8_0ActsAVX512: activations quantized to Q8_0
// blocks exactly as quant.QuantizeActs does (ggml-cpu's x86
// quantize_row_q8_0): per block of 32, amax = max |x|, the scale
// f16(amax/127) (VCVTPS2PH rounds to nearest even, as float16.Fromfloat32
// does), the values x·(127/amax) (0 for amax 0) rounded half to even. With
// sums non-nil it also stores offset times each block's sum of values
// (the fast prefill's corr).
func quantQ8Acts() {
	name := "quantQ8_0ActsAVX512"
	TEXT(name, NOSPLIT, "func(x *float32, blocks int, q *int8, d *float32, sums *int32, lanes *int32, offset int32)")
	Pragma("noescape")
	Doc(name + " quantizes blocks blocks of 32 activations to Q8_0 as quant.QuantizeActs does; with sums non-nil it stores offset times each block's sum, with lanes non-nil -offset times the sum of every 4 values.")
	x, blocks, q, d, sums, lanes := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("x"), x)
	Load(Param("blocks"), blocks)
	Load(Param("q"), q)
	Load(Param("d"), d)
	Load(Param("sums"), sums)
	Load(Param("lanes"), lanes)
	off := GP32()
	Load(Param("offset"), off)
	// -offset in every lane, and unsigned byte ones, for the lane sums.
	negOff := YMM()
	no := GP32()
	MOVL(off, no)
	NEGL(no)
	VPBROADCASTD(no, negOff)
	ones8 := YMM()
	one := GP32()
	MOVL(U32(0x01010101), one)
	VPBROADCASTD(one, ones8)
	absMask := broadcast(avx512, 0x7fffffff)
	c127 := XMM()
	t := GP32()
	MOVL(U32(0x42fe0000), t) // 127.0
	VMOVD(t, c127)
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	lo, hi := ZMM(), ZMM()
	VMOVUPS(Mem{Base: x}, lo)
	VMOVUPS(Mem{Base: x, Disp: 64}, hi)
	a, b := ZMM(), ZMM()
	VANDPS(absMask, lo, a)
	VANDPS(absMask, hi, b)
	VMAXPS(b, a, a)
	mx := fold(a, 16, VMAXPS) // the horizontal max, in the low lane
	// d = f16(amax/127) as float32.
	dv := XMM()
	VDIVSS(c127, mx, dv)
	VCVTPS2PH(U8(0), dv, dv)
	VCVTPH2PS(dv, dv)
	VMOVSS(dv, Mem{Base: d})
	// id = 127/amax, or 0.
	id := XMM()
	VXORPS(id, id, id)
	zero := XMM()
	VXORPS(zero, zero, zero)
	VUCOMISS(zero, mx)
	JE(LabelRef(name + "_zero"))
	VDIVSS(mx, c127, id)
	Label(name + "_zero")
	idz := ZMM()
	VBROADCASTSS(id, idz)
	VMULPS(idz, lo, lo)
	VMULPS(idz, hi, hi)
	VCVTPS2DQ(lo, lo) // MXCSR's rounding: nearest, ties to even
	VCVTPS2DQ(hi, hi)
	VPMOVSDB(lo, Mem{Base: q})
	VPMOVSDB(hi, Mem{Base: q, Disp: 16})
	TESTQ(lanes, lanes)
	JZ(LabelRef(name + "_nolanes"))
	ls := YMM()
	VPXORD(ls, ls, ls)
	VPDPBUSD(Mem{Base: q}, ones8, ls) // Σ of each 4 values
	VPMULLD(negOff, ls, ls)
	VMOVDQU32(ls, Mem{Base: lanes})
	ADDQ(U8(32), lanes)
	Label(name + "_nolanes")
	TESTQ(sums, sums)
	JZ(LabelRef(name + "_next"))
	VPADDD(hi, lo, lo)
	sy := YMM()
	VEXTRACTI64X4(U8(1), lo, sy)
	s2 := YMM()
	VPADDD(sy, lo.(Vec).AsY(), s2)
	s3 := XMM()
	VEXTRACTI32X4(U8(1), s2, s3)
	s4 := XMM()
	VPADDD(s3, s2.(Vec).AsX(), s4)
	VPSHUFD(U8(0x4e), s4, s3)
	VPADDD(s3, s4, s4)
	VPSHUFD(U8(0xb1), s4, s3)
	VPADDD(s3, s4, s4)
	sum := GP32()
	VMOVD(s4, sum)
	IMULL(off, sum)
	MOVL(sum, Mem{Base: sums})
	ADDQ(U8(4), sums)
	Label(name + "_next")
	ADDQ(U8(128), x)
	ADDQ(U8(32), q)
	ADDQ(U8(4), d)
	DECQ(blocks)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// fastGemmK writes fastGemm{Q4_K,Q6_K}x{R}VNNI, fast mode's prefill for
// K-quant weights against Q8_K activations (256 values per super-block,
// a float32 scale each and int16 sums of every 16): eight weight rows
// repacked by simd.packK (6-bit or 4-bit values as unsigned bytes, four of
// a row per lane as in fastGemm16, then the sub-block scales as int32
// lanes, the pairs the sums multiply as int16 pairs, and the row scales
// as float32), R rows of activations at a time. Per super-block and
// column, as ggml's vec_dot_q4_K_q8_K and vec_dot_q6_K_q8_K:
//
//	Q4_K: dx·d·Σ_j sc_j·(Σ q·x) - dx·dmin·Σ_j m_j·(sum of sub-block j's x)
//	Q6_K: dx·d·(Σ_g sc_g·(Σ q·x) - 32·Σ_g sc_g·(sum of group g's x))
//
// with q unsigned (Q6_K's stored 6-bit value, 32 above the weight), the
// integer sums exact. Activation rows have strides ldx bytes (values),
// 4·blocks (scales) and 32·blocks (sums).
func fastGemmK(q string, R int) {
	name := fmt.Sprintf("fastGemm%sx%dVNNI", q, R)
	TEXT(name, NOSPLIT, "func(packed *byte, blocks int, xq *int8, ldx int, xd *float32, sums *int16, rows int, y *float32, ldy int)")
	Pragma("noescape")
	// Q4_K and IQ4_XS run sixteen weight rows on 512-bit vectors, Q6_K
	// eight on 256-bit ones: every offset below scales by L/8.
	L, vec := 16, ZMM
	if q == "Q6_K" {
		L, vec = 8, YMM
	}
	w := L / 8
	Doc(fmt.Sprintf("%s computes %d columns of y for rows rows of Q8_K activations (a multiple of %d) against %d repacked %s weight rows.", name, L, R, L, q))
	// xp, dp and sp run on from row to row (strides ldx, lds = 4·blocks
	// bytes and 8·lds).
	xp, ldx, dp, sp, rows, yrow, lds := GP64(), GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("xq"), xp)
	Load(Param("ldx"), ldx)
	Load(Param("xd"), dp)
	Load(Param("sums"), sp)
	Load(Param("rows"), rows)
	Load(Param("y"), yrow)
	Load(Param("blocks"), lds)
	SHLQ(U8(2), lds)
	// row r's operand: values at xp, scales at dp, sums at sp (strides
	// ldx, lds and lss = 8·lds; the 3s: the multiples a scale cannot give).
	var ldx3, lds3, lss, lss3 GPVirtual
	if R > 2 {
		ldx3, lds3, lss, lss3 = GP64(), GP64(), GP64(), GP64()
		LEAQ(Mem{Base: ldx, Index: ldx, Scale: 2}, ldx3)
		LEAQ(Mem{Base: lds, Index: lds, Scale: 2}, lds3)
		MOVQ(lds, lss)
		SHLQ(U8(3), lss)
		LEAQ(Mem{Base: lss, Index: lss, Scale: 2}, lss3)
	}
	xAt := func(xp GPVirtual, r, disp int) Mem { return rowAt(xp, ldx, ldx3, r, disp) }
	dAt := func(dp GPVirtual, r int) Mem { return rowAt(dp, lds, lds3, r, 0) }
	sAt := func(sp GPVirtual, r, disp int) Mem {
		switch r {
		case 0:
			return Mem{Base: sp, Disp: disp}
		case 1:
			return Mem{Base: sp, Index: lds, Scale: 8, Disp: disp}
		case 2:
			return Mem{Base: sp, Index: lss, Scale: 2, Disp: disp}
		}
		return Mem{Base: sp, Index: lss3, Scale: 1, Disp: disp}
	}
	// IQ4_XS runs on its levels plus 128 in Q4_K's layout (its sub-block
	// scales as Q4_K's sc, each as an int16 pair where Q4_K has m), whose
	// offset 128 the scaled sums take off as Q6_K's 32 is.
	size := map[string]int{"Q4_K": 2624, "Q6_K": 2848, "IQ4_XS": 2592}[q] * w
	acc, isum, msum := make([]VecVirtual, R), make([]VecVirtual, R), make([]VecVirtual, R)
	dacc := make([][2]VecVirtual, R)
	for r := 0; r < R; r++ {
		acc[r], isum[r], msum[r] = vec(), vec(), vec()
		dacc[r] = [2]VecVirtual{vec(), vec()}
	}
	pp, nb := GP64(), GP64()
	// Sums start as copies of one zero, made from a loaded value: a
	// register XORed with itself reads itself, and the allocator keeps
	// it live from the kernel's entry (too many for four rows).
	zero := vec()
	Load(Param("packed"), pp)
	VMOVDQU32(Mem{Base: pp}, zero)
	VPXORD(zero, zero, zero)
	Label(name + "_rows")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	Load(Param("packed"), pp)
	Load(Param("blocks"), nb)
	for r := 0; r < R; r++ {
		VMOVDQA64(zero, acc[r])
	}
	Label(name + "_block")
	for r := 0; r < R; r++ {
		VMOVDQA64(zero, isum[r])
		VMOVDQA64(zero, msum[r])
	}
	// groups: Q4_K's 8 sub-blocks of 32 values, Q6_K's 16 of 16.
	groups, per := 8, 8
	if q == "Q6_K" {
		groups, per = 16, 4
	}
	for g := 0; g < groups; g++ {
		for r := 0; r < R; r++ {
			VMOVDQA64(zero, dacc[r][0])
			VMOVDQA64(zero, dacc[r][1])
		}
		for k := 0; k < per; k++ {
			wv := vec()
			VMOVDQU32(Mem{Base: pp, Disp: 32 * w * (per*g + k)}, wv)
			for r := 0; r < R; r++ {
				VPDPBUSD_BCST(xAt(xp, r, 4*(per*g+k)), wv, dacc[r][k%2])
			}
		}
		scv := vec()
		VMOVDQU32(Mem{Base: pp, Disp: w * (2048 + 32*g)}, scv)
		var mv VecVirtual
		if q != "Q6_K" {
			mv = vec()
			VMOVDQU32(Mem{Base: pp, Disp: w * (2304 + 32*g)}, mv)
		}
		for r := 0; r < R; r++ {
			VPADDD(dacc[r][1], dacc[r][0], dacc[r][0])
			VPMULLD(scv, dacc[r][0], dacc[r][0])
			VPADDD(dacc[r][0], isum[r], isum[r])
			if q != "Q6_K" {
				// m_j times sub-block j's sums of 16 (a pair of int16).
				VPDPWSSD_BCST(sAt(sp, r, 4*g), mv, msum[r])
			}
		}
	}
	if q == "Q6_K" {
		for i := 0; i < 8; i++ {
			pv := YMM()
			VMOVDQU32(Mem{Base: pp, Disp: 2560 + 32*i}, pv)
			for r := 0; r < R; r++ {
				VPDPWSSD_BCST(sAt(sp, r, 4*i), pv, msum[r])
			}
		}
	}
	dv := vec()
	dOff := map[string]int{"Q4_K": 2560, "Q6_K": 2816, "IQ4_XS": 2560}[q] * w
	VMOVUPS(Mem{Base: pp, Disp: dOff}, dv)
	var dmv VecVirtual
	if q == "Q4_K" {
		dmv = vec()
		VMOVUPS(Mem{Base: pp, Disp: 2592 * w}, dmv)
	}
	for r := 0; r < R; r++ {
		if q != "Q4_K" {
			VPSLLD(U8(map[string]uint8{"Q6_K": 5, "IQ4_XS": 7}[q]), msum[r], msum[r]) // the offset, 32 or 128
			VPSUBD(msum[r], isum[r], isum[r])
		}
		VCVTDQ2PS(isum[r], isum[r])
		s := vec()
		VMULPS_BCST(dAt(dp, r), dv, s)
		VFMADD231PS(s, isum[r], acc[r])
		if q == "Q4_K" {
			VCVTDQ2PS(msum[r], msum[r])
			VMULPS_BCST(dAt(dp, r), dmv, s)
			VFNMADD231PS(s, msum[r], acc[r])
		}
	}
	ADDQ(U32(size), pp)
	ADDQ(U32(256), xp)
	ADDQ(U8(4), dp)
	ADDQ(U8(32), sp)
	DECQ(nb)
	JNZ(LabelRef(name + "_block"))
	ldy := GP64()
	Load(Param("ldy"), ldy)
	SHLQ(U8(2), ldy)
	for r := 0; r < R; r++ {
		VMOVUPS(acc[r], Mem{Base: yrow})
		ADDQ(ldy, yrow)
	}
	// xp stands 256·blocks values on from row 0's, dp and sp at row 1's:
	// on to row R's.
	MOVQ(lds, nb)
	SHLQ(U8(6), nb)
	SUBQ(nb, xp)
	for r := 0; r < R; r++ {
		ADDQ(ldx, xp)
	}
	for r := 1; r < R; r++ {
		ADDQ(lds, dp)
		for i := 0; i < 8; i++ {
			ADDQ(lds, sp)
		}
	}
	SUBQ(U8(R), rows)
	JMP(LabelRef(name + "_rows"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// fastQ4_0VNNI writes fastQ4_0VNNI, fast mode's decode product for Q4_0
// rows (y[r] = w_r · x, rows rows of blocks blocks, stride ldw bytes)
// against Q8_0 activations xq, xd: each block's nibbles go to VPDPBUSD
// unsigned, as they are stored, and the lanes start from -8 times the sum
// of their four activations (lanes, from quantQ8_0ActsAVX512), so each
// lane ends with exactly the integer llama.cpp's kernel has there, Σ
// (q-8)·x over four values. Each block's float steps are llama.cpp's
// (d = dw·dx, then a multiply-add), but even and odd blocks go to two
// accumulators, summed at the row's end: with one, the multiply-add's
// latency (4 cycles) bounded every block, and the kernel ran at about the
// memory's speed instead of above it. dw comes from halves (halfTable in
// Go) as gemvQ4_0Table's d does.
//
// Q5_0 (q = nibble | fifth bit << 4, weight q-16) is the same with lanes
// from -16 times the sums, the fifth bits spread to their bytes by
// VPSHUFB and VPTESTMB and added as 16 under that mask.
func fastQ4VNNI(q string) {
	name := "fast" + q + "VNNI"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, rows int, blocks int, xq *int8, xd *float32, lanes *int32, halves *float32, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = w_r · x for rows " + q + " rows of blocks blocks (stride ldw bytes) and Q8_0 activations xq, xd with lanes -offset·(sums of 4); halves is halfTable.")
	bsize, qoff := 18, 2
	if q == "Q5_0" {
		bsize, qoff = 22, 6
	}
	w, ldw, rows := GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("ldw"), ldw)
	Load(Param("rows"), rows)
	y, halves := GP64(), GP64()
	Load(Param("y"), y)
	Load(Param("halves"), halves)
	m0f := YMM()
	t := GP32()
	MOVL(U32(0x0f0f0f0f), t)
	VPBROADCASTD(t, m0f)
	var bitSel, c16 VecVirtual
	if q == "Q5_0" {
		bitSel, c16 = YMM(), YMM()
		VMOVDQU32(q5BitSel, bitSel)
		MOVL(U32(0x10101010), t)
		VPBROADCASTD(t, c16)
	}
	// The activations' pointers and the block count are reloaded for
	// each row, which leaves general registers for the scale's index.
	wp, xp, dp, lp, b := GP64(), GP64(), GP64(), GP64(), GP64()
	rowLoopPairs(name, avx2, rows, w, ldw, y, b, []VecVirtual{YMM(), YMM()}, func() {
		MOVQ(w, wp)
		Load(Param("xq"), xp)
		Load(Param("xd"), dp)
		Load(Param("lanes"), lp)
		Load(Param("blocks"), b)
	}, func(acc []VecVirtual) {
		prefetchBlock(wp, bsize)
		lo, hi := XMM(), XMM()
		VMOVDQU32(Mem{Base: wp, Disp: qoff}, lo)
		VPSRLW(U8(4), lo, hi)
		nib := YMM()
		VINSERTI32X4(U8(1), hi, lo.AsY(), nib)
		VPANDD(m0f, nib, nib)
		if q == "Q5_0" {
			bits := YMM()
			VPBROADCASTD(Mem{Base: wp, Disp: 2}, bits)
			VPSHUFB(q5Shuf, bits, bits) // byte i: byte i/8 of qh
			set := K()
			VPTESTMB(bitSel, bits, set) // bit i%8 of it
			VPADDB(c16, nib, set, nib)
		}
		isum := YMM()
		VMOVDQU32(Mem{Base: lp}, isum)
		VPDPBUSD(Mem{Base: xp}, nib, isum)
		VCVTDQ2PS(isum, isum)
		h := GP64()
		MOVWQZX(Mem{Base: wp}, h)
		d := YMM()
		VBROADCASTSS(Mem{Base: halves, Index: h, Scale: 4}, d)
		VMULPS_BCST(Mem{Base: dp}, d, d)
		VFMADD231PS(isum, d, acc[0])
		ADDQ(U8(bsize), wp)
		ADDQ(U8(32), xp)
		ADDQ(U8(4), dp)
		ADDQ(U8(32), lp)
	})
}

// q5BitSel is 1 << (i%8) in byte i: the bit of its qh byte that byte i
// tests.
var q5BitSel Mem

func fastVNNIConsts() {
	q5BitSel = GLOBL("q5bitsel", RODATA|NOPTR)
	for i := 0; i < 4; i++ {
		DATA(8*i, U64(0x8040201008040201))
	}
}

// quantQ8KActs writes quantQ8_KActsAVX512: activations quantized to Q8_K
// super-blocks of 256 exactly as quant.QuantizeActs does (ggml's
// quantize_row_q8_K_ref): mx, the first value of largest magnitude;
// iscale = -127/mx; q = min(127, nearest(iscale·x)) (VCVTPS2DQ rounds
// half to even, as nearest_int's float trick does); the int16 sums of
// every 16 values; d = 1/iscale. A block of zeros gets d = 0, q = 0.
func quantQ8KActs() {
	name := "quantQ8_KActsAVX512"
	TEXT(name, NOSPLIT, "func(x *float32, blocks int, q *int8, d *float32, sums *int16)")
	Pragma("noescape")
	Doc(name + " quantizes blocks super-blocks of 256 activations to Q8_K as quant.QuantizeActs does.")
	x, blocks, q, d, sums := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("x"), x)
	Load(Param("blocks"), blocks)
	Load(Param("q"), q)
	Load(Param("d"), d)
	Load(Param("sums"), sums)
	absMask := broadcast(avx512, 0x7fffffff)
	c127 := broadcast(avx512, 127)
	t := GP32()
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	// amax over the 16 vectors.
	m := ZMM()
	VANDPS(Mem{Base: x}, absMask, m)
	for i := 1; i < 16; i++ {
		a := ZMM()
		VANDPS(Mem{Base: x, Disp: 64 * i}, absMask, a)
		VMAXPS(a, m, m)
	}
	mx := fold(m, 16, VMAXPS)
	zero := XMM()
	VXORPS(zero, zero, zero)
	VUCOMISS(zero, mx)
	JE(LabelRef(name + "_zeros"))
	// The first value whose magnitude is amax.
	amax := ZMM()
	VBROADCASTSS(mx, amax)
	idx, off := GP64(), GP64()
	XORQ(off, off)
	Label(name + "_find")
	a := ZMM()
	VANDPS(Mem{Base: x, Index: off, Scale: 1}, absMask, a)
	hit := K()
	VCMPPS(U8(0), amax, a, hit) // equal (ordered)
	KMOVW(hit, t)
	TESTL(t, t)
	JNZ(LabelRef(name + "_found"))
	ADDQ(U8(64), off)
	JMP(LabelRef(name + "_find"))
	Label(name + "_found")
	TZCNTL(t, t)
	MOVL(t, idx.As32())
	LEAQ(Mem{Base: off, Index: idx, Scale: 4}, idx)
	is := q8kScale(Mem{Base: x, Index: idx, Scale: 1}, Mem{Base: d}, t)
	isz := ZMM()
	VBROADCASTSS(is, isz)
	for g := 0; g < 16; g++ {
		v := ZMM()
		VMULPS(Mem{Base: x, Disp: 64 * g}, isz, v)
		VCVTPS2DQ(v, v)
		VPMINSD(c127, v, v)
		VPMOVSDB(v, Mem{Base: q, Disp: 16 * g})
		// The group's sum, as int16.
		y := YMM()
		VEXTRACTI64X4(U8(1), v, y)
		s8 := YMM()
		VPADDD(y, v.(Vec).AsY(), s8)
		x4 := XMM()
		VEXTRACTI32X4(U8(1), s8, x4)
		s4 := XMM()
		VPADDD(x4, s8.(Vec).AsX(), s4)
		VPSHUFD(U8(0x4e), s4, x4)
		VPADDD(x4, s4, s4)
		VPSHUFD(U8(0xb1), s4, x4)
		VPADDD(x4, s4, s4)
		VPEXTRW(U8(0), s4, Mem{Base: sums, Disp: 2 * g})
	}
	JMP(LabelRef(name + "_next"))
	Label(name + "_zeros")
	VMOVSS(zero, Mem{Base: d})
	z := ZMM()
	VPXORD(z, z, z)
	for i := 0; i < 4; i++ {
		VMOVDQU32(z, Mem{Base: q, Disp: 64 * i})
	}
	VMOVDQU32(z.(Vec).AsY(), Mem{Base: sums})
	Label(name + "_next")
	ADDQ(U32(1024), x)
	ADDQ(U32(256), q)
	ADDQ(U8(4), d)
	ADDQ(U8(32), sums)
	DECQ(blocks)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// fastQ6KVNNI writes fastQ6_KVNNI, fast mode's decode product for Q6_K
// rows against Q8_K activations (y[r] = w_r · x, rows rows of blocks
// super-blocks, stride ldw bytes). The 6-bit values are assembled 32 at a
// time with byte operations and go to VPDPBUSD unsigned; each lane starts
// from -32 times the sum of its four activations (lanes), so it ends with
// Σ (q-32)·x over four values, which VPMULLD scales by the group's int8
// scale: exactly the integers in the lanes of llama.cpp's AVX2
// vec_dot_q6_K_q8_K, and then its float steps (d = dx·dw, one
// accumulator), so results are unchanged.
func fastQ6KVNNI() {
	name := "fastQ6_KVNNI"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, rows int, blocks int, xq *int8, xd *float32, lanes *int32, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = w_r · x for rows Q6_K rows of blocks super-blocks (stride ldw bytes) and Q8_K activations xq, xd with lanes -32·(sums of 4).")
	w, ldw, rows, blocks, xq, xd := params("w", "ldw", "rows", "blocks", "xq", "xd")
	lanes, y := GP64(), GP64()
	Load(Param("lanes"), lanes)
	Load(Param("y"), y)
	t := GP32()
	m0f, m30 := YMM(), YMM()
	MOVL(U32(0x0f0f0f0f), t)
	VPBROADCASTD(t, m0f)
	MOVL(U32(0x30303030), t)
	VPBROADCASTD(t, m30)
	idx := make([]VecVirtual, 8)
	for v := range idx {
		idx[v] = YMM()
		VMOVDQU32(q6kScaleIdx.Offset(32*v), idx[v])
	}
	evenWords := K()
	MOVL(U32(0x5555), t)
	KMOVW(t, evenWords)
	wp, xp, dp, lp, b := GP64(), GP64(), GP64(), GP64(), GP64()
	acc := YMM()
	rowLoop(name, avx2, rows, w, ldw, y, b, []VecVirtual{acc}, func() {
		MOVQ(w, wp)
		MOVQ(xq, xp)
		MOVQ(xd, dp)
		MOVQ(lanes, lp)
		MOVQ(blocks, b)
	}, func() {
		prefetchBlock(wp, 210)
		scw := YMM()
		VPMOVSXBW(Mem{Base: wp, Disp: 192}, scw) // the 16 scales as int16
		sumi := YMM()
		VPXORD(sumi, sumi, sumi)
		for h := 0; h < 2; h++ {
			values := q6Half(wp, h, m0f, m30)
			for k := 0; k < 4; k++ {
				q := values(k)
				d := YMM()
				VMOVDQU32(Mem{Base: lp, Disp: 128*h + 32*k}, d)
				VPDPBUSD(Mem{Base: xp, Disp: 128*h + 32*k}, q, d)
				// Scales 8h+2k (values l < 16) and 8h+2k+1 (l >= 16) in the
				// low words of the lanes, zero in the high: VPMADDWD then
				// multiplies each lane's sum, which fits 16 bits (|Σ| <=
				// 4·32·127), by its scale.
				sc := YMM()
				VPERMW_Z(scw, idx[4*h+k], evenWords, sc)
				VPMADDWD(sc, d, d)
				VPADDD(d, sumi, sumi)
			}
		}
		VCVTDQ2PS(sumi, sumi)
		hx := XMM()
		VPBROADCASTW(Mem{Base: wp, Disp: 208}, hx)
		dv := YMM()
		VCVTPH2PS(hx, dv)
		VMULPS_BCST(Mem{Base: dp}, dv, dv)
		VFMADD231PS(sumi, dv, acc)
		ADDQ(U32(210), wp)
		ADDQ(U32(256), xp)
		ADDQ(U8(4), dp)
		ADDQ(U32(256), lp) // 64 lanes
	})
}

// q6kScaleIdx holds, for vector 4h+k of a Q6_K super-block, the VPERMW
// word indices that put scale 8h+2k in the low words of lanes 0-3 and
// 8h+2k+1 in those of lanes 4-7 (the high words are zeroed by the mask).
var q6kScaleIdx Mem

func q6kConsts() {
	q6kScaleIdx = GLOBL("q6kscaleidx", RODATA|NOPTR)
	for v := 0; v < 8; v++ {
		h, k := v/4, v%4
		for wd := 0; wd < 16; wd++ {
			DATA(32*v+2*wd, U16(8*h+2*k+wd/8))
		}
	}
}
