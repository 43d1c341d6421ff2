package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// fastX16 writes fastX16<q>AVX2(w, groups, blocks, xq, xd, corr, y): fast
// mode's decode product on a matrix regrouped by 16 rows (x16.go), for
// Q4_0, IQ4_NL and Q8_0 against Q8_0 activations. A regrouped block holds
// the 16 rows' d, then word i of each row side by side, so a 32-byte
// load is word i of 8 rows and each int32 lane of a product is one row:
// x's four values are a broadcast, and a block's integer sums are scaled
// for eight rows at once. Q4_0 takes its nibbles unsigned, sums the
// VPMADDUBSW pairs of a block as 16 bits (at most 8·2·15·127 = 30480) and
// adds corr, −8 times the block's sum of x; IQ4_NL (levels) and Q8_0
// take the sign trick. Each lane ends with ggml's integer for its row's
// block, then (d_w·d_x)·sum into the row's float32 accumulator. Q4_1 and
// Q5_1 run against Q8_1 activations (d_x and s_x per block): their
// nibbles are unsigned as Q4_0's, and each row adds m_w·s_x per block
// into a second accumulator, summed into the first at the end as ggml's
// summs is. Q5_1's fifth bits lie in the head (putRow): byte k of a row's
// word holds value 4j+k's bit at bit j, so a shift and a mask put value
// 4i+k's (low nibble) and 16+4i+k's (high nibble) at bit 4 of byte k.
func fastX16(q string) {
	name := "fastX16" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, groups int, blocks int, xq *int8, xd *float32, corr *int32, y *float32)")
	Pragma("noescape")
	if q == "Q4_1" || q == "Q5_1" {
		Doc(name + " computes y[r] = w_r · x for groups regrouped groups of 16 " + q + " rows of blocks blocks and Q8_1 activations xq, xd (scale and sum pairs; corr unused).")
	} else {
		Doc(name + " computes y[r] = w_r · x for groups regrouped groups of 16 " + q + " rows of blocks blocks and Q8_0 activations xq, xd (corr: −8·Σx a block, Q4_0).")
	}
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	if q == "Q4_1" || q == "Q5_1" {
		fastX16Min(q, name, wp, groups, y)
		return
	}
	words := map[string]int{"Q4_0": 4, "IQ4_NL": 4, "Q8_0": 8}[q]
	bsize := 32 + 64*words
	ones := broadcast(avx2isa, 0x00010001)
	var mask, levels VecVirtual
	if q != "Q8_0" {
		mask = bcast8(0x0f)
	}
	if q == "IQ4_NL" {
		levels = YMM()
		VMOVDQU(iq4Levels, levels)
	}
	xp, dp, cp, b := GP64(), GP64(), GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xq"), xp)
		Load(Param("xd"), dp)
		Load(Param("blocks"), b)
		if q == "Q4_0" {
			Load(Param("corr"), cp)
		}
	}, func(acc [2]VecVirtual) {
		prefetchBlock(wp, bsize)
		var sums [2]VecVirtual
		add := func(h int, p VecVirtual, first bool, words16 bool) {
			switch {
			case first:
				sums[h] = p
			case words16:
				VPADDW(p, sums[h], sums[h])
			default:
				VPADDD(p, sums[h], sums[h])
			}
		}
		// sign multiplies 32 signed weight bytes wv by x's broadcast bytes xb
		// (|w| against x with w's signs) into int32 lanes.
		sign := func(wv, xb VecVirtual) VecVirtual {
			aw, sx := YMM(), YMM()
			VPSIGNB(wv, wv, aw)
			VPSIGNB(wv, xb, sx)
			VPMADDUBSW(sx, aw, aw)
			VPMADDWD(ones, aw, aw)
			return aw
		}
		for i := 0; i < words; i++ {
			if q == "Q8_0" {
				xb := YMM()
				VPBROADCASTD(Mem{Base: xp, Disp: 4 * i}, xb)
				for h := 0; h < 2; h++ {
					wv := YMM()
					VMOVDQU(Mem{Base: wp, Disp: 32 + 64*i + 32*h}, wv)
					add(h, sign(wv, xb), i == 0, false)
				}
				continue
			}
			xl, xh := YMM(), YMM()
			VPBROADCASTD(Mem{Base: xp, Disp: 4 * i}, xl)
			VPBROADCASTD(Mem{Base: xp, Disp: 16 + 4*i}, xh)
			for h := 0; h < 2; h++ {
				v, lo, hi := YMM(), YMM(), YMM()
				VMOVDQU(Mem{Base: wp, Disp: 32 + 64*i + 32*h}, v)
				VPAND(mask, v, lo)
				VPSRLW(U8(4), v, hi)
				VPAND(mask, hi, hi)
				if q == "Q4_0" {
					VPMADDUBSW(xl, lo, lo)
					VPMADDUBSW(xh, hi, hi)
					VPADDW(hi, lo, lo)
					add(h, lo, i == 0, true)
					continue
				}
				VPSHUFB(lo, levels, lo)
				VPSHUFB(hi, levels, hi)
				p := sign(lo, xl)
				VPADDD(sign(hi, xh), p, p)
				add(h, p, i == 0, false)
			}
		}
		dx := YMM()
		VBROADCASTSS(Mem{Base: dp}, dx)
		var c VecVirtual
		if q == "Q4_0" {
			c = YMM()
			VPBROADCASTD(Mem{Base: cp}, c)
		}
		for h := 0; h < 2; h++ {
			s := sums[h]
			if q == "Q4_0" {
				VPMADDWD(ones, s, s)
				VPADDD(c, s, s)
			}
			VCVTDQ2PS(s, s)
			dw := YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, dw)
			VMULPS(dx, dw, dw)
			VFMADD231PS(s, dw, acc[h])
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U8(32), xp)
		ADDQ(U8(4), dp)
		if q == "Q4_0" {
			ADDQ(U8(4), cp)
		}
	}, nil)
}

// fastStageX16 writes fastStageX16<q>AVX2(w, blocks, dst): rows 8h..8h+7
// of a regrouped group (w points at the group, plus 32h bytes of the
// first block's words: half h) staged for fastStaged8x4AVX2 as
// fastStage8 stages rows of the file's layout. The regrouped words are
// already four values of eight rows side by side, so a chunk is a load
// and the values' decoding; the eight d come from the block's head.
func fastStageX16(q string) {
	name := "fastStageX16" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, half int, blocks int, dst *byte)")
	Pragma("noescape")
	Doc(name + " stages half half (rows 8·half..8·half+7) of a group of 16 regrouped " + q + " rows of blocks blocks into dst for fastStaged8x4AVX2.")
	wp, h, b, dp := GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), wp)
	Load(Param("half"), h)
	Load(Param("blocks"), b)
	Load(Param("dst"), dp)
	words := map[string]int{"Q4_0": 4, "IQ4_NL": 4, "Q8_0": 8}[q]
	bsize := 32 + 64*words
	var mask, eight VecVirtual
	if q != "Q8_0" {
		mask = bcast8(0x0f)
	}
	switch q {
	case "Q4_0":
		eight = bcast8(8)
	case "IQ4_NL":
		eight = YMM()
		VMOVDQU(iq4Levels, eight)
	}
	hd, hw := GP64(), GP64() // the half's offsets: 16h into the head, 32h into a word
	MOVQ(h, hd)
	SHLQ(U8(4), hd)
	MOVQ(h, hw)
	SHLQ(U8(5), hw)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_end"))
	store := func(v VecVirtual, c int) {
		a := YMM()
		VPSIGNB(v, v, a)
		VMOVDQU(v, Mem{Base: dp, Disp: 32 * c})
		VMOVDQU(a, Mem{Base: dp, Disp: 256 + 32*c})
	}
	for i := 0; i < words; i++ {
		v := YMM()
		VMOVDQU(Mem{Base: wp, Index: hw, Scale: 1, Disp: 32 + 64*i}, v)
		if q == "Q8_0" {
			store(v, i)
			continue
		}
		hi := YMM()
		VPSRLW(U8(4), v, hi)
		VPAND(mask, v, v)
		VPAND(mask, hi, hi)
		for k, x := range []VecVirtual{v, hi} {
			if q == "Q4_0" {
				VPSUBB(eight, x, x)
			} else {
				VPSHUFB(x, eight, x)
			}
			store(x, i+4*k)
		}
	}
	dw := YMM()
	VCVTPH2PS(Mem{Base: wp, Index: hd, Scale: 1}, dw)
	VMOVUPS(dw, Mem{Base: dp, Disp: 512})
	ADDQ(U32(bsize), wp)
	ADDQ(U32(q8Staged), dp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// fastX16Min is fastX16's body for Q4_1 and Q5_1 (a block's head: the 16
// rows' d, their m, and Q5_1's fifth bits as 16 rows' words), half by
// half of a group: the nibbles' pair sums stay 16-bit over the block
// (Q4_1: at most 4·2·2·15·127 = 30480) or over two words (Q5_1:
// 2·2·2·31·127 = 31496) before VPMADDWD widens them.
func fastX16Min(q, name string, wp, groups, y GPVirtual) {
	head := map[string]int{"Q4_1": 64, "Q5_1": 128}[q]
	bsize := head + 64*4
	ones, mask := broadcast(avx2isa, 0x00010001), bcast8(0x0f)
	var m10 VecVirtual
	if q == "Q5_1" {
		m10 = bcast8(0x10)
	}
	xp, dp, b := GP64(), GP64(), GP64()
	accm := [2]VecVirtual{YMM(), YMM()} // the m_w·s_x terms, ggml's summs
	x16Frame(name, groups, y, b, func() {
		for _, a := range accm {
			VXORPS(a, a, a)
		}
		Load(Param("xq"), xp)
		Load(Param("xd"), dp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		prefetchBlock(wp, bsize)
		for h := 0; h < 2; h++ {
			var qh, s16, s32 VecVirtual
			if q == "Q5_1" {
				qh = YMM()
				VMOVDQU(Mem{Base: wp, Disp: 64 + 32*h}, qh)
			}
			widen := func() {
				VPMADDWD(ones, s16, s16)
				if s32 == nil {
					s32 = s16
				} else {
					VPADDD(s16, s32, s32)
				}
				s16 = nil
			}
			for i := 0; i < 4; i++ {
				v, lo, hi := YMM(), YMM(), YMM()
				VMOVDQU(Mem{Base: wp, Disp: head + 64*i + 32*h}, v)
				VPAND(mask, v, lo)
				VPSRLW(U8(4), v, hi)
				VPAND(mask, hi, hi)
				if q == "Q5_1" {
					orByteBit(lo, qh, i, 4, m10)
					orByteBit(hi, qh, 4+i, 4, m10)
				}
				xl, xh := YMM(), YMM()
				VPBROADCASTD(Mem{Base: xp, Disp: 4 * i}, xl)
				VPBROADCASTD(Mem{Base: xp, Disp: 16 + 4*i}, xh)
				VPMADDUBSW(xl, lo, lo)
				VPMADDUBSW(xh, hi, hi)
				VPADDW(hi, lo, lo)
				if s16 == nil {
					s16 = lo
				} else {
					VPADDW(lo, s16, s16)
				}
				if q == "Q5_1" && i%2 == 1 {
					widen()
				}
			}
			if s16 != nil {
				widen()
			}
			VCVTDQ2PS(s32, s32)
			dw, dx := YMM(), YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, dw)
			VBROADCASTSS(Mem{Base: dp}, dx)
			VMULPS(dx, dw, dw)
			VFMADD231PS(s32, dw, acc[h])
			// m_w·s_x rounded, then added, as ggml's summs.
			mw, sx := YMM(), YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 32 + 16*h}, mw)
			VBROADCASTSS(Mem{Base: dp, Disp: 4}, sx)
			VMULPS(sx, mw, mw)
			VADDPS(mw, accm[h], accm[h])
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U8(32), xp)
		ADDQ(U8(8), dp)
	}, func(acc [2]VecVirtual) {
		for h := range acc {
			VADDPS(accm[h], acc[h], acc[h])
		}
	})
}

// fastX16IQ4XS writes fastX16IQ4_XSAVX2(w, groups, blocks, xq, xd, y): fast
// decode of IQ4_XS regrouped by 16 rows (x16.go: the 16 rows' d, then
// their sub-block scales ls−32 as bytes, sub-block b's at 32+16b, then 32
// words of values) against Q8_K activations. As in fastX16, each int32
// lane is a row: the levels K[nibble] of four values against a
// broadcast of x's four (the sign trick, as ggml's vec_dot_iq4_xs_q8_K),
// each pair of 16-bit sums times the row's scale by one VPMADDWD
// (wordPairs), the super-block's integer then (d_w·d_x)·sum into the
// row's float32 accumulator.
func fastX16IQ4XS() {
	name := "fastX16IQ4_XSAVX2"
	TEXT(name, NOSPLIT, "func(w *byte, groups int, blocks int, xq *int8, xd *float32, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = w_r · x for groups regrouped groups of 16 IQ4_XS rows of blocks super-blocks and Q8_K activations xq, xd.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	const head = 32 + 8*16
	bsize := head + 64*32
	mask, levels := bcast8(0x0f), YMM()
	VMOVDQU(iq4Levels, levels)
	xp, dp, b := GP64(), GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xq"), xp)
		Load(Param("xd"), dp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		lines := (bsize + 63) / 64
		for h := 0; h < 2; h++ {
			sumi := YMM()
			for sb := 0; sb < 8; sb++ {
				spreadPrefetch(wp, lines, 8*h+sb, 16)
				sc := YMM()
				VPMOVSXBD(Mem{Base: wp, Disp: 32 + 16*sb + 8*h}, sc)
				scw := wordPairs(sc)
				for w := 0; w < 4; w++ {
					v, lo, hi := YMM(), YMM(), YMM()
					VMOVDQU(Mem{Base: wp, Disp: head + 64*(4*sb+w) + 32*h}, v)
					VPAND(mask, v, lo)
					VPSRLW(U8(4), v, hi)
					VPAND(mask, hi, hi)
					VPSHUFB(lo, levels, lo)
					VPSHUFB(hi, levels, hi)
					for k, wv := range []VecVirtual{lo, hi} {
						xb, ax := YMM(), YMM()
						VPBROADCASTD(Mem{Base: xp, Disp: 32*sb + 16*k + 4*w}, xb)
						VPSIGNB(wv, wv, ax)
						VPSIGNB(wv, xb, xb)
						VPMADDUBSW(xb, ax, ax)
						VPMADDWD(scw, ax, ax)
						if sb == 0 && w == 0 && k == 0 {
							VMOVDQA(ax, sumi)
						} else {
							VPADDD(ax, sumi, sumi)
						}
					}
				}
			}
			VCVTDQ2PS(sumi, sumi)
			dw, dx := YMM(), YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, dw)
			VBROADCASTSS(Mem{Base: dp}, dx)
			VMULPS(dx, dw, dw)
			VFMADD231PS(sumi, dw, acc[h])
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(256), xp)
		ADDQ(U8(4), dp)
	}, nil)
}

// fastX16Q23K writes fastX16<q>AVX2(w, groups, blocks, xq, xd, xs, y) for
// Q2_K and Q3_K regrouped by 16 rows (x16.go), against Q8_K activations
// (xs: their sums of 16). A regrouped block holds the 16 rows' d (Q2_K:
// then dmin), their sub-block scales by pairs (pair p at head 32p, row r's
// two bytes at 2r: Q2_K's sc|m<<4 bytes as the file has them, Q3_K's
// scales less 32 as int8), then the 2-bit words (Q3_K: after its 8 words
// of hmask). Each int32 lane is a row; word i's field j (values
// 128n+32j+16g+4i' … +3, sub-block 8n+2j+g) against a broadcast of x's
// four values, VPMADDWD by the row's scale in both halves of the lane.
// Q2_K's mins, and Q3_K's −4 where hmask's bit is clear (the bit is
// added at 4, so a value is q+4h−4), go through x's sums: each pair of
// sub-blocks' (m, m') or (sc, sc') words against (Σx, Σx') by one
// VPMADDWD. A row's super-block is then (d_w·d_x)·sumi − (dmin_w·d_x)·mins
// (Q2_K, as ggml's vec_dot_q2_K_q8_K) or (d_w·d_x)·(sumi − 4·Σ sc·Σx)
// (Q3_K).
func fastX16Q23K(q string) {
	name := "fastX16" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, groups int, blocks int, xq *int8, xd *float32, xs *int16, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = w_r · x for groups regrouped groups of 16 " + q + " rows of blocks super-blocks and Q8_K activations xq, xd, xs.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	q2 := q == "Q2_K"
	sc0, words0 := 32, 0 // the scales' and the 2-bit words' offsets
	if q2 {
		sc0 = 64
	} else {
		words0 = 8
	}
	head := sc0 + 256
	bsize := head + 64*(words0+16)
	m3 := bcast8(3)
	var m4, lowNib VecVirtual
	if q2 {
		lowNib = broadcast(avx2isa, 0x000f000f)
	} else {
		m4 = bcast8(4)
	}
	xp, dp, sp, b := GP64(), GP64(), GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xq"), xp)
		Load(Param("xd"), dp)
		Load(Param("xs"), sp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		lines := (bsize + 63) / 64
		for h := 0; h < 2; h++ {
			sumi, mins := YMM(), YMM()
			for p := 0; p < 8; p++ {
				spreadPrefetch(wp, lines, 8*h+p, 16)
				// Lane r: the row's bytes of sub-blocks 2p and 2p+1 as words.
				sw := YMM()
				if q2 {
					VPMOVZXBW(Mem{Base: wp, Disp: sc0 + 32*p + 16*h}, sw)
				} else {
					VPMOVSXBW(Mem{Base: wp, Disp: sc0 + 32*p + 16*h}, sw)
				}
				m, xsum := YMM(), YMM()
				if q2 {
					VPSRLW(U8(4), sw, m)
					VPAND(lowNib, sw, sw)
				} else {
					m = sw
				}
				VPBROADCASTD(Mem{Base: sp, Disp: 4 * p}, xsum)
				VPMADDWD(xsum, m, xsum)
				if p == 0 {
					VMOVDQA(xsum, mins)
				} else {
					VPADDD(xsum, mins, mins)
				}
				for k := 0; k < 2; k++ {
					s := 2*p + k
					n, j, g := s/8, s%8/2, s%2
					scw := YMM()
					VPSHUFB(dupWords.Offset(32*k), sw, scw)
					for i4 := 0; i4 < 4; i4++ {
						i := 8*n + 4*g + i4
						v := YMM()
						VMOVDQU(Mem{Base: wp, Disp: head + 64*(words0+i) + 32*h}, v)
						if j > 0 {
							VPSRLW(U8(2*j), v, v)
						}
						VPAND(m3, v, v)
						if !q2 {
							// hmask bit 4n+j of byte l, moved to bit 2.
							orByteBit(v, Mem{Base: wp, Disp: head + 64*(4*g+i4) + 32*h}, 4*n+j, 2, m4)
						}
						xb := YMM()
						VPBROADCASTD(Mem{Base: xp, Disp: 128*n + 32*j + 16*g + 4*i4}, xb)
						VPMADDUBSW(xb, v, v)
						VPMADDWD(scw, v, v)
						if p == 0 && k == 0 && i4 == 0 {
							VMOVDQA(v, sumi)
						} else {
							VPADDD(v, sumi, sumi)
						}
					}
				}
			}
			dw, dx := YMM(), YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, dw)
			VBROADCASTSS(Mem{Base: dp}, dx)
			VMULPS(dx, dw, dw)
			if q2 {
				VCVTDQ2PS(sumi, sumi)
				VFMADD231PS(sumi, dw, acc[h])
				dm := YMM()
				VCVTPH2PS(Mem{Base: wp, Disp: 32 + 16*h}, dm)
				VMULPS(dx, dm, dm)
				VCVTDQ2PS(mins, mins)
				VFNMADD231PS(mins, dm, acc[h])
			} else {
				VPSLLD(U8(2), mins, mins)
				VPSUBD(mins, sumi, sumi)
				VCVTDQ2PS(sumi, sumi)
				VFMADD231PS(sumi, dw, acc[h])
			}
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(256), xp)
		ADDQ(U8(4), dp)
		ADDQ(U8(32), sp)
	}, nil)
}

// dupWords holds VPSHUFB controls that copy each dword's low word (the
// first 32 bytes) or high word (the next 32) into both of its halves.
var dupWords Mem

func fastX16Consts() {
	dupWords = GLOBL("dupwords", RODATA|NOPTR)
	for k := 0; k < 2; k++ {
		for i := 0; i < 32; i++ {
			DATA(32*k+i, U8(uint8(i&^3+2*k+i%2)))
		}
	}
}

// x16Gather8 writes x16Gather8AVX2(src, step, quads, blocks, dst, rb, bb):
// eight rows' values out of a half group of a regrouping, back in the
// file's layout. src is the half's first word (head + 32h of the group's
// first block), each block step bytes on; dst is the first row's values
// in its first block, rows rb bytes apart and blocks bb. Four words of
// eight rows (four loads) are transposed by two rounds of unpacks into
// each row's 16 contiguous bytes.
func x16Gather8() {
	name := "x16Gather8AVX2"
	TEXT(name, NOSPLIT, "func(src *byte, step int, quads int, blocks int, dst *byte, rb int, bb int)")
	Pragma("noescape")
	Doc(name + " copies quads groups of four words of eight regrouped rows, for blocks blocks (src step bytes, dst bb bytes a block), into the rows at dst (rb bytes apart) in the file's order.")
	src, blocks, dst, rb := GP64(), GP64(), GP64(), GP64()
	Load(Param("src"), src)
	Load(Param("blocks"), blocks)
	Load(Param("dst"), dst)
	Load(Param("rb"), rb)
	rb3, s, d, d4, q := GP64(), GP64(), GP64(), GP64(), GP64()
	LEAQ(Mem{Base: rb, Index: rb, Scale: 2}, rb3)
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	MOVQ(src, s)
	MOVQ(dst, d)
	LEAQ(Mem{Base: dst, Index: rb, Scale: 4}, d4)
	Load(Param("quads"), q)
	Label(name + "_quad")
	TESTQ(q, q)
	JZ(LabelRef(name + "_quadsdone"))
	var a [4]VecVirtual
	for k := range a {
		a[k] = YMM()
		VMOVDQU(Mem{Base: s, Disp: 64 * k}, a[k])
	}
	t0, t1, t2, t3 := YMM(), YMM(), YMM(), YMM()
	VPUNPCKLDQ(a[1], a[0], t0) // rows 0,1 | 4,5 of words 0, 1
	VPUNPCKHDQ(a[1], a[0], t1) // rows 2,3 | 6,7
	VPUNPCKLDQ(a[3], a[2], t2)
	VPUNPCKHDQ(a[3], a[2], t3)
	u := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	VPUNPCKLQDQ(t2, t0, u[0]) // row 0 | row 4
	VPUNPCKHQDQ(t2, t0, u[1]) // row 1 | row 5
	VPUNPCKLQDQ(t3, t1, u[2])
	VPUNPCKHQDQ(t3, t1, u[3])
	rows := [4]func(base GPVirtual) Mem{
		func(base GPVirtual) Mem { return Mem{Base: base} },
		func(base GPVirtual) Mem { return Mem{Base: base, Index: rb, Scale: 1} },
		func(base GPVirtual) Mem { return Mem{Base: base, Index: rb, Scale: 2} },
		func(base GPVirtual) Mem { return Mem{Base: base, Index: rb3, Scale: 1} },
	}
	for r := 0; r < 4; r++ {
		VMOVDQU(u[r].AsX(), rows[r](d))
		VEXTRACTI128(U8(1), u[r], rows[r](d4))
	}
	ADDQ(U32(256), s)
	ADDQ(U8(16), d)
	ADDQ(U8(16), d4)
	DECQ(q)
	JMP(LabelRef(name + "_quad"))
	Label(name + "_quadsdone")
	Load(Param("step"), q)
	ADDQ(q, src)
	Load(Param("bb"), q)
	ADDQ(q, dst)
	DECQ(blocks)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// gemvX16Q2K writes gemvX16Q2_KAVX2(xb, sums, w, blocks, groups, y): exact
// decode of Q2_K on fast mode's regrouping (fastX16Q23K's layout, so that
// either mode's packing serves both). A weight is (d·sc_j)·q − dmin·m_j,
// so a row's product is Σ_j (d·sc_j)·(Σ q·x over sub-block j) −
// (dmin·m_j)·(x's sum over j), as the AVX-512 X16 kernels take Q4_K's
// (sums: x's sums of 16, computed once per product). A value's 2-bit
// field is kept in place by a mask, q·2^(8k+2j), exact as a float32 (byte
// 3's from the word shifted down a byte, clear of the sign bit); the
// sums of the four byte positions k run in four accumulators, each the
// plain Σ q·x scaled by a power of two, and are brought back by exact
// multiplies by 2^−8k and 2^−2j. Each int32 lane is a row; xb holds each
// of x's values eight times (x16Broadcast), a full-width operand of the
// multiply-add, as AVX2 has no broadcast operand.
func gemvX16Q2K() {
	name := "gemvX16Q2_KAVX2"
	TEXT(name, NOSPLIT, "func(xb *float32, sums *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for groups regrouped groups of 16 Q2_K rows of blocks super-blocks (xb: each of x's values eight times; sums: x's sums of 16), exact mode.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	const head = 64 + 256
	bsize := head + 64*16
	low4 := broadcast(avx2isa, 0x0f)
	xp, sp, b := GP64(), GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xb"), xp)
		Load(Param("sums"), sp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		lines := (bsize + 63) / 64
		for h := 0; h < 2; h++ {
			d, dmin := YMM(), YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
			VCVTPH2PS(Mem{Base: wp, Disp: 32 + 16*h}, dmin)
			for p := 0; p < 8; p++ {
				spreadPrefetch(wp, lines, 8*h+p, 16)
				// Lane r: the row's sc|m<<4 bytes of sub-blocks 2p, 2p+1.
				pair := YMM()
				VPMOVZXWD(Mem{Base: wp, Disp: 64 + 32*p + 16*h}, pair)
				for k2 := 0; k2 < 2; k2++ {
					s := 2*p + k2
					n, j, g := s/8, s%8/2, s%2
					var sk [4]VecVirtual
					for i4 := 0; i4 < 4; i4++ {
						wv, hi := YMM(), YMM()
						VMOVDQU(Mem{Base: wp, Disp: head + 64*(8*n+4*g+i4) + 32*h}, wv)
						// Byte 3's field would reach the sign bit: it is taken
						// from the word shifted down a byte, at byte 2's place.
						VPSRLD(U8(8), wv, hi)
						for k := 0; k < 4; k++ {
							v := YMM()
							if k < 3 {
								VPAND(q2Masks.Offset(32*(4*j+k)), wv, v)
							} else {
								VPAND(q2Masks.Offset(32*(4*j+2)), hi, v)
							}
							VCVTDQ2PS(v, v)
							xv := Mem{Base: xp, Disp: 32 * (128*n + 32*j + 16*g + 4*i4 + k)}
							mulAdd(&sk[k], xv, v)
						}
					}
					// Σ_k 2^−8k·sk[k] (sk[3] is at sk[2]'s scale), then the
					// sub-block's scale d·sc·2^−2j.
					VADDPS(sk[3], sk[2], sk[2])
					for k := 2; k > 0; k-- {
						VFMADD231PS(q2Pow.Offset(32*0), sk[k], sk[k-1]) // sk[k-1] += sk[k]·2^−8
					}
					sc, m := YMM(), YMM()
					if k2 == 0 {
						VPAND(low4, pair, sc)
						VPSRLD(U8(4), pair, m)
						VPAND(low4, m, m)
					} else {
						VPSRLD(U8(8), pair, sc)
						VPAND(low4, sc, sc)
						VPSRLD(U8(12), pair, m)
						VPAND(low4, m, m)
					}
					VCVTDQ2PS(sc, sc)
					VMULPS(d, sc, sc) // d·sc: exact (17 bits)
					if j > 0 {
						VMULPS(q2Pow.Offset(32*j), sc, sc) // 2^−2j, exact
					}
					VFMADD231PS(sk[0], sc, acc[h])
					subMin(acc[h], m, dmin, Mem{Base: sp, Disp: 4 * s})
				}
			}
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(32*256), xp)
		ADDQ(U32(4*16), sp)
	}, nil)
}

// gemvX16Q3K writes gemvX16Q3_KAVX2(xb, sums, w, blocks, groups, y): exact
// decode of Q3_K on fast mode's regrouping (fastX16Q23K's layout). A
// weight is (d·sc_s)·(v − 4) with v = q + 4h (h: the hmask bit), so a
// row's product is Σ_s (d·sc_s)·(Σ v·x − 4·X_s) over sub-blocks s of 16
// values (sums: x's sums of 16). As in fastX16Q23K, a word's 2-bit field
// is shifted to each byte's low bits and the hmask bit ORed in at bit 2;
// then v of byte k masked in place is v·2^8k, exact as a float, summed in
// four accumulators by byte position as gemvX16Q2K does. xb holds each of
// x's values eight times (x16BroadcastAVX2).
func gemvX16Q3K() {
	name := "gemvX16Q3_KAVX2"
	TEXT(name, NOSPLIT, "func(xb *float32, sums *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for groups regrouped groups of 16 Q3_K rows of blocks super-blocks (xb: each of x's values eight times; sums: x's sums of 16), exact mode.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	const head, words0 = 32 + 256, 8
	bsize := head + 64*(words0+16)
	m3, m4 := bcast8(3), bcast8(4)
	xp, sp, b := GP64(), GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xb"), xp)
		Load(Param("sums"), sp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		lines := (bsize + 63) / 64
		for h := 0; h < 2; h++ {
			d := YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
			for p := 0; p < 8; p++ {
				spreadPrefetch(wp, lines, 8*h+p, 16)
				// Lane r: the row's int8 scales of sub-blocks 2p, 2p+1 as a word.
				pair := YMM()
				VPMOVSXWD(Mem{Base: wp, Disp: 32 + 32*p + 16*h}, pair)
				for k2 := 0; k2 < 2; k2++ {
					s := 2*p + k2
					n, j, g := s/8, s%8/2, s%2
					var sk [4]VecVirtual
					for i4 := 0; i4 < 4; i4++ {
						v := YMM()
						VMOVDQU(Mem{Base: wp, Disp: head + 64*(words0+8*n+4*g+i4) + 32*h}, v)
						if j > 0 {
							VPSRLW(U8(2*j), v, v)
						}
						VPAND(m3, v, v)
						// hmask bit 4n+j of each byte, moved to bit 2.
						orByteBit(v, Mem{Base: wp, Disp: head + 64*(4*g+i4) + 32*h}, 4*n+j, 2, m4)
						for k := 0; k < 4; k++ {
							t := YMM()
							VPAND(q3Masks.Offset(32*k), v, t)
							VCVTDQ2PS(t, t)
							xv := Mem{Base: xp, Disp: 32 * (128*n + 32*j + 16*g + 4*i4 + k)}
							mulAdd(&sk[k], xv, t)
						}
					}
					// Σ_k 2^−8k·sk[k] = Σ v·x, less 4·X_s.
					foldBytes(sk)
					xs := YMM()
					VBROADCASTSS(Mem{Base: sp, Disp: 4 * s}, xs)
					VFMADD231PS(q3MinusFour, xs, sk[0])
					// The row's scale of sub-block s: byte k2 of its word, sign-extended.
					sc := YMM()
					VPSLLD(U8(24-8*k2), pair, sc)
					VPSRAD(U8(24), sc, sc)
					VCVTDQ2PS(sc, sc)
					VMULPS(d, sc, sc) // d·sc: exact (17 bits)
					VFMADD231PS(sk[0], sc, acc[h])
				}
			}
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(32*256), xp)
		ADDQ(U32(4*16), sp)
	}, nil)
}

// gemvX16Q45K writes gemvX16Q5_KAVX2(xb, sums, w, blocks, groups, y): exact
// decode of Q5_K regrouped by 16 rows (the 16 rows' d and dmin, then the
// file's 12 bytes of scales and mins as 3 words, qh as 8 and qs as 32: as
// many bytes as the file's), or gemvX16Q4_KAVX2 on X16's Q4_K layout
// (gemvQ4_Kx16's: scales and mins unpacked to bytes, no qh). A weight is (d·sc_s)·v − dmin·m_s with v
// = nibble + 16·(qh's bit s), so a row's product is Σ_s (d·sc_s)·(Σ v·x)
// − (dmin·m_s)·X_s (sums: x's sums of 32). Each byte's v is built in its
// low 5 bits (nibble, then qh's bit moved to bit 4), and v of byte k
// masked in place is v·2^8k, exact as a float, summed by byte position
// as gemvX16Q2K does. xb holds each of x's values eight times.
func gemvX16Q45K(q string) {
	name := "gemvX16" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(xb *float32, sums *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for groups regrouped groups of 16 " + q + " rows of blocks super-blocks (xb: each of x's values eight times; sums: x's sums of 32), exact mode.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	q5 := q == "Q5_K"
	head, qs0 := 64+4*64, 0 // Q4_K: its scales and mins unpacked to bytes
	if q5 {
		head, qs0 = 64+3*64, 8
	}
	bsize := head + 64*(qs0+32)
	nib, bit4 := bcast8(0x0f), bcast8(0x10)
	xp, sp, b := GP64(), GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xb"), xp)
		Load(Param("sums"), sp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		lines := (bsize + 63) / 64
		for h := 0; h < 2; h++ {
			d, dmin := YMM(), YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
			VCVTPH2PS(Mem{Base: wp, Disp: 32 + 16*h}, dmin)
			for s := 0; s < 8; s++ {
				spreadPrefetch(wp, lines, 8*h+s, 16)
				j, half := s/2, s%2
				var sk [4]VecVirtual
				for i4 := 0; i4 < 8; i4++ {
					v := YMM()
					VMOVDQU(Mem{Base: wp, Disp: head + 64*(qs0+8*j+i4) + 32*h}, v)
					if half == 1 {
						VPSRLW(U8(4), v, v)
					}
					VPAND(nib, v, v)
					if q5 {
						// qh's bit s of each byte, moved to bit 4.
						orByteBit(v, Mem{Base: wp, Disp: head + 64*i4 + 32*h}, s, 4, bit4)
					}
					for k := 0; k < 4; k++ {
						t := YMM()
						VPAND(q5Masks.Offset(32*k), v, t)
						VCVTDQ2PS(t, t)
						xv := Mem{Base: xp, Disp: 32 * (32*s + 4*i4 + k)}
						mulAdd(&sk[k], xv, t)
					}
				}
				foldBytes(sk)
				// The rows' 6-bit scale and min of sub-block s, from ggml's 12
				// bytes as words w0..w2 (get_scale_min_k4).
				var sc, m VecVirtual
				if q5 {
					sc, m = q5kScaleMin(wp, 64+32*h, s)
				} else {
					// Byte s%4 of the unpacked words s/4 (scales) and 2+s/4 (mins).
					sc, m = YMM(), YMM()
					for i, r := range []VecVirtual{sc, m} {
						VMOVDQU(Mem{Base: wp, Disp: 64 + 64*(2*i+s/4) + 32*h}, r)
						if s%4 > 0 {
							VPSRLD(U8(8*(s%4)), r, r)
						}
						VPAND(kScaleMasks.Offset(96), r, r)
					}
				}
				VCVTDQ2PS(sc, sc)
				VMULPS(d, sc, sc) // d·sc: exact
				VFMADD231PS(sk[0], sc, acc[h])
				subMin(acc[h], m, dmin, Mem{Base: sp, Disp: 4 * s})
			}
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(32*256), xp)
		ADDQ(U32(4*8), sp)
	}, nil)
}

// gemvX16Q6K writes gemvX16Q6_KAVX2(xb, sums, w, blocks, groups, y): exact
// decode of Q6_K on X16's regrouping (gemvQ6_Kx16's layout, the file's
// bytes) on AVX2. As gemvQ6_Kx16 does on AVX-512, each 6-bit field masked
// in place is q·2^6k, exact as a float, in a chain of its own, the last
// value of a sub-block comes from the words' top bits, and a row's
// super-block is d·(Σ_j sc_j·S_j − 32·Σ_j sc_j·X_j), with the scales taken
// as sc_j·2^24 from a word's top byte. xb holds each of x's values eight
// times (x16BroadcastAVX2); sums is x's sums of 16.
func gemvX16Q6K() {
	name := "gemvX16Q6_KAVX2"
	TEXT(name, NOSPLIT, "func(xb *float32, sums *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for groups regrouped groups of 16 Q6_K rows of blocks super-blocks (xb: each of x's values eight times; sums: x's sums of 16), exact mode.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	const head = 32 + 4*64
	bsize := head + 64*48
	xp, sp, b := GP64(), GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xb"), xp)
		Load(Param("sums"), sp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		lines := (bsize + 63) / 64
		for h := 0; h < 2; h++ {
			sb, off := YMM(), YMM()
			for j := 0; j < 16; j++ {
				spreadPrefetch(wp, lines, 16*h+j, 32)
				word := func(t int) Mem { return Mem{Base: wp, Disp: head + 64*(3*j+t) + 32*h} }
				var chains [5]VecVirtual
				product := func(v VecVirtual, k, col int) {
					xv := Mem{Base: xp, Disp: 32 * (16*j + col)}
					mulAdd(&chains[k], xv, v)
				}
				for t := 0; t < 3; t++ {
					wv := YMM()
					VMOVDQU(word(t), wv)
					for k := 0; k < 5; k++ {
						v := YMM()
						VPAND(q6Fields.Offset(32*k), wv, v)
						VCVTDQ2PS(v, v) // q·2^6k
						product(v, k, 5*t+k)
					}
				}
				// The last value: word 0's bits 30-31, then word 1's and
				// word 2's as its bits 2-3 and 4-5.
				last, hi := YMM(), YMM()
				VMOVDQU(word(0), last)
				VPSRLD(U8(30), last, last)
				for t := 1; t < 3; t++ {
					VMOVDQU(word(t), hi)
					VPSRLD(U8(30-2*t), hi, hi)
					VPAND(q6Fields.Offset(32*(4+t)), hi, hi)
					VPOR(hi, last, last)
				}
				VCVTDQ2PS(last, last)
				product(last, 0, 15)
				for k := 1; k < 5; k++ {
					VFMADD231PS(q6Fields.Offset(32*(6+k)), chains[k], chains[0]) // chains[0] += chains[k]·2^−6k
				}
				// sc_j·2^24: the top byte of the dword that ends at byte j%4 of word j/4.
				sc, xs := YMM(), YMM()
				VMOVDQU(Mem{Base: wp, Disp: 32 + 64*(j/4) + j%4 - 3 + 32*h}, sc)
				VPAND(q6Fields.Offset(32*11), sc, sc)
				VCVTDQ2PS(sc, sc)
				VBROADCASTSS(Mem{Base: sp, Disp: 4 * j}, xs)
				if j == 0 {
					VMULPS(sc, chains[0], sb)
					VMULPS(sc, xs, off)
				} else {
					VFMADD231PS(sc, chains[0], sb)
					VFMADD231PS(sc, xs, off)
				}
			}
			VFMADD231PS(q6Fields.Offset(32*12), off, sb) // sb −= 32·off
			d := YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
			VMULPS(iq4Unscale, d, d) // d·2^−24, exact
			VFMADD231PS(sb, d, acc[h])
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(32*256), xp)
		ADDQ(U32(4*16), sp)
	}, nil)
}

// gemvX16Q51 writes gemvX16Q5_1AVX2(xb, sums, w, blocks, groups, y): exact
// decode of Q5_1 on fast mode's regrouping (fastX16Min's layout: the 16
// rows' d and m, their fifth bits as a word (q5Bits), then 4 words of
// nibbles). A row's block is d·Σ q·x + m·X (sums: x's sums of 32). Each
// byte's q is built in its low 5 bits as fastX16Min builds it, then
// masked in place by byte position (q·2^8k, exact) and summed as
// gemvX16Q2K does. xb holds each of x's values eight times.
func gemvX16Q51() {
	name := "gemvX16Q5_1AVX2"
	TEXT(name, NOSPLIT, "func(xb *float32, sums *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for groups regrouped groups of 16 Q5_1 rows of blocks blocks (xb: each of x's values eight times; sums: x's sums of 32), exact mode.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	const head = 128
	bsize := head + 64*4
	nib, bit4 := bcast8(0x0f), bcast8(0x10)
	xp, sp, b := GP64(), GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xb"), xp)
		Load(Param("sums"), sp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		prefetchBlock(wp, bsize)
		for h := 0; h < 2; h++ {
			var sk [4]VecVirtual
			for i := 0; i < 4; i++ {
				v, lo, hi := YMM(), YMM(), YMM()
				VMOVDQU(Mem{Base: wp, Disp: head + 64*i + 32*h}, v)
				VPAND(nib, v, lo)
				VPSRLW(U8(4), v, hi)
				VPAND(nib, hi, hi)
				// The fifth bits: bit i of byte k for the low nibbles, bit
				// 4+i for the high ones, moved to bit 4.
				orByteBit(lo, Mem{Base: wp, Disp: 64 + 32*h}, i, 4, bit4)
				orByteBit(hi, Mem{Base: wp, Disp: 64 + 32*h}, 4+i, 4, bit4)
				for half, src := range []VecVirtual{lo, hi} {
					for k := 0; k < 4; k++ {
						u := YMM()
						VPAND(q5Masks.Offset(32*k), src, u)
						VCVTDQ2PS(u, u)
						xv := Mem{Base: xp, Disp: 32 * (16*half + 4*i + k)}
						mulAdd(&sk[k], xv, u)
					}
				}
			}
			foldBytes(sk)
			d, m, xs := YMM(), YMM(), YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
			VFMADD231PS(sk[0], d, acc[h])
			VCVTPH2PS(Mem{Base: wp, Disp: 32 + 16*h}, m)
			VBROADCASTSS(Mem{Base: sp}, xs)
			VFMADD231PS(xs, m, acc[h]) // + m·X
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(32*32), xp)
		ADDQ(U8(4), sp)
	}, nil)
}

// x16PanelQ6K writes x16PanelQ6_KAVX2(w, blocks, dst): one group of 16
// Q6_K rows in X16's layout (gemvQ6_Kx16's) widened into a panel, value i
// of the 16 rows at dst[16i:16i+16], each exactly as ggml dequantizes it:
// (d·sc)·(q−32), with d·sc exact (17 bits). Products of more than one row
// of x then run on the panel (GemmPanels' kernels) instead of on rows
// rebuilt in the file's layout, whose 6-bit fields Go unpacks slowly.
func x16PanelQ6K() {
	name := "x16PanelQ6_KAVX2"
	TEXT(name, NOSPLIT, "func(w *byte, blocks int, dst *float32)")
	Pragma("noescape")
	Doc(name + " widens a regrouped group of 16 Q6_K rows of blocks super-blocks into a panel at dst (value i of the rows at dst[16i:]).")
	wp, b, dp := GP64(), GP64(), GP64()
	Load(Param("w"), wp)
	Load(Param("blocks"), b)
	Load(Param("dst"), dp)
	const head = 32 + 4*64
	bsize := head + 64*48
	m63, m32 := broadcast(avx2isa, 63), broadcast(avx2isa, 32)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_end"))
	for h := 0; h < 2; h++ {
		d := YMM()
		VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
		VMULPS(iq4Unscale, d, d) // d·2^−24
		for j := 0; j < 16; j++ {
			word := func(t int) Mem { return Mem{Base: wp, Disp: head + 64*(3*j+t) + 32*h} }
			dsc := YMM()
			VMOVDQU(Mem{Base: wp, Disp: 32 + 64*(j/4) + j%4 - 3 + 32*h}, dsc)
			VPAND(q6Fields.Offset(32*11), dsc, dsc)
			VCVTDQ2PS(dsc, dsc) // sc·2^24
			VMULPS(d, dsc, dsc) // d·sc, exact
			store := func(q VecVirtual, i int) {
				VPSUBD(m32, q, q)
				VCVTDQ2PS(q, q)
				VMULPS(dsc, q, q)
				VMOVUPS(q, Mem{Base: dp, Disp: 4 * (16*(16*j+i) + 8*h)})
			}
			for t := 0; t < 3; t++ {
				wv := YMM()
				VMOVDQU(word(t), wv)
				for k := 0; k < 5; k++ {
					q := YMM()
					if k > 0 {
						VPSRLD(U8(6*k), wv, q)
						VPAND(m63, q, q)
					} else {
						VPAND(m63, wv, q)
					}
					store(q, 5*t+k)
				}
			}
			last, hi := YMM(), YMM()
			VMOVDQU(word(0), last)
			VPSRLD(U8(30), last, last)
			for t := 1; t < 3; t++ {
				VMOVDQU(word(t), hi)
				VPSRLD(U8(30-2*t), hi, hi)
				VPAND(q6Fields.Offset(32*(4+t)), hi, hi)
				VPOR(hi, last, last)
			}
			store(last, 15)
		}
	}
	ADDQ(U32(bsize), wp)
	ADDQ(U32(4*16*256), dp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// x16Panel writes x16Panel<q>AVX2(w, blocks, dst) for the formats other
// than Q6_K (x16PanelQ6K): one group of 16 rows in its regrouping widened
// into a panel, value i of the 16 rows at dst[16i:16i+16], each exactly
// as ggml dequantizes it (its products and sums in the same order, no
// fused multiply-add). block emits one block's two halves of 8 rows:
// put(v, i, h) converts lane values v (int32) and stores them as value i
// of half h, scaled by the block's current scale and offset.
func x16Panel(q string, n, head, bsize int) {
	name := "x16Panel" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, blocks int, dst *float32)")
	Pragma("noescape")
	Doc(name + " widens a regrouped group of 16 " + q + " rows of blocks blocks into a panel at dst (value i of the rows at dst[16i:]).")
	wp, b, dp := GP64(), GP64(), GP64()
	Load(Param("w"), wp)
	Load(Param("blocks"), b)
	Load(Param("dst"), dp)
	nib := bcast8(0x0f)
	var levels VecVirtual
	if q == "IQ4_NL" || q == "IQ4_XS" {
		levels = YMM()
		VMOVDQU(iq4Levels, levels)
	}
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_end"))
	for h := 0; h < 2; h++ {
		// scale·v (− off, or + off for Q5_1) as ggml's dequantizers.
		var scale, off VecVirtual
		put := func(v VecVirtual, i int) {
			VCVTDQ2PS(v, v)
			VMULPS(scale, v, v)
			switch {
			case off != nil && q == "Q5_1":
				VADDPS(off, v, v)
			case off != nil:
				VSUBPS(off, v, v)
			}
			VMOVUPS(v, Mem{Base: dp, Disp: 4 * (16*i + 8*h)})
		}
		word := func(i int) Mem { return Mem{Base: wp, Disp: head + 64*i + 32*h} }
		// byteAt emits byte k of each lane of v, sign-extended (signed)
		// or masked to bits (a mask register).
		byteAt := func(v VecVirtual, k int, mask VecVirtual) VecVirtual {
			t := YMM()
			if mask == nil {
				VPSLLD(U8(24-8*k), v, t)
				VPSRAD(U8(24), t, t)
				return t
			}
			if k > 0 {
				VPSRLD(U8(8*k), v, t)
				VPAND(mask, t, t)
			} else {
				VPAND(mask, v, t)
			}
			return t
		}
		d := YMM()
		VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
		switch q {
		case "Q4_0", "IQ4_NL", "Q5_1", "Q5_0":
			scale = d
			var m8, m15, m5, m16, bit4, qh VecVirtual
			switch q {
			case "Q4_0":
				m8, m15 = broadcast(avx2isa, 8), broadcast(avx2isa, 15)
			case "Q5_1":
				off = YMM()
				VCVTPH2PS(Mem{Base: wp, Disp: 32 + 16*h}, off)
				m5, bit4, qh = broadcast(avx2isa, 31), bcast8(0x10), YMM()
				VMOVDQU(Mem{Base: wp, Disp: 64 + 32*h}, qh)
			case "Q5_0":
				m5, m16, bit4, qh = broadcast(avx2isa, 31), broadcast(avx2isa, 16), bcast8(0x10), YMM()
				VMOVDQU(Mem{Base: wp, Disp: 32 + 32*h}, qh)
			}
			for i := 0; i < 4; i++ {
				v, lo, hi := YMM(), YMM(), YMM()
				VMOVDQU(word(i), v)
				VPAND(nib, v, lo)
				VPSRLW(U8(4), v, hi)
				VPAND(nib, hi, hi)
				switch q {
				case "IQ4_NL":
					VPSHUFB(lo, levels, lo)
					VPSHUFB(hi, levels, hi)
				case "Q5_1", "Q5_0":
					orByteBit(lo, qh, i, 4, bit4)
					orByteBit(hi, qh, 4+i, 4, bit4)
				}
				for half, src := range []VecVirtual{lo, hi} {
					for k := 0; k < 4; k++ {
						var t VecVirtual
						switch q {
						case "IQ4_NL":
							t = byteAt(src, k, nil)
						case "Q5_1":
							t = byteAt(src, k, m5)
						case "Q5_0":
							t = byteAt(src, k, m5)
							VPSUBD(m16, t, t) // q−16, as ggml's dequantizer
						default:
							t = byteAt(src, k, m15)
							VPSUBD(m8, t, t)
						}
						put(t, 16*half+4*i+k)
					}
				}
			}
		case "Q8_0":
			scale = d
			for i := 0; i < 8; i++ {
				v := YMM()
				VMOVDQU(word(i), v)
				for k := 0; k < 4; k++ {
					put(byteAt(v, k, nil), 4*i+k)
				}
			}
		case "IQ4_XS":
			for sb := 0; sb < 8; sb++ {
				scale = YMM()
				VPMOVSXBD(Mem{Base: wp, Disp: 32 + 16*sb + 8*h}, scale)
				VCVTDQ2PS(scale, scale)
				VMULPS(d, scale, scale) // d·(ls−32), exact
				for i := 0; i < 4; i++ {
					v, lo, hi := YMM(), YMM(), YMM()
					VMOVDQU(word(4*sb+i), v)
					VPAND(nib, v, lo)
					VPSRLW(U8(4), v, hi)
					VPAND(nib, hi, hi)
					VPSHUFB(lo, levels, lo)
					VPSHUFB(hi, levels, hi)
					for half, src := range []VecVirtual{lo, hi} {
						for k := 0; k < 4; k++ {
							put(byteAt(src, k, nil), 32*sb+16*half+4*i+k)
						}
					}
				}
			}
		case "Q2_K", "Q3_K":
			q2 := q == "Q2_K"
			sc0, words0 := 32, 8
			var dmin, m3, low4, m7, m4, b3, b4 VecVirtual
			if q2 {
				sc0, words0 = 64, 0
				dmin, m3, low4 = YMM(), broadcast(avx2isa, 3), broadcast(avx2isa, 15)
				VCVTPH2PS(Mem{Base: wp, Disp: 32 + 16*h}, dmin)
			} else {
				m7, m4, b3, b4 = broadcast(avx2isa, 7), broadcast(avx2isa, 4), bcast8(3), bcast8(4)
			}
			for p := 0; p < 8; p++ {
				pair := YMM()
				if q2 {
					VPMOVZXWD(Mem{Base: wp, Disp: sc0 + 32*p + 16*h}, pair)
				} else {
					VPMOVSXWD(Mem{Base: wp, Disp: sc0 + 32*p + 16*h}, pair)
				}
				for k2 := 0; k2 < 2; k2++ {
					s := 2*p + k2
					nn, j, g := s/8, s%8/2, s%2
					scale = YMM()
					if q2 {
						off = YMM()
						VPSRLD(U8(8*k2), pair, scale)
						VPAND(low4, scale, scale)
						VPSRLD(U8(8*k2+4), pair, off)
						VPAND(low4, off, off)
						VCVTDQ2PS(off, off)
						VMULPS(dmin, off, off) // dmin·m
					} else {
						VPSLLD(U8(24-8*k2), pair, scale)
						VPSRAD(U8(24), scale, scale)
					}
					VCVTDQ2PS(scale, scale)
					VMULPS(d, scale, scale) // d·sc, exact
					for i4 := 0; i4 < 4; i4++ {
						v := YMM()
						VMOVDQU(word(words0+8*nn+4*g+i4), v)
						if j > 0 {
							VPSRLW(U8(2*j), v, v)
						}
						if !q2 {
							// v = q + 4h in each byte, as fastX16Q23K builds it.
							VPAND(b3, v, v)
							orByteBit(v, word(4*g+i4), 4*nn+j, 2, b4)
						}
						for k := 0; k < 4; k++ {
							var t VecVirtual
							if q2 {
								t = byteAt(v, k, m3)
							} else {
								t = byteAt(v, k, m7)
								VPSUBD(m4, t, t)
							}
							put(t, 128*nn+32*j+16*g+4*i4+k)
						}
					}
				}
			}
		case "Q4_K", "Q5_K":
			q5 := q == "Q5_K"
			dmin, m5, bit4 := YMM(), broadcast(avx2isa, 31), bcast8(0x10)
			VCVTPH2PS(Mem{Base: wp, Disp: 32 + 16*h}, dmin)
			qs0 := 0
			if q5 {
				qs0 = 8
			}
			for s := 0; s < 8; s++ {
				jj, half := s/2, s%2
				var sc, m VecVirtual
				if q5 {
					sc, m = q5kScaleMin(wp, 64+32*h, s)
				} else {
					sc, m = YMM(), YMM()
					for i, r := range []VecVirtual{sc, m} {
						VMOVDQU(Mem{Base: wp, Disp: 64 + 64*(2*i+s/4) + 32*h}, r)
						if s%4 > 0 {
							VPSRLD(U8(8*(s%4)), r, r)
						}
						VPAND(kScaleMasks.Offset(96), r, r)
					}
				}
				VCVTDQ2PS(sc, sc)
				VMULPS(d, sc, sc)
				VCVTDQ2PS(m, m)
				VMULPS(dmin, m, m)
				scale, off = sc, m
				for i4 := 0; i4 < 8; i4++ {
					v := YMM()
					VMOVDQU(word(qs0+8*jj+i4), v)
					if half == 1 {
						VPSRLW(U8(4), v, v)
					}
					VPAND(nib, v, v)
					if q5 {
						orByteBit(v, word(i4), s, 4, bit4)
					}
					for k := 0; k < 4; k++ {
						put(byteAt(v, k, m5), 32*s+4*i4+k)
					}
				}
			}
		}
	}
	ADDQ(U32(bsize), wp)
	ADDQ(U32(4*16*n), dp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// gemvX16Q80 writes gemvX16Q8_0AVX2(xb, w, blocks, groups, y): exact decode
// of Q8_0 on X16's regrouping (the 16 rows' d, then 8 words of int8). A
// value shifted to the top byte and masked is q·2^24, exact as a float;
// a block sums Σ q·x·2^24 by byte position and is scaled by d·2^−24
// (exact). xb holds each of x's values eight times.
func gemvX16Q80() {
	name := "gemvX16Q8_0AVX2"
	TEXT(name, NOSPLIT, "func(xb *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for groups regrouped groups of 16 Q8_0 rows of blocks blocks (xb: each of x's values eight times), exact mode.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	const head = 32
	bsize := head + 64*8
	top := broadcast(avx2isa, 0xff000000)
	xp, b := GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xb"), xp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		prefetchBlock(wp, bsize)
		for h := 0; h < 2; h++ {
			var sk [4]VecVirtual
			for i := 0; i < 8; i++ {
				wv := YMM()
				VMOVDQU(Mem{Base: wp, Disp: head + 64*i + 32*h}, wv)
				for k := 0; k < 4; k++ {
					v := YMM()
					if k < 3 {
						VPSLLD(U8(24-8*k), wv, v)
						VPAND(top, v, v)
					} else {
						VPAND(top, wv, v)
					}
					VCVTDQ2PS(v, v) // q·2^24
					xv := Mem{Base: xp, Disp: 32 * (4*i + k)}
					mulAdd(&sk[k], xv, v)
				}
			}
			VADDPS(sk[1], sk[0], sk[0])
			VADDPS(sk[3], sk[2], sk[2])
			VADDPS(sk[2], sk[0], sk[0])
			d := YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
			VMULPS(iq4Unscale, d, d) // d·2^−24, exact
			VFMADD231PS(sk[0], d, acc[h])
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(32*32), xp)
	}, nil)
}

// subMin takes a sub-block's min term off acc: (dmin·m)·X, with m the
// rows' mins as integers and X x's sum over the sub-block at xs.
func subMin(acc, m, dmin VecVirtual, xs Mem) {
	VCVTDQ2PS(m, m)
	VMULPS(dmin, m, m)
	x := YMM()
	VBROADCASTSS(xs, x)
	VFNMADD231PS(x, m, acc)
}

// mulAdd accumulates v·xv into *acc, starting it with a multiply.
func mulAdd(acc *VecVirtual, xv Mem, v VecVirtual) {
	if *acc == nil {
		*acc = YMM()
		VMULPS(xv, v, *acc)
		return
	}
	VFMADD231PS(xv, v, *acc)
}

// foldBytes brings the sums by byte position back to one, in sk[0]:
// sk[k] holds Σ v·x·2^8k (a field masked in place), so sk[k-1] +=
// sk[k]·2^−8 from the top down, each multiply exact.
func foldBytes(sk [4]VecVirtual) {
	for k := 3; k > 0; k-- {
		VFMADD231PS(q2Pow.Offset(0), sk[k], sk[k-1])
	}
}

// orByteBit ORs bit from of each byte of src (a register, or memory it
// loads) into bit to of v's bytes, mask holding that bit in every byte:
// Q3_K's hmask bit beside its 2-bit field, Q5_K's and Q5_1's fifth bit
// above the nibble.
func orByteBit(v VecVirtual, src Op, from, to int, mask VecVirtual) {
	t := YMM()
	if m, ok := src.(Mem); ok {
		VMOVDQU(m, t)
		src = t
	}
	switch {
	case from < to:
		VPSLLW(U8(to-from), src, t)
	case from > to:
		VPSRLW(U8(from-to), src, t)
	default:
		VPAND(mask, src, t)
		VPOR(t, v, v)
		return
	}
	VPAND(mask, t, t)
	VPOR(t, v, v)
}

// q5kScaleMin loads 8 rows' scale and min of sub-block s of a Q5_K (or
// Q4_K) super-block whose 12 bytes of scales lie as words w0, w1, w2 at
// wp+disp, 64 bytes apart: for s < 4 byte s of w0 and w1, low 6 bits; for
// s = 4+t the low and high nibbles of byte t of w2, with the top 2 bits
// of byte t of w0 and w1 above them.
func q5kScaleMin(wp GPVirtual, disp, s int) (sc, m VecVirtual) {
	w := func(t int) Mem { return Mem{Base: wp, Disp: disp + 64*t} }
	// A VEX shift takes no memory source: each word is loaded first.
	sc, m = YMM(), YMM()
	if s < 4 {
		for i, r := range []VecVirtual{sc, m} {
			VMOVDQU(w(i), r)
			VPSRLD(U8(8*s), r, r)
			VPAND(kScaleMasks.Offset(0), r, r)
		}
		return sc, m
	}
	t := 8 * (s - 4)
	for i, r := range []VecVirtual{sc, m} {
		top := YMM()
		VMOVDQU(w(2), r)
		VPSRLD(U8(t+4*i), r, r)
		VPAND(kScaleMasks.Offset(32), r, r)
		VMOVDQU(w(i), top)
		VPSRLD(U8(t+2), top, top)
		VPAND(kScaleMasks.Offset(64), top, top)
		VPOR(top, r, r)
	}
	return sc, m
}

// q2Masks holds 3<<(8k+2j) in every lane, k-major within j (the
// 2-bit field of byte k at shift 2j); q2Pow holds 2^−8 and then 2^−2j for
// j = 1..3 (the second to fourth 32 bytes).
var q2Masks, q2Pow Mem

// q3Masks holds 7<<8k in every lane (k = 0..3); q3MinusFour holds −4.0;
// q5Masks holds 0x1f<<8k; kScaleMasks holds 63, 0x0f, 0x30 and 0xff.
// q6Fields holds gemvX16Q6K's constants, 32 bytes each: the masks
// 0x3f<<6k (k = 0..4), 0x0c and 0x30, 2^−6k (k = 1..4), 0xff000000 and
// −32.0.
var q3Masks, q3MinusFour, q5Masks, kScaleMasks, q6Fields Mem

func gemvX16Consts() {
	q2Masks = GLOBL("q2masks", RODATA|NOPTR)
	for j := 0; j < 4; j++ {
		for k := 0; k < 4; k++ {
			for l := 0; l < 8; l++ {
				DATA(32*(4*j+k)+4*l, U32(uint32(3)<<(8*k+2*j)))
			}
		}
	}
	q3Masks = GLOBL("q3masks", RODATA|NOPTR)
	for k := 0; k < 4; k++ {
		for l := 0; l < 8; l++ {
			DATA(32*k+4*l, U32(uint32(7)<<(8*k)))
		}
	}
	q6Fields = GLOBL("q6fields", RODATA|NOPTR)
	var q6 []uint32
	for k := 0; k < 5; k++ {
		q6 = append(q6, 0x3f<<(6*k))
	}
	q6 = append(q6, 0x0c, 0x30)
	for k := 1; k < 5; k++ {
		q6 = append(q6, math.Float32bits(float32(math.Ldexp(1, -6*k))))
	}
	q6 = append(q6, 0xff000000, math.Float32bits(-32))
	for i, v := range q6 {
		for l := 0; l < 8; l++ {
			DATA(32*i+4*l, U32(v))
		}
	}
	kScaleMasks = GLOBL("kscalemasks", RODATA|NOPTR)
	for i, v := range []uint32{63, 0x0f, 0x30, 0xff} {
		for l := 0; l < 8; l++ {
			DATA(32*i+4*l, U32(v))
		}
	}
	q5Masks = GLOBL("q5masks", RODATA|NOPTR)
	for k := 0; k < 4; k++ {
		for l := 0; l < 8; l++ {
			DATA(32*k+4*l, U32(uint32(0x1f)<<(8*k)))
		}
	}
	q3MinusFour = GLOBL("q3minusfour", RODATA|NOPTR)
	for l := 0; l < 8; l++ {
		DATA(4*l, U32(math.Float32bits(-4)))
	}
	q2Pow = GLOBL("q2pow", RODATA|NOPTR)
	for l := 0; l < 8; l++ {
		DATA(4*l, U32(math.Float32bits(1.0/256)))
	}
	for j := 1; j < 4; j++ {
		for l := 0; l < 8; l++ {
			DATA(32*j+4*l, U32(math.Float32bits(float32(math.Ldexp(1, -2*j)))))
		}
	}
}

// x16Broadcast writes x16BroadcastAVX2(x, n, dst): each of x's n values
// eight times, for gemvX16Q2_KAVX2's multiply-adds.
func x16Broadcast() {
	name := "x16BroadcastAVX2"
	TEXT(name, NOSPLIT, "func(x *float32, n int, dst *float32)")
	Pragma("noescape")
	Doc(name + " writes each of x's n values eight times into dst.")
	x, n, dst := GP64(), GP64(), GP64()
	Load(Param("x"), x)
	Load(Param("n"), n)
	Load(Param("dst"), dst)
	Label(name + "_loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "_end"))
	v := YMM()
	VBROADCASTSS(Mem{Base: x}, v)
	VMOVUPS(v, Mem{Base: dst})
	ADDQ(U8(4), x)
	ADDQ(U8(32), dst)
	DECQ(n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// gemvX16Q40 writes gemvX16Q4_0AVX2(xb, sums, w, blocks, groups, y): exact
// decode of Q4_0 on the regrouping fast mode makes on AVX2 (X16's layout:
// the 16 rows' d, then 4 words of nibbles). A row's block is
// d·(Σ q·x − 8·X) with X x's sum over the block (sums, one per 32 values).
// A word's low nibbles masked in place are q·2^8k, exact as floats, and
// its high nibbles the same from the word shifted down 4 bits (clear of
// the sign bit), so both go into the four accumulators by byte position,
// brought back by exact powers of two as in gemvX16Q2K; xb holds each of
// x's values eight times (x16BroadcastAVX2).
func gemvX16Q40() {
	name := "gemvX16Q4_0AVX2"
	TEXT(name, NOSPLIT, "func(xb *float32, sums *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for groups regrouped groups of 16 Q4_0 rows of blocks blocks (xb: each of x's values eight times; sums: x's sums of 32), exact mode.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	const head = 32
	bsize := head + 64*4
	xp, sp, b := GP64(), GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xb"), xp)
		Load(Param("sums"), sp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		prefetchBlock(wp, bsize)
		for h := 0; h < 2; h++ {
			var sk [4]VecVirtual
			for i := 0; i < 4; i++ {
				wv, hi := YMM(), YMM()
				VMOVDQU(Mem{Base: wp, Disp: head + 64*i + 32*h}, wv)
				VPSRLD(U8(4), wv, hi)
				for half, src := range []VecVirtual{wv, hi} {
					for k := 0; k < 4; k++ {
						v := YMM()
						VPAND(q4Masks.Offset(32*k), src, v)
						VCVTDQ2PS(v, v)
						xv := Mem{Base: xp, Disp: 32 * (16*half + 4*i + k)}
						mulAdd(&sk[k], xv, v)
					}
				}
			}
			foldBytes(sk)
			d, xs := YMM(), YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
			VFMADD231PS(sk[0], d, acc[h])
			VBROADCASTSS(Mem{Base: sp}, xs)
			VMULPS(q4Eight, xs, xs)
			VFNMADD231PS(xs, d, acc[h]) // − d·8X
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(32*32), xp)
		ADDQ(U8(4), sp)
	}, nil)
}

// q4Masks holds 0xf<<8k in every lane (k = 0..3); q4Eight holds 8.0.
var q4Masks, q4Eight Mem

func gemvX16Q40Consts() {
	q4Masks = GLOBL("q4masks", RODATA|NOPTR)
	for k := 0; k < 4; k++ {
		for l := 0; l < 8; l++ {
			DATA(32*k+4*l, U32(uint32(0xf)<<(8*k)))
		}
	}
	q4Eight = GLOBL("q4eight", RODATA|NOPTR)
	for l := 0; l < 8; l++ {
		DATA(4*l, U32(math.Float32bits(8)))
	}
}

// gemvX16IQ4NL writes gemvX16IQ4_NLAVX2(xb, w, blocks, groups, y): exact
// decode of IQ4_NL on fast mode's regrouping (X16's layout: the 16 rows'
// d, then 4 words of nibbles). VPSHUFB turns a word's nibbles into ggml's
// int8 levels; a level shifted to the top byte and masked is K·2^24,
// exact as a float, so a block sums Σ K·x·2^24 and is scaled by d·2^−24
// (exact). xb holds each of x's values eight times (x16BroadcastAVX2).
func gemvX16IQ4NL() {
	name := "gemvX16IQ4_NLAVX2"
	TEXT(name, NOSPLIT, "func(xb *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for groups regrouped groups of 16 IQ4_NL rows of blocks blocks (xb: each of x's values eight times), exact mode.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	const head = 32
	bsize := head + 64*4
	c := newIQ4Exact()
	xp, b := GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xb"), xp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		prefetchBlock(wp, bsize)
		for h := 0; h < 2; h++ {
			sum := c.block(wp, head+32*h, xp, 0)
			d := YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
			VMULPS(iq4Unscale, d, d) // d·2^−24, exact
			VFMADD231PS(sum, d, acc[h])
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(32*32), xp)
	}, nil)
}

// gemvX16IQ4XS writes gemvX16IQ4_XSAVX2(xb, w, blocks, groups, y): exact
// decode of IQ4_XS on fast mode's regrouping (fastX16IQ4XS's layout).
// Each sub-block of 32 is an IQ4_NL block (iq4Exact) whose scale is
// d·(ls−32), exact as a float32 (17 bits), taken with 2^−24.
func gemvX16IQ4XS() {
	name := "gemvX16IQ4_XSAVX2"
	TEXT(name, NOSPLIT, "func(xb *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for groups regrouped groups of 16 IQ4_XS rows of blocks super-blocks (xb: each of x's values eight times), exact mode.")
	wp, groups, y, _, _, _ := params("w", "groups", "y")
	const head = 32 + 8*16
	bsize := head + 64*32
	c := newIQ4Exact()
	xp, b := GP64(), GP64()
	x16Frame(name, groups, y, b, func() {
		Load(Param("xb"), xp)
		Load(Param("blocks"), b)
	}, func(acc [2]VecVirtual) {
		lines := (bsize + 63) / 64
		for h := 0; h < 2; h++ {
			d := YMM()
			VCVTPH2PS(Mem{Base: wp, Disp: 16 * h}, d)
			VMULPS(iq4Unscale, d, d) // d·2^−24, exact
			for sb := 0; sb < 8; sb++ {
				spreadPrefetch(wp, lines, 8*h+sb, 16)
				sum := c.block(wp, head+64*4*sb+32*h, xp, 32*32*sb)
				sc := YMM()
				VPMOVSXBD(Mem{Base: wp, Disp: 32 + 16*sb + 8*h}, sc)
				VCVTDQ2PS(sc, sc)
				VMULPS(d, sc, sc)
				VFMADD231PS(sum, sc, acc[h])
			}
		}
		ADDQ(U32(bsize), wp)
		ADDQ(U32(32*256), xp)
	}, nil)
}

// iq4Exact is the registers of exact IQ4_NL-style blocks: the nibble mask,
// ggml's levels, and the top byte's mask.
type iq4Exact struct{ mask, levels, top VecVirtual }

func newIQ4Exact() iq4Exact {
	c := iq4Exact{bcast8(0x0f), YMM(), broadcast(avx2isa, 0xff000000)}
	VMOVDQU(iq4Levels, c.levels)
	return c
}

// block sums K·x·2^24 over a block of 32 values of 8 rows: its 4 words at
// wp+disp, 64 bytes apart, against xb's values from xp+xdisp. VPSHUFB
// turns the nibbles into ggml's int8 levels; a level shifted to the top
// byte and masked is K·2^24, exact as a float.
func (c iq4Exact) block(wp GPVirtual, disp int, xp GPVirtual, xdisp int) VecVirtual {
	var sk [4]VecVirtual
	for i := 0; i < 4; i++ {
		wv, lo, hi := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: disp + 64*i}, wv)
		VPAND(c.mask, wv, lo)
		VPSRLW(U8(4), wv, hi)
		VPAND(c.mask, hi, hi)
		VPSHUFB(lo, c.levels, lo)
		VPSHUFB(hi, c.levels, hi)
		for half, src := range []VecVirtual{lo, hi} {
			for k := 0; k < 4; k++ {
				v := YMM()
				if k < 3 {
					VPSLLD(U8(24-8*k), src, v)
					VPAND(c.top, v, v)
				} else {
					VPAND(c.top, src, v)
				}
				VCVTDQ2PS(v, v) // K·2^24
				xv := Mem{Base: xp, Disp: xdisp + 32*(16*half+4*i+k)}
				mulAdd(&sk[k], xv, v)
			}
		}
	}
	VADDPS(sk[1], sk[0], sk[0])
	VADDPS(sk[3], sk[2], sk[2])
	VADDPS(sk[2], sk[0], sk[0])
	return sk[0]
}

// iq4Unscale holds 2^−24 in every lane.
var iq4Unscale Mem

func gemvX16IQ4NLConsts() {
	iq4Unscale = GLOBL("iq4unscale", RODATA|NOPTR)
	for l := 0; l < 8; l++ {
		DATA(4*l, U32(math.Float32bits(1.0/(1<<24))))
	}
}

// x16Frame emits the frame of the AVX2 kernels on regroupings: per group
// of 16 rows, two accumulators (rows 0–7 and 8–15) are cleared and start
// loads the group's pointers and its block count into b; block emits a
// block into the accumulators and steps the pointers, while b counts
// down; then finish (if any) folds other sums into them, and they go to
// 16 values of y.
func x16Frame(name string, groups, y, b GPVirtual, start func(), block, finish func(acc [2]VecVirtual)) {
	Label(name + "_group")
	TESTQ(groups, groups)
	JZ(LabelRef(name + "_end"))
	acc := [2]VecVirtual{YMM(), YMM()}
	for _, a := range acc {
		VXORPS(a, a, a)
	}
	start()
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_groupdone"))
	block(acc)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_groupdone")
	if finish != nil {
		finish(acc)
	}
	VMOVUPS(acc[0], Mem{Base: y})
	VMOVUPS(acc[1], Mem{Base: y, Disp: 32})
	ADDQ(U8(64), y)
	DECQ(groups)
	JMP(LabelRef(name + "_group"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}
