package main

import (
	"math"

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

// qOffsets is the float32s -8..7: q-8 for every nibble q, exact.
var qOffsets Mem

func x16Consts() {
	qOffsets = GLOBL("qoffsets", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(math.Float32bits(float32(i-8))))
	}
}

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
		table = ZMM()
		VMOVUPS(qOffsets, table)
	}
	xp, b := GP64(), GP64()
	Label(name + "_group")
	TESTQ(groups, groups)
	JZ(LabelRef(name + "_end"))
	acc := ZMM()
	VPXORD(acc, acc, acc)
	MOVQ(x, xp)
	MOVQ(blocks, b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_groupdone"))
	for off := 0; off < bsize; off += 64 {
		PREFETCHT0(Mem{Base: w, Disp: prefetchDist + off})
	}
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
	ADDQ(U32(bsize), w)
	ADDQ(U8(128), xp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_groupdone")
	if q == "Q8_0" {
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
