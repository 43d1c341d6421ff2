package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// fastPack writes fastPack{q}AVX512, the repacking of 16 weight rows for
// fast mode's prefill (packedRows.pack in fastgemm.go): per block, word
// 16j + c is row c's 4-byte word j of values (Q4_0: its low nibbles for
// j < 4, its high ones for j >= 4; Q8_0: each byte + 128), and dw has
// the 16 rows' scales as float32. The Go loop spent about 25 cycles a
// row and block on its scattered stores, a sixth of a 128-token prefill
// of Qwen3-0.6B Q4_0; here one gather reads a word of the 16 rows, and
// a vector store writes it.
func fastPack(q string) {
	name := "fastPack" + q + "AVX512"
	TEXT(name, NOSPLIT, "func(w *byte, rb int, blocks int, dst *uint32, dw *float32)")
	Pragma("noescape")
	Doc(name + " repacks 16 " + q + " rows of blocks blocks (stride rb bytes) into dst and dw for the fast prefill kernels.")
	w, rb, blocks, dst, dw, _ := params("w", "rb", "blocks", "dst", "dw")
	bsize, words := map[string]int{"Q4_0": 18, "Q8_0": 34}[q], map[string]int{"Q4_0": 4, "Q8_0": 8}[q]
	// offs[c] = c·rb, the gathers' indexes.
	offs, step := ZMM(), ZMM()
	VCVTTPS2DQ(iota16, offs)
	VPBROADCASTD(rb.As32(), step)
	VPMULLD(step, offs, offs)
	var mask VecVirtual
	if q == "Q4_0" {
		mask = broadcast(avx512, 0x0f0f0f0f)
	} else {
		mask = broadcast(avx512, 0x80808080)
	}
	all := GP32()
	MOVL(U32(0xffff), all)
	// gather reads the 4 bytes at disp in the 16 rows' current block (a
	// gather clears its mask as it goes).
	gather := func(disp int) VecVirtual {
		k, v := K(), ZMM()
		KMOVW(all, k)
		VPXORD(v, v, v)
		VPGATHERDD(Mem{Base: w, Index: offs, Scale: 1, Disp: disp}, k, v)
		return v
	}
	Label(name + "_block")
	TESTQ(blocks, blocks)
	JZ(LabelRef(name + "_end"))
	for j := 0; j < words; j++ {
		v := gather(2 + 4*j)
		if q == "Q4_0" {
			lo := ZMM()
			VPANDD(mask, v, lo)
			VMOVDQU32(lo, Mem{Base: dst, Disp: 64 * j})
			VPSRLD(U8(4), v, v)
			VPANDD(mask, v, v)
			VMOVDQU32(v, Mem{Base: dst, Disp: 64 * (j + 4)})
		} else {
			VPXORD(mask, v, v)
			VMOVDQU32(v, Mem{Base: dst, Disp: 64 * j})
		}
	}
	d, h := gather(0), YMM()
	VPMOVDW(d, h) // the half in each dword's low 16 bits
	VCVTPH2PS(h, d)
	VMOVUPS(d, Mem{Base: dw})
	ADDQ(U8(bsize), w)
	ADDQ(U32(512), dst)
	ADDQ(U8(64), dw)
	DECQ(blocks)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}
