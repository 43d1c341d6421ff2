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
// A block's d is read as a float32 from halves, the table of all 65536
// halves (halfTable in Go), by the broadcast operand of the one multiply
// that scales the table: no broadcast, no conversion, in the vector
// pipes, which bound this kernel.
func gemvQ4_0Table() {
	var offsets VecVirtual
	blockGemv("Q4_0", 18, false, func() {
		// offsets = iota - 8: q - 8 for every nibble value, exact.
		offsets = ZMM()
		VMOVUPS(iota16, offsets)
		VSUBPS(f32(8), offsets, offsets)
	}, func(wp, xp GPVirtual, d Mem, acc []VecVirtual) {
		table := ZMM()
		VMULPS_BCST(d, offsets, table) // d·(q-8), exact: a half times a 4-bit integer
		idx := ZMM()
		VPMOVZXBD(Mem{Base: wp, Disp: 2}, idx)
		lo := ZMM()
		VPERMPS(table, idx, lo) // low nibbles: values 0-15
		VFMADD231PS(Mem{Base: xp}, lo, acc[0])
		VPSRLD(U8(4), idx, idx)
		hi := ZMM()
		VPERMPS(table, idx, hi) // high nibbles: values 16-31
		VFMADD231PS(Mem{Base: xp, Disp: 64}, hi, acc[1])
	})
}

// blockGemv writes gemv{q}AVX512 for 32-value blocks of bsize bytes whose
// first two bytes are the half d: y[r] = x · w_r for rows rows of blocks
// blocks (stride ldw bytes). setup emits the kernel's constants; block
// emits one block's products into acc (two accumulators; with pairs two
// blocks an iteration, each into its own pair), given the block at wp,
// its x at xp and d as a float32 in memory, read from halves (halfTable
// in Go) for a broadcast operand.
func blockGemv(q string, bsize int, pairs bool, setup func(), block func(wp, xp GPVirtual, d Mem, acc []VecVirtual)) {
	name := "gemv" + q + "AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, ldw int, blocks int, rows int, halves *float32, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for rows " + q + " rows of blocks blocks (stride ldw bytes); halves is halfTable.")
	x, w, ldw, blocks, rows, y := params("x", "w", "ldw", "blocks", "rows", "y")
	halves := GP64()
	Load(Param("halves"), halves)
	setup()
	xp, wp, b := GP64(), GP64(), GP64()
	start := func() {
		MOVQ(x, xp)
		MOVQ(w, wp)
		MOVQ(blocks, b)
	}
	one := func(acc []VecVirtual) {
		prefetchBlock(wp, bsize)
		h := GP64()
		MOVWQZX(Mem{Base: wp}, h)
		block(wp, xp, Mem{Base: halves, Index: h, Scale: 4}, acc)
		ADDQ(U8(bsize), wp)
		ADDQ(U8(128), xp)
	}
	if pairs {
		rowLoopPairs(name, avx512, rows, w, ldw, y, b, []VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}, start, one)
		return
	}
	acc := []VecVirtual{ZMM(), ZMM()}
	rowLoop(name, avx512, rows, w, ldw, y, b, acc, start, func() { one(acc) })
}

// gemvQ8_0Halves writes gemvQ8_0AVX512: y[r] = x · w_r for rows Q8_0 rows
// of blocks blocks (stride ldw bytes), the weights d·q in float32 as
// ggml's dequantize_row_q8_0 computes them, with d read from halfTable by
// the multiply's broadcast operand as gemvQ4_0Table does.
func gemvQ8_0Halves() {
	blockGemv("Q8_0", 34, false, func() {}, func(wp, xp GPVirtual, d Mem, acc []VecVirtual) {
		for v := 0; v < 2; v++ {
			q := ZMM()
			VPMOVSXBD(Mem{Base: wp, Disp: 2 + 16*v}, q)
			VCVTDQ2PS(q, q)
			VMULPS_BCST(d, q, q) // d·q, exact: a half times an int8
			VFMADD231PS(Mem{Base: xp, Disp: 64 * v}, q, acc[v])
		}
	})
}

// gemvQ6_K writes gemvQ6_KAVX512 (gemvQ6_KGFNI with gfni): y[r] = x · w_r
// for rows Q6_K rows of blocks super-blocks (stride ldw bytes), the
// weights (d·sc)·(q-32) in float32 as ggml's dequantize_row_q6_K computes
// them. The 6-bit values q-32 are assembled 32 at a time as signed bytes
// (q6Half, or q6HalfGFNI with GFNI's bit moves, fewer byte operations on
// the vector pipes that bound this kernel: BenchmarkMulTFast); each
// 16 are then widened from the register (no trip through the stack),
// converted, and scaled by their d·sc through a broadcast operand, with the
// super-block's 16 scales converted once. Four accumulators take the
// products in turn.
func gemvQ6_K(gfni bool) {
	name := "gemvQ6_KAVX512"
	if gfni {
		name = "gemvQ6_KGFNI"
	}
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, ldw int, blocks int, rows int, y *float32)")
	Pragma("noescape")
	Doc(name + " computes y[r] = x · w_r for rows Q6_K rows of blocks super-blocks (stride ldw bytes).")
	x, w, ldw, blocks, rows, y := params("x", "w", "ldw", "blocks", "rows", "y")
	scales := AllocLocal(64)
	m0f := bcast8(0x0f)
	half := func(wp GPVirtual, h int) func(k int) VecVirtual { return q6HalfGFNI(wp, h, m0f) }
	if !gfni {
		m30, k32 := bcast8(0x30), bcast8(32)
		half = func(wp GPVirtual, h int) func(k int) VecVirtual {
			values := q6Half(wp, h, m0f, m30)
			return func(k int) VecVirtual {
				t := values(k)
				VPSUBB(k32, t, t)
				return t
			}
		}
	}
	acc := []VecVirtual{ZMM(), ZMM(), ZMM(), ZMM()}
	xp, wp, nb := GP64(), GP64(), GP64()
	rowLoop(name, avx512, rows, w, ldw, y, nb, acc, func() {
		MOVQ(x, xp)
		MOVQ(w, wp)
		MOVQ(blocks, nb)
	}, func() {
		prefetchBlock(wp, 210)
		// The 16 scales d·sc, each exact (a half times an int8).
		sv := ZMM()
		VPMOVSXBD(Mem{Base: wp, Disp: 192}, sv)
		VCVTDQ2PS(sv, sv)
		d := halfToScalar(Mem{Base: wp, Disp: 208})
		VMULPS(bcastScalar(d), sv, sv)
		VMOVUPS(sv, scales)
		n := 0
		for h := 0; h < 2; h++ {
			values := half(wp, h)
			for k := 0; k < 4; k++ {
				t := values(k)
				for is := 0; is < 2; is++ {
					src := t.AsX()
					if is == 1 {
						src = XMM()
						VEXTRACTI32X4(U8(1), t, src)
					}
					v := ZMM()
					VPMOVSXBD(src, v)
					VCVTDQ2PS(v, v)
					VMULPS_BCST(scales.Offset(4*(8*h+is+2*k)), v, v)
					VFMADD231PS(Mem{Base: xp, Disp: 4 * (128*h + 32*k + 16*is)}, v, acc[n%len(acc)])
					n++
				}
			}
		}
		ADDQ(U32(210), wp)
		ADDQ(U32(1024), xp)
	})
}

// q6GFNI holds the GF(2) affine matrices (one 64-bit matrix per byte
// lane, broadcast by the instruction) that build Q6_K's signed values
// q-32 from its bits: matrices 0-3 move qh's bits 2k and 2k+1 to bit 4
// and to bits 5-7 (with the constant 0xE0 flipping the latter, the 6-bit
// value's sign extension after subtracting 32), matrix 4 moves a byte's
// high nibble to its low.
var q6GFNI Mem

func q6GFNIConsts() {
	q6GFNI = GLOBL("q6gfni", RODATA|NOPTR)
	for k := 0; k < 4; k++ {
		// Output bit i is the parity of the input bits in byte 7-i.
		lo, hi := uint64(1)<<(2*k), uint64(1)<<(2*k+1)
		m := hi | hi<<8 | hi<<16 | lo<<24
		DATA(8*k, U64(m))
	}
	DATA(32, U64(0x10<<56|0x20<<48|0x40<<40|0x80<<32))
}

// q6HalfGFNI is q6Half with the values' 32 subtracted, as signed bytes,
// built with GFNI's bit moves: (ql nibble) | affine_k(qh), two or three
// byte operations a vector where q6Half and the subtraction take five or
// six.
func q6HalfGFNI(wp GPVirtual, h int, m0f VecVirtual) func(k int) VecVirtual {
	a, b, hb := q6Load(wp, h)
	return func(k int) VecVirtual {
		src := a
		if k%2 == 1 {
			src = b
		}
		q := YMM()
		VGF2P8AFFINEQB_BCST(U8(0xE0), q6GFNI.Offset(8*k), hb, q)
		if k < 2 {
			VPTERNLOGD(U8(0xF8), m0f, src, q) // q | (src & 0x0f)
		} else {
			lo := YMM()
			VGF2P8AFFINEQB_BCST(U8(0), q6GFNI.Offset(32), src, lo)
			VPORD(lo, q, q)
		}
		return q
	}
}

// q6Load loads the bits of half h of the Q6_K super-block at wp: ql[l],
// ql[l+32] and qh[l] for l < 32.
func q6Load(wp GPVirtual, h int) (a, b, hb VecVirtual) {
	a, b, hb = YMM(), YMM(), YMM()
	VMOVDQU32(Mem{Base: wp, Disp: 64 * h}, a)
	VMOVDQU32(Mem{Base: wp, Disp: 64*h + 32}, b)
	VMOVDQU32(Mem{Base: wp, Disp: 128 + 32*h}, hb)
	return a, b, hb
}

// q6Half loads half h of the Q6_K super-block at wp (ql, qh) and returns
// its vector k, the values 128h+32k+l for l < 32, as unsigned 6-bit bytes
// q = (nibble | ((qh >> 2k) & 3) << 4): low nibbles of ql[l] (k = 0) and
// ql[l+32] (k = 1), then their high nibbles (k = 2, 3). EVEX forms only,
// so the allocator may use any register.
func q6Half(wp GPVirtual, h int, m0f, m30 VecVirtual) func(k int) VecVirtual {
	a, b, hb := q6Load(wp, h)
	return func(k int) VecVirtual {
		q, u := YMM(), YMM()
		src := a
		if k%2 == 1 {
			src = b
		}
		if k < 2 {
			VPANDD(m0f, src, q)
		} else {
			VPSRLW(U8(4), src, q)
			VPANDD(m0f, q, q)
		}
		switch k {
		case 0:
			VPSLLW(U8(4), hb, u)
		case 1:
			VPSLLW(U8(2), hb, u)
		case 2:
			VMOVDQU32(hb, u)
		case 3:
			VPSRLW(U8(2), hb, u)
		}
		VPANDD(m30, u, u)
		VPORD(u, q, q)
		return q
	}
}

// rowLoop emits the frame every per-row product kernel here shares: for
// each of rows weight rows (w advancing ldw bytes a row), the
// accumulators are zeroed and start sets the row's pointers and the block
// count b; block runs (advancing its own pointers) while b counts down;
// then the accumulators are summed into y[r] and y moves on.
func rowLoop(name string, is isa, rows, w, ldw, y, b GPVirtual, acc []VecVirtual, start, block func()) {
	rowsOf(name, is, rows, w, ldw, y, acc, start, func() {
		Label(name + "_block")
		TESTQ(b, b)
		JZ(LabelRef(name + "_rowdone"))
		block()
		DECQ(b)
		JMP(LabelRef(name + "_block"))
	})
}

// rowLoopPairs is rowLoop with two blocks an iteration, each block
// accumulating into its own half of acc: a block's FMAs then wait on the
// block before last, not on the last, so the adds' latency (4 cycles) no
// longer bounds a block's time. An odd last block takes the first half.
func rowLoopPairs(name string, is isa, rows, w, ldw, y, b GPVirtual, acc []VecVirtual, start func(), block func(acc []VecVirtual)) {
	rowsOf(name, is, rows, w, ldw, y, acc, start, func() {
		Label(name + "_block")
		CMPQ(b, U8(2))
		JB(LabelRef(name + "_tail"))
		h := len(acc) / 2
		block(acc[:h])
		block(acc[h:])
		SUBQ(U8(2), b)
		JMP(LabelRef(name + "_block"))
		Label(name + "_tail")
		TESTQ(b, b)
		JZ(LabelRef(name + "_rowdone"))
		block(acc[:len(acc)/2])
	})
}

// zeroVec clears v with a zero idiom its width allows: VPXOR (VEX) for
// xmm and ymm, which every AVX2 machine runs, and VPXORD only for zmm.
// VPXORD on a ymm register is EVEX-encoded (AVX-512VL): in an AVX2 kernel
// it is an illegal instruction on machines without AVX-512.
func zeroVec(v VecVirtual) {
	if v.Size() == 64 {
		VPXORD(v, v, v)
		return
	}
	VPXOR(v, v, v)
}

// rowsOf is the row loop of rowLoop and rowLoopPairs: per row, the
// accumulators cleared, start, the blocks (which end at _rowdone or fall
// through to it), then the accumulators summed into y[r].
func rowsOf(name string, is isa, rows, w, ldw, y GPVirtual, acc []VecVirtual, start, blocks func()) {
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	for _, a := range acc {
		zeroVec(a)
	}
	start()
	blocks()
	Label(name + "_rowdone")
	for _, a := range acc[1:] {
		VADDPS(a, acc[0], acc[0])
	}
	reduce(is, acc[0], Mem{Base: y})
	ADDQ(U8(4), y)
	endRows(name, w, ldw, rows)
}

// gemvQ5_0Table writes gemvQ5_0AVX512: y[r] = x · w_r for rows Q5_0 rows
// of blocks blocks (stride ldw bytes), the weights d·(q-16) in float32,
// q = nibble | bit << 4 with the bit from the block's 32-bit qh. Two
// tables of 16 serve a block: d·(nibble-16) where the bit is clear and
// d·nibble where it is set. Each nibble is looked up in the first, then
// in the second under qh as a mask (merge masking), so the fifth bit
// costs no vector instruction of its own.
func gemvQ5_0Table() {
	var clear, set VecVirtual
	blockGemv("Q5_0", 22, true, func() {
		clear, set = ZMM(), ZMM()
		VMOVUPS(iota16, set) // nibble - 16 + 16
		VSUBPS(f32(16), set, clear)
	}, func(wp, xp GPVirtual, d Mem, acc []VecVirtual) {
		t0, t1 := ZMM(), ZMM()
		VMULPS_BCST(d, clear, t0) // exact: a half times a 5-bit integer
		VMULPS_BCST(d, set, t1)
		bits, bitsHi := K(), K()
		KMOVD(Mem{Base: wp, Disp: 2}, bits)
		KSHIFTRD(U8(16), bits, bitsHi)
		idx := ZMM()
		VPMOVZXBD(Mem{Base: wp, Disp: 6}, idx)
		lo := ZMM()
		VPERMPS(t0, idx, lo)
		VPERMPS(t1, idx, bits, lo) // values 0-15 whose bit is set
		VFMADD231PS(Mem{Base: xp}, lo, acc[0])
		VPSRLD(U8(4), idx, idx)
		hi := ZMM()
		VPERMPS(t0, idx, hi)
		VPERMPS(t1, idx, bitsHi, hi) // values 16-31
		VFMADD231PS(Mem{Base: xp, Disp: 64}, hi, acc[1])
	})
}
