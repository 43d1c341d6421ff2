package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Exact decode over 16 weight rows at once (x16.go in the package): the
// rows of a Q4_0 or Q8_0 matrix are regrouped by 16, so that one vector
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
	}, func(acc VecVirtual) { gemvX16Block(q, w, xp, table, acc) }, func() { ADDQ(U8(128), xp) }, q == "Q8_0")
}

// gemvX16Block emits one block of gemvX16 into acc.
func gemvX16Block(q string, w, xp GPVirtual, table, acc VecVirtual) {
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
// pointers); block runs, w steps bsize bytes and advance steps the rest,
// while b counts down; then acc (times 2^-24 with unscale) goes to 16
// values of y.
func groupLoop(name string, w, groups, y, b GPVirtual, bsize int, start func(), block func(acc VecVirtual), advance func(), unscale bool) {
	Label(name + "_group")
	TESTQ(groups, groups)
	JZ(LabelRef(name + "_end"))
	acc := ZMM()
	VPXORD(acc, acc, acc)
	start()
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_groupdone"))
	for off := 0; off < bsize; off += 64 {
		PREFETCHT0(Mem{Base: w, Disp: prefetchDist + off})
	}
	block(acc)
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
	name := "gemvQ4_Kx16AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, sums *float32, w *byte, blocks int, groups int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[16g+r] = x · w_{16g+r} for groups groups of 16 Q4_K rows of blocks super-blocks, regrouped by 16 rows (x16.go), with sums x's sums over each 32 values.")
	x, sums, w, blocks, groups, y := params("x", "sums", "w", "blocks", "groups", "y")
	const bsize = 64 + 4*64 + 32*64
	table, low := ZMM(), broadcast(avx512, 0xff)
	VMOVUPS(iota16, table)
	xp, sp, b := GP64(), GP64(), GP64()
	groupLoop(name, w, groups, y, b, bsize, func() {
		MOVQ(x, xp)
		MOVQ(sums, sp)
		MOVQ(blocks, b)
	}, func(acc VecVirtual) { q4kx16Block(w, xp, sp, table, low, acc) }, func() {
		ADDQ(U32(4*256), xp)
		ADDQ(U8(32), sp)
	}, false)
}

// q4kx16Block emits one super-block of gemvQ4_Kx16 into acc.
func q4kx16Block(w, xp, sp GPVirtual, table, low, acc VecVirtual) {
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
