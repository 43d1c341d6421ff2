package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Exact decode of 4-bit weights by table: a nibble q takes one of 16
// values in a block (Q4_0: d·(q-8); Q4_K: (d·sc)·q - dmin·m), so the block
// computes those 16 float32s once, exactly as ggml's dequantize_row_*
// does, and VPERMPS looks every nibble up in them: VPERMPS reads only an
// index's low 4 bits, which is the low nibble of a zero-extended byte
// as it stands, and the high nibble after one shift. That replaces the
// mask, offset, conversion and scale of each vector of weights by one
// permute, and each 16 bytes of nibbles are widened once for both halves.

// iota16 is the float32s 0..15.
var iota16 Mem

func tableConsts() {
	iota16 = GLOBL("iota16", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(math.Float32bits(float32(i))))
	}
}

// gemvQ4_0Table writes gemvQ4_0AVX512: y[r] = x · w_r for rows Q4_0 rows
// of blocks blocks (stride ldw bytes), the weights d·(q-8) in float32.
func gemvQ4_0Table() {
	name := "gemvQ4_0AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, ldw int, blocks int, rows int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for rows Q4_0 rows of blocks blocks (stride ldw bytes).")
	x, w, ldw, blocks, rows, y := params("x", "w", "ldw", "blocks", "rows", "y")
	// offsets = iota - 8: q - 8 for every nibble value, exact.
	offsets := ZMM()
	VMOVUPS(iota16, offsets)
	VSUBPS(f32(8), offsets, offsets)
	acc := []VecVirtual{ZMM(), ZMM()}
	xp, wp, b := GP64(), GP64(), GP64()
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	VXORPS(acc[0], acc[0], acc[0])
	VXORPS(acc[1], acc[1], acc[1])
	MOVQ(x, xp)
	MOVQ(w, wp)
	MOVQ(blocks, b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	hy, d := YMM(), ZMM()
	VPBROADCASTW(Mem{Base: wp}, hy)
	VCVTPH2PS(hy, d)
	table := ZMM()
	VMULPS(d, offsets, table) // d·(q-8), exact: a half times a 4-bit integer
	idx := ZMM()
	VPMOVZXBD(Mem{Base: wp, Disp: 2}, idx)
	lo := ZMM()
	VPERMPS(table, idx, lo) // low nibbles: values 0-15
	VFMADD231PS(Mem{Base: xp}, lo, acc[0])
	VPSRLD(U8(4), idx, idx)
	hi := ZMM()
	VPERMPS(table, idx, hi) // high nibbles: values 16-31
	VFMADD231PS(Mem{Base: xp, Disp: 64}, hi, acc[1])
	ADDQ(U8(18), wp)
	ADDQ(U8(128), xp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_rowdone")
	VADDPS(acc[1], acc[0], acc[0])
	reduce(avx512, acc[0], Mem{Base: y})
	ADDQ(U8(4), y)
	ADDQ(ldw, w)
	DECQ(rows)
	JMP(LabelRef(name + "_row"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}
