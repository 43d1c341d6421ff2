package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Exact decode over 16 weight rows at once (x16.go in the package): the
// rows of a quantized matrix are regrouped by 16, so that one vector
// holds the same column of 16 rows. A weight then costs one widening and
// one lookup or conversion per 16, and the product one multiply-add with
// x's value broadcast from memory; the block's scale d is applied once a
// block, to the 16 rows' sums at once (d as 16 halves converted together),
// not to every weight: the per-row kernels spend a vector instruction a
// block on their table or scale, one in seven of their instructions.

// gemvX16 writes gemv{q}x16AVX512: y[16g+r] = x · w_{16g+r} for groups
// groups of 16 rows, each of blocks blocks of 32 columns, stored as the
// 16 rows' d (16 halves) and then their 32 values in 4-byte words: word i of
// the 16 rows' values (Q4_0, IQ4_NL: bytes whose nibbles are columns j and
// j+16; Q8_0: signed bytes) takes 64 bytes, row r's at 4r). Each block's
// products go to four chains of multiply-adds, which the block sums and
// scales by its 16 d into the rows' accumulator.
func gemvX16(q string) {
	name := "gemv" + q + "x16AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[16g+r] = x · w_{16g+r} for groups groups of 16 " + q + " rows of blocks blocks, regrouped by 16 rows (x16.go).")
	x, w, blocks, groups, y, _ := params("x", "w", "blocks", "groups", "y")
	bsize := map[string]int{"Q4_0": 32 + 256, "IQ4_NL": 32 + 256, "Q8_0": 32 + 512}[q]
	table := nibbleTable(q)
	xp, b := GP64(), GP64()
	groupLoop(name, w, groups, y, b, bsize, func() {
		MOVQ(x, xp)
		MOVQ(blocks, b)
	}, func(acc VecVirtual, pf prefetchPart) {
		var sum VecVirtual
		if q == "Q8_0" {
			sum = x16Bytes(w, xp, pf)
		} else {
			sum = x16Nibbles(w, 32, xp, 0, table, func(k int) { pf(k, 4) })
		}
		d := ZMM()
		VCVTPH2PS(Mem{Base: w}, d)
		VFMADD231PS(d, sum, acc)
	}, func() { ADDQ(U8(128), xp) }, q == "Q8_0")
}

// nibbleTable loads the float32 value of every nibble for q: q−8 (Q4_0,
// exact as gemvQ4_0Table's offsets) or ggml's levels (IQ4_NL, IQ4_XS).
func nibbleTable(q string) VecVirtual {
	table := ZMM()
	switch q {
	case "Q4_0":
		VMOVUPS(iota16, table)
		VSUBPS(f32(8), table, table)
	case "IQ4_NL", "IQ4_XS":
		VMOVUPS(iq4LevelsF32, table)
	}
	return table
}

// iq4LevelsF32 is ggml's kvalues_iq4nl as float32s.
var iq4LevelsF32 Mem

func iq4LevelsConsts() {
	iq4LevelsF32 = GLOBL("iq4levelsf32", RODATA|NOPTR)
	for i, v := range []int{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113} {
		DATA(4*i, U32(math.Float32bits(float32(v))))
	}
}

// chainSum adds v·x's value at xm to the next of four chains of
// multiply-adds (the first four start them), and finally sums them.
type chainSum struct {
	chains [4]VecVirtual
	n      int
}

func (c *chainSum) add(xm Mem, v VecVirtual) {
	k := c.n % 4
	if c.n < 4 {
		c.chains[k] = ZMM()
		VMULPS_BCST(xm, v, c.chains[k])
	} else {
		VFMADD231PS_BCST(xm, v, c.chains[k])
	}
	c.n++
}

func (c *chainSum) sum() VecVirtual {
	VADDPS(c.chains[1], c.chains[0], c.chains[0])
	VADDPS(c.chains[3], c.chains[2], c.chains[2])
	VADDPS(c.chains[2], c.chains[0], c.chains[0])
	return c.chains[0]
}

// x16Nibbles sums the 16 rows' nibble values (table's) times x over 32
// columns: the 4 words at w+disp against x's values from xp+4·col0.
// Chunk k of 64 bytes holds the 16 rows' bytes 4k..4k+3 (row r at 4r):
// the 64 bytes from chunk+i are then 16 dwords whose low nibbles are the
// rows' column 4k+i, with no instruction to widen them (VPERMPS reads an
// index's low 4 bits only), and after a shift their column 4k+i+16.
// Loads at chunk+1..3 run 3 bytes into the next chunk (the matrix has
// padding after it). pf(k) prefetches before chunk k.
func x16Nibbles(w GPVirtual, disp int, xp GPVirtual, col0 int, table VecVirtual, pf func(k int)) VecVirtual {
	var c chainSum
	for k := 0; k < 4; k++ {
		pf(k)
		for i := 0; i < 4; i++ {
			idx := ZMM()
			VMOVDQU32(Mem{Base: w, Disp: disp + 64*k + i}, idx)
			lo := ZMM()
			VPERMPS(table, idx, lo) // column 4k+i
			c.add(Mem{Base: xp, Disp: 4 * (col0 + 4*k + i)}, lo)
			VPSRLD(U8(4), idx, idx)
			hi := ZMM()
			VPERMPS(table, idx, hi) // column 4k+i+16
			c.add(Mem{Base: xp, Disp: 4 * (col0 + 4*k + i + 16)}, hi)
		}
	}
	return c.sum()
}

// x16Bytes sums a Q8_0 block's 16 rows' values times x. In the same
// layout of 4-byte words, the dword that ends at row r's byte c holds it
// in its top byte, where a mask keeps it alone and the conversion reads
// it as a signed q·2^24 (exact); the group's sums are scaled back by
// 2^-24 at the end (exact).
func x16Bytes(w, xp GPVirtual, pf prefetchPart) VecVirtual {
	var s chainSum
	top := broadcast(avx512, 0xff000000)
	for c := 0; c < 32; c++ {
		pf(c, 32)
		v := ZMM()
		VPANDD(Mem{Base: w, Disp: 32 + 64*(c/4) + c%4 - 3}, top, v)
		VCVTDQ2PS(v, v)
		s.add(Mem{Base: xp, Disp: 4 * c}, v)
	}
	return s.sum()
}

// gemvIQ4_XSx16 writes gemvIQ4_XSx16AVX512: y[16g+r] = x · w_{16g+r} for
// groups groups of 16 IQ4_XS rows of blocks super-blocks, on the
// regrouping AVX2 reads (the 16 rows' d, then sub-block b's 16 scales
// ls−32 as int8 at 32+16b, then 32 words of nibbles, sub-block b's in
// words 4b..4b+3 as an IQ4_NL block's). A weight is (d·(ls−32))·K, so a
// sub-block's 16 rows' sums of K·x are scaled by d·(ls−32), computed as
// ggml does (exact: 17 bits).
func gemvIQ4_XSx16() {
	name := "gemvIQ4_XSx16AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[16g+r] = x · w_{16g+r} for groups groups of 16 IQ4_XS rows of blocks super-blocks, regrouped by 16 rows (x16.go).")
	x, w, blocks, groups, y, _ := params("x", "w", "blocks", "groups", "y")
	const head = 32 + 8*16
	bsize := head + 32*64
	table := nibbleTable("IQ4_XS")
	xp, b := GP64(), GP64()
	groupLoop(name, w, groups, y, b, bsize, func() {
		MOVQ(x, xp)
		MOVQ(blocks, b)
	}, func(acc VecVirtual, pf prefetchPart) {
		d := ZMM()
		VCVTPH2PS(Mem{Base: w}, d)
		for sb := 0; sb < 8; sb++ {
			sum := x16Nibbles(w, head+4*64*sb, xp, 32*sb, table, func(k int) { pf(4*sb+k, 32) })
			dl := ZMM()
			VPMOVSXBD(Mem{Base: w, Disp: 32 + 16*sb}, dl)
			VCVTDQ2PS(dl, dl)
			VMULPS(d, dl, dl) // d·(ls−32), as ggml computes it
			VFMADD231PS(dl, sum, acc)
		}
	}, func() { ADDQ(U32(4*256), xp) }, false)
}

// groupLoop is the frame of the regrouped kernels: for each group of 16
// rows, acc is cleared and start sets the block count b (and the group's
// pointers); block runs (prefetching its share of the lines
// x16PrefetchDist ahead through pf), w steps bsize bytes and advance steps the rest,
// while b counts down; then acc (times 2^-24 with unscale) goes to 16
// values of y.
func groupLoop(name string, w, groups, y, b GPVirtual, bsize int, start func(), block func(acc VecVirtual, pf prefetchPart), advance func(), unscale bool) {
	Label(name + "_group")
	TESTQ(groups, groups)
	JZ(LabelRef(name + "_end"))
	acc := ZMM()
	VPXORD(acc, acc, acc)
	start()
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_groupdone"))
	lines := (bsize + 63) / 64
	block(acc, func(part, parts int) { spreadPrefetch(w, lines, part, parts) })
	ADDQ(U32(bsize), w)
	advance()
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_groupdone")
	if unscale {
		VMULPS(f32(1.0/(1<<24)), acc, acc)
	}
	VMOVUPS(acc, Mem{Base: y})
	ADDQ(U8(64), y)
	DECQ(groups)
	JMP(LabelRef(name + "_group"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// gemvQ4_Kx16 writes gemvQ4_Kx16AVX512: y[16g+r] = x · w_{16g+r} for
// groups groups of 16 Q4_K rows of blocks super-blocks, regrouped by 16
// rows: per super-block the 16 rows' d and dmin (16 halves each), their
// 6-bit scales and mins unpacked to bytes (sc[8] in words 0-1, m[8] in
// words 2-3), then the 32 words of their nibbles (byte 32ch+l: column
// 64ch+l in its low nibble, 64ch+32+l in its high), each word 16 rows' 4
// bytes. A weight is (d·sc_j)·q - dmin·m_j, so a row's product is
// Σ_j d·sc_j·(Σ q·x over sub-block j) - dmin·Σ_j m_j·sums[j], with sums
// x's sums over each 32 values (computed once per product): the nibbles
// are looked up as plain q, and the scales are applied to 16 rows' sums
// of each sub-block at once.
func gemvQ4_Kx16() {
	kquantX16("Q4_K", 32, 64+4*64+32*64, false, func() x16KBlock {
		table, low := ZMM(), broadcast(avx512, 0xff)
		VMOVUPS(iota16, table)
		return func(w, xp, sp GPVirtual, acc VecVirtual, pf prefetchPart) {
			q4kx16Block(w, xp, sp, table, low, acc, pf)
		}
	})
}

// x16KBlock emits one super-block of a regrouped K-quant kernel into acc:
// w at the block, xp at its 256 values of x, sp at their sums.
type x16KBlock func(w, xp, sp GPVirtual, acc VecVirtual, pf prefetchPart)

// kquantX16 writes gemv{q}x16AVX512, the frame the regrouped K-quant
// kernels share: for groups groups of 16 rows, super-blocks of bsize
// bytes against x and sums, x's sums over each sub values; setup emits
// the kernel's constants and gives its block (whose sum is times 2^24
// with unscale).
func kquantX16(q string, sub, bsize int, unscale bool, setup func() x16KBlock) {
	name := "gemv" + q + "x16AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, sums *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[16g+r] = x · w_{16g+r} for groups groups of 16 %s rows of blocks super-blocks, regrouped by 16 rows (x16.go), with sums x's sums over each %d values.", name, q, sub))
	x, sums, w, blocks, groups, y := params("x", "sums", "w", "blocks", "groups", "y")
	block := setup()
	xp, sp, b := GP64(), GP64(), GP64()
	groupLoop(name, w, groups, y, b, bsize, func() {
		MOVQ(x, xp)
		MOVQ(sums, sp)
		MOVQ(blocks, b)
	}, func(acc VecVirtual, pf prefetchPart) { block(w, xp, sp, acc, pf) }, func() {
		ADDQ(U32(4*256), xp)
		ADDQ(U8(4*256/sub), sp)
	}, unscale)
}

// q4kx16Block emits one super-block of gemvQ4_Kx16 into acc.
func q4kx16Block(w, xp, sp GPVirtual, table, low, acc VecVirtual, pf prefetchPart) {
	q4kx16Rows(w, []x16Row{{
		x:   func(disp int) Mem { return Mem{Base: xp, Disp: disp} },
		s:   func(disp int) Mem { return Mem{Base: sp, Disp: disp} },
		acc: acc,
	}}, table, low, pf)
}

// x16Row is one row of x in a regrouped kernel's block: its values and
// its sums over sub-blocks at a byte offset, and its accumulator.
type x16Row struct {
	x, s func(disp int) Mem
	acc  VecVirtual
}

// q4kx16Rows emits one super-block of gemvQ4_Kx16 for each of rows, the
// values widened once for all: each row's instructions are the one-row
// kernel's, in its order.
func q4kx16Rows(w GPVirtual, rows []x16Row, table, low VecVirtual, pf prefetchPart) {
	// byteAt is byte k of the 16 rows' word i as floats.
	byteAt := func(i, k int) VecVirtual {
		v := ZMM()
		VPANDD(Mem{Base: w, Disp: 64 + 64*i + k}, low, v)
		VCVTDQ2PS(v, v)
		return v
	}
	// The mins: dmin·Σ_j m_j·sums[j], subtracted from the rows' sums.
	subtractMinsRows(w, rows, 8, func(s int) VecVirtual { return byteAt(2+s/4, s%4) })
	d := ZMM()
	VCVTPH2PS(Mem{Base: w}, d)
	for ch := 0; ch < 4; ch++ {
		pf(ch, 4)
		// Two chains for each of the two sub-blocks, 2ch (low nibbles)
		// and 2ch+1 (high), taking the 16 rows' products in turn.
		a, hb := make([][2]VecVirtual, len(rows)), make([][2]VecVirtual, len(rows))
		for l := 0; l < 32; l++ {
			word, k := 8*ch+l/4, l%4
			idx := ZMM()
			VMOVDQU32(Mem{Base: w, Disp: 320 + 64*word + k}, idx)
			lo := ZMM()
			VPERMPS(table, idx, lo) // q of column 64ch+l
			VPSRLD(U8(4), idx, idx)
			hi := ZMM()
			VPERMPS(table, idx, hi) // q of column 64ch+32+l
			for r, row := range rows {
				for _, c := range []struct {
					v     VecVirtual
					chain *VecVirtual
					col   int
				}{{lo, &a[r][l%2], 64*ch + l}, {hi, &hb[r][l%2], 64*ch + 32 + l}} {
					xm := row.x(4 * c.col)
					if l < 2 {
						*c.chain = ZMM()
						VMULPS_BCST(xm, c.v, *c.chain)
					} else {
						VFMADD231PS_BCST(xm, c.v, *c.chain)
					}
				}
			}
		}
		for s := 0; s < 2; s++ {
			j := 2*ch + s
			sc := byteAt(j/4, j%4)
			VMULPS(d, sc, sc) // d·sc_j for 16 rows, as ggml computes it
			for r, row := range rows {
				chains := [][2]VecVirtual{a[r], hb[r]}[s]
				VADDPS(chains[1], chains[0], chains[0])
				VFMADD231PS(sc, chains[0], row.acc)
			}
		}
	}
}

// subtractMinsRows is subtractMins for each of rows, the mins widened
// once for all.
func subtractMinsRows(w GPVirtual, rows []x16Row, n int, minOf func(s int) VecVirtual) {
	mins := make([]VecVirtual, len(rows))
	for s := 0; s < n; s++ {
		m := minOf(s)
		for r, row := range rows {
			if s == 0 {
				mins[r] = ZMM()
				VMULPS_BCST(row.s(0), m, mins[r])
			} else {
				VFMADD231PS_BCST(row.s(4*s), m, mins[r])
			}
		}
	}
	dmin := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: 32}, dmin)
	for r, row := range rows {
		VFNMADD231PS(dmin, mins[r], row.acc)
	}
}

// subtractMins takes dmin·Σ_s m_s·sums[s] off the rows' sums acc, for n
// sub-blocks whose mins minOf gives as floats for the 16 rows (the
// block's dmin, 16 halves, at w+32).
func subtractMins(w, sp GPVirtual, acc VecVirtual, n int, minOf func(s int) VecVirtual) {
	mins := ZMM()
	for s := 0; s < n; s++ {
		m := minOf(s)
		if s == 0 {
			VMULPS_BCST(Mem{Base: sp}, m, mins)
		} else {
			VFMADD231PS_BCST(Mem{Base: sp, Disp: 4 * s}, m, mins)
		}
	}
	dmin := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: 32}, dmin)
	VFNMADD231PS(dmin, mins, acc)
}

// gemvQ6_Kx16 writes gemvQ6_Kx16AVX512: y[16g+r] = x · w_{16g+r} for
// groups groups of 16 Q6_K rows of blocks super-blocks, regrouped by 16
// rows in as many bytes as the file's: per super-block the 16 rows' d (16
// halves), their 16 scales (int8, sub-block j's in byte j%4 of word j/4),
// then 3 words for each sub-block j holding its 16 values, each word 16
// rows' 4 bytes: value 16j+5t+k in field k (bits 6k..6k+5) of word t, and
// the last value's bits 2t, 2t+1 in bits 30-31 of word t. A weight is
// (d·sc_j)·(q-32), so a row's product is Σ_j d·sc_j·(Σ q·x over sub-block
// j) - 32·d·Σ_j sc_j·sums[j], with sums x's sums over each 16 values
// (computed once per product). A field masked in place is q·2^6k, exact as
// a float, and goes to a chain of its own; the five chains of a sub-block
// are scaled back by 2^-6k (exact) and summed. Against the row kernel,
// which builds 32 signed bytes from the bits and then widens 16 at a
// time, a weight here is a mask, a conversion and a multiply-add for 16
// rows (the last of a sub-block, three shifts and two bit selects more):
// about 3.75 vector instructions per 16 weights with the sub-block's sums
// and scale, against 4.75.
func gemvQ6_Kx16() {
	kquantX16("Q6_K", 16, 32+4*64+48*64, true, func() x16KBlock {
		var c q6kx16Consts
		for k := range c.fields {
			c.fields[k] = broadcast(avx512, 0x3f<<(6*k))
		}
		c.top = broadcast(avx512, 0xff000000)
		c.bits23, c.bits45 = broadcast(avx512, 0x0c), broadcast(avx512, 0x30)
		for k := 1; k < 5; k++ {
			c.back[k] = f32(float32(math.Ldexp(1, -6*k)))
		}
		c.m32 = f32(-32)
		return func(w, xp, sp GPVirtual, acc VecVirtual, pf prefetchPart) {
			q6kx16Block(w, xp, sp, c, acc, pf)
		}
	})
}

// q6kx16Consts is the constant registers of gemvQ6_Kx16.
type q6kx16Consts struct {
	fields, back             [5]VecVirtual // the fields' masks, and 2^-6k
	top, bits23, bits45, m32 VecVirtual
}

// q6kx16Block emits one super-block of gemvQ6_Kx16 into acc, times 2^24
// (the scales are converted from the top byte of a word).
func q6kx16Block(w, xp, sp GPVirtual, c q6kx16Consts, acc VecVirtual, pf prefetchPart) {
	sb, off := ZMM(), ZMM()
	for j := 0; j < 16; j++ {
		pf(j, 16)
		var chains [5]VecVirtual
		product := func(v VecVirtual, k, col int) {
			xm := Mem{Base: xp, Disp: 4 * (16*j + col)}
			if chains[k] == nil {
				chains[k] = ZMM()
				VMULPS_BCST(xm, v, chains[k])
			} else {
				VFMADD231PS_BCST(xm, v, chains[k])
			}
		}
		word := func(t int) Mem { return Mem{Base: w, Disp: 32 + 4*64 + 64*(3*j+t)} }
		for t := 0; t < 3; t++ {
			for k := 0; k < 5; k++ {
				v := ZMM()
				VPANDD(word(t), c.fields[k], v)
				VCVTDQ2PS(v, v) // q·2^6k
				product(v, k, 5*t+k)
			}
		}
		// The last value, from the words' top bits: select bits 2-3 of
		// word 1 >> 28 over word 0 >> 30, then bits 4-5 of word 2 >> 26.
		last, hi := ZMM(), ZMM()
		VPSRLD(U8(30), word(0), last)
		VPSRLD(U8(28), word(1), hi)
		VPTERNLOGD(U8(0xD8), c.bits23, hi, last) // last = bits23 ? hi : last
		VPSRLD(U8(26), word(2), hi)
		VPTERNLOGD(U8(0xD8), c.bits45, hi, last)
		VCVTDQ2PS(last, last)
		product(last, 0, 15)
		for k := 1; k < 5; k++ {
			VFMADD231PS(c.back[k], chains[k], chains[0])
		}
		sc := ZMM() // sc_j·2^24, from the top byte of the dword that ends at byte j%4 of word j/4
		VPANDD(Mem{Base: w, Disp: 32 + 64*(j/4) + j%4 - 3}, c.top, sc)
		VCVTDQ2PS(sc, sc)
		if j == 0 {
			VMULPS(sc, chains[0], sb)
			VMULPS_BCST(Mem{Base: sp}, sc, off)
		} else {
			VFMADD231PS(sc, chains[0], sb)
			VFMADD231PS_BCST(Mem{Base: sp, Disp: 4 * j}, sc, off)
		}
	}
	VFMADD231PS(c.m32, off, sb)
	d := ZMM()
	VCVTPH2PS(Mem{Base: w}, d)
	VFMADD231PS(d, sb, acc)
}

// prefetchPart emits the prefetches of part of parts of a block, so that
// a block's prefetches spread over its instructions instead of queueing
// up at its start.
type prefetchPart func(part, parts int)

// spreadPrefetch emits part of parts of the prefetches of a block of
// lines cache lines at w, x16PrefetchDist ahead, so that a block's
// prefetches spread over its instructions.
func spreadPrefetch(w GPVirtual, lines, part, parts int) {
	for l := part * lines / parts; l < (part+1)*lines/parts; l++ {
		streamPrefetch(Mem{Base: w, Disp: x16PrefetchDist + 64*l})
	}
}

// x16PrefetchDist is how far ahead of a block the regrouped kernels
// prefetch. A regrouped matrix is one stream per thread, and with two
// threads decode is bound by memory: prefetches spread over the block,
// 6 KB ahead, streamed best (BenchmarkX16Stream and gozoo bench; the
// distances tried are in docs/performance.md).
const x16PrefetchDist = 6144

// gemvQ2_Kx16 writes gemvQ2_Kx16AVX512: y[16g+r] = x · w_{16g+r} for
// groups groups of 16 Q2_K rows of blocks super-blocks, on the regrouping
// AVX2 reads (putK23: the 16 rows' d and dmin, sub-blocks 2p and 2p+1's
// scale bytes sc|m<<4 at 64+32p+2r, then the file's 64 bytes of 2-bit
// values as 16 words). Column 128n+32j+l is field j (bits 2j, 2j+1) of
// byte 32n+l, in sub-block 8n+2j+l/16. A weight is (d·sc)·q − dmin·m, so a
// row's product is Σ_s d·sc_s·(Σ q·x over sub-block s) − dmin·Σ_s
// m_s·sums[s], with sums x's sums over each 16 values. VPERMPS reads an
// index's low 4 bits, which hold fields 0 and 1 of the byte at an
// unaligned load's low end: one table reads field 0 (i&3), another field
// 1 (i>>2), and after one shift the same two read fields 2 and 3.
func gemvQ2_Kx16() {
	const head = 64 + 8*32
	kquantX16("Q2_K", 16, head+16*64, false, func() x16KBlock {
		tables := [2]VecVirtual{ZMM(), ZMM()}
		VMOVUPS(q2Fields[0], tables[0])
		VMOVUPS(q2Fields[1], tables[1])
		low4 := broadcast(avx512, 0x0f)
		return func(w, xp, sp GPVirtual, acc VecVirtual, pf prefetchPart) {
			// scaleByte is the low (sc) or high (m) nibble of sub-block
			// s's scale byte for the 16 rows, as floats.
			scaleByte := func(s int, min bool) VecVirtual {
				v := ZMM()
				VPMOVZXWD(Mem{Base: w, Disp: 64 + 32*(s/2)}, v)
				if sh := 8*(s%2) + 4*b2i(min); sh > 0 {
					VPSRLD(U8(sh), v, v)
				}
				VPANDD(low4, v, v)
				VCVTDQ2PS(v, v)
				return v
			}
			subtractMins(w, sp, acc, 16, func(s int) VecVirtual { return scaleByte(s, true) })
			d := ZMM()
			VCVTPH2PS(Mem{Base: w}, d)
			k23Sums(xp, pf, func(n, w8, k int) func(j int) VecVirtual {
				raw := ZMM()
				VMOVDQU32(Mem{Base: w, Disp: head + 64*(8*n+w8) + k}, raw)
				return func(j int) VecVirtual {
					if j == 2 {
						VPSRLD(U8(4), raw, raw)
					}
					v := ZMM()
					VPERMPS(tables[j%2], raw, v)
					return v
				}
			}, func(s int, chain VecVirtual) {
				sc := scaleByte(s, false)
				VMULPS(d, sc, sc) // d·sc, as ggml computes it
				VFMADD231PS(sc, chain, acc)
			})
		}
	})
}

// q2Fields are the tables of gemvQ2_Kx16: field 0 (i&3) and field 1
// (i>>2) of a 4-bit index, as float32s.
var q2Fields [2]Mem

func q2FieldsConsts() {
	for t := range q2Fields {
		q2Fields[t] = GLOBL(fmt.Sprintf("q2fields%d", t), RODATA|NOPTR)
		for i := 0; i < 16; i++ {
			DATA(4*i, U32(math.Float32bits(float32(i>>(2*t)&3))))
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gemvQ3_Kx16 writes gemvQ3_Kx16AVX512: y[16g+r] = x · w_{16g+r} for
// groups groups of 16 Q3_K rows of blocks super-blocks, on the regrouping
// AVX2 reads (putK23: the 16 rows' d, sub-blocks 2p and 2p+1's scales less
// 32 as int8 at 32+32p+2r, then the file's hmask as 8 words and its 2-bit
// values as 16). Column 128n+32j+l is field j of byte 32n+l of the values
// and bit 4n+j of hmask's byte l, in sub-block 8n+2j+l/16. A weight is
// (d·sc)·(q+4h−4), so a sub-block's 16 rows' sums of (q+4h)·x less 4 times
// x's sum over it are scaled by d·sc. The high bit is moved next to its
// field and merged in (VPTERNLOGD), and a table reads the 3-bit value
// from the index's low 4 bits: field 0 or 2 (after a shift) at bits 0-1
// with h at bit 2, field 1 or 3 at bits 2-3 with h at bit 1 (bit 0
// ignored), where hmask's bits 1 and 2 already lie, and bits 5 and 6 by
// one shift: five shifts for eight fields.
func gemvQ3_Kx16() {
	const head = 32 + 8*32
	kquantX16("Q3_K", 16, head+24*64, false, func() x16KBlock {
		tables := [2]VecVirtual{ZMM(), ZMM()}
		VMOVUPS(q3Values[0], tables[0])
		VMOVUPS(q3Values[1], tables[1])
		fields := [2]VecVirtual{broadcast(avx512, 0x3), broadcast(avx512, 0xc)}
		m4 := f32(-4)
		return func(w, xp, sp GPVirtual, acc VecVirtual, pf prefetchPart) {
			d := ZMM()
			VCVTPH2PS(Mem{Base: w}, d)
			k23Sums(xp, pf, func(n, w8, k int) func(j int) VecVirtual {
				raw, hm := ZMM(), ZMM()
				VMOVDQU32(Mem{Base: w, Disp: head + 8*64 + 64*(8*n+w8) + k}, raw)
				VMOVDQU32(Mem{Base: w, Disp: head + 64*w8 + k}, hm)
				var shared VecVirtual // hm >> 4, fields 1 and 2 of n = 1
				return func(j int) VecVirtual {
					if j == 2 {
						VPSRLD(U8(4), raw, raw)
					}
					idx := ZMM()
					switch sh := 4*n + j - 2 + j%2; {
					case n == 1 && j == 1:
						shared = ZMM()
						VPSRLD(U8(4), hm, shared)
						VMOVDQA32(shared, idx)
					case n == 1 && j == 2:
						idx = shared
					case sh > 0:
						VPSRLD(U8(sh), hm, idx)
					case sh < 0:
						VPSLLD(U8(-sh), hm, idx)
					default:
						VMOVDQA32(hm, idx)
					}
					VPTERNLOGD(U8(0xD8), fields[j%2], raw, idx) // idx = field bits ? raw : h
					VPERMPS(tables[j%2], idx, idx)
					return idx
				}
			}, func(s int, chain VecVirtual) {
				VFMADD231PS_BCST(Mem{Base: sp, Disp: 4 * s}, m4, chain) // less 4·Σx
				sc := ZMM()
				VPMOVSXWD(Mem{Base: w, Disp: 32 + 32*(s/2)}, sc)
				if s%2 == 0 {
					VPSLLD(U8(24), sc, sc)
				} else {
					VPSLLD(U8(16), sc, sc)
				}
				VPSRAD(U8(24), sc, sc) // the int8 scale, sign-extended
				VCVTDQ2PS(sc, sc)
				VMULPS(d, sc, sc) // d·sc, as ggml computes it
				VFMADD231PS(sc, chain, acc)
			})
		}
	})
}

// k23Sums emits the loop Q2_K's and Q3_K's regrouped kernels share: column
// 128n+32j+l is field j of byte 32n+l of the 2-bit values, in sub-block
// 8n+2j+l/16. For each half of each 128 columns, four chains (one a field)
// sum the 16 rows' values times x over their sub-blocks: values(n, w8, k)
// loads what byte k of word w8 needs and gives field j's values; then
// done(s, chain) takes sub-block s's sums into the rows' accumulator.
func k23Sums(xp GPVirtual, pf prefetchPart, values func(n, w8, k int) func(j int) VecVirtual, done func(s int, chain VecVirtual)) {
	for n := 0; n < 2; n++ {
		for half := 0; half < 2; half++ {
			var chains [4]VecVirtual
			for w8 := 4 * half; w8 < 4*half+4; w8++ {
				pf(8*n+w8, 16)
				for k := 0; k < 4; k++ {
					l := 4*w8 + k
					field := values(n, w8, k)
					for j := 0; j < 4; j++ {
						v := field(j)
						xm := Mem{Base: xp, Disp: 4 * (128*n + 32*j + l)}
						if w8 == 4*half && k == 0 {
							chains[j] = ZMM()
							VMULPS_BCST(xm, v, chains[j])
						} else {
							VFMADD231PS_BCST(xm, v, chains[j])
						}
					}
				}
			}
			for j := 0; j < 4; j++ {
				done(8*n+2*j+half, chains[j])
			}
		}
	}
}

// q3Values are the tables of gemvQ3_Kx16: q+4h of a 4-bit index with the
// field at bits 0-1 and h at bit 2, and with the field at bits 2-3 and h
// at bit 1, as float32s.
var q3Values [2]Mem

func q3ValuesConsts() {
	for t := range q3Values {
		q3Values[t] = GLOBL(fmt.Sprintf("q3values%d", t), RODATA|NOPTR)
		for i := 0; i < 16; i++ {
			v := i&3 + 4*(i>>2&1)
			if t == 1 {
				v = i>>2&3 + 4*(i>>1&1)
			}
			DATA(4*i, U32(math.Float32bits(float32(v))))
		}
	}
}

// fifthBit builds the 5-bit value of a Q5 weight: raw holds its nibble at
// bits 0-3, hm its fifth bit at bit; the bit is moved to bit 4 and merged
// in (VPTERNLOGD), and VPERMI2PS reads the 32-entry table of 0..31.
type fifthBit struct{ low4, lo, hi VecVirtual }

func newFifthBit() fifthBit {
	c := fifthBit{broadcast(avx512, 0x0f), ZMM(), ZMM()}
	VMOVUPS(iota16, c.lo)
	VADDPS(f32(16), c.lo, c.hi)
	return c
}

func (c fifthBit) value(raw, hm VecVirtual, bit int) VecVirtual {
	idx := ZMM()
	switch sh := bit - 4; {
	case sh > 0:
		VPSRLD(U8(sh), hm, idx)
	case sh < 0:
		VPSLLD(U8(-sh), hm, idx)
	default:
		VMOVDQA32(hm, idx)
	}
	VPTERNLOGD(U8(0xD8), c.low4, raw, idx) // idx = low4 ? raw : the bit
	VPERMI2PS(c.hi, c.lo, idx)
	return idx
}

// newFifthBitQ5_0 is fifthBit with Q5_0's table, the values less 16
// (q−16, exact: the dequantizer's integer before its scale).
func newFifthBitQ5_0() fifthBit {
	c := fifthBit{broadcast(avx512, 0x0f), ZMM(), ZMM()}
	VMOVUPS(iota16, c.hi)
	VSUBPS(f32(16), c.hi, c.lo)
	return c
}

// gemvQ5_0x16 writes gemvQ5_0x16AVX512: y[16g+r] = x · w_{16g+r} for
// groups groups of 16 Q5_0 rows of blocks blocks, on Q5_1's regrouping
// without m (the 16 rows' d, their fifth bits as a word, q5Bits, then the
// nibbles as 4 words). A weight is d·(q−16), so a row's product is d·Σ
// (q−16)·x, the table giving q−16 as Q4_0's gives q−8. Its block is
// gemmQ5_0x16x*'s (q50x16Rows), so that a row's result is the same bits
// alone and among others.
func gemvQ5_0x16() {
	name := "gemvQ5_0x16AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[16g+r] = x · w_{16g+r} for groups groups of 16 Q5_0 rows of blocks blocks, regrouped by 16 rows (x16.go).")
	x, w, blocks, groups, y, _ := params("x", "w", "blocks", "groups", "y")
	c := newFifthBitQ5_0()
	xp, b := GP64(), GP64()
	groupLoop(name, w, groups, y, b, 96+4*64, func() {
		MOVQ(x, xp)
		MOVQ(blocks, b)
	}, func(acc VecVirtual, pf prefetchPart) {
		q50x16Rows(w, []x16Row{{x: func(disp int) Mem { return Mem{Base: xp, Disp: disp} }, acc: acc}}, c, pf)
	}, func() { ADDQ(U8(128), xp) }, false)
}

// gemmQ50x16 writes gemmQ5_0x16x{R}AVX512(x, ldx, w, blocks, groups, y,
// ldy): gemvQ5_0x16AVX512 for R rows of x at once (gemmX16Rows).
func gemmQ50x16(R int) {
	gemmX16Rows("Q5_0", R, 32, 0, 96+4*64, false, func() x16RowsBlock {
		c := newFifthBitQ5_0()
		return func(w GPVirtual, rows []x16Row, pf prefetchPart) { q50x16Rows(w, rows, c, pf) }
	})
}

// q50x16Rows emits one block of gemvQ5_0x16 for each of rows: each
// column's 16 values built once for all, each row's four chains summed
// as chainSum's, then scaled by d.
func q50x16Rows(w GPVirtual, rows []x16Row, c fifthBit, pf prefetchPart) {
	var hm [4]VecVirtual
	for k := range hm {
		hm[k] = ZMM()
		VMOVDQU32(Mem{Base: w, Disp: 32 + k}, hm[k])
	}
	chains := make([]chainSum, len(rows))
	for i := 0; i < 4; i++ {
		pf(i, 4)
		for k := 0; k < 4; k++ {
			raw := ZMM()
			VMOVDQU32(Mem{Base: w, Disp: 96 + 64*i + k}, raw)
			lo := c.value(raw, hm[k], i) // column 4i+k
			for r, row := range rows {
				chains[r].add(row.x(4*(4*i+k)), lo)
			}
			VPSRLD(U8(4), raw, raw)
			hi := c.value(raw, hm[k], 4+i) // column 16+4i+k
			for r, row := range rows {
				chains[r].add(row.x(4*(16+4*i+k)), hi)
			}
		}
	}
	d := ZMM()
	VCVTPH2PS(Mem{Base: w}, d)
	for r, row := range rows {
		VFMADD231PS(d, chains[r].sum(), row.acc)
	}
}

// gemvQ5_1x16 writes gemvQ5_1x16AVX512: y[16g+r] = x · w_{16g+r} for
// groups groups of 16 Q5_1 rows of blocks blocks, on the regrouping AVX2
// reads (the 16 rows' d and m, their fifth bits as a word, q5Bits: value
// 4j+k's at bit j of byte k, then the nibbles as 4 words, as Q4_0's). A
// weight is d·q + m, so a row's product is d·Σ q·x + m·Σx, with sums x's
// sums over each block.
func gemvQ5_1x16() {
	name := "gemvQ5_1x16AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, sums *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[16g+r] = x · w_{16g+r} for groups groups of 16 Q5_1 rows of blocks blocks, regrouped by 16 rows (x16.go), with sums x's sums over each block.")
	x, sums, w, blocks, groups, y := params("x", "sums", "w", "blocks", "groups", "y")
	const head = 128
	c := newFifthBit()
	xp, sp, b := GP64(), GP64(), GP64()
	groupLoop(name, w, groups, y, b, head+4*64, func() {
		MOVQ(x, xp)
		MOVQ(sums, sp)
		MOVQ(blocks, b)
	}, func(acc VecVirtual, pf prefetchPart) {
		var hm [4]VecVirtual
		for k := range hm {
			hm[k] = ZMM()
			VMOVDQU32(Mem{Base: w, Disp: 64 + k}, hm[k])
		}
		var s chainSum
		for i := 0; i < 4; i++ {
			pf(i, 4)
			for k := 0; k < 4; k++ {
				raw := ZMM()
				VMOVDQU32(Mem{Base: w, Disp: head + 64*i + k}, raw)
				s.add(Mem{Base: xp, Disp: 4 * (4*i + k)}, c.value(raw, hm[k], i))
				VPSRLD(U8(4), raw, raw)
				s.add(Mem{Base: xp, Disp: 4 * (16 + 4*i + k)}, c.value(raw, hm[k], 4+i))
			}
		}
		sum := s.sum()
		d, m := ZMM(), ZMM()
		VCVTPH2PS(Mem{Base: w}, d)
		VFMADD231PS(d, sum, acc)
		VCVTPH2PS(Mem{Base: w, Disp: 32}, m)
		VFMADD231PS_BCST(Mem{Base: sp}, m, acc)
	}, func() {
		ADDQ(U8(128), xp)
		ADDQ(U8(4), sp)
	}, false)
}

// gemvQ5_Kx16 writes gemvQ5_Kx16AVX512: y[16g+r] = x · w_{16g+r} for
// groups groups of 16 Q5_K rows of blocks super-blocks, on the regrouping
// AVX2 reads (the 16 rows' d and dmin, the file's 12 bytes of 6-bit
// scales and mins as 3 words, then qh as 8 words and qs as 32). Column
// 64j+32h+l is nibble h of qs byte 32j+l with bit 2j+h of qh byte l, in
// sub-block 2j+h. A weight is (d·sc)·q − dmin·m, taken as Q4_K's are, with
// sums x's sums over each 32 values; the scales are unpacked as ggml's
// get_scale_min_k4 does.
func gemvQ5_Kx16() {
	const head = 64 + 3*64
	kquantX16("Q5_K", 32, head+40*64, false, func() x16KBlock {
		c := newFifthBit()
		m30, m3f := broadcast(avx512, 0x30), broadcast(avx512, 0x3f)
		return func(w, xp, sp GPVirtual, acc VecVirtual, pf prefetchPart) {
			// scaleByte is ggml's scales[t] of the 16 rows in the low byte.
			scaleByte := func(t int) VecVirtual {
				v := ZMM()
				VMOVDQU32(Mem{Base: w, Disp: 64 + 64*(t/4) + t%4}, v)
				return v
			}
			// scaleMin is get_scale_min_k4's scale (or min) of sub-block s
			// for the 16 rows, as floats.
			scaleMin := func(s int, min bool) VecVirtual {
				var v VecVirtual
				if s < 4 {
					v = scaleByte(s + 4*b2i(min))
				} else {
					v = scaleByte(s + 4)
					high := scaleByte(s - 4*b2i(!min))
					if min {
						VPSRLD(U8(4), v, v)
					}
					VPSRLD(U8(2), high, high)
					VPTERNLOGD(U8(0xD8), m30, high, v) // bits 4-5 from the high part
				}
				VPANDD(m3f, v, v)
				VCVTDQ2PS(v, v)
				return v
			}
			subtractMins(w, sp, acc, 8, func(s int) VecVirtual { return scaleMin(s, true) })
			d := ZMM()
			VCVTPH2PS(Mem{Base: w}, d)
			for j := 0; j < 4; j++ {
				pf(j, 4)
				// Two chains for each of sub-blocks 2j and 2j+1.
				var lo, hi [2]VecVirtual
				for l := 0; l < 32; l++ {
					raw, hm := ZMM(), ZMM()
					VMOVDQU32(Mem{Base: w, Disp: head + 8*64 + 64*(8*j+l/4) + l%4}, raw)
					VMOVDQU32(Mem{Base: w, Disp: head + 64*(l/4) + l%4}, hm)
					for h, chain := range []*VecVirtual{&lo[l%2], &hi[l%2]} {
						if h == 1 {
							VPSRLD(U8(4), raw, raw)
						}
						v := c.value(raw, hm, 2*j+h)
						xm := Mem{Base: xp, Disp: 4 * (64*j + 32*h + l)}
						if l < 2 {
							*chain = ZMM()
							VMULPS_BCST(xm, v, *chain)
						} else {
							VFMADD231PS_BCST(xm, v, *chain)
						}
					}
				}
				for h, chains := range [][2]VecVirtual{lo, hi} {
					VADDPS(chains[1], chains[0], chains[0])
					sc := scaleMin(2*j+h, false)
					VMULPS(d, sc, sc) // d·sc, as ggml computes it
					VFMADD231PS(sc, chains[0], acc)
				}
			}
		}
	})
}

// x16PanelQ80 writes x16PanelQ8_0AVX512, x16PanelQ8_0AVX2's widening on
// 16 lanes: a group's block is the 16 rows' d, then 8 words of int8, and
// the dword that ends at a row's byte k of a word, shifted right
// arithmetically by 24, is its value sign-extended (x16Bytes' load), which
// converts and scales by d as ggml's dequantizer does (exact: 19 bits).
func x16PanelQ80() {
	name := "x16PanelQ8_0AVX512"
	TEXT(name, NOSPLIT, "func(w *byte, blocks int, dst *float32)")
	Pragma("noescape")
	Doc(name + " widens a regrouped group of 16 Q8_0 rows of blocks blocks into a panel at dst (value i of the rows at dst[16i:]).")
	wp, b, dp := GP64(), GP64(), GP64()
	Load(Param("w"), wp)
	Load(Param("blocks"), b)
	Load(Param("dst"), dp)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_end"))
	d := ZMM()
	VCVTPH2PS(Mem{Base: wp}, d)
	for c := 0; c < 32; c++ {
		v := ZMM()
		VPSRAD(U8(24), Mem{Base: wp, Disp: 32 + 64*(c/4) + c%4 - 3}, v)
		VCVTDQ2PS(v, v)
		VMULPS(d, v, v)
		VMOVUPS(v, Mem{Base: dp, Disp: 64 * c})
	}
	ADDQ(U32(32+8*64), wp)
	ADDQ(U32(4*16*32), dp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// gemmQ80x16 writes gemmQ8_0x16x{R}AVX512(x, ldx, w, blocks, groups, y,
// ldy): gemvQ8_0x16AVX512 for R rows of x at once (gemmX16Rows).
func gemmQ80x16(R int) {
	gemmX16Rows("Q8_0", R, 32, 0, 32+512, true, func() x16RowsBlock {
		top := broadcast(avx512, 0xff000000)
		return func(w GPVirtual, rows []x16Row, pf prefetchPart) { q80x16Rows(w, rows, top, pf) }
	})
}

// q80x16Rows emits one block of gemvQ8_0x16 (x16Bytes' widening, chainSum's
// four chains) for each of rows, each column widened once for all.
func q80x16Rows(w GPVirtual, rows []x16Row, top VecVirtual, pf prefetchPart) {
	chains := make([][4]VecVirtual, len(rows))
	for c := 0; c < 32; c++ {
		pf(c, 32)
		v := ZMM()
		VPANDD(Mem{Base: w, Disp: 32 + 64*(c/4) + c%4 - 3}, top, v)
		VCVTDQ2PS(v, v)
		for r, row := range rows {
			k := c % 4
			if c < 4 {
				chains[r][k] = ZMM()
				VMULPS_BCST(row.x(4*c), v, chains[r][k])
			} else {
				VFMADD231PS_BCST(row.x(4*c), v, chains[r][k])
			}
		}
	}
	d := ZMM()
	VCVTPH2PS(Mem{Base: w}, d)
	for r, row := range rows {
		ch := chains[r]
		VADDPS(ch[1], ch[0], ch[0])
		VADDPS(ch[3], ch[2], ch[2])
		VADDPS(ch[2], ch[0], ch[0])
		VFMADD231PS(d, ch[0], row.acc)
	}
}

// gemmQ4Kx16 writes gemmQ4_Kx16x{R}AVX512(x, ldx, sums, lds, w, blocks,
// groups, y, ldy): gemvQ4_Kx16AVX512 for R rows of x at once, with their
// sums over each 32 values (gemmX16Rows).
func gemmQ4Kx16(R int) {
	gemmX16Rows("Q4_K", R, 256, 32, 64+4*64+32*64, false, func() x16RowsBlock {
		table, low := ZMM(), broadcast(avx512, 0xff)
		VMOVUPS(iota16, table)
		return func(w GPVirtual, rows []x16Row, pf prefetchPart) { q4kx16Rows(w, rows, table, low, pf) }
	})
}

// x16RowsBlock emits one block of a regrouped kernel for each of rows.
type x16RowsBlock func(w GPVirtual, rows []x16Row, pf prefetchPart)

// gemmX16Rows writes gemm{q}x16x{R}AVX512(x, ldx, [sums, lds,] w, blocks,
// groups, y, ldy), the frame of the regrouped kernels for R (up to 4) rows
// of x at once: ldx floats apart, with (for sub > 0) their sums over each
// sub values lds floats apart, against groups groups of 16 rows of blocks
// blocks of n values and bsize bytes; setup emits the constants and gives
// the block (the one-row kernel's, row by row: each row's result its bits
// alone), whose sums are times 2^24 with unscale.
func gemmX16Rows(q string, R, n, sub, bsize int, unscale bool, setup func() x16RowsBlock) {
	name := fmt.Sprintf("gemm%sx16x%dAVX512", q, R)
	sig, withSums := "func(x *float32, ldx int, w *byte, blocks int, groups int, y *float32, ldy int)", ""
	if sub > 0 {
		sig = "func(x *float32, ldx int, sums *float32, lds int, w *byte, blocks int, groups int, y *float32, ldy int)"
		withSums = fmt.Sprintf(", with their sums over each %d values lds floats apart", sub)
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[t·ldy + 16g+r] = x_t · w_{16g+r} for %d rows of x (ldx floats apart%s) and groups groups of 16 %s rows of blocks blocks, regrouped by 16 rows (x16.go).", name, R, withSums, q))
	x, w, y, groups := GP64(), GP64(), GP64(), GP64()
	Load(Param("x"), x)
	Load(Param("w"), w)
	Load(Param("y"), y)
	Load(Param("groups"), groups)
	// Row r of x (and of the sums) is r·stride bytes on; stride3 is the
	// multiple a scale cannot give.
	strides := func(param string) (s, s3 GPVirtual) {
		s, s3 = GP64(), GP64()
		Load(Param(param), s)
		SHLQ(U8(2), s)
		LEAQ(Mem{Base: s, Index: s, Scale: 2}, s3)
		return s, s3
	}
	ldb, ldb3 := strides("ldx")
	var sums, lsb, lsb3 GPVirtual
	if sub > 0 {
		sums = GP64()
		Load(Param("sums"), sums)
		lsb, lsb3 = strides("lds")
	}
	block := setup()
	lines := (bsize + 63) / 64
	xp, sp, b := GP64(), GP64(), GP64()
	Label(name + "_group")
	TESTQ(groups, groups)
	JZ(LabelRef(name + "_end"))
	rows := make([]x16Row, R)
	for r := range rows {
		rows[r] = x16Row{
			x:   func(disp int) Mem { return rowAt(xp, ldb, ldb3, r, disp) },
			s:   func(disp int) Mem { return rowAt(sp, lsb, lsb3, r, disp) },
			acc: ZMM(),
		}
		VPXORD(rows[r].acc, rows[r].acc, rows[r].acc)
	}
	MOVQ(x, xp)
	if sub > 0 {
		MOVQ(sums, sp)
	}
	Load(Param("blocks"), b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_groupdone"))
	block(w, rows, func(part, parts int) { spreadPrefetch(w, lines, part, parts) })
	ADDQ(U32(bsize), w)
	ADDQ(U32(4*n), xp)
	if sub > 0 {
		ADDQ(U8(4*n/sub), sp)
	}
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_groupdone")
	ldy, yp := GP64(), GP64()
	Load(Param("ldy"), ldy)
	SHLQ(U8(2), ldy)
	MOVQ(y, yp)
	for _, row := range rows {
		if unscale {
			VMULPS(f32(1.0/(1<<24)), row.acc, row.acc)
		}
		VMOVUPS(row.acc, Mem{Base: yp})
		ADDQ(ldy, yp)
	}
	ADDQ(U8(64), y)
	DECQ(groups)
	JMP(LabelRef(name + "_group"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// rowAt is row r (0 to 3) of an array at base whose rows lie ld bytes
// apart (ld3 = 3·ld, the multiple a scale cannot give), disp bytes in:
// the row addressing of the kernels that take several rows at once.
func rowAt(base, ld, ld3 GPVirtual, r, disp int) Mem {
	switch r {
	case 0:
		return Mem{Base: base, Disp: disp}
	case 1:
		return Mem{Base: base, Index: ld, Scale: 1, Disp: disp}
	case 2:
		return Mem{Base: base, Index: ld, Scale: 2, Disp: disp}
	}
	return Mem{Base: base, Index: ld3, Scale: 1, Disp: disp}
}
