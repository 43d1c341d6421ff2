package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// iq4nlRows writes exact mode's AVX2 kernels for IQ4_NL weights (f16 d,
// 16 bytes of nibbles indexing ggml's kvalues_iq4nl, low nibbles the first
// 16 values): each value is d·K[nibble], one float32 product as in
// ggml's dequantize_row_iq4_nl, found with VPSHUFB on the byte table and
// widened to int32; then, with dot, multiplied into x and accumulated in
// float32 (y[r] = x · w_r), or stored (dst, row after row).
func iq4nlRows(dot bool) {
	kind := "gemv"
	sig := "func(x *float32, w *byte, ldw int, blocks int, rows int, y *float32)"
	if !dot {
		kind = "dequant"
		sig = "func(w *byte, ldw int, blocks int, rows int, dst *float32)"
	}
	name := kind + "IQ4_NLAVX2"
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	if dot {
		Doc(fmt.Sprintf("%s computes y[r] = x · w_r for rows IQ4_NL rows of blocks blocks (stride ldw bytes).", name))
	} else {
		Doc(fmt.Sprintf("%s dequantizes rows IQ4_NL rows of blocks blocks (stride ldw bytes) into dst, row after row.", name))
	}
	var x GPVirtual
	if dot {
		x = GP64()
		Load(Param("x"), x)
	}
	w, ldw, blocks, rows, out := GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("ldw"), ldw)
	Load(Param("blocks"), blocks)
	Load(Param("rows"), rows)
	if dot {
		Load(Param("y"), out)
	} else {
		Load(Param("dst"), out)
	}
	levels, mask := XMM(), XMM()
	VMOVDQU(iq4Levels, levels)
	VMOVDQU(iq4Mask, mask)
	acc := []VecVirtual{YMM(), YMM(), YMM(), YMM()}
	xp, wp, b := GP64(), GP64(), GP64()
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	if dot {
		for _, a := range acc {
			VXORPS(a, a, a)
		}
		MOVQ(x, xp)
	}
	MOVQ(w, wp)
	MOVQ(blocks, b)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	if dot {
		prefetchBlock(wp, 18)
	}
	d := YMM()
	hb := XMM()
	VPBROADCASTW(Mem{Base: wp}, hb)
	VCVTPH2PS(hb, d)
	raw, lo, hi := XMM(), XMM(), XMM()
	VMOVDQU(Mem{Base: wp, Disp: 2}, raw)
	VPAND(mask, raw, lo)
	VPSRLW(U8(4), raw, hi)
	VPAND(mask, hi, hi)
	VPSHUFB(lo, levels, lo) // values 0..15
	VPSHUFB(hi, levels, hi) // values 16..31
	for v := 0; v < 4; v++ {
		src := []VecVirtual{lo, lo, hi, hi}[v]
		if v%2 == 1 {
			t := XMM()
			VPSRLDQ(U8(8), src, t)
			src = t
		}
		qv := YMM()
		VPMOVSXBD(src, qv)
		VCVTDQ2PS(qv, qv)
		VMULPS(d, qv, qv)
		if dot {
			VFMADD231PS(Mem{Base: xp, Disp: 32 * v}, qv, acc[v])
		} else {
			VMOVUPS(qv, Mem{Base: out, Disp: 32 * v})
		}
	}
	nextBlock(name, wp, b, xp, out, 18, 32, dot)
	Label(name + "_rowdone")
	if dot {
		for v := 1; v < 4; v++ {
			VADDPS(acc[v], acc[0], acc[0])
		}
		reduce(avx2, acc[0], Mem{Base: out})
		ADDQ(U8(4), out)
	}
	endRows(name, w, ldw, rows)
}

// iq4Mask is sixteen 0x0f bytes.
var iq4Mask Mem

func iq4Consts() {
	iq4Mask = GLOBL("iq4mask", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(i, U8(0x0f))
	}
}
