package main

import (
	"fmt"
	"math/bits"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// q4kPairs[k] is a VPSHUFB control that makes each 32-bit lane the int16
// pair (b, b) of the lane's byte k: Q4_K's min m_j in both halves, for
// VPDPWSSD against the pair of x's sums of 16 in sub-block j.
var q4kPairs [4]Mem

func q4kPairConsts() {
	for k := 0; k < 4; k++ {
		q4kPairs[k] = GLOBL(fmt.Sprintf("q4kpairs%d", k), RODATA|NOPTR)
		for i := 0; i < 16; i++ {
			b := uint32(4*(i%4) + k)
			DATA(4*i, U32(b|0x80<<8|b<<16|0x80<<24))
		}
	}
}

// fastX16Q4K writes fast mode's VNNI kernels on Q4_K regrouped by 16 rows
// (x16.go: per super-block the 16 rows' d and dmin as halves, sc_j and
// m_j unpacked to bytes, sc at 64+64(j/4)+4r+j%4 and m 128 bytes on, then
// 32 words of nibbles, word i of row r at 320+64i+4r: byte 32ch+l holds
// column 64ch+l in its low nibble and 64ch+32+l in its high). Each lane is
// a weight row: a word's low and high nibbles, masked, are four unsigned
// values of sub-blocks 2ch and 2ch+1 for VPDPBUSD against x's four bytes
// broadcast, so the regrouping needs no repacking (packK's work, a third
// of a batched mixture-of-experts decode). The arithmetic is
// fastGemmQ4_K's, lane for lane: per super-block
//
//	acc += (dx·d)·float(Σ_j sc_j·(Σ q·x)) − (dx·dmin)·float(Σ_j m_j·xsum_j)
//
// With decode set it writes fastX16Q4_KVNNI(w, groups, blocks, xq, xd, xs,
// y), one row of activations against groups groups of 16 rows, streamed
// with prefetches; otherwise fastGemmX16Q4_Kx{R}VNNI(w, blocks, xq, ldx,
// xd, xs, rows, y, ldy), rows rows of activations (a multiple of R, with
// strides ldx values, 4·blocks bytes of scales and 32·blocks of sums)
// against one group, y's rows ldy floats apart.
func fastX16Q4K(R int, decode bool) {
	name := fmt.Sprintf("fastGemmX16Q4_Kx%dVNNI", R)
	sig := "func(w *byte, blocks int, xq *int8, ldx int, xd *float32, xs *int16, rows int, y *float32, ldy int)"
	if decode {
		name = "fastX16Q4_KVNNI"
		sig = "func(w *byte, groups int, blocks int, xq *int8, xd *float32, xs *int16, y *float32)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	if decode {
		Doc(name + " computes y[r] = w_r · x for groups regrouped groups of 16 Q4_K rows of blocks super-blocks and Q8_K activations xq, xd (xs: their sums of 16).")
	} else {
		Doc(fmt.Sprintf("%s computes 16 columns of y for rows rows of Q8_K activations (a multiple of %d) against one regrouped group of 16 Q4_K rows.", name, R))
	}
	const head, bsize = 320, 320 + 64*32
	var mask, low VecVirtual
	frame := inPlaceVNNI{name: name, third: "xs", perRow: 8, xBlock: 256, thirdBlock: 32, bsize: bsize}
	frame.emit(R, decode, func() VecVirtual {
		mask, low = broadcast(avx512, 0x0f0f0f0f), broadcast(avx512, 0xff)
		return mask
	}, func(o vnniOperands) {
		isum, msum := make([]VecVirtual, R), make([]VecVirtual, R)
		for r := 0; r < R; r++ {
			isum[r], msum[r] = ZMM(), ZMM()
			VMOVDQA64(o.zero, isum[r])
			VMOVDQA64(o.zero, msum[r])
		}
		lines := (bsize + 63) / 64
		for ch := 0; ch < 4; ch++ {
			if decode {
				spreadPrefetch(o.pp, lines, ch, 4)
			}
			// dots[r][s][c]: row r, sub-block 2ch+s, chain c.
			dots := make([][2][]VecVirtual, R)
			for r := range dots {
				for s := 0; s < 2; s++ {
					dots[r][s] = make([]VecVirtual, o.chains)
					for c := range dots[r][s] {
						dots[r][s][c] = ZMM()
						VMOVDQA64(o.zero, dots[r][s][c])
					}
				}
			}
			for k := 0; k < 8; k++ {
				v, lo, hi := ZMM(), ZMM(), ZMM()
				VMOVDQU32(Mem{Base: o.pp, Disp: head + 64*(8*ch+k)}, v)
				VPANDD(mask, v, lo)
				VPSRLD(U8(4), v, hi)
				VPANDD(mask, hi, hi)
				for r := 0; r < R; r++ {
					VPDPBUSD_BCST(o.x(r, 64*ch+4*k), lo, dots[r][0][k%o.chains])
					VPDPBUSD_BCST(o.x(r, 64*ch+32+4*k), hi, dots[r][1][k%o.chains])
				}
			}
			for s := 0; s < 2; s++ {
				j := 2*ch + s
				sc, m := ZMM(), ZMM()
				VPANDD(Mem{Base: o.pp, Disp: 64 + 64*(j/4) + j%4}, low, sc)
				VMOVDQU32(Mem{Base: o.pp, Disp: 192 + 64*(j/4)}, m)
				VPSHUFB(q4kPairs[j%4], m, m)
				for r := 0; r < R; r++ {
					d := dots[r][s]
					if o.chains == 2 {
						VPADDD(d[1], d[0], d[0])
					}
					VPMULLD(sc, d[0], d[0])
					VPADDD(d[0], isum[r], isum[r])
					VPDPWSSD_BCST(o.third(r, 4*j), m, msum[r])
				}
			}
		}
		dv, dmv := ZMM(), ZMM()
		VCVTPH2PS(Mem{Base: o.pp}, dv)
		VCVTPH2PS(Mem{Base: o.pp, Disp: 32}, dmv)
		for r := 0; r < R; r++ {
			s := ZMM()
			VCVTDQ2PS(isum[r], isum[r])
			VMULPS_BCST(o.d(r), dv, s)
			VFMADD231PS(s, isum[r], o.acc[r])
			VCVTDQ2PS(msum[r], msum[r])
			VMULPS_BCST(o.d(r), dmv, s)
			VFNMADD231PS(s, msum[r], o.acc[r])
		}
	})
}

// fastX16Q8 writes fast mode's VNNI kernels on Q5_0, Q8_0 or IQ4_NL
// regrouped by 16 rows, formats whose blocks of 32 pair with Q8_0
// activations. Q5_0 (x16.go: per block the 16 rows' d as halves, their
// fifth bits as q5Bits words at 32, then the nibbles as 4 words at 96:
// byte k of word j holds column 4j+k in its low nibble and 16+4j+k in its
// high, whose fifth bits are bits j and 4+j of byte k of the row's q5Bits
// word): each lane is a weight row, and a word's nibbles, masked, with the
// fifth bit shifted to bit 4 of each byte and merged in, are four unsigned
// 5-bit values for VPDPBUSD against x's four bytes broadcast, so the
// regrouping needs no repacking (pack's work, for every product of a
// batched decode). Q8_0's 8 words of int8 (at 32, after the d) become
// unsigned by a flip of each byte's top bit, and IQ4_NL's nibbles (4
// words at 32, in Q5_0's order) ggml's levels plus 128 by VPSHUFB, as
// pack's do. The arithmetic is fastGemm16x*VNNI's, lane for lane: per
// block
//
//	acc += float(Σ q·x − off·Σx)·(d·dx)
//
// with corr the activations' off·Σx a block (off 16 for Q5_0, 128 for
// Q8_0 and IQ4_NL). With decode set it writes fastX16<q>VNNI(w, groups,
// blocks, xq, xd, corr, y), one row of activations against groups groups
// of 16 rows, streamed with prefetches; otherwise
// fastGemmX16<q>x{R}VNNI(w, blocks, xq, ldx, xd, corr, rows, y, ldy), rows
// rows of activations (a multiple of R, ldx values and 4·blocks bytes of
// scales and corrections apart) against one group, y's rows ldy floats
// apart.
func fastX16Q8(fq string, R int, decode bool) {
	name := fmt.Sprintf("fastGemmX16%sx%dVNNI", fq, R)
	sig := "func(w *byte, blocks int, xq *int8, ldx int, xd *float32, corr *int32, rows int, y *float32, ldy int)"
	if decode {
		name = "fastX16" + fq + "VNNI"
		sig = "func(w *byte, groups int, blocks int, xq *int8, xd *float32, corr *int32, y *float32)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	if decode {
		Doc(name + " computes y[r] = w_r · x for groups regrouped groups of 16 " + fq + " rows of blocks blocks and Q8_0 activations xq, xd (corr: their block sums times the weights' offset).")
	} else {
		Doc(fmt.Sprintf("%s computes 16 columns of y for rows rows of Q8_0 activations (a multiple of %d) against one regrouped group of 16 %s rows.", name, R, fq))
	}
	head, bsize := 96, 96+64*4
	switch fq {
	case "Q8_0":
		head, bsize = 32, 32+64*8
	case "IQ4_NL":
		head, bsize = 32, 32+64*4
	}
	var mask, bit4, levels VecVirtual
	frame := inPlaceVNNI{name: name, third: "corr", perRow: 1, xBlock: 32, thirdBlock: 4, bsize: bsize}
	frame.emit(R, decode, func() VecVirtual {
		mask, bit4 = broadcast(avx512, 0x0f0f0f0f), broadcast(avx512, 0x10101010)
		switch fq {
		case "Q8_0":
			mask = broadcast(avx512, 0x80808080)
		case "IQ4_NL":
			levels = ZMM()
			VBROADCASTI32X4(iq4LevelsU8, levels)
		}
		return mask
	}, func(o vnniOperands) {
		if decode {
			spreadPrefetch(o.pp, (bsize+63)/64, 0, 1)
		}
		dots := make([][]VecVirtual, R)
		for r := range dots {
			dots[r] = make([]VecVirtual, o.chains)
			for c := range dots[r] {
				dots[r][c] = ZMM()
				VMOVDQA64(o.zero, dots[r][c])
			}
		}
		// dot adds q's products with x's four bytes at column col into
		// chain c of every row.
		dot := func(q VecVirtual, col, c int) {
			for r := 0; r < R; r++ {
				VPDPBUSD_BCST(o.x(r, col), q, dots[r][c%o.chains])
			}
		}
		if fq == "Q8_0" {
			for j := 0; j < 8; j++ {
				q := ZMM()
				VPXORD(Mem{Base: o.pp, Disp: head + 64*j}, mask, q)
				dot(q, 4*j, j)
			}
		}
		for j := 0; fq == "IQ4_NL" && j < 4; j++ {
			v := ZMM()
			VMOVDQU32(Mem{Base: o.pp, Disp: head + 64*j}, v)
			for h := 0; h < 2; h++ {
				q := ZMM()
				if h == 0 {
					VPANDD(mask, v, q)
				} else {
					VPSRLD(U8(4), v, q)
					VPANDD(mask, q, q)
				}
				VPSHUFB(q, levels, q)
				dot(q, 4*(4*h+j), 2*h+j)
			}
		}
		hm := ZMM()
		for j := 0; fq == "Q5_0" && j < 4; j++ {
			if j == 0 {
				VMOVDQU32(Mem{Base: o.pp, Disp: 32}, hm)
			}
			v := ZMM()
			VMOVDQU32(Mem{Base: o.pp, Disp: head + 64*j}, v)
			for h := 0; h < 2; h++ {
				// q = (nibble) | (fifth bit at bit 4): the bit is j (low
				// nibble) or 4+j (high) of each byte of hm.
				q, src := ZMM(), v
				if h == 0 {
					VPSLLD(U8(4-j), hm, q)
				} else {
					if j > 0 {
						VPSRLD(U8(j), hm, q)
					} else {
						VMOVDQA64(hm, q)
					}
					src = ZMM()
					VPSRLD(U8(4), v, src)
				}
				VPANDD(bit4, q, q)
				VPTERNLOGD(U8(0xF8), src, mask, q) // q |= mask & src
				dot(q, 4*(4*h+j), 2*h+j)
			}
		}
		dv := ZMM()
		VCVTPH2PS(Mem{Base: o.pp}, dv)
		for r := 0; r < R; r++ {
			d := dots[r]
			if o.chains == 2 {
				VPADDD(d[1], d[0], d[0])
			}
			VPSUBD_BCST(o.third(r, 0), d[0], d[0])
			VCVTDQ2PS(d[0], d[0])
			s := ZMM()
			VMULPS_BCST(o.d(r), dv, s)
			VFMADD231PS(s, d[0], o.acc[r])
		}
	})
}

// inPlaceVNNI is the frame of fast mode's VNNI kernels that read a
// regrouping in place (fastX16Q4K, fastX16Q8): decode, one row of
// activations against every group, or R rows against one group. The
// activations are x (xq, ldx values a row), their scales (xd, lds =
// 4·blocks bytes a row) and a third operand: Q8_K's sums of 16 (xs,
// perRow 8: 8·lds a row) or the weights' offset times the Q8_0 blocks'
// sums (corr, perRow 1). A block moves x by xBlock bytes, the third
// operand by thirdBlock and the weights by bsize.
type inPlaceVNNI struct {
	name, third               string
	perRow                    int
	xBlock, thirdBlock, bsize int
}

// vnniOperands is what the frame gives a block: the weights (pp), each
// row's accumulator and operands, a zero to start sums from, and how many
// chains a row's dot products take (two while one or two rows leave the
// multiply-adds too few to cover their latency).
type vnniOperands struct {
	pp     GPVirtual
	acc    []VecVirtual
	zero   VecVirtual
	chains int
	x      func(r, disp int) Mem
	d      func(r int) Mem
	third  func(r, disp int) Mem
}

// emit writes the kernel (its TEXT and Doc already given): consts emits
// its constants and returns one, which the zero is made from (a register
// XORed with itself reads itself, and the allocator keeps it live from the
// kernel's entry); block emits one block's products into the rows'
// accumulators.
func (k inPlaceVNNI) emit(R int, decode bool, consts func() VecVirtual, block func(vnniOperands)) {
	name := k.name
	c := consts()
	zero := ZMM()
	VPXORD(c, c, zero)
	chains := 1
	if R <= 2 {
		chains = 2
	}
	loop, xp, dp, tp, yrow, ldx, lds := GP64(), GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Load(Param("xq"), xp)
	Load(Param("xd"), dp)
	Load(Param(k.third), tp)
	Load(Param("y"), yrow)
	Load(Param("blocks"), lds)
	SHLQ(U8(2), lds)
	if decode {
		Load(Param("groups"), loop)
	} else {
		Load(Param("rows"), loop)
		Load(Param("ldx"), ldx)
	}
	// The multiples of a stride a scale cannot give: 3·ldx, 3·lds, and
	// with perRow 8 (a scale of 8) 2·lds.
	var ldx3, lds2, lds3 GPVirtual
	if R > 2 {
		ldx3 = GP64()
		LEAQ(Mem{Base: ldx, Index: ldx, Scale: 2}, ldx3)
		if k.perRow == 8 {
			lds2 = GP64()
			LEAQ(Mem{Base: lds, Index: lds, Scale: 1}, lds2)
		}
		lds3 = GP64()
		LEAQ(Mem{Base: lds, Index: lds, Scale: 2}, lds3)
	}
	third := func(r, disp int) Mem { return rowAt(tp, lds, lds3, r, disp) }
	if k.perRow == 8 {
		third = func(r, disp int) Mem {
			if r == 0 {
				return Mem{Base: tp, Disp: disp}
			}
			return Mem{Base: tp, Index: []GPVirtual{lds, lds2, lds3}[r-1], Scale: 8, Disp: disp}
		}
	}
	acc := make([]VecVirtual, R)
	for r := range acc {
		acc[r] = ZMM()
	}
	pp, b := GP64(), GP64()
	if decode {
		Load(Param("w"), pp) // each group's weights follow the last's
	}
	Label(name + "_outer")
	TESTQ(loop, loop)
	JZ(LabelRef(name + "_end"))
	if !decode {
		Load(Param("w"), pp) // every R rows read the group again
	}
	Load(Param("blocks"), b)
	for r := range acc {
		VMOVDQA64(zero, acc[r])
	}
	Label(name + "_block")
	block(vnniOperands{
		pp: pp, acc: acc, zero: zero, chains: chains,
		x:     func(r, disp int) Mem { return rowAt(xp, ldx, ldx3, r, disp) },
		d:     func(r int) Mem { return rowAt(dp, lds, lds3, r, 0) },
		third: third,
	})
	ADDQ(U32(k.bsize), pp)
	if k.xBlock > 127 {
		ADDQ(U32(k.xBlock), xp)
	} else {
		ADDQ(U8(k.xBlock), xp)
	}
	ADDQ(U8(4), dp)
	ADDQ(U8(k.thirdBlock), tp)
	DECQ(b)
	JNZ(LabelRef(name + "_block"))
	if decode {
		// The next group: x is read again.
		VMOVUPS(acc[0], Mem{Base: yrow})
		ADDQ(U8(64), yrow)
		Load(Param("xq"), xp)
		Load(Param("xd"), dp)
		Load(Param(k.third), tp)
		DECQ(loop)
		JMP(LabelRef(name + "_outer"))
	} else {
		ldy := GP64()
		Load(Param("ldy"), ldy)
		SHLQ(U8(2), ldy)
		for r := 0; r < R; r++ {
			VMOVUPS(acc[r], Mem{Base: yrow})
			ADDQ(ldy, yrow)
		}
		// xp stands xBlock·blocks bytes on from row 0's, dp and tp at row
		// 1's: on to row R's.
		MOVQ(lds, b)
		SHLQ(U8(bits.TrailingZeros(uint(k.xBlock/4))), b)
		SUBQ(b, xp)
		for r := 0; r < R; r++ {
			ADDQ(ldx, xp)
		}
		for r := 1; r < R; r++ {
			ADDQ(lds, dp)
			for i := 0; i < k.perRow; i++ {
				ADDQ(lds, tp)
			}
		}
		SUBQ(U8(R), loop)
		JMP(LabelRef(name + "_outer"))
	}
	Label(name + "_end")
	VZEROUPPER()
	RET()
}
