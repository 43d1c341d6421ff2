package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// exactProduct: where ggml multiplies a dequantized value and then adds or
// subtracts (Q4_1/Q5_1 q·d + m; Q4_K/Q5_K/Q2_K (d·sc)·q − dmin·m), the
// product is exact in float32: d is a half (11 significant bits), sc at
// most 6 bits, so d·sc fits in 17 bits, and q at most 5 more (22 ≤ 24).
// A fused multiply-add then rounds once, where ggml's product rounds to
// itself, so VFMADD213PS/VFMSUB213PS give ggml's float32 bit for bit
// (TestDequantKernels checks it) with one instruction fewer per 8 values.
//
// lowbitDequantAVX2 writes dequant<q>AVX2(w, blocks, dst) for the formats
// that have no other kernel (Q4_1, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_XS): blocks
// whole blocks from w (rows of whole blocks lie one after another) into
// dst, each value in ggml's dequantize_row_* order of float32 operations:
// Q4_1/Q5_1 q·d then + m; Q2_K/Q5_K (d·sc)·q then − dmin·m; Q3_K
// (d·sc)·q; IQ4_XS (d·(ls−32))·K[q]. Every rounding is ggml's: where a
// multiply and an add are fused, the product is exact (exactProduct). Prefill multiplies
// the widened rows with the float32 kernels.
func lowbitDequantAVX2(q string) { lowbitRowsAVX2(q, false) }

// lowbitGemvAVX2 writes gemv<q>AVX2(x, w, ldw, blocks, rows, y), exact
// decode for the same formats: each block is dequantized in registers by
// the very instructions of dequant<q>AVX2, and each vector of 8 values,
// instead of being stored, goes into one of four float32 accumulators by
// an FMA with x (y[r] = x · w_r, summed in another order than the float32
// kernels, as every fused kernel does).
func lowbitGemvAVX2(q string) { lowbitRowsAVX2(q, true) }

func lowbitRowsAVX2(q string, dot bool) {
	name := "dequant" + q + "AVX2"
	sig := "func(w *byte, blocks int, dst *float32)"
	if dot {
		name = "gemv" + q + "AVX2"
		sig = "func(x *float32, w *byte, ldw int, blocks int, rows int, y *float32)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	if dot {
		Doc(name + " computes y[r] = x · w_r for rows " + q + " rows of blocks blocks (stride ldw bytes), dequantizing as ggml does.")
	} else {
		Doc(name + " dequantizes blocks " + q + " blocks from w into dst, exactly as ggml does.")
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
		Load(Param("w"), wp)
		Load(Param("blocks"), nb)
		Load(Param("dst"), out)
	}
	bsize := map[string]int{"Q4_1": 20, "Q5_1": 24, "Q2_K": 84, "Q3_K": 110, "Q5_K": 176, "IQ4_XS": 136}[q]
	values := 256
	if q == "Q4_1" || q == "Q5_1" {
		values = 32
	}
	bcast := func(x VecVirtual) VecVirtual {
		y := YMM()
		VBROADCASTSS(x, y)
		return y
	}
	// bits8 loads 8 bytes at m as int32 lanes, shifted right by shift
	// and masked with mask.
	bits8 := func(m Mem, shift int, mask VecVirtual) VecVirtual {
		v := YMM()
		VPMOVZXBD(m, v)
		if shift > 0 {
			VPSRLD(U8(shift), v, v)
		}
		if mask != nil {
			VPAND(mask, v, v)
		}
		return v
	}
	var m1, m15, b0f, b10, b01, b03, b04 VecVirtual
	switch q {
	case "Q4_1":
		m15 = broadcast(avx2isa, 15)
	case "Q5_1":
		m1, m15 = broadcast(avx2isa, 1), broadcast(avx2isa, 15)
	case "Q5_K":
		b0f, b10 = broadcast(avx2isa, 0x0f0f0f0f), broadcast(avx2isa, 0x10101010)
	case "Q2_K":
		b03 = broadcast(avx2isa, 0x03030303)
	case "Q3_K":
		b03, b01, b04 = broadcast(avx2isa, 0x03030303), broadcast(avx2isa, 0x01010101), broadcast(avx2isa, 0x04040404)
	}
	var levels, mask16 VecVirtual
	if q == "IQ4_XS" {
		levels, mask16 = XMM(), XMM()
		VMOVDQU(iq4Levels, levels)
		VMOVDQU(iq4Mask, mask16)
	}
	// The super-block's scales as float32s (q2kScalesAVX2 and its kin).
	var scaleBuf Mem
	if q != "Q4_1" && q != "Q5_1" {
		scaleBuf = AllocLocal(128)
	}
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
	Label(name + "_block")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_blocksdone"))
	if dot {
		prefetchBlock(wp, bsize)
	}
	store := func(v VecVirtual, value int) {
		if dot {
			VFMADD231PS(Mem{Base: xp, Disp: 4 * value}, v, acc[(value/8)%4])
			return
		}
		VMOVUPS(v, Mem{Base: out, Disp: 4 * value})
	}
	switch q {
	case "Q4_1", "Q5_1":
		d, m := bcast(halfToScalar(Mem{Base: wp})), bcast(halfToScalar(Mem{Base: wp, Disp: 2}))
		qs := 4
		var qh VecVirtual
		if q == "Q5_1" {
			qs = 8
			qh = YMM()
			VPBROADCASTD(Mem{Base: wp, Disp: 4}, qh)
		}
		for v := 0; v < 4; v++ {
			shift := 0
			if v >= 2 {
				shift = 4
			}
			x := bits8(Mem{Base: wp, Disp: qs + 8*(v%2)}, shift, m15)
			if q == "Q5_1" {
				// Bit j of qh is value j's fifth bit: shift lane i by
				// 8v+i (lowbitShifts) and keep bit 0.
				h := YMM()
				VPSRLVD(lowbitShifts.Offset(32*v), qh, h)
				VPAND(m1, h, h)
				VPSLLD(U8(4), h, h)
				VPOR(h, x, x)
			}
			VCVTDQ2PS(x, x)
			VFMADD213PS(m, d, x) // q·d + m: q·d is exact (see exactProduct)
			store(x, 8*v)
		}
	case "Q5_K":
		q4kScalesAVX2(wp, scaleBuf)
		qh := YMM()
		VMOVDQU(Mem{Base: wp, Disp: 16}, qh)
		// fifth ORs into v bit b of each byte of qh, moved to bit 4.
		fifth := func(v VecVirtual, b int) {
			t := YMM()
			switch {
			case b < 4:
				VPSLLW(U8(4-b), qh, t)
			case b > 4:
				VPSRLW(U8(b-4), qh, t)
			default:
				VMOVDQA(qh, t)
			}
			VPAND(b10, t, t)
			VPOR(t, v, v)
		}
		for ch := 0; ch < 4; ch++ {
			// Chunk ch's 64 values as bytes: low nibbles are sub-block
			// 2ch, high nibbles 2ch+1, byte l value l.
			lo, hi := YMM(), YMM()
			VMOVDQU(Mem{Base: wp, Disp: 48 + 32*ch}, lo)
			VPSRLW(U8(4), lo, hi)
			VPAND(b0f, lo, lo)
			VPAND(b0f, hi, hi)
			fifth(lo, 2*ch)
			fifth(hi, 2*ch+1)
			for sub, v := range []VecVirtual{lo, hi} {
				ds, ms := YMM(), YMM()
				VBROADCASTSS(scaleBuf.Offset(4*(2*ch+sub)), ds)
				VBROADCASTSS(scaleBuf.Offset(32+4*(2*ch+sub)), ms)
				widen32(v, func(x VecVirtual, k int) {
					VCVTDQ2PS(x, x)
					VFMSUB213PS(ms, ds, x) // (d·sc)·q − dmin·m (exactProduct)
					store(x, 64*ch+32*sub+8*k)
				})
			}
		}
	case "Q2_K", "Q3_K":
		// Each group of 32 values (two sub-blocks of 16) as bytes: the
		// 2-bit field of qs, Q3_K's hmask bit as 4 and its −4 (signed),
		// widened to int32 four vectors at a time; then ggml's float32
		// steps per sub-block.
		qs := map[string]int{"Q2_K": 16, "Q3_K": 32}[q]
		var hm VecVirtual
		if q == "Q2_K" {
			q2kScalesAVX2(wp, scaleBuf)
		} else {
			q3kScalesAVX2(wp, scaleBuf)
			hm = YMM()
			VMOVDQU(Mem{Base: wp}, hm)
		}
		// scales returns sub-block i's d·sc broadcast (and Q2_K's
		// dmin·m) from the super-block's scales at scaleBuf.
		scales := func(i int) (ds, ms VecVirtual) {
			ds = YMM()
			VBROADCASTSS(scaleBuf.Offset(4*i), ds)
			if q == "Q2_K" {
				ms = YMM()
				VBROADCASTSS(scaleBuf.Offset(64+4*i), ms)
			}
			return ds, ms
		}
		for h := 0; h < 2; h++ {
			q2 := YMM()
			VMOVDQU(Mem{Base: wp, Disp: qs + 32*h}, q2)
			for j := 0; j < 4; j++ {
				qv := YMM()
				if j > 0 {
					VPSRLW(U8(2*j), q2, qv)
					VPAND(b03, qv, qv)
				} else {
					VPAND(b03, q2, qv)
				}
				if q == "Q3_K" {
					hb := YMM()
					if b := 4*h + j; b > 0 {
						VPSRLW(U8(b), hm, hb)
						VPAND(b01, hb, hb)
					} else {
						VPAND(b01, hm, hb)
					}
					VPSLLW(U8(2), hb, hb)
					VPOR(hb, qv, qv)
					VPSUBB(b04, qv, qv)
				}
				var ds, ms VecVirtual
				widenBytes(qv, q == "Q3_K", func(x VecVirtual, k int) {
					if k%2 == 0 {
						ds, ms = scales(8*h + 2*j + k/2)
					}
					VCVTDQ2PS(x, x)
					if q == "Q2_K" {
						VFMSUB213PS(ms, ds, x) // (d·sc)·q − dmin·m (exactProduct)
					} else {
						VMULPS(ds, x, x)
					}
					store(x, 128*h+32*j+8*k)
				})
			}
		}
	case "IQ4_XS":
		iq4xsScalesAVX2(wp, scaleBuf)
		for b := 0; b < 8; b++ {
			dv := YMM()
			VBROADCASTSS(scaleBuf.Offset(4*b), dv)
			raw, lo, hi := XMM(), XMM(), XMM()
			VMOVDQU(Mem{Base: wp, Disp: 8 + 16*b}, raw)
			VPAND(mask16, raw, lo)
			VPSRLW(U8(4), raw, hi)
			VPAND(mask16, hi, hi)
			VPSHUFB(lo, levels, lo)
			VPSHUFB(hi, levels, hi)
			for v := 0; v < 4; v++ {
				src := []VecVirtual{lo, lo, hi, hi}[v]
				if v%2 == 1 {
					t := XMM()
					VPSRLDQ(U8(8), src, t)
					src = t
				}
				x := YMM()
				VPMOVSXBD(src, x)
				VCVTDQ2PS(x, x)
				VMULPS(dv, x, x)
				store(x, 32*b+8*v)
			}
		}
	}
	ADDQ(U32(bsize), wp)
	if dot {
		ADDQ(U32(4*values), xp)
	} else {
		ADDQ(U32(4*values), out)
	}
	DECQ(nb)
	JMP(LabelRef(name + "_block"))
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

// widen32 widens the 32 bytes of v (values 0-31 in order) to four
// vectors of int32 lanes, values 8k..8k+7 in the k-th, and hands each to
// emit.
func widen32(v VecVirtual, emit func(x VecVirtual, k int)) { widenBytes(v, false, emit) }

// widenBytes is widen32 with the bytes signed (VPMOVSXBD) or not.
func widenBytes(v VecVirtual, signed bool, emit func(x VecVirtual, k int)) {
	mov := VPMOVZXBD
	if signed {
		mov = VPMOVSXBD
	}
	x0 := YMM()
	mov(v.AsX(), x0)
	emit(x0, 0)
	t := XMM()
	VPSRLDQ(U8(8), v.AsX(), t)
	x1 := YMM()
	mov(t, x1)
	emit(x1, 1)
	h := XMM()
	VEXTRACTI128(U8(1), v, h)
	x2 := YMM()
	mov(h, x2)
	emit(x2, 2)
	VPSRLDQ(U8(8), h, h)
	x3 := YMM()
	mov(h, x3)
	emit(x3, 3)
}

// lowbitShifts holds 0..31 as int32: Q5_1's per-lane shifts of qh.
var lowbitShifts Mem

func lowbitConsts() {
	lowbitShifts = GLOBL("lowbitshifts", RODATA|NOPTR)
	for i := 0; i < 32; i++ {
		DATA(4*i, U32(uint32(i)))
	}
}

// fastQ8_1 writes the fast-mode decode kernel for Q4_1 or Q5_1 weights
// against Q8_1 activations (xq; xd holds (d, s) pairs): per block the
// integer sum of the unsigned weight values times x (VPMADDUBSW, exact),
// scaled by d_w·d_x into eight float32 lanes, and m_w·s_x summed apart in
// the low lane of a second accumulator, as ggml's x86 vec_dot_q4_1_q8_1
// keeps summs apart from its lanes.
func fastQ8_1(q string) {
	name := "fast" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, rows int, blocks int, xq *int8, xd *float32, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = w_r · x for rows " + q + " rows of blocks blocks (stride ldw bytes) and Q8_1 activations xq, xd (scale and sum pairs).")
	w, ldw, rows, blocks, xq, xd := params("w", "ldw", "rows", "blocks", "xq", "xd")
	y := GP64()
	Load(Param("y"), y)
	bsize, qs := 20, 4
	if q == "Q5_1" {
		bsize, qs = 24, 8
	}
	ones, mask := broadcast(avx2, 0x00010001), bcast8(0x0f)
	var m10, allOnes VecVirtual
	if q == "Q5_1" {
		m10, allOnes = bcast8(0x10), YMM()
		VPCMPEQB(allOnes, allOnes, allOnes)
	}
	wp, xp, dp, b := GP64(), GP64(), GP64(), GP64()
	rowLoopPairs(name, avx2, rows, w, ldw, y, b, []VecVirtual{YMM(), YMM(), YMM(), YMM()}, func() {
		MOVQ(w, wp)
		MOVQ(xq, xp)
		MOVQ(xd, dp)
		MOVQ(blocks, b)
	}, func(acc []VecVirtual) {
		prefetchBlock(wp, bsize)
		wv := nibblesAVX2(Mem{Base: wp, Disp: qs}, nibbleShifts, mask)
		if q == "Q5_1" {
			// bytes_from_bits as for Q5_0: 0xff where the fifth bit is
			// set, kept as 0x10.
			bits := YMM()
			VPBROADCASTD(Mem{Base: wp, Disp: 4}, bits)
			VPSHUFB(q5Shuf, bits, bits)
			VPOR(q5Bits, bits, bits)
			VPCMPEQB(allOnes, bits, bits)
			VPAND(m10, bits, bits)
			VPOR(bits, wv, wv)
		}
		p := YMM()
		VPMADDUBSW(Mem{Base: xp}, wv, p) // unsigned weights × signed x
		VPMADDWD(ones, p, p)
		VCVTDQ2PS(p, p)
		// The block's (d, m) halves widened together and times x's
		// (d, s): d_w·d_x in lane 0, m_w·s_x in lane 1.
		dm, xds := XMM(), XMM()
		VMOVD(Mem{Base: wp}, dm)
		VCVTPH2PS(dm, dm)
		VMOVQ(Mem{Base: dp}, xds)
		VMULPS(xds, dm, dm)
		d := YMM()
		VBROADCASTSS(dm, d)
		VFMADD231PS(p, d, acc[0])
		m := XMM()
		VMOVSHDUP(dm, m)
		VADDSS(m, acc[1].AsX(), acc[1].AsX())
		ADDQ(U32(bsize), wp)
		ADDQ(U8(32), xp)
		ADDQ(U8(8), dp)
	})
}

// iq4xsBlock accumulates one IQ4_XS super-block against Q8_K activations:
// per 32-value sub-block b the levels K[nibble] (VPSHUFB on levels) times
// x as fastQ8 does (|w| and x with w's signs into VPMADDUBSW), the pairs
// of 16-bit sums times ls_b − 32 and added by one VPMADDWD (the scale as
// a word in both halves of each lane, iq4xsScaleWords), then d_w·d_x times
// their float32 sum, as ggml's x86 vec_dot_iq4_xs_q8_K.
func iq4xsBlock(wp, xp, dp GPVirtual, acc, sumi, mask, levels VecVirtual, words Mem) {
	VPXOR(sumi, sumi, sumi)
	iq4xsScaleWords(wp, words)
	for b := 0; b < 8; b++ {
		wv := iq4Nibbles(Mem{Base: wp, Disp: 8 + 16*b}, mask)
		VPSHUFB(wv, levels, wv)
		ax, sx, lv := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: xp, Disp: 32 * b}, sx)
		VPSIGNB(wv, wv, ax)
		VPSIGNB(wv, sx, sx)
		VPMADDUBSW(sx, ax, ax)
		VPBROADCASTD(words.Offset(4*b), lv)
		VPMADDWD(lv, ax, ax)
		VPADDD(ax, sumi, sumi)
	}
	VCVTDQ2PS(sumi, sumi)
	d := scaleOf(Mem{Base: wp}, Mem{Base: dp})
	VFMADD231PS(sumi, d, acc)
}

// q23kBlock accumulates one Q2_K or Q3_K super-block against Q8_K
// activations. Values 128h+32j..+31 are 2-bit fields j of the 32 bytes
// at h (sub-blocks 8h+2j, 8h+2j+1: the two 128-bit lanes), times x by
// VPMADDUBSW, lane sums times the sub-block scale (VPERMD of the scales
// as dwords with q6kIdx's pattern, VPMULLD), then d_w·d_x times their
// float32 sum. Q2_K subtracts dmin·d_x·Σ m_i·bsums_i; Q3_K's values are
// field + 4·hbit - 4, the -4 taken as 4·Σ sc_i·bsums_i, as ggml's x86
// vec_dot_q3_K_q8_K does.
func q23kBlock(q string, wp, xp, sp, dp GPVirtual, acc, sumi, ones, m3, m0f VecVirtual) {
	VPXOR(sumi, sumi, sumi)
	scb := XMM()
	var scw VecVirtual // scale (Q3_K) or min (Q2_K) words against the sums
	qs := 16
	if q == "Q2_K" {
		raw := XMM()
		VMOVDQU(Mem{Base: wp}, raw)
		VPAND(m0f.AsX(), raw, scb)
		mn := XMM()
		VPSRLW(U8(4), raw, mn)
		VPAND(m0f.AsX(), mn, mn)
		scw = YMM()
		VPMOVZXBW(mn, scw)
	} else {
		qs = 32
		a0, a1, tmp, t := GP32(), GP32(), GP32(), GP32()
		MOVL(Mem{Base: wp, Disp: 96}, a0)
		MOVL(Mem{Base: wp, Disp: 100}, a1)
		MOVL(Mem{Base: wp, Disp: 104}, tmp)
		// aux_k = (low or high nibbles of a0 / a1) | ((tmp >> 2k) & 0x03030303) << 4
		aux := func(src GPVirtual, nib, k int) GPVirtual {
			r := GP32()
			MOVL(src, r)
			if nib > 0 {
				SHRL(U8(4), r)
			}
			ANDL(U32(0x0f0f0f0f), r)
			MOVL(tmp, t)
			if k > 0 {
				SHRL(U8(2*k), t)
			}
			ANDL(U32(0x03030303), t)
			SHLL(U8(4), t)
			ORL(t, r)
			return r
		}
		u0, u1, u2, u3 := aux(a0, 0, 0), aux(a1, 0, 1), aux(a0, 1, 2), aux(a1, 1, 3)
		VMOVD(u0, scb)
		VPINSRD(U8(1), u1, scb, scb)
		VPINSRD(U8(2), u2, scb, scb)
		VPINSRD(U8(3), u3, scb, scb)
		k32 := XMM()
		VMOVDQU(q3kBias, k32)
		VPSUBB(k32, scb, scb) // sc_i - 32, signed
		scw = YMM()
		VPMOVSXBW(scb, scw)
	}
	// The scales as 16-bit words, sub-blocks 8h..8h+7 in both lanes.
	scw16 := YMM()
	if q == "Q2_K" {
		VPMOVZXBW(scb, scw16)
	} else {
		VPMOVSXBW(scb, scw16)
	}
	sch := [2]VecVirtual{YMM(), YMM()}
	VPERMQ(U8(0x44), scw16, sch[0])
	VPERMQ(U8(0xee), scw16, sch[1])
	corr := YMM()
	VPMADDWD(Mem{Base: sp}, scw, corr)
	var hm, m01 VecVirtual
	if q == "Q3_K" {
		hm, m01 = YMM(), YMM()
		VMOVDQU(Mem{Base: wp}, hm)
		VPSRLW(U8(1), m3, m01) // 0x0303 words >> 1 are 0x0181:
		VPAND(m3, m01, m01)    // 0x01 in every byte
	}
	for h := 0; h < 2; h++ {
		q2 := YMM()
		VMOVDQU(Mem{Base: wp, Disp: qs + 32*h}, q2)
		for j := 0; j < 4; j++ {
			qv := YMM()
			if j > 0 {
				VPSRLW(U8(2*j), q2, qv)
				VPAND(m3, qv, qv)
			} else {
				VPAND(m3, q2, qv)
			}
			if q == "Q3_K" {
				hb := YMM()
				if b := 4*h + j; b > 0 {
					VPSRLW(U8(b), hm, hb)
					VPAND(m01, hb, hb)
				} else {
					VPAND(m01, hm, hb)
				}
				VPSLLW(U8(2), hb, hb)
				VPOR(hb, qv, qv)
			}
			VPMADDUBSW(Mem{Base: xp, Disp: 128*h + 32*j}, qv, qv)
			VPMADDWD(groupScaleWords(sch[h], j), qv, qv)
			VPADDD(qv, sumi, sumi)
		}
	}
	if q == "Q3_K" {
		VPSLLD(U8(2), corr, corr)
		VPSUBD(corr, sumi, sumi)
		VCVTDQ2PS(sumi, sumi)
		d := scaleOf(Mem{Base: wp, Disp: 108}, Mem{Base: dp})
		VFMADD231PS(sumi, d, acc)
		return
	}
	VCVTDQ2PS(sumi, sumi)
	VCVTDQ2PS(corr, corr)
	d := scaleOf(Mem{Base: wp, Disp: 80}, Mem{Base: dp})
	VFMADD231PS(sumi, d, acc)
	dmin := scaleOf(Mem{Base: wp, Disp: 82}, Mem{Base: dp})
	VFNMADD231PS(corr, dmin, acc)
}

// q3kBias is sixteen bytes of 32, Q3_K's scale offset.
var q3kBias Mem

func q3kConsts() {
	q3kBias = GLOBL("q3kbias", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(i, U8(32))
	}
}

// fastQ8_1x4 is fastQ8_1 for four rows of Q8_1 activations (stride ldx
// values; their (d, s) pairs at stride ldx/16 float32s): each block's
// unsigned weight values are built once and go into VPMADDUBSW against
// the four rows. Per row, d_w·d_x times the block's integer lane sums goes
// into that row's eight float32 lanes; m_w·s_x of the four rows goes into
// the four lanes of one XMM (lane i row i), added to row i's lane sum at
// the end, as ggml's vec_dot_q4_1_q8_1 adds its summs after hsum.
func fastQ8_1x4(q string) {
	name := "fast" + q + "x4AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, rows int, blocks int, xq *int8, xd *float32, ldx int, y *float32, ldy int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[i*ldy+r] = w_r · x_i for rows %s rows of blocks blocks (stride ldw bytes) and four rows of Q8_1 activations (stride ldx values).", name, q))
	w, rows, y, ldx, ldd := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("rows"), rows)
	Load(Param("y"), y)
	Load(Param("ldx"), ldx)
	MOVQ(ldx, ldd)
	SHRQ(U8(2), ldd) // bytes of (d, s) pairs per row: ldx/16 float32s
	bsize, qs := 20, 4
	if q == "Q5_1" {
		bsize, qs = 24, 8
	}
	ones, mask := broadcast(avx2, 0x00010001), bcast8(0x0f)
	var m10, allOnes VecVirtual
	if q == "Q5_1" {
		m10, allOnes = bcast8(0x10), YMM()
		VPCMPEQB(allOnes, allOnes, allOnes)
	}
	wp, xp, xp2, dp, dp2, b := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	acc := []VecVirtual{YMM(), YMM(), YMM(), YMM()}
	summs := XMM()
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	for _, a := range acc {
		VXORPS(a, a, a)
	}
	VXORPS(summs, summs, summs)
	MOVQ(w, wp)
	Load(Param("xq"), xp)
	LEAQ(Mem{Base: xp, Index: ldx, Scale: 2}, xp2)
	Load(Param("xd"), dp)
	LEAQ(Mem{Base: dp, Index: ldd, Scale: 2}, dp2)
	Load(Param("blocks"), b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	prefetchBlock(wp, bsize)
	wv := nibblesAVX2(Mem{Base: wp, Disp: qs}, nibbleShifts, mask)
	if q == "Q5_1" {
		bits := YMM()
		VPBROADCASTD(Mem{Base: wp, Disp: 4}, bits)
		VPSHUFB(q5Shuf, bits, bits)
		VPOR(q5Bits, bits, bits)
		VPCMPEQB(allOnes, bits, bits)
		VPAND(m10, bits, bits)
		VPOR(bits, wv, wv)
	}
	dw := YMM()
	VBROADCASTSS(halfToScalar(Mem{Base: wp}), dw)
	mw := XMM()
	VBROADCASTSS(halfToScalar(Mem{Base: wp, Disp: 2}), mw)
	dms := []Mem{{Base: dp}, {Base: dp, Index: ldd, Scale: 1}, {Base: dp2}, {Base: dp2, Index: ldd, Scale: 1}}
	for i, a := range acc {
		xm := []Mem{{Base: xp}, {Base: xp, Index: ldx, Scale: 1}, {Base: xp2}, {Base: xp2, Index: ldx, Scale: 1}}[i]
		p, d := YMM(), YMM()
		VPMADDUBSW(xm, wv, p) // unsigned weights × signed x
		VPMADDWD(ones, p, p)
		VCVTDQ2PS(p, p)
		VBROADCASTSS(dms[i], d)
		VMULPS(dw, d, d)
		VFMADD231PS(p, d, a)
	}
	// The four rows' s_x into one XMM's lanes, times m_w.
	s := XMM()
	VMOVSS(dms[0].Offset(4), s)
	for i := 1; i < 4; i++ {
		VINSERTPS(U8(i<<4), dms[i].Offset(4), s, s)
	}
	VMULPS(mw, s, s)
	VADDPS(s, summs, summs)
	ADDQ(U32(bsize), wp)
	ADDQ(U8(32), xp)
	ADDQ(U8(32), xp2)
	ADDQ(U8(8), dp)
	ADDQ(U8(8), dp2)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_rowdone")
	Load(Param("ldy"), b)
	SHLQ(U8(2), b)
	MOVQ(y, xp)
	for i, a := range acc {
		r := fold(a, 8, VADDPS)
		m := summs
		if i > 0 {
			m = XMM()
			VPERMILPS(U8(i), summs, m) // lane i to lane 0
		}
		VADDSS(m, r, r)
		VMOVSS(r, Mem{Base: xp})
		ADDQ(b, xp)
	}
	ADDQ(U8(4), y)
	Load(Param("ldw"), b)
	ADDQ(b, w)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}
