package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Fast mode's kernels: integer dot products of quantized weight rows with
// activations quantized to 8 bits (Q8_0 blocks of 32 for Q8_0, Q4_0 and
// Q5_0 weights; Q8_K super-blocks of 256 with their 16-value sums for Q4_K
// and Q6_K), as llama.cpp's ggml_vec_dot_*_q8_* compute them: an exact
// integer sum per block (VPMADDUBSW into 16-bit pairs, VPMADDWD into 32-bit
// lanes), converted to float32 and scaled by the weight block's scale
// times the activation block's, accumulated in eight float32 lanes. The
// kernels are AVX2 (VEX-encoded, ymm), which every machine with the
// AVX-512 kernels also runs.

var avx2 = isa{"AVX2", 8, YMM, 2}

// fastConsts are the data tables of the K-quant kernels: for Q4_K, a
// VPSHUFB pattern per sub-block j that spreads 16-bit word j of a lane to
// all eight; for Q6_K, a VPERMD index per group k that repeats scale 2k
// four times and 2k+1 four times; and Q5_0's bytes_from_bits tables.
var q4kShuf, q6kIdx, q5Shuf, q5Bits, iq4Levels Mem

func fastConsts() {
	q4kShuf = GLOBL("fastq4kshuf", RODATA|NOPTR)
	for j := 0; j < 8; j++ {
		for i := 0; i < 16; i++ {
			DATA(32*j+2*i, U8(2*j))
			DATA(32*j+2*i+1, U8(2*j+1))
		}
	}
	q6kIdx = GLOBL("fastq6kidx", RODATA|NOPTR)
	for k := 0; k < 4; k++ {
		for i := 0; i < 8; i++ {
			DATA(32*k+4*i, U32(2*k+i/4))
		}
	}
	// bytes_from_bits_32: byte i takes byte i/8 of the 32 bits, then ORs a
	// mask that leaves all ones only where bit i%8 was set.
	q5Shuf = GLOBL("fastq5shuf", RODATA|NOPTR)
	for i := 0; i < 32; i++ {
		DATA(i, U8(i/8))
	}
	q5Bits = GLOBL("fastq5bits", RODATA|NOPTR)
	for i := 0; i < 4; i++ {
		DATA(8*i, U64(0x7fbfdfeff7fbfdfe))
	}
	// IQ4_NL's 16 levels (ggml's kvalues_iq4nl) in each 128-bit lane, for
	// VPSHUFB by nibble.
	iq4Levels = GLOBL("fastiq4levels", RODATA|NOPTR)
	levels := []int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	for i := 0; i < 32; i++ { // the assembler wants DATA in ascending order
		DATA(i, U8(uint8(levels[i%16])))
	}
}

// bcast8 puts the byte v in every byte of a new ymm register.
func bcast8(v uint8) VecVirtual {
	return broadcast(avx2, uint32(v)*0x01010101)
}

// scaleOf computes the float32 block scale half(h) * xd and broadcasts it.
func scaleOf(h Mem, xd Mem) VecVirtual {
	f := halfToScalar(h)
	VMULSS(xd, f, f)
	d := YMM()
	VBROADCASTSS(f, d)
	return d
}

// q8Consts makes the constants of the Q8_0-family kernels: 16-bit ones for
// VPMADDWD, and the nibble mask, Q4_0's offset 8 (IQ4_NL's level table in
// its place) and Q5_0's 0xf0 where the format needs them.
func q8Consts(q string) (ones, mask, eight, f0 VecVirtual) {
	ones = broadcast(avx2, 0x00010001)
	if q != "Q8_0" {
		mask = bcast8(0x0f)
	}
	if q == "Q4_0" {
		eight = bcast8(8)
	}
	if q == "IQ4_NL" {
		eight = YMM()
		VMOVDQU(iq4Levels, eight)
	}
	if q == "Q5_0" {
		f0 = bcast8(0xf0)
	}
	return ones, mask, eight, f0
}

// fastQ8 writes the kernel for Q8_0, Q4_0 or Q5_0 weights against Q8_0
// activations: y[r] = w_r · x for rows rows of blocks blocks (stride ldw
// bytes). Even and odd blocks take two accumulators, summed at the row's
// end, so the multiply-add's latency does not bound a block's time.
func fastQ8(q string) {
	name := "fast" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, rows int, blocks int, xq *int8, xd *float32, y *float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[r] = w_r · x for rows %s rows of blocks blocks (stride ldw bytes) and Q8_0 activations xq, xd.", name, q))
	w, ldw, rows, blocks, xq, xd := params("w", "ldw", "rows", "blocks", "xq", "xd")
	y := GP64()
	Load(Param("y"), y)
	bsize := map[string]int{"Q8_0": 34, "Q4_0": 18, "Q5_0": 22, "IQ4_NL": 18}[q]
	ones, mask, eight, f0 := q8Consts(q)
	wp, xp, dp, b := GP64(), GP64(), GP64(), GP64()
	rowLoopPairs(name, avx2, rows, w, ldw, y, b, []VecVirtual{YMM(), YMM()}, func() {
		MOVQ(w, wp)
		MOVQ(xq, xp)
		MOVQ(xd, dp)
		MOVQ(blocks, b)
	}, func(acc []VecVirtual) {
		prefetchBlock(wp, bsize)
		wv := loadQ8Weights(q, wp, mask, eight, f0)
		// |w| times x with w's signs: unsigned × signed for VPMADDUBSW.
		ax, sx := YMM(), YMM()
		VMOVDQU(Mem{Base: xp}, sx)
		VPSIGNB(wv, wv, ax)
		VPSIGNB(wv, sx, sx)
		VPMADDUBSW(sx, ax, ax)
		VPMADDWD(ones, ax, ax)
		VCVTDQ2PS(ax, ax)
		d := scaleOf(Mem{Base: wp}, Mem{Base: dp})
		VFMADD231PS(ax, d, acc[0])
		ADDQ(U32(bsize), wp)
		ADDQ(U8(32), xp)
		ADDQ(U8(4), dp)
	})
}

// fastK writes the kernel for Q4_K or Q6_K weights against Q8_K
// activations (xq, float32 scales xd, int16 sums of every 16 values xs).
func fastK(q string) {
	name := "fast" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, rows int, blocks int, xq *int8, xd *float32, xs *int16, y *float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[r] = w_r · x for rows %s rows of blocks super-blocks (stride ldw bytes) and Q8_K activations xq, xd, xs.", name, q))
	// Fourteen general registers are not enough to keep every argument:
	// the row's pointers are reloaded from the arguments at each row.
	w, rows, y := GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("rows"), rows)
	Load(Param("y"), y)
	mask := bcast8(0x0f)
	var ones VecVirtual
	if q != "IQ4_XS" {
		ones = broadcast(avx2, 0x00010001)
	}
	var m30, m10 VecVirtual
	if q == "Q6_K" {
		m30 = bcast8(0x30)
	}
	if q == "Q5_K" {
		m10 = bcast8(0x10)
	}
	var levels, m3 VecVirtual
	if q == "Q2_K" || q == "Q3_K" {
		m3 = bcast8(0x03)
	}
	var words Mem
	if q == "IQ4_XS" {
		levels = YMM()
		VMOVDQU(iq4Levels, levels)
		words = AllocLocal(32)
	}
	bsize := map[string]int{"Q4_K": 144, "Q6_K": 210, "Q5_K": 176, "IQ4_XS": 136, "Q2_K": 84, "Q3_K": 110}[q]
	wp, xp, dp, sp, b := GP64(), GP64(), GP64(), GP64(), GP64()
	acc := YMM()
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	VXORPS(acc, acc, acc)
	MOVQ(w, wp)
	Load(Param("xq"), xp)
	Load(Param("xd"), dp)
	Load(Param("xs"), sp)
	Load(Param("blocks"), b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	prefetchBlock(wp, bsize)
	sumi := YMM()
	switch q {
	case "Q4_K":
		q4kBlock(wp, xp, sp, dp, acc, sumi, mask, nil)
	case "Q5_K":
		q4kBlock(wp, xp, sp, dp, acc, sumi, mask, m10)
	case "IQ4_XS":
		iq4xsBlock(wp, xp, dp, acc, sumi, mask, levels, words)
	case "Q2_K", "Q3_K":
		q23kBlock(q, wp, xp, sp, dp, acc, sumi, ones, m3, mask)
	default:
		q6kBlock(wp, xp, sp, dp, acc, sumi, mask, m30, ones)
	}
	ADDQ(U32(bsize), wp)
	ADDQ(U32(256), xp)
	ADDQ(U8(4), dp)
	ADDQ(U8(32), sp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_rowdone")
	reduce(avx2, acc, Mem{Base: y})
	ADDQ(U8(4), y)
	Load(Param("ldw"), b)
	ADDQ(b, w)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// q4kBlock accumulates one Q4_K super-block: d·Σ_j sc_j·(q·x)_j -
// dmin·Σ_j m_j·(sums of sub-block j), with the 6-bit scales and mins
// unpacked in general registers as ggml's utmp trick does.
//
// With m10 set the block is Q5_K's: the nibbles at byte 48 and the fifth
// bits from the 32 bytes of qh at byte 16 (bit 2c of qh[l] for the low
// nibbles of chunk c, bit 2c+1 for the high ones), moved to bit 4 by word
// shifts (a byte's bits stay in that byte) and masked by m10 (0x10).
func q4kBlock(wp, xp, sp, dp GPVirtual, acc, sumi, mask, m10 VecVirtual) {
	a0, a1, a2 := GP32(), GP32(), GP32()
	MOVL(Mem{Base: wp, Disp: 4}, a0)
	MOVL(Mem{Base: wp, Disp: 8}, a1)
	MOVL(Mem{Base: wp, Disp: 12}, a2)
	// u0 = a0 & 0x3f3f3f3f (sc0..3), u1 = (a2 & 0x0f0f0f0f) | ((a0>>6)&0x03030303)<<4 (sc4..7),
	// u2 = a1 & 0x3f3f3f3f (m0..3), u3 = ((a2>>4) & 0x0f0f0f0f) | ((a1>>6)&0x03030303)<<4 (m4..7).
	u1, t := GP32(), GP32()
	MOVL(a0, t)
	SHRL(U8(6), t)
	ANDL(U32(0x03030303), t)
	SHLL(U8(4), t)
	ANDL(U32(0x3f3f3f3f), a0) // u0
	MOVL(a2, u1)
	ANDL(U32(0x0f0f0f0f), u1)
	ORL(t, u1)
	MOVL(a1, t)
	SHRL(U8(6), t)
	ANDL(U32(0x03030303), t)
	SHLL(U8(4), t)
	ANDL(U32(0x3f3f3f3f), a1) // u2
	SHRL(U8(4), a2)
	ANDL(U32(0x0f0f0f0f), a2)
	ORL(t, a2) // u3
	u0, u2, u3 := a0, a1, a2
	// The scales as eight 16-bit words, in both 128-bit lanes.
	sc, mn := YMM(), YMM()
	VMOVD(u0, sc.AsX())
	VPINSRD(U8(1), u1, sc.AsX(), sc.AsX())
	VPMOVZXBW(sc.AsX(), sc.AsX())
	VINSERTI128(U8(1), sc.AsX(), sc, sc)
	// The mins, each twice, against the 16-value sums: VPMADDWD gives
	// m_j·(s_2j + s_2j+1) per 32-bit lane.
	VMOVD(u2, mn.AsX())
	VPINSRD(U8(1), u3, mn.AsX(), mn.AsX())
	VPMOVZXBW(mn.AsX(), mn.AsX())
	mhi := XMM()
	VPUNPCKHWD(mn.AsX(), mn.AsX(), mhi)
	VPUNPCKLWD(mn.AsX(), mn.AsX(), mn.AsX())
	VINSERTI128(U8(1), mhi, mn, mn)
	VPMADDWD(Mem{Base: sp}, mn, mn)
	VPXOR(sumi, sumi, sumi)
	qs := 16
	var qh VecVirtual
	if m10 != nil {
		qs = 48
		qh = YMM()
		VMOVDQU(Mem{Base: wp, Disp: 16}, qh)
	}
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
		VPAND(m10, t, t)
		VPOR(t, v, v)
	}
	for c := 0; c < 4; c++ {
		qv, hi, s := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: qs + 32*c}, qv)
		VPSRLW(U8(4), qv, hi)
		VPAND(mask, qv, qv)
		VPAND(mask, hi, hi)
		if m10 != nil {
			fifth(qv, 2*c)
			fifth(hi, 2*c+1)
		}
		VPMADDUBSW(Mem{Base: xp, Disp: 64 * c}, qv, qv)
		VPSHUFB(q4kShuf.Offset(32*(2*c)), sc, s)
		VPMADDWD(s, qv, qv)
		VPADDD(qv, sumi, sumi)
		VPMADDUBSW(Mem{Base: xp, Disp: 64*c + 32}, hi, hi)
		VPSHUFB(q4kShuf.Offset(32*(2*c+1)), sc, s)
		VPMADDWD(s, hi, hi)
		VPADDD(hi, sumi, sumi)
	}
	VCVTDQ2PS(sumi, sumi)
	VCVTDQ2PS(mn, mn)
	d := scaleOf(Mem{Base: wp}, Mem{Base: dp})
	VFMADD231PS(sumi, d, acc)
	dmin := scaleOf(Mem{Base: wp, Disp: 2}, Mem{Base: dp})
	VFNMADD231PS(mn, dmin, acc)
}

// q6kBlock accumulates one Q6_K super-block: d·Σ_g sc_g·Σ (q-32)·x, as
// Σ_g sc_g·(q·x)_g - 32·Σ_g sc_g·(sum of group g).
func q6kBlock(wp, xp, sp, dp GPVirtual, acc, sumi, mask, m30, ones VecVirtual) {
	VPXOR(sumi, sumi, sumi)
	for h := 0; h < 2; h++ {
		qh, l0, l1 := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: 128 + 32*h}, qh)
		VMOVDQU(Mem{Base: wp, Disp: 64 * h}, l0)
		VMOVDQU(Mem{Base: wp, Disp: 64*h + 32}, l1)
		sc := halfScaleWords(Mem{Base: wp, Disp: 192}, h, true)
		for k := 0; k < 4; k++ {
			qv, hb := YMM(), YMM()
			switch k {
			case 0: // (l0 & 15) | (qh & 3) << 4
				VPAND(mask, l0, qv)
				VPSLLW(U8(4), qh, hb)
			case 1: // (l1 & 15) | ((qh >> 2) & 3) << 4
				VPAND(mask, l1, qv)
				VPSLLW(U8(2), qh, hb)
			case 2: // (l0 >> 4) | ((qh >> 4) & 3) << 4
				VPSRLW(U8(4), l0, qv)
				VPAND(mask, qv, qv)
				VMOVDQA(qh, hb)
			case 3: // (l1 >> 4) | ((qh >> 6) & 3) << 4
				VPSRLW(U8(4), l1, qv)
				VPAND(mask, qv, qv)
				VPSRLW(U8(2), qh, hb)
			}
			VPAND(m30, hb, hb)
			VPOR(hb, qv, qv)
			VPMADDUBSW(Mem{Base: xp, Disp: 128*h + 32*k}, qv, qv)
			VPMADDWD(groupScaleWords(sc, k), qv, qv)
			VPADDD(qv, sumi, sumi)
		}
	}
	// The -32 offset: 32·Σ_g sc_g·sums_g.
	sc16 := YMM()
	VPMOVSXBW(Mem{Base: wp, Disp: 192}, sc16)
	VPMADDWD(Mem{Base: sp}, sc16, sc16)
	VPSLLD(U8(5), sc16, sc16)
	VPSUBD(sc16, sumi, sumi)
	VCVTDQ2PS(sumi, sumi)
	d := scaleOf(Mem{Base: wp, Disp: 208}, Mem{Base: dp})
	VFMADD231PS(sumi, d, acc)
}

// loadQ8Weights loads the 32 values of the block at wp as signed bytes.
func loadQ8Weights(q string, wp GPVirtual, mask, eight, f0 VecVirtual) VecVirtual {
	wv := YMM()
	switch q {
	case "Q8_0":
		VMOVDQU(Mem{Base: wp, Disp: 2}, wv)
	case "Q4_0", "Q5_0", "IQ4_NL":
		off := 2
		if q == "Q5_0" {
			off = 6
		}
		wv = nibblesAVX2(Mem{Base: wp, Disp: off}, nibbleShifts, mask)
		switch q {
		case "Q4_0":
			VPSUBB(eight, wv, wv)
		case "IQ4_NL":
			// The nibble indexes the levels (eight holds the table).
			VPSHUFB(wv, eight, wv)
		default:
			// The fifth bits: 0xff bytes where set; a clear bit makes
			// the value nibble - 16, i.e. nibble | 0xf0 as int8.
			bits := YMM()
			t := GP32()
			MOVL(Mem{Base: wp, Disp: 2}, t)
			VMOVD(t, bits.AsX())
			VPBROADCASTD(bits.AsX(), bits)
			VPSHUFB(q5Shuf, bits, bits)
			VPOR(q5Bits, bits, bits)
			allOnes := YMM()
			VPCMPEQB(allOnes, allOnes, allOnes)
			VPCMPEQB(allOnes, bits, bits)
			VPANDN(f0, bits, bits)
			VPOR(bits, wv, wv)
		}
	}
	return wv
}

// fastQ8x4 writes the prefill kernel: fastQ8 for four rows of activations
// at once (stride ldx values), so each weight block is decoded once for
// four independent accumulators; y[i*ldy + r].
func fastQ8x4(q string) {
	name := "fast" + q + "x4AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, rows int, blocks int, xq *int8, xd *float32, ldx int, y *float32, ldy int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[i*ldy+r] = w_r · x_i for rows %s rows of blocks blocks (stride ldw bytes) and four rows of Q8_0 activations (stride ldx values).", name, q))
	w, rows, y, ldx, ldd := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("rows"), rows)
	Load(Param("y"), y)
	Load(Param("ldx"), ldx)
	MOVQ(ldx, ldd)
	SHRQ(U8(3), ldd) // bytes of scales per row: ldx/32 float32s
	bsize := map[string]int{"Q8_0": 34, "Q4_0": 18, "Q5_0": 22, "IQ4_NL": 18}[q]
	ones, mask, eight, f0 := q8Consts(q)
	wp, xp, xp2, dp, dp2, b := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	acc := []VecVirtual{YMM(), YMM(), YMM(), YMM()}
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	for _, a := range acc {
		VXORPS(a, a, a)
	}
	MOVQ(w, wp)
	Load(Param("xq"), xp)
	LEAQ(Mem{Base: xp, Index: ldx, Scale: 2}, xp2)
	Load(Param("xd"), dp)
	LEAQ(Mem{Base: dp, Index: ldd, Scale: 2}, dp2)
	Load(Param("blocks"), b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	wv := loadQ8Weights(q, wp, mask, eight, f0)
	ax := YMM()
	VPSIGNB(wv, wv, ax)
	dw := YMM()
	VBROADCASTSS(halfToScalar(Mem{Base: wp}), dw)
	for i, a := range acc {
		xm := []Mem{{Base: xp}, {Base: xp, Index: ldx, Scale: 1}, {Base: xp2}, {Base: xp2, Index: ldx, Scale: 1}}[i]
		dm := []Mem{{Base: dp}, {Base: dp, Index: ldd, Scale: 1}, {Base: dp2}, {Base: dp2, Index: ldd, Scale: 1}}[i]
		sx, d := YMM(), YMM()
		VMOVDQU(xm, sx)
		VPSIGNB(wv, sx, sx)
		VPMADDUBSW(sx, ax, sx)
		VPMADDWD(ones, sx, sx)
		VCVTDQ2PS(sx, sx)
		VBROADCASTSS(dm, d)
		VMULPS(dw, d, d)
		VFMADD231PS(sx, d, a)
	}
	ADDQ(U32(bsize), wp)
	ADDQ(U8(32), xp)
	ADDQ(U8(32), xp2)
	ADDQ(U8(4), dp)
	ADDQ(U8(4), dp2)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_rowdone")
	Load(Param("ldy"), b)
	SHLQ(U8(2), b)
	MOVQ(y, xp)
	for _, a := range acc {
		reduce(avx2, a, Mem{Base: xp})
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

// fastKx4 writes fast<q>x4AVX2 for Q4_K and Q5_K weights against four
// rows of Q8_K activations (stride ldx values; ldx/256 scales and ldx/16
// sums a row). Per super-block the weight side of q4kBlock is done once:
// the eight 32-value groups' unsigned values (with Q5_K's fifth bits),
// each group's 16-bit scale vector and the mins go to the stack. Then
// each row runs only VPMADDUBSW, VPMADDWD and VPADDD per group against
// them, and d·sumi − dmin·(mins·sums) into its eight float32 lanes as
// q4kBlock does.
func fastKx4(q string) { fastKx4Rows(q, false) }

// kStaged is the size of a staged super-block (fastKStage): the groups'
// values, their scale vectors and the words against the sums, 256 bytes
// each.
const kStaged = 768

// fastKStage writes fastStage<q>AVX2(w, ldw, rows, blocks, dst): the
// weight side of fastKx4 for rows rows of blocks super-blocks, staged
// once into dst (kStaged bytes a super-block, row after row), so that a
// prefill's every four rows of activations read it instead of staging
// each super-block again (fastStaged<q>x4AVX2).
func fastKStage(q string) {
	name := "fastStage" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, rows int, blocks int, dst *byte)")
	Pragma("noescape")
	Doc(name + " stages rows " + q + " rows of blocks super-blocks (stride ldw bytes) into dst for fastStaged" + q + "x4AVX2, kStaged bytes a super-block.")
	w, rows, dp, wp, b := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("rows"), rows)
	Load(Param("dst"), dp)
	bsize := map[string]int{"Q4_K": 144, "Q5_K": 176, "Q6_K": 210, "Q2_K": 84, "Q3_K": 110, "IQ4_XS": 136}[q]
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	MOVQ(w, wp)
	Load(Param("blocks"), b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	kStage(q, wp, Mem{Base: dp}, Mem{Base: dp, Disp: 256}, Mem{Base: dp, Disp: 512})
	ADDQ(U32(bsize), wp)
	ADDQ(U32(kStaged), dp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_rowdone")
	Load(Param("ldw"), b)
	ADDQ(b, w)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// kStage stages super-block wp's weight side at wq, ws, wm.
func kStage(q string, wp GPVirtual, wq, ws, wm Mem) {
	switch q {
	case "Q6_K":
		q6kStage(wp, wq, ws, wm)
	case "Q2_K", "Q3_K":
		q23kStage(q, wp, wq, ws, wm)
	case "IQ4_XS":
		iq4xsStage(wp, wq, ws, wm)
	default:
		q4kStage(q, wp, wq, ws, wm)
	}
}

// fastKx4Rows writes fast<q>x4AVX2, or with staged fastStaged<q>x4AVX2,
// which reads each super-block's weight side from st (fastKStage's
// layout, the same rows) instead of staging it on the stack.
func fastKx4Rows(q string, staged bool) {
	name := "fast" + q + "x4AVX2"
	sig := "func(w *byte, ldw int, rows int, blocks int, xq *int8, xd *float32, xs *int16, ldx int, y *float32, ldy int)"
	if staged {
		name = "fastStaged" + q + "x4AVX2"
		sig = "func(w *byte, ldw int, rows int, blocks int, st *byte, xq *int8, xd *float32, xs *int16, ldx int, y *float32, ldy int)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[i*ldy+r] = w_r · x_i for rows %s rows of blocks super-blocks (stride ldw bytes) and four rows of Q8_K activations (stride ldx values).", name, q))
	var wq, ws, wm Mem
	var stp GPVirtual
	if staged {
		stp = GP64()
		Load(Param("st"), stp)
		wq, ws, wm = Mem{Base: stp}, Mem{Base: stp, Disp: 256}, Mem{Base: stp, Disp: 512}
	} else {
		wq = AllocLocal(8 * 32) // the groups' unsigned values
		ws = AllocLocal(8 * 32) // the groups' scales as 16-bit words
		wm = AllocLocal(8 * 32) // the words against the sums (IQ4_XS: ls − 32 as word pairs)
	}
	w, rows, y, ldx := GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("rows"), rows)
	Load(Param("y"), y)
	Load(Param("ldx"), ldx)
	bsize := map[string]int{"Q4_K": 144, "Q5_K": 176, "Q6_K": 210, "Q2_K": 84, "Q3_K": 110, "IQ4_XS": 136}[q]
	wp, xp, dp, sp, b := GP64(), GP64(), GP64(), GP64(), GP64()
	acc := []VecVirtual{YMM(), YMM(), YMM(), YMM()}
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	for _, a := range acc {
		VXORPS(a, a, a)
	}
	MOVQ(w, wp)
	Load(Param("xq"), xp)
	Load(Param("xd"), dp)
	Load(Param("xs"), sp)
	Load(Param("blocks"), b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	if !staged {
		prefetchBlock(wp, bsize)
		kStage(q, wp, wq, ws, wm)
	}
	// Each row: its x at tx, its scale at td, its sums at ts.
	tx, td, ts, st := GP64(), GP64(), GP64(), GP64()
	MOVQ(xp, tx)
	MOVQ(dp, td)
	MOVQ(sp, ts)
	if staged {
		// Group by group for the four rows, then each row's tail.
		x3 := GP64()
		LEAQ(Mem{Base: xp, Index: ldx, Scale: 2}, x3)
		ADDQ(ldx, x3)
		xr := [4]Mem{{Base: xp}, {Base: xp, Index: ldx, Scale: 1}, {Base: xp, Index: ldx, Scale: 2}, {Base: x3}}
		sumi := quadSums(q, xr, wq, ws, wm)
		for i, a := range acc {
			if i > 0 {
				MOVQ(ldx, st)
				SHRQ(U8(6), st) // ldx/256 float32s
				ADDQ(st, td)
				MOVQ(ldx, st)
				SHRQ(U8(3), st) // ldx/16 int16s
				ADDQ(st, ts)
			}
			kTail(q, wp, td, ts, wm, sumi[i], a)
		}
	}
	for i, a := range acc {
		if staged {
			break
		}
		if i > 0 {
			ADDQ(ldx, tx)
			MOVQ(ldx, st)
			SHRQ(U8(6), st) // ldx/256 float32s
			ADDQ(st, td)
			MOVQ(ldx, st)
			SHRQ(U8(3), st) // ldx/16 int16s
			ADDQ(st, ts)
		}
		switch q {
		case "Q6_K":
			q6kRow(wp, tx, td, ts, wq, ws, wm, a)
		case "Q2_K", "Q3_K":
			q23kRow(q, wp, tx, td, ts, wq, ws, wm, a)
		case "IQ4_XS":
			iq4xsRow(wp, tx, td, wq, ws, wm, a)
		default:
			q4kRow(wp, tx, td, ts, wq, ws, wm, a)
		}
	}
	ADDQ(U32(bsize), wp)
	if staged {
		ADDQ(U32(kStaged), stp)
	}
	ADDQ(U32(256), xp)
	ADDQ(U8(4), dp)
	ADDQ(U8(32), sp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_rowdone")
	Load(Param("ldy"), b)
	SHLQ(U8(2), b)
	MOVQ(y, xp)
	for _, a := range acc {
		reduce(avx2, a, Mem{Base: xp})
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

// q4kStage stages the weight side of a Q4_K or Q5_K super-block at wp
// for fastKx4: the eight groups' unsigned values at wq, their 16-bit scale
// vectors at ws, the mins (each twice, as 16-bit words) at wm.
func q4kStage(q string, wp GPVirtual, wq, ws, wm Mem) {
	a0, a1, a2 := GP32(), GP32(), GP32()
	MOVL(Mem{Base: wp, Disp: 4}, a0)
	MOVL(Mem{Base: wp, Disp: 8}, a1)
	MOVL(Mem{Base: wp, Disp: 12}, a2)
	u1, t := GP32(), GP32()
	MOVL(a0, t)
	SHRL(U8(6), t)
	ANDL(U32(0x03030303), t)
	SHLL(U8(4), t)
	ANDL(U32(0x3f3f3f3f), a0) // u0
	MOVL(a2, u1)
	ANDL(U32(0x0f0f0f0f), u1)
	ORL(t, u1)
	MOVL(a1, t)
	SHRL(U8(6), t)
	ANDL(U32(0x03030303), t)
	SHLL(U8(4), t)
	ANDL(U32(0x3f3f3f3f), a1) // u2
	SHRL(U8(4), a2)
	ANDL(U32(0x0f0f0f0f), a2)
	ORL(t, a2) // u3
	sc, mn := YMM(), YMM()
	VMOVD(a0, sc.AsX())
	VPINSRD(U8(1), u1, sc.AsX(), sc.AsX())
	VPMOVZXBW(sc.AsX(), sc.AsX())
	VINSERTI128(U8(1), sc.AsX(), sc, sc)
	VMOVD(a1, mn.AsX())
	VPINSRD(U8(1), a2, mn.AsX(), mn.AsX())
	VPMOVZXBW(mn.AsX(), mn.AsX())
	mhi := XMM()
	VPUNPCKHWD(mn.AsX(), mn.AsX(), mhi)
	VPUNPCKLWD(mn.AsX(), mn.AsX(), mn.AsX())
	VINSERTI128(U8(1), mhi, mn, mn)
	VMOVDQU(mn, wm)
	mask := bcast8(0x0f)
	qs := 16
	var qh, m10 VecVirtual
	if q == "Q5_K" {
		qs = 48
		qh = YMM()
		VMOVDQU(Mem{Base: wp, Disp: 16}, qh)
		m10 = bcast8(0x10)
	}
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
		VPAND(m10, t, t)
		VPOR(t, v, v)
	}
	for c := 0; c < 4; c++ {
		qv, hi, s := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: qs + 32*c}, qv)
		VPSRLW(U8(4), qv, hi)
		VPAND(mask, qv, qv)
		VPAND(mask, hi, hi)
		if q == "Q5_K" {
			fifth(qv, 2*c)
			fifth(hi, 2*c+1)
		}
		VMOVDQU(qv, wq.Offset(64*c))
		VMOVDQU(hi, wq.Offset(64*c+32))
		VPSHUFB(q4kShuf.Offset(32*(2*c)), sc, s)
		VMOVDQU(s, ws.Offset(64*c))
		s2 := YMM()
		VPSHUFB(q4kShuf.Offset(32*(2*c+1)), sc, s2)
		VMOVDQU(s2, ws.Offset(64*c+32))
	}
}

// q4kRow adds one activation row's share of a staged Q4_K or Q5_K
// super-block into acc: d·sumi − dmin·(mins·sums), as q4kBlock.
func q4kRow(wp, tx, td, ts GPVirtual, wq, ws, wm Mem, acc VecVirtual) {
	q4kTail(wp, td, ts, wm, rowSums("Q4_K", tx, wq, ws, wm), acc)
}

// q4kTail adds d·sumi − dmin·(mins·sums) into acc.
func q4kTail(wp, td, ts GPVirtual, wm Mem, sumi, acc VecVirtual) {
	m := YMM()
	VMOVDQU(wm, m)
	VPMADDWD(Mem{Base: ts}, m, m)
	VCVTDQ2PS(sumi, sumi)
	VCVTDQ2PS(m, m)
	d := scaleOf(Mem{Base: wp}, Mem{Base: td})
	VFMADD231PS(sumi, d, acc)
	dmin := scaleOf(Mem{Base: wp, Disp: 2}, Mem{Base: td})
	VFNMADD231PS(m, dmin, acc)
}

// rowSums returns one activation row's eight int32 lane sums against a
// staged super-block: per group VPMADDUBSW of the unsigned values (IQ4_XS:
// their magnitudes, x taking their signs) and one VPMADDWD by the group's
// scale words.
func rowSums(q string, tx GPVirtual, wq, ws, wm Mem) VecVirtual {
	sumi := YMM()
	for g := 0; g < 8; g++ {
		p := YMM()
		if q == "IQ4_XS" {
			VMOVDQU(Mem{Base: tx, Disp: 32 * g}, p)
			VPSIGNB(wq.Offset(32*g), p, p)
			t := YMM()
			VMOVDQU(ws.Offset(32*g), t)
			VPMADDUBSW(p, t, p)
			VPMADDWD(wm.Offset(32*g), p, p)
		} else {
			VMOVDQU(wq.Offset(32*g), p)
			VPMADDUBSW(Mem{Base: tx, Disp: 32 * g}, p, p)
			VPMADDWD(ws.Offset(32*g), p, p)
		}
		if g == 0 {
			sumi = p
		} else {
			VPADDD(p, sumi, sumi)
		}
	}
	return sumi
}

// quadSums is rowSums for four activation rows at once (x at xr[0..3]),
// group by group: each group's staged vectors are loaded once for the
// four rows, so a row costs one load of x and three or four operations.
func quadSums(q string, xr [4]Mem, wq, ws, wm Mem) [4]VecVirtual {
	var sumi [4]VecVirtual
	for g := 0; g < 8; g++ {
		wv, sv := YMM(), YMM()
		VMOVDQU(wq.Offset(32*g), wv)
		VMOVDQU(ws.Offset(32*g), sv)
		var mv VecVirtual
		if q == "IQ4_XS" {
			mv = YMM()
			VMOVDQU(wm.Offset(32*g), mv)
		}
		for r := 0; r < 4; r++ {
			p := YMM()
			x := xr[r].Offset(32 * g)
			if q == "IQ4_XS" {
				VMOVDQU(x, p)
				VPSIGNB(wv, p, p)
				VPMADDUBSW(p, sv, p)
				VPMADDWD(mv, p, p)
			} else {
				VPMADDUBSW(x, wv, p)
				VPMADDWD(sv, p, p)
			}
			if g == 0 {
				sumi[r] = p
			} else {
				VPADDD(p, sumi[r], sumi[r])
			}
		}
	}
	return sumi
}

// kTail adds a row's lane sums into acc, the format's tail.
func kTail(q string, wp, td, ts GPVirtual, wm Mem, sumi, acc VecVirtual) {
	switch q {
	case "Q6_K":
		q6kTail(wp, td, ts, wm, sumi, acc)
	case "Q2_K", "Q3_K":
		q23kTail(q, wp, td, ts, wm, sumi, acc)
	case "IQ4_XS":
		VCVTDQ2PS(sumi, sumi)
		d := scaleOf(Mem{Base: wp}, Mem{Base: td})
		VFMADD231PS(sumi, d, acc)
	default:
		q4kTail(wp, td, ts, wm, sumi, acc)
	}
}

// q6kStage stages a Q6_K super-block at wp for fastKx4: the eight groups'
// unsigned 6-bit values at wq, each group's scales as 16-bit word pairs
// (for VPMADDWD) at ws, the sixteen scales as 16-bit words at wm.
func q6kStage(wp GPVirtual, wq, ws, wm Mem) {
	mask, m30 := bcast8(0x0f), bcast8(0x30)
	for h := 0; h < 2; h++ {
		qh, l0, l1 := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: 128 + 32*h}, qh)
		VMOVDQU(Mem{Base: wp, Disp: 64 * h}, l0)
		VMOVDQU(Mem{Base: wp, Disp: 64*h + 32}, l1)
		sc := YMM()
		VPMOVSXBD(Mem{Base: wp, Disp: 192 + 8*h}, sc)
		for k := 0; k < 4; k++ {
			qv, hb := YMM(), YMM()
			switch k {
			case 0:
				VPAND(mask, l0, qv)
				VPSLLW(U8(4), qh, hb)
			case 1:
				VPAND(mask, l1, qv)
				VPSLLW(U8(2), qh, hb)
			case 2:
				VPSRLW(U8(4), l0, qv)
				VPAND(mask, qv, qv)
				VMOVDQA(qh, hb)
			case 3:
				VPSRLW(U8(4), l1, qv)
				VPAND(mask, qv, qv)
				VPSRLW(U8(2), qh, hb)
			}
			VPAND(m30, hb, hb)
			VPOR(hb, qv, qv)
			VMOVDQU(qv, wq.Offset(32*(4*h+k)))
			s := YMM()
			VMOVDQU(q6kIdx.Offset(32*k), s)
			VPERMD(sc, s, s)
			VMOVDQU(wordPairs(s), ws.Offset(32*(4*h+k)))
		}
	}
	sc16 := YMM()
	VPMOVSXBW(Mem{Base: wp, Disp: 192}, sc16)
	VMOVDQU(sc16, wm)
}

// q6kRow adds one activation row's share of a staged Q6_K super-block
// into acc: d·(Σ_g sc_g·(q·x)_g − 32·Σ_g sc_g·sums_g), as q6kBlock.
func q6kRow(wp, tx, td, ts GPVirtual, wq, ws, wm Mem, acc VecVirtual) {
	q6kTail(wp, td, ts, wm, rowSums("Q6_K", tx, wq, ws, wm), acc)
}

// q6kTail adds d·(sumi − 32·Σ_g sc_g·sums_g) into acc.
func q6kTail(wp, td, ts GPVirtual, wm Mem, sumi, acc VecVirtual) {
	sc16 := YMM()
	VMOVDQU(wm, sc16)
	VPMADDWD(Mem{Base: ts}, sc16, sc16)
	VPSLLD(U8(5), sc16, sc16)
	VPSUBD(sc16, sumi, sumi)
	VCVTDQ2PS(sumi, sumi)
	d := scaleOf(Mem{Base: wp, Disp: 208}, Mem{Base: td})
	VFMADD231PS(sumi, d, acc)
}

// q23kStage stages a Q2_K or Q3_K super-block at wp for fastKx4 (see
// q23kBlock): the eight groups' unsigned values (Q3_K's with the hmask
// bit as 4, its −4 taken off through the sums) at wq, each group's scales
// as 16-bit word pairs at ws, and the words against the sums (Q2_K's mins,
// Q3_K's scales) at wm.
func q23kStage(q string, wp GPVirtual, wq, ws, wm Mem) {
	m3, m0f := bcast8(0x03), bcast8(0x0f)
	scb := XMM()
	var scw VecVirtual
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
		u0 := aux(a0, 0, 0)
		VMOVD(u0, scb)
		u1 := aux(a1, 0, 1)
		VPINSRD(U8(1), u1, scb, scb)
		u2 := aux(a0, 1, 2)
		VPINSRD(U8(2), u2, scb, scb)
		u3 := aux(a1, 1, 3)
		VPINSRD(U8(3), u3, scb, scb)
		k32 := XMM()
		VMOVDQU(q3kBias, k32)
		VPSUBB(k32, scb, scb)
		scw = YMM()
		VPMOVSXBW(scb, scw)
	}
	VMOVDQU(scw, wm)
	scd := []VecVirtual{YMM(), YMM()}
	sch := XMM()
	VPSRLDQ(U8(8), scb, sch)
	if q == "Q2_K" {
		VPMOVZXBD(scb, scd[0])
		VPMOVZXBD(sch, scd[1])
	} else {
		VPMOVSXBD(scb, scd[0])
		VPMOVSXBD(sch, scd[1])
	}
	for g := 0; g < 8; g++ {
		s := YMM()
		VMOVDQU(q6kIdx.Offset(32*(g%4)), s)
		VPERMD(scd[g/4], s, s)
		VMOVDQU(wordPairs(s), ws.Offset(32*g))
	}
	var hm, m01 VecVirtual
	if q == "Q3_K" {
		hm, m01 = YMM(), YMM()
		VMOVDQU(Mem{Base: wp}, hm)
		VPSRLW(U8(1), m3, m01)
		VPAND(m3, m01, m01)
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
			VMOVDQU(qv, wq.Offset(32*(4*h+j)))
		}
	}
}

// q23kRow adds one activation row's share of a staged Q2_K or Q3_K
// super-block into acc, as q23kBlock.
func q23kRow(q string, wp, tx, td, ts GPVirtual, wq, ws, wm Mem, acc VecVirtual) {
	q23kTail(q, wp, td, ts, wm, rowSums(q, tx, wq, ws, wm), acc)
}

// q23kTail adds the lane sums into acc with Q2_K's min term or Q3_K's
// −4 term, as q23kBlock.
func q23kTail(q string, wp, td, ts GPVirtual, wm Mem, sumi, acc VecVirtual) {
	corr := YMM()
	VMOVDQU(wm, corr)
	VPMADDWD(Mem{Base: ts}, corr, corr)
	if q == "Q3_K" {
		VPSLLD(U8(2), corr, corr)
		VPSUBD(corr, sumi, sumi)
		VCVTDQ2PS(sumi, sumi)
		d := scaleOf(Mem{Base: wp, Disp: 108}, Mem{Base: td})
		VFMADD231PS(sumi, d, acc)
		return
	}
	VCVTDQ2PS(sumi, sumi)
	VCVTDQ2PS(corr, corr)
	d := scaleOf(Mem{Base: wp, Disp: 80}, Mem{Base: td})
	VFMADD231PS(sumi, d, acc)
	dmin := scaleOf(Mem{Base: wp, Disp: 82}, Mem{Base: td})
	VFNMADD231PS(corr, dmin, acc)
}

// iq4xsStage stages an IQ4_XS super-block at wp for fastKx4 (see
// iq4xsBlock): the eight groups' signed levels at wq, their absolute
// values at ws, and each group's ls − 32 as 16-bit word pairs broadcast
// at wm (eight vectors).
func iq4xsStage(wp GPVirtual, wq, ws, wm Mem) {
	mask, levels := bcast8(0x0f), YMM()
	VMOVDQU(iq4Levels, levels)
	words := iq4xsWords(wp)
	for b := 0; b < 8; b++ {
		wv := iq4Nibbles(Mem{Base: wp, Disp: 8 + 16*b}, mask)
		VPSHUFB(wv, levels, wv)
		VMOVDQU(wv, wq.Offset(32*b))
		VPSIGNB(wv, wv, wv)
		VMOVDQU(wv, ws.Offset(32*b))
		lv, idx := YMM(), YMM()
		VMOVDQU(laneIdx.Offset(32*b), idx)
		VPERMD(words, idx, lv)
		VMOVDQU(lv, wm.Offset(32*b))
	}
}

// iq4xsRow adds one activation row's share of a staged IQ4_XS
// super-block into acc, as iq4xsBlock: |w| against x with w's signs.
func iq4xsRow(wp, tx, td GPVirtual, wq, ws, wm Mem, acc VecVirtual) {
	kTail("IQ4_XS", wp, td, td, wm, rowSums("IQ4_XS", tx, wq, ws, wm), acc)
}
