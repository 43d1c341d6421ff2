package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// fastPack writes fastPack{q}AVX512, the repacking of 16 weight rows for
// fast mode's prefill and batched decode (packedRows.pack in
// fastgemm.go): per block, word 16j + c is row c's 4-byte word j of
// values (Q4_0: its low nibbles for j < 4, its high ones for j >= 4;
// Q5_0: the same with each value's fifth bit, read by VPERMD from the 4
// bits of qh that a shift puts lowest; Q8_0: each byte + 128), and dw has
// the 16 rows' scales as float32. A block's words are loaded row by row
// and transposed (transpose8), rows 0-7 and 8-15 apart; only d is
// gathered (a gather reads a lane a cycle here). The Go loop's scattered
// stores had spent about 25 cycles a row and block, a sixth of a
// 128-token prefill of Qwen3-0.6B Q4_0.
func fastPack(q string) {
	name := "fastPack" + q + "AVX512"
	TEXT(name, NOSPLIT, "func(w *byte, rb int, blocks int, dst *uint32, dw *float32)")
	Pragma("noescape")
	Doc(name + " repacks 16 " + q + " rows of blocks blocks (stride rb bytes) into dst and dw for the fast prefill kernels.")
	w, rb, blocks, dst, dw, _ := params("w", "rb", "blocks", "dst", "dw")
	bsize := map[string]int{"Q4_0": 18, "Q5_0": 22, "Q8_0": 34}[q]
	words := map[string]int{"Q4_0": 4, "Q5_0": 4, "Q8_0": 8}[q]
	// offs[c] = c·rb, the gathers' indexes.
	offs, step := ZMM(), ZMM()
	VCVTTPS2DQ(iota16, offs)
	VPBROADCASTD(rb.As32(), step)
	VPMULLD(step, offs, offs)
	var mask, fifth VecVirtual
	if q == "Q8_0" {
		mask = broadcast(avx512, 0x80808080)
	} else {
		mask = broadcast(avx512, 0x0f0f0f0f)
	}
	if q == "Q5_0" {
		fifth = ZMM()
		VMOVDQU32(fifthBitsTable, fifth)
	}
	// The words after d (Q5_0: qh, then the values) that a block holds:
	// loads of fewer than 8 are masked to them (own), since the last
	// block may end the matrix.
	n := map[string]int{"Q4_0": 4, "Q5_0": 5, "Q8_0": 8}[q]
	var own Op
	if n < 8 {
		k, all := K(), GP32()
		MOVL(U32(1<<n-1), all)
		KMOVW(all, k)
		own = k
	}
	// gather reads the 4 bytes at disp in the 16 rows' current block.
	g := rowGather(w)
	gather := func(disp int) VecVirtual { return g(offs, disp) }
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	rowsPrefetch(w, rb, 16, packPrefetchDist, 1)
	// Those words of rows 0-7 and 8-15, loaded and transposed, then
	// joined: vecs[i] is word i of the 16 rows (a gather reads a lane a
	// cycle here).
	vecs := words16(w, rb, 2, n, own)
	var qh VecVirtual
	if q == "Q5_0" {
		qh, vecs = vecs[0], vecs[1:]
	}
	// withFifth merges the fifth bits of the 4 values at bits 4·shift of
	// qh into v's.
	withFifth := func(v VecVirtual, shift int) {
		if q != "Q5_0" {
			return
		}
		idx := qh
		if shift > 0 {
			idx = ZMM()
			VPSRLD(U8(4*shift), qh, idx)
		}
		bits := ZMM()
		VPERMD(fifth, idx, bits)
		VPORD(bits, v, v)
	}
	for j := 0; j < words; j++ {
		v := vecs[j]
		if q != "Q8_0" {
			lo := ZMM()
			VPANDD(mask, v, lo)
			withFifth(lo, j)
			VMOVDQU32(lo, Mem{Base: dst, Disp: 64 * j})
			VPSRLD(U8(4), v, v)
			VPANDD(mask, v, v)
			withFifth(v, 4+j)
			VMOVDQU32(v, Mem{Base: dst, Disp: 64 * (j + 4)})
		} else {
			VPXORD(mask, v, v)
			VMOVDQU32(v, Mem{Base: dst, Disp: 64 * j})
		}
	}
	VMOVUPS(halves(gather(0)), Mem{Base: dw})
	ADDQ(U8(bsize), w)
	ADDQ(U32(512), dst)
	ADDQ(U8(64), dw)
	DECQ(blocks)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// packPrefetchDist is how far ahead in each row the row repackings
// prefetch. Their gathers read 16 rows at once, a stream per row that the
// hardware prefetchers do not follow: without it, a batched decode's
// repacking waited on memory for each block.
const packPrefetchDist = 512

// rowsPrefetch prefetches lines lines from dist bytes past w in each of
// rows rows of stride rb.
func rowsPrefetch(w, rb GPVirtual, rows, dist, lines int) {
	p := GP64()
	LEAQ(Mem{Base: w, Disp: dist}, p)
	for c := 0; c < rows; c++ {
		for l := 0; l < lines; l++ {
			streamPrefetch(Mem{Base: p, Disp: 64 * l})
		}
		if c < rows-1 {
			ADDQ(rb, p)
		}
	}
}

// halves widens the IEEE halves in the low 16 bits of v's dwords (16 or
// 8 of them) to float32s.
func halves(v VecVirtual) VecVirtual {
	if v.Size() == 64 {
		h, f := YMM(), ZMM()
		VPMOVDW(v, h)
		VCVTPH2PS(h, f)
		return f
	}
	h, f := XMM(), YMM()
	VPMOVDW(v, h)
	VCVTPH2PS(h, f)
	return f
}

// rowGather returns a gather of the dwords at disp past w + offs[c], for
// each lane c of offs (a ZMM index, or a YMM one for 8 lanes), into a new
// register of offs's size. Each gather sets its own mask (a gather clears
// it as it goes) and zeroes its destination with VXORPS, a zero idiom
// avo knows: with VPXORD, avo takes the register as live from the
// kernel's entry, and the Q6_K kernel's 29 gathers failed allocation.
func rowGather(w GPVirtual) func(offs Register, disp int) VecVirtual {
	all := GP32()
	MOVL(U32(0xffff), all)
	return func(offs Register, disp int) VecVirtual {
		k, v := K(), ZMM()
		if offs.Size() == 32 {
			v = YMM()
		}
		KMOVW(all, k)
		VXORPS(v, v, v)
		VPGATHERDD(Mem{Base: w, Index: offs, Scale: 1, Disp: disp}, k, v)
		return v
	}
}

// fastPackK writes fastPack{q}AVX512 for the K-quants: the repacking of
// 16 Q4_K or 8 Q6_K weight rows (packedRows.packK in fastgemm.go, whose
// comment gives the layout: lane c for row c). The values are loaded 32
// bytes a row and transposed 8 rows at a time (a gather reads a lane a
// cycle here, and was most of a batched decode's repacking); the scales
// and mins are gathered and unpacked a row a lane. The Go loop's
// scattered stores were 15% of a 128-token fast prefill of Qwen3-0.6B
// Q4_K_M.
func fastPackK(q string) {
	name := "fastPack" + q + "AVX512"
	TEXT(name, NOSPLIT, "func(w *byte, rb int, blocks int, dst *uint32)")
	Pragma("noescape")
	rows := map[string]int{"Q4_K": 16, "Q6_K": 8}[q]
	Doc(fmt.Sprintf("%s repacks %d %s rows of blocks super-blocks (stride rb bytes) into dst for the fast prefill kernels.", name, rows, q))
	w, rb, blocks, dst, _, _ := params("w", "rb", "blocks", "dst")
	// offs[c] = c·rb: the gathers read a word of each row.
	offs, step := YMM(), YMM()
	if rows == 16 {
		offs, step = ZMM(), ZMM()
	}
	VCVTTPS2DQ(iota16.Offset(0), offs)
	VPBROADCASTD(rb.As32(), step)
	VPMULLD(step, offs, offs)
	g := rowGather(w)
	gather := func(disp int) VecVirtual { return g(offs, disp) }
	store := func(v VecVirtual, word int) {
		if v.Size() == 64 {
			VMOVDQU32(v, Mem{Base: dst, Disp: 4 * word})
		} else {
			VMOVDQU(v, Mem{Base: dst, Disp: 4 * word})
		}
	}
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	bsize, size := 144, 5248
	if q == "Q6_K" {
		bsize = 210
	}
	rowsPrefetch(w, rb, rows, 2*bsize, (bsize+63)/64)
	if q == "Q4_K" {
		// The values: each 32 bytes of the rows' qs loaded, transposed 8
		// rows at a time, and joined so that a vector holds one word of
		// the 16 rows.
		nib := broadcast(avx512, 0x0f0f0f0f)
		for ch := 0; ch < 4; ch++ {
			for k, v := range words16(w, rb, 16+32*ch, 8, nil) {
				lo := ZMM()
				VPANDD(nib, v, lo)
				store(lo, 256*ch+16*k)
				VPSRLD(U8(4), v, v)
				VPANDD(nib, v, v)
				store(v, 256*ch+128+16*k)
			}
		}
		// Sub-block j's scale and min (quant.ScaleMinK4): s0-s2 are the
		// 12 bytes of scales as 3 words.
		s := []VecVirtual{gather(4), gather(8), gather(12)}
		m63, m15, m3 := broadcast(avx512, 63), broadcast(avx512, 15), broadcast(avx512, 3)
		// field is (src >> shift) & mask.
		field := func(src VecVirtual, shift int, mask VecVirtual) VecVirtual {
			v := ZMM()
			VPSRLD(U8(shift), src, v)
			VPANDD(mask, v, v)
			return v
		}
		for j := 0; j < 8; j++ {
			var sc, m VecVirtual
			if j < 4 {
				sc, m = field(s[0], 8*j, m63), field(s[1], 8*j, m63)
			} else {
				b := 8 * (j - 4)
				sc, m = field(s[2], b, m15), field(s[2], b+4, m15)
				top := field(s[0], b+6, m3)
				VPSLLD(U8(4), top, top)
				VPORD(top, sc, sc)
				top = field(s[1], b+6, m3)
				VPSLLD(U8(4), top, top)
				VPORD(top, m, m)
			}
			store(sc, 1024+16*j)
			t := ZMM()
			VPSLLD(U8(16), m, t)
			VPORD(t, m, m)
			store(m, 1152+16*j)
		}
		d := gather(0) // d | dmin<<16
		store(halves(d), 1280)
		VPSRLD(U8(16), d, d)
		store(halves(d), 1296)
	} else {
		bsize, size = 210, 2848
		nib, two := broadcast(avx512, 0x0f0f0f0f), broadcast(avx512, 0x03030303)
		// Values 128h + 32k + l, l = 4i..4i+3: low (k < 2) or high
		// nibbles of ql word 16h + 8(k%2) + i, bits 2k, 2k+1 of qh word
		// 8h + i; group 8h + 2k + i/4, word i%4 of it.
		// The 8 rows' 32 bytes at disp, transposed, as 4 vectors of words
		// 2j and 2j+1 (a 16-lane gather's layout, without the gathers).
		rowMem := rowsAt(w, rb)
		wordPairs := func(disp int) [4]VecVirtual {
			t := transpose8(loadRows8(rowMem, disp, nil))
			var z [4]VecVirtual
			for j := range z {
				z[j] = ZMM()
				VINSERTI64X4(U8(1), t[2*j+1], t[2*j].AsZ(), z[j])
			}
			return z
		}
		for h := 0; h < 2; h++ {
			qh, ql0, ql1 := wordPairs(128+32*h), wordPairs(64*h), wordPairs(64*h+32)
			for i := 0; i < 8; i += 2 {
				hw := qh[i/2]
				ql := []VecVirtual{ql0[i/2], ql1[i/2]}
				for k := 0; k < 4; k++ {
					v, hi := ZMM(), ZMM()
					if k < 2 {
						VPANDD(nib, ql[k%2], v)
					} else {
						VPSRLD(U8(4), ql[k%2], v)
						VPANDD(nib, v, v)
					}
					VPSRLD(U8(2*k), hw, hi)
					VPANDD(two, hi, hi)
					VPSLLD(U8(4), hi, hi)
					VPORD(hi, v, v)
					store(v, 32*(8*h+2*k+i/4)+8*(i%4))
				}
			}
		}
		// The 16 signed scales, as int32 and as int16 pairs.
		lo16 := broadcastY(0xffff)
		for m := 0; m < 4; m++ {
			s := gather(192 + 4*m)
			for b := 0; b < 4; b++ {
				v := YMM()
				VPSLLD(U8(24-8*b), s, v)
				VPSRAD(U8(24), v, v)
				store(v, 512+8*(4*m+b))
			}
			// a: bytes 0 and 2 sign-extended to 16 bits, b: bytes 1
			// and 3.
			a, b := YMM(), YMM()
			VPSLLW(U8(8), s, a)
			VPSRAW(U8(8), a, a)
			VPSRAW(U8(8), s, b)
			p0, p1 := YMM(), YMM()
			VPAND(lo16, a, p0)
			VPSLLD(U8(16), b, p1)
			VPOR(p1, p0, p0)
			store(p0, 640+8*(2*m))
			VPSRLD(U8(16), a, a)
			VPANDN(b, lo16, b) // b &^ 0xffff
			VPOR(b, a, a)
			store(a, 640+8*(2*m+1))
		}
		// d is bytes 208-209; the gather reads 206-209, inside the block.
		g := gather(206)
		VPSRLD(U8(16), g, g)
		store(halves(g), 704)
	}
	ADDQ(U32(bsize), w)
	ADDQ(U32(size), dst)
	DECQ(blocks)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// rowsAt returns the address disp bytes into row c (0-7) of stride rb
// from w.
func rowsAt(w, rb GPVirtual) func(c, disp int) Mem {
	w4, rb3 := GP64(), GP64()
	LEAQ(Mem{Base: rb, Index: rb, Scale: 2}, rb3)
	LEAQ(Mem{Base: w, Index: rb, Scale: 4}, w4)
	return func(c, disp int) Mem {
		base := w
		if c >= 4 {
			base = w4
		}
		switch c % 4 {
		case 1:
			return Mem{Base: base, Index: rb, Scale: 1, Disp: disp}
		case 2:
			return Mem{Base: base, Index: rb, Scale: 2, Disp: disp}
		case 3:
			return Mem{Base: base, Index: rb3, Scale: 1, Disp: disp}
		}
		return Mem{Base: base, Disp: disp}
	}
}

// loadRows8 loads the 32 bytes at disp of 8 rows (at), or with mask set
// only its words (the others zero).
func loadRows8(at func(c, disp int) Mem, disp int, mask Op) [8]VecVirtual {
	var r [8]VecVirtual
	for c := range r {
		r[c] = YMM()
		if mask != nil {
			VMOVDQU32_Z(at(c, disp), mask, r[c])
		} else {
			VMOVDQU32(at(c, disp), r[c])
		}
	}
	return r
}

// words16 returns words 0..n-1 of the 32 bytes at disp of the 16 rows of
// stride rb from w, each as a 16-lane vector (lane c: row c): rows 0-7
// and 8-15 loaded (loadRows8) and transposed apart, then joined.
func words16(w, rb GPVirtual, disp, n int, mask Op) []VecVirtual {
	w8 := GP64()
	LEAQ(Mem{Base: w, Index: rb, Scale: 8}, w8)
	lo := transpose8(loadRows8(rowsAt(w, rb), disp, mask))
	hi := transpose8(loadRows8(rowsAt(w8, rb), disp, mask))
	vecs := make([]VecVirtual, n)
	for i := range vecs {
		vecs[i] = ZMM()
		VINSERTI64X4(U8(1), hi[i], lo[i].AsZ(), vecs[i])
	}
	return vecs
}

// transpose8 transposes 8 YMM rows of 8 dwords: word k of the result
// holds dword k of rows 0-7. Unpacks pair the rows' dwords and then their
// pairs within each 128-bit lane; a lane shuffle joins rows 0-3 and 4-7.
// (All EVEX forms, so that any of the 32 registers may serve.)
func transpose8(r [8]VecVirtual) [8]VecVirtual {
	var t, u, out [8]VecVirtual
	for i := 0; i < 4; i++ {
		t[2*i], t[2*i+1] = YMM(), YMM()
		VPUNPCKLDQ(r[2*i+1], r[2*i], t[2*i])   // d0 d1 | d4 d5 of rows 2i, 2i+1
		VPUNPCKHDQ(r[2*i+1], r[2*i], t[2*i+1]) // d2 d3 | d6 d7
	}
	for h := 0; h < 2; h++ { // rows 4h..4h+3
		for i := 0; i < 4; i++ {
			u[4*h+i] = YMM()
		}
		VPUNPCKLQDQ(t[4*h+2], t[4*h], u[4*h])     // d0 | d4
		VPUNPCKHQDQ(t[4*h+2], t[4*h], u[4*h+1])   // d1 | d5
		VPUNPCKLQDQ(t[4*h+3], t[4*h+1], u[4*h+2]) // d2 | d6
		VPUNPCKHQDQ(t[4*h+3], t[4*h+1], u[4*h+3]) // d3 | d7
	}
	for j := 0; j < 4; j++ {
		out[j], out[j+4] = YMM(), YMM()
		VSHUFI32X4(U8(0), u[4+j], u[j], out[j])   // the low lanes: dword j
		VSHUFI32X4(U8(3), u[4+j], u[j], out[j+4]) // the high lanes: dword j+4
	}
	return out
}

// broadcastY is v in every dword of a 256-bit vector.
func broadcastY(v uint32) VecVirtual {
	r, t := YMM(), GP32()
	MOVL(U32(v), t)
	VPBROADCASTD(t, r)
	return r
}

// fastPackX16 writes fastPackX16{q}AVX512: fastPack's output from a group
// of 16 regrouped Q4_0 rows (x16.go), which already holds each word of the
// 16 rows side by side: its nibbles are split, as fastPack does. Q8_0's,
// IQ4_NL's and Q5_0's regroupings are read in place (fastX16Q8).
func fastPackX16(q string) {
	name := "fastPackX16" + q + "AVX512"
	TEXT(name, NOSPLIT, "func(src *byte, blocks int, dst *uint32, dw *float32)")
	Pragma("noescape")
	Doc(name + " repacks a regrouped group of 16 " + q + " rows of blocks blocks into dst and dw for the fast prefill kernels.")
	src, blocks, dst, dw, _, _ := params("src", "blocks", "dst", "dw")
	const words = 4
	bsize := 32 + 64*words
	mask := broadcast(avx512, 0x0f0f0f0f)
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	for j := 0; j < words; j++ {
		v := ZMM()
		VMOVDQU32(Mem{Base: src, Disp: 32 + 64*j}, v)
		lo := ZMM()
		VPANDD(mask, v, lo)
		VPSRLD(U8(4), v, v)
		VPANDD(mask, v, v)
		VMOVDQU32(lo, Mem{Base: dst, Disp: 64 * j})
		VMOVDQU32(v, Mem{Base: dst, Disp: 64 * (j + 4)})
	}
	d := ZMM()
	VCVTPH2PS(Mem{Base: src}, d)
	VMOVUPS(d, Mem{Base: dw})
	ADDQ(U32(bsize), src)
	ADDQ(U32(512), dst)
	ADDQ(U8(64), dw)
	DECQ(blocks)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// iq4LevelsU8 is ggml's kvalues_iq4nl plus 128, as unsigned bytes.
var iq4LevelsU8 Mem

// fifthBitsTable is fastgemm.go's fifthBits: for n < 16, 0x10 in byte i
// where bit i of n is set.
var fifthBitsTable Mem

func fifthBitsConsts() {
	fifthBitsTable = GLOBL("fifthbits", RODATA|NOPTR)
	for n := 0; n < 16; n++ {
		v := uint32(0)
		for i := 0; i < 4; i++ {
			if n>>i&1 == 1 {
				v |= 0x10 << (8 * i)
			}
		}
		DATA(4*n, U32(v))
	}
}

func iq4LevelsU8Consts() {
	iq4LevelsU8 = GLOBL("iq4levelsu8", RODATA|NOPTR)
	for i, v := range []int{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113} {
		DATA(i, U8(v+128))
	}
}

// fastPackX16IQ4XS writes fastPackX16IQ4_XSAVX512: a regrouped group of
// 16 IQ4_XS rows (x16.go) in fastGemmK's layout for IQ4_XS (Q4_K's, 16
// lanes wide: simd.packK): per super-block, sub-block s's 32 values (its
// low nibbles, then its high ones) as ggml's levels plus 128 in words
// 128s..128s+127, its scale ls−32 as int32 at 1024+16s and as an int16
// pair at 1152+16s, and d as float32 at 1280.
func fastPackX16IQ4XS() {
	name := "fastPackX16IQ4_XSAVX512"
	TEXT(name, NOSPLIT, "func(src *byte, blocks int, dst *uint32)")
	Pragma("noescape")
	Doc(name + " repacks a regrouped group of 16 IQ4_XS rows of blocks super-blocks into dst for fastGemmIQ4_XS*.")
	src, blocks, dst, _, _, _ := params("src", "blocks", "dst")
	const head, bsize = 32 + 8*16, 32 + 8*16 + 32*64
	levels, mask, low16 := ZMM(), broadcast(avx512, 0x0f0f0f0f), broadcast(avx512, 0xffff)
	VBROADCASTI32X4(iq4LevelsU8, levels)
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	for s := 0; s < 8; s++ {
		for w := 0; w < 4; w++ {
			v, lo := ZMM(), ZMM()
			VMOVDQU32(Mem{Base: src, Disp: head + 64*(4*s+w)}, v)
			VPANDD(mask, v, lo)
			VPSRLD(U8(4), v, v)
			VPANDD(mask, v, v)
			VPSHUFB(lo, levels, lo)
			VPSHUFB(v, levels, v)
			VMOVDQU32(lo, Mem{Base: dst, Disp: 4 * (128*s + 16*w)})
			VMOVDQU32(v, Mem{Base: dst, Disp: 4 * (128*s + 16*(w+4))})
		}
		sc, pair := ZMM(), ZMM()
		VPMOVSXBD(Mem{Base: src, Disp: 32 + 16*s}, sc)
		VMOVDQU32(sc, Mem{Base: dst, Disp: 4 * (1024 + 16*s)})
		VPSLLD(U8(16), sc, pair)
		VPANDD(low16, sc, sc)
		VPORD(sc, pair, pair)
		VMOVDQU32(pair, Mem{Base: dst, Disp: 4 * (1152 + 16*s)})
	}
	d := ZMM()
	VCVTPH2PS(Mem{Base: src}, d)
	VMOVUPS(d, Mem{Base: dst, Disp: 4 * 1280})
	ADDQ(U32(bsize), src)
	ADDQ(U32(5184), dst)
	DECQ(blocks)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}
