package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// BF12 rows (simd/bf12.go): a 16-byte table of high bytes, then chunks of
// 32 weights, each 16 bytes of 4-bit codes (byte j: weight j's code in its
// low nibble, weight 16+j's in its high nibble) and the 32 low bytes. A
// weight's float32 bits are table[code]<<24 | low<<16: its bfloat16 bits
// widened, so nothing is rounded.

var bf12Lo, bf12Hi Mem

// bf12Consts writes the byte indexes that carry a chunk's low bytes 0-15
// (bf12lo) and 16-31 (bf12hi) to byte 2 of each dword; every byte of
// dword j holds the index, and the merge mask keeps byte 2 only.
func bf12Consts() {
	bf12Lo = GLOBL("bf12lo", RODATA|NOPTR)
	for i := 0; i < 64; i++ {
		DATA(i, U8(i/4))
	}
	bf12Hi = GLOBL("bf12hi", RODATA|NOPTR)
	for i := 0; i < 64; i++ {
		DATA(i, U8(16+i/4))
	}
}

// bf12Chunk widens the 32 weights of the chunk at wp into v0 (weights
// 0-15) and v1 (16-31): the codes look the high bytes up in tab
// (VPERMD reads a dword's low 4 bits), and a byte permute merges the low
// bytes in under the mask.
func bf12Chunk(wp GPVirtual, tab, lo, hi VecVirtual, mask OpmaskVirtual) (v0, v1 VecVirtual) {
	idx := ZMM()
	VPMOVZXBD(Mem{Base: wp}, idx)
	lows := YMM()
	VMOVDQU(Mem{Base: wp, Disp: 16}, lows)
	v0, v1 = ZMM(), ZMM()
	VPERMD(tab, idx, v0)
	VPERMB(lows.AsZ(), lo, mask, v0)
	VPSRLD(U8(4), idx, idx)
	VPERMD(tab, idx, v1)
	VPERMB(lows.AsZ(), hi, mask, v1)
	return v0, v1
}

// bf12Setup loads the byte indexes and the merge mask (byte 2 of every
// dword).
func bf12Setup() (lo, hi VecVirtual, mask OpmaskVirtual) {
	lo, hi = ZMM(), ZMM()
	VMOVDQU64(bf12Lo, lo)
	VMOVDQU64(bf12Hi, hi)
	mask = K()
	m := GP64()
	MOVQ(U64(0x4444444444444444), m)
	KMOVQ(m, mask)
	return lo, hi, mask
}

// bf12Table loads a row's table of high bytes as dwords, shifted into
// place, and steps wp past it.
func bf12Table(wp GPVirtual) VecVirtual {
	tab := ZMM()
	VPMOVZXBD(Mem{Base: wp}, tab)
	VPSLLD(U8(24), tab, tab)
	ADDQ(U8(16), wp)
	return tab
}

// bf12PrefetchDist is how far ahead gemvBF12AVX512 prefetches, in bytes: a
// line per 48-byte chunk, past rows' ends into the next rows, as the float
// kernels do (floatPrefetchDist). Interleaved gozoo bench runs (128-token
// prompt, 64 tokens, medians of 6): SmolLM2-135M BF16 decode 158.7 ->
// 180.7 tok/s, Qwen3-0.6B BF16 43.2 -> 47.5; 2 KB ahead gave 172.7 where
// 4 KB gave 180.2, and 8 KB did worse than 4 KB.
const bf12PrefetchDist = 4096

// gemvBF12 writes gemvBF12AVX512: y[r] = x · w_r for rows BF12 rows of
// chunks chunks (stride ldw bytes), the products of the bfloat16 weights
// (exceptions aside, which the caller adds).
func gemvBF12() {
	name := "gemvBF12AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, ldw int, chunks int, rows int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for rows BF12 rows of chunks chunks of 32 (stride ldw bytes).")
	x, w, ldw, chunks, rows, y := params("x", "w", "ldw", "chunks", "rows", "y")
	lo, hi, mask := bf12Setup()
	xp, wp, b := GP64(), GP64(), GP64()
	var tab VecVirtual
	acc := []VecVirtual{ZMM(), ZMM()}
	rowLoop(name, avx512, rows, w, ldw, y, b, acc, func() {
		MOVQ(x, xp)
		MOVQ(w, wp)
		MOVQ(chunks, b)
		tab = bf12Table(wp)
	}, func() {
		v0, v1 := bf12Chunk(wp, tab, lo, hi, mask)
		PREFETCHT0(Mem{Base: wp, Disp: bf12PrefetchDist})
		VFMADD231PS(Mem{Base: xp}, v0, acc[0])
		VFMADD231PS(Mem{Base: xp, Disp: 64}, v1, acc[1])
		ADDQ(U8(48), wp)
		ADDQ(U8(128), xp)
	})
}

// unpackBF12 writes unpackBF12AVX512: the float32 values of rows BF12
// rows (stride ldw bytes) into dst, row after row.
func unpackBF12() {
	name := "unpackBF12AVX512"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, chunks int, rows int, dst *float32)")
	Pragma("noescape")
	Doc(name + " widens rows BF12 rows of chunks chunks of 32 (stride ldw bytes) into dst.")
	w, ldw, chunks, rows, dst, _ := params("w", "ldw", "chunks", "rows", "dst")
	lo, hi, mask := bf12Setup()
	wp, b := GP64(), GP64()
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	MOVQ(w, wp)
	MOVQ(chunks, b)
	tab := bf12Table(wp)
	Label(name + "_chunk")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	v0, v1 := bf12Chunk(wp, tab, lo, hi, mask)
	VMOVUPS(v0, Mem{Base: dst})
	VMOVUPS(v1, Mem{Base: dst, Disp: 64})
	ADDQ(U8(48), wp)
	ADDQ(U8(128), dst)
	DECQ(b)
	JMP(LabelRef(name + "_chunk"))
	Label(name + "_rowdone")
	endRows(name, w, ldw, rows)
}
