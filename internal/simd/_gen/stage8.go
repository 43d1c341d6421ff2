package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// q8Staged is the bytes of one staged block of eight rows (fastStage8):
// the eight rows' signed values as eight 32-byte chunks, each chunk four
// values of every row (row i's values 4c..4c+3 at byte 32c + 4i), then
// their magnitudes in the same order, then the rows' d as float32.
const q8Staged = 544

// fastStage8 writes fastStage8<q>AVX2(w, ldw, blocks, dst): eight rows of
// Q8_0-family weights decoded to int8 and interleaved by four values, a
// layout in which each int32 lane of a product is one weight row. A
// prefill stages a group once and runs every four rows of activations
// against it (fastStaged8x4AVX2); its cost, a few instructions per value,
// is paid once per group instead of once per four activation rows.
func fastStage8(q string) {
	name := "fastStage8" + q + "AVX2"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, blocks int, dst *byte)")
	Pragma("noescape")
	Doc(name + " stages eight " + q + " rows of blocks blocks (stride ldw bytes) into dst for fastStaged8x4AVX2, q8Staged bytes a block.")
	w, ldw, b, dp := GP64(), GP64(), GP64(), GP64()
	Load(Param("w"), w)
	Load(Param("ldw"), ldw)
	Load(Param("blocks"), b)
	Load(Param("dst"), dp)
	bsize := map[string]int{"Q8_0": 34, "Q4_0": 18, "Q5_0": 22, "IQ4_NL": 18}[q]
	_, mask, eight, f0 := q8Consts(q)
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_end"))
	rp, t := GP64(), GP32()
	MOVQ(w, rp)
	hs := XMM()
	for i := 0; i < 8; i++ {
		if i > 0 {
			ADDQ(ldw, rp)
		}
		wv := loadQ8Weights(q, rp, mask, eight, f0)
		aw := YMM()
		VPSIGNB(wv, wv, aw)
		for k, v := range []VecVirtual{wv, aw} {
			hx := XMM()
			VEXTRACTI128(U8(1), v, hx)
			for c := 0; c < 8; c++ {
				src := v.(Vec).AsX()
				if c >= 4 {
					src = hx
				}
				m := Mem{Base: dp, Disp: 256*k + 32*c + 4*i}
				if c%4 == 0 {
					VMOVD(src, m)
				} else {
					VPEXTRD(U8(c%4), src, m)
				}
			}
		}
		MOVWLZX(Mem{Base: rp}, t)
		if i == 0 {
			VMOVD(t, hs)
		} else {
			VPINSRW(U8(i), t, hs, hs)
		}
	}
	dv := YMM()
	VCVTPH2PS(hs, dv)
	VMOVUPS(dv, Mem{Base: dp, Disp: 512})
	ADDQ(U32(bsize), w)
	ADDQ(U32(q8Staged), dp)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}

// fastStaged8x4 writes fastStaged8x4AVX2(st, blocks, xq, xd, ldx, y, ldy):
// eight staged weight rows against four rows of Q8_0 activations (stride
// ldx values, ldx/32 scales). Per block and four values, the activation
// row's four bytes are broadcast, take the weights' signs and meet their
// magnitudes in VPMADDUBSW, so each lane sums one weight row; the block's
// integer sums are scaled by d_w·d_x for the eight rows at once. y[i*ldy
// + r], eight outputs a row.
func fastStaged8x4() {
	name := "fastStaged8x4AVX2"
	TEXT(name, NOSPLIT, "func(st *byte, blocks int, xq *int8, xd *float32, ldx int, y *float32, ldy int)")
	Pragma("noescape")
	Doc(name + " computes y[i*ldy+r] = w_r · x_i for eight rows staged by fastStage8*AVX2 and four rows of Q8_0 activations (stride ldx values).")
	sp, b, xp, dp, ldx, ldd, x3, d3 := GP64(), GP64(), GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("st"), sp)
	Load(Param("blocks"), b)
	Load(Param("xq"), xp)
	Load(Param("xd"), dp)
	Load(Param("ldx"), ldx)
	MOVQ(ldx, ldd)
	SHRQ(U8(3), ldd) // bytes of scales a row: ldx/32 float32s
	LEAQ(Mem{Base: xp, Index: ldx, Scale: 2}, x3)
	ADDQ(ldx, x3)
	LEAQ(Mem{Base: dp, Index: ldd, Scale: 2}, d3)
	ADDQ(ldd, d3)
	ones := broadcast(avx2isa, 0x00010001)
	acc := [4]VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for _, a := range acc {
		VXORPS(a, a, a)
	}
	Label(name + "_block")
	TESTQ(b, b)
	JZ(LabelRef(name + "_end"))
	xr := [4]Mem{{Base: xp}, {Base: xp, Index: ldx, Scale: 1}, {Base: xp, Index: ldx, Scale: 2}, {Base: x3}}
	dr := [4]Mem{{Base: dp}, {Base: dp, Index: ldd, Scale: 1}, {Base: dp, Index: ldd, Scale: 2}, {Base: d3}}
	var sumi [4]VecVirtual
	for c := 0; c < 8; c++ {
		wv, aw := YMM(), YMM()
		VMOVDQU(Mem{Base: sp, Disp: 32 * c}, wv)
		VMOVDQU(Mem{Base: sp, Disp: 256 + 32*c}, aw)
		for r := 0; r < 4; r++ {
			p := YMM()
			VPBROADCASTD(xr[r].Offset(4*c), p)
			VPSIGNB(wv, p, p)
			VPMADDUBSW(p, aw, p)
			VPMADDWD(ones, p, p)
			if c == 0 {
				sumi[r] = p
			} else {
				VPADDD(p, sumi[r], sumi[r])
			}
		}
	}
	for r := 0; r < 4; r++ {
		d := YMM()
		VBROADCASTSS(dr[r], d)
		VMULPS(Mem{Base: sp, Disp: 512}, d, d)
		VCVTDQ2PS(sumi[r], sumi[r])
		VFMADD231PS(sumi[r], d, acc[r])
	}
	ADDQ(U32(q8Staged), sp)
	ADDQ(U8(32), xp)
	ADDQ(U8(32), x3)
	ADDQ(U8(4), dp)
	ADDQ(U8(4), d3)
	DECQ(b)
	JMP(LabelRef(name + "_block"))
	Label(name + "_end")
	y, ldy := GP64(), GP64()
	Load(Param("y"), y)
	Load(Param("ldy"), ldy)
	SHLQ(U8(2), ldy)
	for r, a := range acc {
		if r > 0 {
			ADDQ(ldy, y)
		}
		VMOVUPS(a, Mem{Base: y})
	}
	VZEROUPPER()
	RET()
}

// fastQ4_0Lanes writes fastQ4_0LanesAVX2, the Q4_0 decode product with
// the weights' nibbles taken as they are stored, unsigned: VPMADDUBSW of
// the nibbles and x, VPMADDWD into int32 lanes of four values, and each
// lane started from −8 times its four activations' sum (lanes, made once
// per activation vector), so that it ends with Σ (q−8)·x, the very integer
// of ggml's sign trick. Four instructions fewer a block than fastQ4_0AVX2
// (no signs, no offset), and the same float steps.
func fastQ4_0Lanes() {
	name := "fastQ4_0LanesAVX2"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, rows int, blocks int, xq *int8, xd *float32, lanes *int32, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = w_r · x for rows Q4_0 rows of blocks blocks (stride ldw bytes) and Q8_0 activations xq, xd with lanes −8·(sums of 4).")
	w, ldw, rows, blocks, xq, xd := params("w", "ldw", "rows", "blocks", "xq", "xd")
	lanes, y := GP64(), GP64()
	Load(Param("lanes"), lanes)
	Load(Param("y"), y)
	ones, mask := broadcast(avx2isa, 0x00010001), bcast8(0x0f)
	wp, xp, dp, lp, b := GP64(), GP64(), GP64(), GP64(), GP64()
	rowLoopPairs(name, avx2isa, rows, w, ldw, y, b, []VecVirtual{YMM(), YMM()}, func() {
		MOVQ(w, wp)
		MOVQ(xq, xp)
		MOVQ(xd, dp)
		MOVQ(lanes, lp)
		MOVQ(blocks, b)
	}, func(acc []VecVirtual) {
		prefetchBlock(wp, 18)
		wv := nibblesAVX2(Mem{Base: wp, Disp: 2}, nibbleShifts, mask)
		VPMADDUBSW(Mem{Base: xp}, wv, wv)
		VPMADDWD(ones, wv, wv)
		VPADDD(Mem{Base: lp}, wv, wv)
		VCVTDQ2PS(wv, wv)
		d := scaleOf(Mem{Base: wp}, Mem{Base: dp})
		VFMADD231PS(wv, d, acc[0])
		ADDQ(U32(18), wp)
		ADDQ(U8(32), xp)
		ADDQ(U8(32), lp)
		ADDQ(U8(4), dp)
	})
}

// nibblesAVX2 loads 16 bytes at m as their 16 low nibbles, then their 16
// high ones, one byte each: the bytes broadcast to both lanes, the high
// lane's dwords shifted by 4 (nibbleShifts), then masked.
func nibblesAVX2(m Mem, shifts Op, mask VecVirtual) VecVirtual {
	wv := YMM()
	VBROADCASTI128(m, wv)
	VPSRLVD(shifts, wv, wv)
	VPAND(mask, wv, wv)
	return wv
}

// nibbleShifts holds nibblesAVX2's dword shifts: 0 in the low lane, 4 in
// the high one.
var nibbleShifts Mem

func nibbleConsts() {
	nibbleShifts = GLOBL("nibbleshifts", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(uint32(4*(i/4))))
	}
}

// widen16 writes widen<BF16|F16>AVX2(src, n, dst): n (a multiple of 8)
// 16-bit weights widened to float32, exactly (BF16: the bits shifted up;
// F16: VCVTPH2PS), for the float tiles' prefill to read a tile's weight
// rows widened once per block of activation rows instead of once per
// three rows.
func widen16(dt string) {
	name := "widen" + dt + "AVX2"
	TEXT(name, NOSPLIT, "func(src *uint16, n int, dst *float32)")
	Pragma("noescape")
	Doc(name + " widens n (a multiple of 8) " + dt + " values at src to float32 at dst.")
	src, n, dst := GP64(), GP64(), GP64()
	Load(Param("src"), src)
	Load(Param("n"), n)
	Load(Param("dst"), dst)
	Label(name + "_loop")
	CMPQ(n, U8(8))
	JB(LabelRef(name + "_end"))
	v := YMM()
	if dt == "BF16" {
		VPMOVZXWD(Mem{Base: src}, v)
		VPSLLD(U8(16), v, v)
	} else {
		VCVTPH2PS(Mem{Base: src}, v)
	}
	VMOVUPS(v, Mem{Base: dst})
	ADDQ(U8(16), src)
	ADDQ(U8(32), dst)
	SUBQ(U8(8), n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_end")
	VZEROUPPER()
	RET()
}
