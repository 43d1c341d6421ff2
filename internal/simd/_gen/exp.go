package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// f32 broadcasts the float32 constant v to a new ZMM register.
func f32(v float32) VecVirtual { return broadcast(avx512, math.Float32bits(v)) }

// expShift writes expShiftAVX512: row[i] = exp(row[i] - m) for i < n (a
// multiple of 16), returning the sum of the results in float64: the
// numerator and denominator of a softmax shifted by its maximum m. Each
// lane computes exactly what simd.Exp32 computes (Cephes' expf, every
// product and sum rounded on its own, no fused multiply-add), for
// arguments x = row[i] - m <= 0 with m finite: 0 below -87.33654, where
// float32's exp underflows.
func expShift() {
	name := "expShiftAVX512"
	TEXT(name, NOSPLIT, "func(row *float32, n int, m float32) float64")
	Pragma("noescape")
	Doc(name + " sets row[i] = exp(row[i] - m) for i < n (a multiple of 16) and returns their sum, for row[i] <= m and m finite.")
	row, n := GP64(), GP64()
	Load(Param("row"), row)
	Load(Param("n"), n)
	mx := XMM()
	Load(Param("m"), mx)
	mv := ZMM()
	VBROADCASTSS(mx, mv)
	ec := newExpConsts()
	lim, bias := f32(-87.33654), broadcast(avx512, 127)
	sumLo, sumHi := ZMM(), ZMM()
	VXORPD(sumLo, sumLo, sumLo)
	VXORPD(sumHi, sumHi, sumHi)
	countLoop(name, n, 16, func() {
		x := ZMM()
		VMOVUPS(Mem{Base: row}, x)
		VSUBPS(mv, x, x) // x - m
		p, _, ni := ec.core(x)
		// times 2^n
		VPADDD(bias, ni, ni)
		VPSLLD(U8(23), ni, ni)
		VMULPS(ni, p, p)
		// 0 where x < -87.33654 (predicate 13: greater or equal, ordered).
		keep := K()
		VCMPPS(U8(13), lim, x, keep)
		VMOVAPS_Z(p, keep, p)
		VMOVUPS(p, Mem{Base: row})
		lo, hi := ZMM(), ZMM()
		VCVTPS2PD(p.(Vec).AsY(), lo)
		VEXTRACTF32X8(U8(1), p, hi.(Vec).AsY())
		VCVTPS2PD(hi.(Vec).AsY(), hi)
		VADDPD(lo, sumLo, sumLo)
		VADDPD(hi, sumHi, sumHi)
		ADDQ(U8(64), row)
	})
	VADDPD(sumHi, sumLo, sumLo)
	h := YMM()
	VEXTRACTF64X4(U8(1), sumLo, h)
	a := YMM()
	VADDPD(h, sumLo.(Vec).AsY(), a)
	hx := XMM()
	VEXTRACTF64X2(U8(1), a, hx)
	b := XMM()
	VADDPD(hx, a.(Vec).AsX(), b)
	c := XMM()
	VPERMILPD(U8(1), b, c)
	VADDSD(c, b, b)
	Store(b, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// silu writes siluAVX512 (mul false: out[i] = silu(x[i])) or
// siluMulAVX512 (mul true: out[i] = silu(x[i])·u[i]) for n (a multiple of
// 16) values, with silu(x) = x / (1 + exp(-x)) and exp computed exactly
// as simd.Exp32 computes it, over its whole range: +Inf above 88.72283, 0
// below -87.33654, and 2^n applied by VSCALEFPS, which rounds once as
// Exp32's multiply by a power of two does (even for n = 128, which Exp32
// splits in two exact steps). So every lane equals the scalar SiLU.
func silu(mul bool) {
	name := "siluAVX512"
	sig := "func(x *float32, out *float32, n int)"
	if mul {
		name = "siluMulAVX512"
		sig = "func(x *float32, u *float32, out *float32, n int)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " sets out[i] = x[i] / (1 + Exp32(-x[i])) (times u[i] for siluMul) for i < n, a multiple of 16.")
	xp, up, out, n := GP64(), GP64(), GP64(), GP64()
	Load(Param("x"), xp)
	if mul {
		Load(Param("u"), up)
	}
	Load(Param("out"), out)
	Load(Param("n"), n)
	ec := newExpConsts()
	sign, one := ec.sign, ec.one
	lo, hi, inf := f32(-87.33654), f32(88.72283), broadcast(avx512, 0x7f800000)
	countLoop(name, n, 16, func() {
		g, x := ZMM(), ZMM()
		VMOVUPS(Mem{Base: xp}, g)
		VPXORD(sign, g, x) // x = -g
		p, nf, _ := ec.core(x)
		VSCALEFPS(nf, p, p)
		keep, over := K(), K()
		VCMPPS(U8(13), lo, x, keep) // x >= -87.33654 (ordered)
		VMOVAPS_Z(p, keep, p)
		VCMPPS(U8(30), hi, x, over) // x > 88.72283 (ordered)
		VMOVAPS(inf, over, p)
		// g / (1 + e), times u
		VADDPS(one, p, p)
		VDIVPS(p, g, g)
		if mul {
			VMULPS(Mem{Base: up}, g, g)
			ADDQ(U8(64), up)
		}
		VMOVUPS(g, Mem{Base: out})
		ADDQ(U8(64), xp)
		ADDQ(U8(64), out)
	})
	VZEROUPPER()
	RET()
}

// countLoop emits the loop of the streaming kernels: body runs
// (advancing its own pointers) while n, which drops by step after each
// run, is not zero.
func countLoop(name string, n GPVirtual, step int, body func()) {
	Label(name + "_loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	body()
	SUBQ(U8(step), n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
}

// expConsts are Cephes expf's constants, each in every lane of a vector
// of the instruction set is.
type expConsts struct {
	is                             isa
	log2e, half, sign, c1, c2, one Op
	poly                           []Op
}

func newExpConsts() expConsts { return newExpConstsFor(avx512) }

func newExpConstsFor(is isa) expConsts {
	f := func(v float32) Op { return broadcast(is, math.Float32bits(v)) }
	if is.lanes == 8 {
		// AVX2's 16 registers cannot hold the constants beside the
		// kernels' own values: they are read from memory.
		f = func(v float32) Op { return expConst8(math.Float32bits(v)) }
	}
	return expConsts{
		is:    is,
		log2e: f(1.442695041), half: f(0.5), sign: f(math.Float32frombits(0x80000000)),
		c1: f(0.693359375), c2: f(2.12194440e-4), one: f(1),
		poly: []Op{f(1.9875691500e-4), f(1.3981999507e-3), f(8.3334519073e-3), f(4.1665795894e-2), f(1.6666665459e-1), f(5.0000001201e-1)},
	}
}

// expConsts8 are the AVX2 kernels' constants, each 8 times in a row.
var expConsts8 = map[uint32]Mem{}

func expConst8(bits uint32) Mem {
	if m, ok := expConsts8[bits]; ok {
		return m
	}
	m := GLOBL(fmt.Sprintf("exp8_%08x", bits), RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(bits))
	}
	expConsts8[bits] = m
	return m
}

// core computes, lane by lane and rounding as simd.Exp32 does, the
// y = e^r with r = x - n·ln2 and the n (as float and as int) of exp(x) =
// y·2^n, before the scaling by 2^n and the range limits, which the
// callers apply their own ways.
func (c expConsts) core(x VecVirtual) (y, nf, ni VecVirtual) {
	vec := c.is.vec
	// n = trunc(x·log2e + copysign(0.5, x))
	t, s := vec(), vec()
	VMULPS(c.log2e, x, t)
	VANDPS(c.sign, x, s)
	VORPS(c.half, s, s)
	VADDPS(s, t, t)
	ni, nf = vec(), vec()
	VCVTTPS2DQ(t, ni)
	VCVTDQ2PS(ni, nf)
	// r = (x - n·c1) + n·c2
	r := vec()
	VMULPS(c.c1, nf, t)
	VSUBPS(t, x, r)
	VMULPS(c.c2, nf, t)
	VADDPS(t, r, r)
	// p = ((((p0·r + p1)·r + p2)·r + p3)·r + p4)·r + p5
	y = vec()
	VMOVUPS(c.poly[0], y)
	for _, k := range c.poly[1:] {
		VMULPS(r, y, y)
		VADDPS(k, y, y)
	}
	// y = ((p·r)·r + r) + 1
	VMULPS(r, y, y)
	VMULPS(r, y, y)
	VADDPS(r, y, y)
	VADDPS(c.one, y, y)
	return y, nf, ni
}

// toF16 writes toF16AVX512, the conversion of float32s to F16 bits (to
// nearest, ties to even: VCVTPS2PH's immediate 0), and with widen
// roundF16AVX512, which widens them back: x rounded to F16 precision.
func toF16(widen bool) {
	name, sig := "toF16AVX512", "func(x *float32, dst *uint16, n int)"
	if widen {
		name, sig = "roundF16AVX512", "func(x *float32, dst *float32, n int)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	doc := name + " converts n float32s (a multiple of 16) to F16, to nearest with ties to even"
	if widen {
		doc += ", and widens them back"
	}
	Doc(doc + ".")
	xp, dst, n := GP64(), GP64(), GP64()
	Load(Param("x"), xp)
	Load(Param("dst"), dst)
	Load(Param("n"), n)
	countLoop(name, n, 16, func() {
		x, h := ZMM(), YMM()
		VMOVUPS(Mem{Base: xp}, x)
		VCVTPS2PH(U8(0), x, h)
		if widen {
			VCVTPH2PS(h, x)
			VMOVUPS(x, Mem{Base: dst})
			ADDQ(U8(64), dst)
		} else {
			VMOVDQU16(h, Mem{Base: dst})
			ADDQ(U8(32), dst)
		}
		ADDQ(U8(64), xp)
	})
	VZEROUPPER()
	RET()
}

// maxF32 writes maxAVX512: the largest of x[0..n), n a positive multiple
// of 16, by VMAXPS. Where Go's max gives NaN for a NaN in x, this gives
// some other element; a softmax computes NaN throughout either way.
func maxF32() {
	name := "maxAVX512"
	TEXT(name, NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	Doc(name + " returns the largest of x[0..n), n a positive multiple of 16.")
	x, n := GP64(), GP64()
	Load(Param("x"), x)
	Load(Param("n"), n)
	m := ZMM()
	VMOVUPS(Mem{Base: x}, m)
	Label(name + "_loop")
	ADDQ(U8(64), x)
	SUBQ(U8(16), n)
	JZ(LabelRef(name + "_done"))
	VMAXPS(Mem{Base: x}, m, m)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	Store(fold(m, 16, VMAXPS), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// scaleF64 writes scaleF64AVX512: x[i] = float32(float64(x[i]) · s) for
// i < n, a multiple of 8, each product in float64 and rounded to nearest
// once, as the Go expression does.
func scaleF64() {
	name := "scaleF64AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, n int, s float64)")
	Pragma("noescape")
	Doc(name + " sets x[i] = float32(float64(x[i]) * s) for i < n, a multiple of 8.")
	x, n := GP64(), GP64()
	Load(Param("x"), x)
	Load(Param("n"), n)
	sx := XMM()
	Load(Param("s"), sx)
	sv := ZMM()
	VBROADCASTSD(sx, sv)
	countLoop(name, n, 8, func() {
		w := ZMM()
		VCVTPS2PD(Mem{Base: x}, w)
		VMULPD(sv, w, w)
		r := YMM()
		VCVTPD2PS(w, r)
		VMOVUPS(r, Mem{Base: x})
		ADDQ(U8(32), x)
	})
	VZEROUPPER()
	RET()
}

// expShiftAVX2 is expShift for AVX2, 8 lanes at a time: each lane as
// simd.Exp32 computes it, 0 below -87.33654; the float64 sum in another
// order.
func expShiftAVX2() {
	name := "expShiftAVX2"
	TEXT(name, NOSPLIT, "func(row *float32, n int, m float32) float64")
	Pragma("noescape")
	Doc(name + " sets row[i] = exp(row[i] - m) for i < n (a multiple of 8) and returns their sum, for row[i] <= m and m finite.")
	row, n := GP64(), GP64()
	Load(Param("row"), row)
	Load(Param("n"), n)
	mx := XMM()
	Load(Param("m"), mx)
	mv := YMM()
	VBROADCASTSS(mx, mv)
	ec := newExpConstsFor(avx2isa)
	lim, bias := broadcast(avx2isa, math.Float32bits(-87.33654)), broadcast(avx2isa, 127)
	sumLo, sumHi := YMM(), YMM()
	VXORPD(sumLo, sumLo, sumLo)
	VXORPD(sumHi, sumHi, sumHi)
	countLoop(name, n, 8, func() {
		x := YMM()
		VMOVUPS(Mem{Base: row}, x)
		VSUBPS(mv, x, x) // x - m
		p, _, ni := ec.core(x)
		VPADDD(bias, ni, ni)
		VPSLLD(U8(23), ni, ni)
		VMULPS(ni, p, p)
		keep := YMM()
		VCMPPS(U8(13), lim, x, keep) // x >= -87.33654 (ordered)
		VANDPS(keep, p, p)
		VMOVUPS(p, Mem{Base: row})
		lo, hi := YMM(), YMM()
		VCVTPS2PD(p.(Vec).AsX(), lo)
		hx := XMM()
		VEXTRACTF128(U8(1), p, hx)
		VCVTPS2PD(hx, hi)
		VADDPD(lo, sumLo, sumLo)
		VADDPD(hi, sumHi, sumHi)
		ADDQ(U8(32), row)
	})
	VADDPD(sumHi, sumLo, sumLo)
	hx := XMM()
	VEXTRACTF128(U8(1), sumLo, hx)
	b := XMM()
	VADDPD(hx, sumLo.(Vec).AsX(), b)
	c := XMM()
	VPERMILPD(U8(1), b, c)
	VADDSD(c, b, b)
	Store(b, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// maxAVX2 is maxF32 for AVX2.
func maxAVX2() {
	name := "maxAVX2"
	TEXT(name, NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	Doc(name + " returns the largest of x[0..n), n a positive multiple of 8.")
	x, n := GP64(), GP64()
	Load(Param("x"), x)
	Load(Param("n"), n)
	m := YMM()
	VMOVUPS(Mem{Base: x}, m)
	Label(name + "_loop")
	ADDQ(U8(32), x)
	SUBQ(U8(8), n)
	JZ(LabelRef(name + "_done"))
	VMAXPS(Mem{Base: x}, m, m)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	Store(fold(m, 8, VMAXPS), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// siluAVX2 is silu for AVX2. Without VSCALEFPS, 2^n is applied as
// Exp32 applies it: by the power of two min(n, 127), then once more by 2
// where n is 128 (both exact but for the last rounding, so the same
// float32 as Exp32's (2·y)·2^127).
func siluAVX2(mul bool) {
	name := "siluAVX2"
	sig := "func(x *float32, out *float32, n int)"
	if mul {
		name = "siluMulAVX2"
		sig = "func(x *float32, u *float32, out *float32, n int)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " sets out[i] = x[i] / (1 + Exp32(-x[i])) (times u[i] for siluMul) for i < n, a multiple of 8.")
	xp, up, out, n := GP64(), GP64(), GP64(), GP64()
	Load(Param("x"), xp)
	if mul {
		Load(Param("u"), up)
	}
	Load(Param("out"), out)
	Load(Param("n"), n)
	ec := newExpConstsFor(avx2isa)
	sign, one := ec.sign, ec.one
	lo, hi := broadcast(avx2isa, math.Float32bits(-87.33654)), broadcast(avx2isa, math.Float32bits(88.72283))
	inf, k127 := broadcast(avx2isa, 0x7f800000), broadcast(avx2isa, 127)
	countLoop(name, n, 8, func() {
		g, x := YMM(), YMM()
		VMOVUPS(Mem{Base: xp}, g)
		VXORPS(sign, g, x) // x = -g
		p, _, ni := ec.core(x)
		big := YMM()
		VPCMPGTD(k127, ni, big) // n = 128
		s := YMM()
		VPMINSD(k127, ni, s)
		VPADDD(k127, s, s)
		VPSLLD(U8(23), s, s)
		VMULPS(s, p, p)
		twice := YMM()
		VADDPS(p, p, twice)
		VBLENDVPS(big, twice, p, p)
		keep, over := YMM(), YMM()
		VCMPPS(U8(13), lo, x, keep) // x >= -87.33654 (ordered)
		VANDPS(keep, p, p)
		VCMPPS(U8(30), hi, x, over) // x > 88.72283 (ordered)
		VBLENDVPS(over, inf, p, p)
		// g / (1 + e), times u
		VADDPS(one, p, p)
		VDIVPS(p, g, g)
		if mul {
			VMULPS(Mem{Base: up}, g, g)
			ADDQ(U8(32), up)
		}
		VMOVUPS(g, Mem{Base: out})
		ADDQ(U8(32), xp)
		ADDQ(U8(32), out)
	})
	VZEROUPPER()
	RET()
}
