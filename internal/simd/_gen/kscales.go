package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The AVX2 exact kernels once built each sub-block's d·sc with a chain of
// scalar steps (a byte load, masks, VCVTSI2SS, VMULSS, a broadcast) in
// front of its few vector products: on Q2_K and Q6_K, whose sub-blocks
// hold 16 values, that chain was as many instructions as the values'
// own. These helpers compute a super-block's scales eight lanes at a
// time into a stack buffer, once, as float32 products with the same single
// rounding as ggml's d·sc; each sub-block then takes its scale with one
// broadcast load.

// scaleLanes converts the int32 lanes of v to float32, multiplies them by
// d (broadcast) and stores the eight products at buf.
func scaleLanes(v, d VecVirtual, buf Mem) {
	VCVTDQ2PS(v, v)
	VMULPS(d, v, v)
	VMOVUPS(v, buf)
}

// broadcastHalf loads the half at m as a float32 broadcast to eight lanes.
func broadcastHalf(m Mem) VecVirtual {
	d := YMM()
	VBROADCASTSS(halfToScalar(m), d)
	return d
}

// q4kScalesAVX2 writes a Q4_K or Q5_K super-block's d·sc[0..7] then
// dmin·m[0..7] at buf (16 float32s): the twelve packed bytes unpacked
// with 32-bit operations as ggml's vec_dot_q4_K does (q4kScaleMins, the
// AVX-512 form).
func q4kScalesAVX2(wp GPVirtual, buf Mem) {
	dd, dm := broadcastHalf(Mem{Base: wp}), broadcastHalf(Mem{Base: wp, Disp: 2})
	u0, u1, u2, u3, aux, t := GP32(), GP32(), GP32(), GP32(), GP32(), GP32()
	MOVL(Mem{Base: wp, Disp: 4}, u0)
	MOVL(Mem{Base: wp, Disp: 8}, u1)
	MOVL(Mem{Base: wp, Disp: 12}, u2)
	high2 := func(b GPVirtual) { // ((b >> 6) & 0x03030303) << 4 into t
		MOVL(b, t)
		SHRL(U8(6), t)
		ANDL(U32(0x03030303), t)
		SHLL(U8(4), t)
	}
	MOVL(u2, u3) // mins 4-7
	SHRL(U8(4), u3)
	ANDL(U32(0x0f0f0f0f), u3)
	high2(u1)
	ORL(t, u3)
	MOVL(u1, aux) // mins 0-3
	ANDL(U32(0x3f3f3f3f), aux)
	MOVL(u2, u1) // scales 4-7
	ANDL(U32(0x0f0f0f0f), u1)
	high2(u0)
	ORL(t, u1)
	ANDL(U32(0x3f3f3f3f), u0) // scales 0-3
	sc, mn := packBytes(u0, u1, t), packBytes(aux, u3, t)
	s, m := YMM(), YMM()
	VPMOVZXBD(sc, s)
	scaleLanes(s, dd, buf)
	VPMOVZXBD(mn, m)
	scaleLanes(m, dm, buf.Offset(32))
}

// packBytes puts the four bytes of lo, then the four of hi, in the low
// eight bytes of an XMM (through registers: four-byte stores read back
// as one load are not forwarded).
func packBytes(lo, hi, t GPVirtual) VecVirtual {
	MOVL(hi, t)
	SHLQ(U8(32), t.As64())
	MOVL(lo, lo) // clears the upper half
	ORQ(t.As64(), lo.As64())
	x := XMM()
	VMOVQ(lo.As64(), x)
	return x
}

// q6kScalesAVX2 writes a Q6_K super-block's d·sc[0..15] at buf.
func q6kScalesAVX2(wp GPVirtual, buf Mem) {
	d := broadcastHalf(Mem{Base: wp, Disp: 208})
	for h := 0; h < 2; h++ {
		s := YMM()
		VPMOVSXBD(Mem{Base: wp, Disp: 192 + 8*h}, s)
		scaleLanes(s, d, buf.Offset(32*h))
	}
}

// q2kScalesAVX2 writes a Q2_K super-block's d·(sc&15)[0..15] at buf and
// dmin·(sc>>4)[0..15] at buf+64.
func q2kScalesAVX2(wp GPVirtual, buf Mem) {
	d, dmin := broadcastHalf(Mem{Base: wp, Disp: 80}), broadcastHalf(Mem{Base: wp, Disp: 82})
	mask := bcast8(0x0f)
	raw, lo, hi := XMM(), XMM(), XMM()
	VMOVDQU(Mem{Base: wp}, raw)
	VPAND(mask.AsX(), raw, lo)
	VPSRLW(U8(4), raw, hi)
	VPAND(mask.AsX(), hi, hi)
	for i, v := range []VecVirtual{lo, hi} {
		f := []VecVirtual{d, dmin}[i]
		a, b, t := YMM(), YMM(), XMM()
		VPMOVZXBD(v, a)
		scaleLanes(a, f, buf.Offset(64*i))
		VPSRLDQ(U8(8), v, t)
		VPMOVZXBD(t, b)
		scaleLanes(b, f, buf.Offset(64*i+32))
	}
}

// q3kScalesAVX2 writes a Q3_K super-block's d·(sc−32)[0..15] at buf: the
// 6-bit scales unpacked as ggml's dequantize_row_q3_K does (low nibbles
// from bytes 0-7, two high bits each from bytes 8-11).
func q3kScalesAVX2(wp GPVirtual, buf Mem) {
	d := broadcastHalf(Mem{Base: wp, Disp: 108})
	a0, a1, tmp := GP32(), GP32(), GP32()
	MOVL(Mem{Base: wp, Disp: 96}, a0)
	MOVL(Mem{Base: wp, Disp: 100}, a1)
	MOVL(Mem{Base: wp, Disp: 104}, tmp)
	// scale(a, shift, hs): ((a >> shift) & 0x0f0f0f0f) | (((tmp >> hs) & 0x03030303) << 4)
	scale := func(a GPVirtual, shift, hs int) GPVirtual {
		s, h := GP32(), GP32()
		MOVL(a, s)
		if shift > 0 {
			SHRL(U8(shift), s)
		}
		ANDL(U32(0x0f0f0f0f), s)
		MOVL(tmp, h)
		if hs > 0 {
			SHRL(U8(hs), h)
		}
		ANDL(U32(0x03030303), h)
		SHLL(U8(4), h)
		ORL(h, s)
		return s
	}
	s0, s1, s2, s3 := scale(a0, 0, 0), scale(a1, 0, 2), scale(a0, 4, 4), scale(a1, 4, 6)
	t := GP32()
	lo, hi := packBytes(s0, s1, t), packBytes(s2, s3, t)
	VPUNPCKLQDQ(hi, lo, lo)
	VPSUBB(bcast8(32).AsX(), lo, lo) // signed sc − 32
	a, b, sh := YMM(), YMM(), XMM()
	VPMOVSXBD(lo, a)
	scaleLanes(a, d, buf)
	VPSRLDQ(U8(8), lo, sh)
	VPMOVSXBD(sh, b)
	scaleLanes(b, d, buf.Offset(32))
}

// iq4xsLanes returns an IQ4_XS super-block's ls_b − 32 in int32 lane b:
// ls_b is nibble b of scales_l with bits 2b, 2b+1 of scales_h above it.
func iq4xsLanes(wp GPVirtual) VecVirtual {
	l, h := YMM(), YMM()
	VPBROADCASTD(Mem{Base: wp, Disp: 4}, l)
	VPSRLVD(iq4xsShifts, l, l)
	VPAND(broadcast(avx2isa, 15), l, l)
	sh := GP32()
	MOVWLZX(Mem{Base: wp, Disp: 2}, sh)
	VMOVD(sh, h.AsX())
	VPBROADCASTD(h.AsX(), h)
	VPSRLVD(iq4xsShifts.Offset(32), h, h)
	VPAND(broadcast(avx2isa, 3), h, h)
	VPSLLD(U8(4), h, h)
	VPOR(h, l, l)
	VPSUBD(broadcast(avx2isa, 32), l, l)
	return l
}

// iq4xsScaleWords writes an IQ4_XS super-block's ls_b − 32 at buf as
// eight dwords, each the 16-bit scale twice: the operand of a VPMADDWD
// that scales and adds a pair of VPMADDUBSW sums at once.
func iq4xsScaleWords(wp GPVirtual, buf Mem) { VMOVDQU(iq4xsWords(wp), buf) }

// iq4xsWords returns the dwords of iq4xsScaleWords in a register.
func iq4xsWords(wp GPVirtual) VecVirtual {
	return wordPairs(iq4xsLanes(wp))
}

// iq4xsScalesAVX2 writes an IQ4_XS super-block's d·(ls−32)[0..7] at buf:
// ls_b is nibble b of scales_l with bits 2b, 2b+1 of scales_h above it.
func iq4xsScalesAVX2(wp GPVirtual, buf Mem) {
	d := broadcastHalf(Mem{Base: wp})
	scaleLanes(iq4xsLanes(wp), d, buf)
}

// iq4xsShifts holds the lanes' shifts of scales_l (4b) and of scales_h
// (2b); laneIdx holds eight VPERMD indices, the b-th all b.
var iq4xsShifts, laneIdx Mem

func kscalesConsts() {
	iq4xsShifts = GLOBL("iq4xsshifts", RODATA|NOPTR)
	for b := 0; b < 8; b++ {
		DATA(4*b, U32(uint32(4*b)))
	}
	for b := 0; b < 8; b++ {
		DATA(32+4*b, U32(uint32(2*b)))
	}
	laneIdx = GLOBL("laneidx", RODATA|NOPTR)
	for i := 0; i < 64; i++ {
		DATA(4*i, U32(uint32(i/8)))
	}
}

// iq4Nibbles loads 16 bytes of nibbles at m as 32 bytes, the low nibbles
// in the low lane and the high ones in the high lane. The load defines
// the whole register (a load into its low half leaves the register live
// from the loop's top in avo's eyes, and the kernel out of registers).
func iq4Nibbles(m Mem, mask VecVirtual) VecVirtual {
	wv, hi := YMM(), YMM()
	VBROADCASTI128(m, wv)
	VPSRLW(U8(4), wv, hi)
	VPBLENDD(U8(0xf0), hi, wv, wv)
	VPAND(mask, wv, wv)
	return wv
}

// wordPairs turns int32 lanes (values that fit 16 bits) into dwords that
// hold the value's low 16 bits twice: VPMADDWD by them multiplies both
// halves of a pair of 16-bit sums and adds them, as VPMADDWD by ones then
// VPMULLD by the lanes did, in one instruction.
func wordPairs(v VecVirtual) VecVirtual {
	t := YMM()
	VPSLLD(U8(16), v, t)
	VPBLENDW(U8(0x55), v, t, t)
	return t
}

// quantQ8KActsAVX2 writes quantQ8_KActsAVX2, quantQ8_KActsAVX512's AVX2
// twin: a super-block's largest magnitude, the first value that has it
// (its sign sets the scale's), iscale = −127/that value, each value
// rounded to nearest even after one float32 product and held to 127,
// and the sums of 16 (as quant.QuantizeActs does, bit for bit).
func quantQ8KActsAVX2() {
	name := "quantQ8_KActsAVX2"
	TEXT(name, NOSPLIT, "func(x *float32, blocks int, q *int8, d *float32, sums *int16)")
	Pragma("noescape")
	Doc(name + " quantizes blocks super-blocks of 256 activations to Q8_K as quant.QuantizeActs does.")
	x, blocks, q, d, sums := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("x"), x)
	Load(Param("blocks"), blocks)
	Load(Param("q"), q)
	Load(Param("d"), d)
	Load(Param("sums"), sums)
	absMask := broadcast(avx2isa, 0x7fffffff)
	c127 := broadcast(avx2isa, 127)
	perm := YMM()
	VMOVDQU(q8kPackIdx, perm)
	t := GP32()
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	m := YMM()
	VANDPS(Mem{Base: x}, absMask, m)
	for i := 1; i < 32; i++ {
		a := YMM()
		VANDPS(Mem{Base: x, Disp: 32 * i}, absMask, a)
		VMAXPS(a, m, m)
	}
	mx := fold(m, 8, VMAXPS)
	zero := XMM()
	VXORPS(zero, zero, zero)
	VUCOMISS(zero, mx)
	JE(LabelRef(name + "_zeros"))
	amax := YMM()
	VBROADCASTSS(mx, amax)
	idx, off := GP64(), GP64()
	XORQ(off, off)
	Label(name + "_find")
	a := YMM()
	VANDPS(Mem{Base: x, Index: off, Scale: 1}, absMask, a)
	VCMPPS(U8(0), amax, a, a) // equal (ordered)
	VMOVMSKPS(a, t)
	TESTL(t, t)
	JNZ(LabelRef(name + "_found"))
	ADDQ(U8(32), off)
	JMP(LabelRef(name + "_find"))
	Label(name + "_found")
	BSFL(t, t)
	MOVL(t, idx.As32())
	LEAQ(Mem{Base: off, Index: idx, Scale: 4}, idx)
	is := q8kScale(Mem{Base: x, Index: idx, Scale: 1}, Mem{Base: d}, t)
	isy := YMM()
	VBROADCASTSS(is, isy)
	for c := 0; c < 8; c++ { // 32 values: two groups of 16
		var iv [4]VecVirtual
		for k := range iv {
			iv[k] = YMM()
			VMULPS(Mem{Base: x, Disp: 128*c + 32*k}, isy, iv[k])
			VCVTPS2DQ(iv[k], iv[k])
			VPMINSD(c127, iv[k], iv[k])
		}
		sa, sb := YMM(), YMM()
		VPADDD(iv[1], iv[0], sa)
		VPADDD(iv[3], iv[2], sb)
		VMOVDQU(packInt8(iv, perm), Mem{Base: q, Disp: 32 * c})
		h := YMM()
		VPHADDD(sb, sa, h) // a01 a23 b01 b23 | a45 a67 b45 b67
		VPHADDD(h, h, h)   // a0-3 b0-3 … | a4-7 b4-7 …
		hx := XMM()
		VEXTRACTI128(U8(1), h, hx)
		VPADDD(hx, h.AsX(), hx)
		VPEXTRW(U8(0), hx, Mem{Base: sums, Disp: 4 * c})
		VPEXTRW(U8(2), hx, Mem{Base: sums, Disp: 4*c + 2})
	}
	JMP(LabelRef(name + "_next"))
	Label(name + "_zeros")
	VMOVSS(zero, Mem{Base: d})
	z := YMM()
	VPXOR(z, z, z)
	for i := 0; i < 8; i++ {
		VMOVDQU(z, Mem{Base: q, Disp: 32 * i})
	}
	VMOVDQU(z, Mem{Base: sums})
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

// packInt8 packs the 32 int32 lanes of v (values 8k..8k+7 in v[k], all
// within int8) to 32 bytes in order: two VPACKSSDW and a VPACKSSWB
// interleave them by 128-bit halves, and VPERMD by perm (q8kPackIdx)
// puts their dwords back in order.
func packInt8(v [4]VecVirtual, perm VecVirtual) VecVirtual {
	w01, w23, b := YMM(), YMM(), YMM()
	VPACKSSDW(v[1], v[0], w01)
	VPACKSSDW(v[3], v[2], w23)
	VPACKSSWB(w23, w01, b)
	VPERMD(b, perm, b)
	return b
}

// q8kPackIdx is packInt8's dword order.
var q8kPackIdx Mem

func q8kConsts() {
	q8kPackIdx = GLOBL("q8kpackidx", RODATA|NOPTR)
	for i, v := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(v))
	}
}

// halfScaleWords loads the 16 int8 (signed) or uint8 scales at m as
// 16-bit words and returns those of half h (scales 8h..8h+7) in both
// 128-bit lanes, for groupScaleWords.
func halfScaleWords(m Mem, h int, signed bool) VecVirtual {
	w := YMM()
	if signed {
		VPMOVSXBW(m, w)
	} else {
		VPMOVZXBW(m, w)
	}
	VPERMQ(U8([]uint8{0x44, 0xee}[h]), w, w)
	return w
}

// groupScaleWords returns the scale words of group k of a half (sub-block
// 2k in the low lane, 2k+1 in the high one, each word eight times) from
// halfScaleWords' vector: VPMADDWD by it scales and adds the pairs of a
// group's VPMADDUBSW sums, as ggml's x86 vec_dot_q{2,3,6}_K_q8_K do
// with get_scale_shuffle.
func groupScaleWords(half VecVirtual, k int) VecVirtual {
	s := YMM()
	VPSHUFB(scaleWordShuf.Offset(32*k), half, s)
	return s
}

// scaleWordShuf holds groupScaleWords' four byte shuffles.
var scaleWordShuf Mem

func scaleWordConsts() {
	scaleWordShuf = GLOBL("scalewordshuf", RODATA|NOPTR)
	for k := 0; k < 4; k++ {
		for i := 0; i < 32; i++ {
			w := 2*k + i/16 // the low lane takes word 2k, the high 2k+1
			DATA(32*k+i, U8(uint8(2*w+i%2)))
		}
	}
}

// quantQ8_0ActsAVX2 writes quantQ8_0ActsAVX2, the Q8_0 activation
// quantizer of fast mode on AVX2 (quantQ8_0ActsAVX512 without its sums
// and lanes, which Go adds where a kernel wants them): per block of 32,
// d = f16(amax/127), values round-half-even(x·127/amax), as
// quant.QuantizeActs does bit for bit. With q81 it writes
// quantQ8_1ActsAVX2, Q4_1's and Q5_1's activations: d in (d, s) pairs,
// s = f16(amax/127 · Σq) from the scale before its rounding, as ggml's
// x86 quantize_row_q8_1.
func quantQ8_0ActsAVX2(q81 bool) {
	name, kind := "quantQ8_0ActsAVX2", "Q8_0"
	if q81 {
		name, kind = "quantQ8_1ActsAVX2", "Q8_1"
	}
	TEXT(name, NOSPLIT, "func(x *float32, blocks int, q *int8, d *float32)")
	Pragma("noescape")
	Doc(name + " quantizes blocks blocks of 32 activations to " + kind + " as quant.QuantizeActs does.")
	x, blocks, q, d := GP64(), GP64(), GP64(), GP64()
	Load(Param("x"), x)
	Load(Param("blocks"), blocks)
	Load(Param("q"), q)
	Load(Param("d"), d)
	absMask := broadcast(avx2isa, 0x7fffffff)
	perm := YMM()
	VMOVDQU(q8kPackIdx, perm)
	c127 := XMM()
	t := GP32()
	MOVL(U32(0x42fe0000), t) // 127.0
	VMOVD(t, c127)
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	var v [4]VecVirtual
	m := YMM()
	for k := range v {
		v[k] = YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * k}, v[k])
		if k == 0 {
			VANDPS(absMask, v[k], m)
			continue
		}
		a := YMM()
		VANDPS(absMask, v[k], a)
		VMAXPS(a, m, m)
	}
	mx := fold(m, 8, VMAXPS)
	dv := XMM()
	VDIVSS(c127, mx, dv)
	var dd VecVirtual
	if q81 {
		dd = XMM()
		VMOVAPS(dv, dd)
	}
	VCVTPS2PH(U8(0), dv, dv)
	VCVTPH2PS(dv, dv)
	VMOVSS(dv, Mem{Base: d})
	id, zero := XMM(), XMM()
	VXORPS(id, id, id)
	VXORPS(zero, zero, zero)
	VUCOMISS(zero, mx)
	JE(LabelRef(name + "_zero"))
	VDIVSS(mx, c127, id)
	Label(name + "_zero")
	idy := YMM()
	VBROADCASTSS(id, idy)
	for k := range v {
		VMULPS(idy, v[k], v[k])
		VCVTPS2DQ(v[k], v[k]) // MXCSR's rounding: nearest, ties to even
	}
	if q81 {
		sum := YMM()
		VPADDD(v[0], v[1], sum)
		VPADDD(v[2], sum, sum)
		VPADDD(v[3], sum, sum)
		sv := fold(sum, 8, VPADDD)
		VCVTDQ2PS(sv, sv)
		VMULSS(sv, dd, dd)
		VCVTPS2PH(U8(0), dd, dd)
		VCVTPH2PS(dd, dd)
		VMOVSS(dd, Mem{Base: d, Disp: 4})
	}
	VMOVDQU(packInt8(v, perm), Mem{Base: q})
	ADDQ(U8(128), x)
	ADDQ(U8(32), q)
	if q81 {
		ADDQ(U8(8), d)
	} else {
		ADDQ(U8(4), d)
	}
	DECQ(blocks)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// q8kScale computes a Q8_K super-block's iscale = −127/v from the value v
// at m (the first of largest magnitude), stores the float32 scale
// 1/iscale at d and returns iscale, as quantize_row_q8_K_ref does.
func q8kScale(m, d Mem, t GPVirtual) VecVirtual {
	v := XMM()
	VMOVSS(m, v)
	is := XMM()
	MOVL(U32(0xc2fe0000), t) // -127.0
	VMOVD(t, is)
	VDIVSS(v, is, is)
	one := XMM()
	MOVL(U32(0x3f800000), t)
	VMOVD(t, one)
	dv := XMM()
	VDIVSS(is, one, dv)
	VMOVSS(dv, d)
	return is
}
