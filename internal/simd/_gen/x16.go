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
// the 16 rows' values (Q4_0: bytes whose nibbles are columns j and j+16;
// Q8_0: signed bytes) takes 64 bytes, row r's at 4r). Each block's products
// go to four chains of multiply-adds, which the block sums and scales by
// its 16 d into the rows' accumulator.
func gemvX16(q string) {
	name := "gemv" + q + "x16AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[16g+r] = x · w_{16g+r} for groups groups of 16 " + q + " rows of blocks blocks, regrouped by 16 rows (x16.go).")
	x, w, blocks, groups, y, _ := params("x", "w", "blocks", "groups", "y")
	bsize := map[string]int{"Q4_0": 32 + 256, "Q8_0": 32 + 512}[q]
	var table VecVirtual
	if q == "Q4_0" {
		// q-8 for every nibble q, exact (as gemvQ4_0Table's offsets).
		table = ZMM()
		VMOVUPS(iota16, table)
		VSUBPS(f32(8), table, table)
	}
	xp, b := GP64(), GP64()
	groupLoop(name, w, groups, y, b, bsize, func() {
		MOVQ(x, xp)
		MOVQ(blocks, b)
	}, func(acc VecVirtual, pf prefetchPart) { gemvX16Block(q, w, xp, table, acc, pf) }, func() { ADDQ(U8(128), xp) }, q == "Q8_0")
}

// gemvX16Block emits one block of gemvX16 into acc.
func gemvX16Block(q string, w, xp GPVirtual, table, acc VecVirtual, pf prefetchPart) {
	var chains [4]VecVirtual
	n := 0
	// product adds v·x[col] to the next chain (the first four start them).
	product := func(v VecVirtual, col int) {
		c := n % 4
		xm := Mem{Base: xp, Disp: 4 * col}
		if n < 4 {
			chains[c] = ZMM()
			VMULPS_BCST(xm, v, chains[c])
		} else {
			VFMADD231PS_BCST(xm, v, chains[c])
		}
		n++
	}
	if q == "Q4_0" {
		// Chunk k of 64 bytes holds the 16 rows' bytes 4k..4k+3 (row r at
		// 4r): the 64 bytes from chunk+i are then 16 dwords whose low
		// nibbles are the rows' column 4k+i, with no instruction to
		// widen them (VPERMPS reads an index's low 4 bits only), and
		// after a shift their column 4k+i+16. Loads at chunk+1..3 run 3
		// bytes into the next chunk (the matrix has padding after it).
		for k := 0; k < 4; k++ {
			pf(k, 4)
			for i := 0; i < 4; i++ {
				idx := ZMM()
				VMOVDQU32(Mem{Base: w, Disp: 32 + 64*k + i}, idx)
				lo := ZMM()
				VPERMPS(table, idx, lo) // q-8 of column 4k+i
				product(lo, 4*k+i)
				VPSRLD(U8(4), idx, idx)
				hi := ZMM()
				VPERMPS(table, idx, hi) // column 4k+i+16
				product(hi, 4*k+i+16)
			}
		}
	} else {
		// The same layout of 4-byte words: the dword that ends at row r's
		// byte c holds it in its top byte, where a mask keeps it alone
		// and the conversion reads it as a signed q·2^24 (exact); the
		// group's sums are scaled back by 2^-24 at the end (exact).
		top := broadcast(avx512, 0xff000000)
		for c := 0; c < 32; c++ {
			pf(c, 32)
			v := ZMM()
			VPANDD(Mem{Base: w, Disp: 32 + 64*(c/4) + c%4 - 3}, top, v)
			VCVTDQ2PS(v, v)
			product(v, c)
		}
	}
	VADDPS(chains[1], chains[0], chains[0])
	VADDPS(chains[3], chains[2], chains[2])
	VADDPS(chains[2], chains[0], chains[0])
	d := ZMM()
	VCVTPH2PS(Mem{Base: w}, d)
	VFMADD231PS(d, chains[0], acc)
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
	// byteAt is byte k of the 16 rows' word i as floats.
	byteAt := func(i, k int) VecVirtual {
		v := ZMM()
		VPANDD(Mem{Base: w, Disp: 64 + 64*i + k}, low, v)
		VCVTDQ2PS(v, v)
		return v
	}
	// The mins: dmin·Σ_j m_j·sums[j], subtracted from the rows' sums.
	mins := ZMM()
	for j := 0; j < 8; j++ {
		m := byteAt(2+j/4, j%4)
		if j == 0 {
			VMULPS_BCST(Mem{Base: sp}, m, mins)
		} else {
			VFMADD231PS_BCST(Mem{Base: sp, Disp: 4 * j}, m, mins)
		}
	}
	dmin := ZMM()
	VCVTPH2PS(Mem{Base: w, Disp: 32}, dmin)
	VFNMADD231PS(dmin, mins, acc)
	d := ZMM()
	VCVTPH2PS(Mem{Base: w}, d)
	for ch := 0; ch < 4; ch++ {
		pf(ch, 4)
		// Two chains for each of the two sub-blocks, 2ch (low nibbles)
		// and 2ch+1 (high), taking the 16 rows' products in turn.
		var a, hb [2]VecVirtual
		for l := 0; l < 32; l++ {
			word, k := 8*ch+l/4, l%4
			idx := ZMM()
			VMOVDQU32(Mem{Base: w, Disp: 320 + 64*word + k}, idx)
			lo := ZMM()
			VPERMPS(table, idx, lo) // q of column 64ch+l
			VPSRLD(U8(4), idx, idx)
			hi := ZMM()
			VPERMPS(table, idx, hi) // q of column 64ch+32+l
			for _, c := range []struct {
				v     VecVirtual
				chain *VecVirtual
				col   int
			}{{lo, &a[l%2], 64*ch + l}, {hi, &hb[l%2], 64*ch + 32 + l}} {
				xm := Mem{Base: xp, Disp: 4 * c.col}
				if l < 2 {
					*c.chain = ZMM()
					VMULPS_BCST(xm, c.v, *c.chain)
				} else {
					VFMADD231PS_BCST(xm, c.v, *c.chain)
				}
			}
		}
		for s, chains := range [][2]VecVirtual{a, hb} {
			j := 2*ch + s
			VADDPS(chains[1], chains[0], chains[0])
			sc := byteAt(j/4, j%4)
			VMULPS(d, sc, sc) // d·sc_j for 16 rows, as ggml computes it
			VFMADD231PS(sc, chains[0], acc)
		}
	}
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
		PREFETCHT0(Mem{Base: w, Disp: x16PrefetchDist + 64*l})
	}
}

// x16PrefetchDist is how far ahead of a block the regrouped kernels
// prefetch. A regrouped matrix is one stream per thread, and with two
// threads decode is bound by memory: prefetches spread over the block,
// 6 KB ahead, streamed best (BenchmarkX16Stream and gozoo bench; the
// distances tried are in docs/performance.md).
const x16PrefetchDist = 6144
