package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Coded rows (simd/coded.go): a 16-byte table of high bytes, then chunks
// of 32 weights, each 16 bytes of 4-bit codes (byte j: weight j's code in
// its low nibble, weight 16+j's in its high nibble) and the weights' low
// bytes: BF12 keeps one a weight (a bfloat16's low byte), F28 three (a
// float32's), weights 0-15 first. A weight's float32 bits are
// table[code]<<24 | its low bytes below, so nothing is rounded.

// coding is BF12 or F28: its name and its low bytes a weight.
type coding struct {
	name string
	low  int
}

var codings = []coding{{"BF12", 1}, {"F28", 3}}

// chunkBytes is a chunk's bytes: codes, then low bytes.
func (c coding) chunkBytes() int { return 16 + 32*c.low }

// mask is the bytes of each dword the low bytes fill: byte 2 for BF12
// (bits 16-23), bytes 0-2 for F28.
func (c coding) mask() uint64 {
	if c.low == 1 {
		return 0x4444444444444444
	}
	return 0x7777777777777777
}

var codedIdx = map[string][2]Mem{}

// codedConsts writes, for each coding, the byte indexes that carry the low
// bytes of weights 0-15 and of 16-31 into place. BF12 permutes the 32 low
// bytes (loaded at the chunk's byte 16): dword j takes byte j, or 16+j.
// F28 permutes 64 bytes loaded at the chunk's byte 16 for weights 0-15,
// and at byte 48 for 16-31 (whose low bytes start 16 bytes in), so no
// load reads past the chunk: dword j's byte b takes byte 3j+b, or
// 16+3j+b. The merge mask keeps the bytes the low bytes fill.
func codedConsts() {
	for _, c := range codings {
		var m [2]Mem
		for h := range m {
			m[h] = GLOBL(fmt.Sprintf("%sidx%d", strings.ToLower(c.name), h), RODATA|NOPTR)
			for i := 0; i < 64; i++ {
				j, b := i/4, i%4
				v := 16*h + j
				if c.low == 3 {
					v = 16*h + 3*j + min(b, 2)
				}
				DATA(i, U8(v))
			}
		}
		codedIdx[c.name] = m
	}
}

// codedChunk widens the 32 weights of the chunk at wp into v0 (weights
// 0-15) and v1 (16-31): the codes look the high bytes up in tab
// (VPERMD reads a dword's low 4 bits), and a byte permute merges the low
// bytes in under the mask.
func codedChunk(c coding, wp GPVirtual, tab, lo, hi VecVirtual, mask OpmaskVirtual) (v0, v1 VecVirtual) {
	idx := ZMM()
	VPMOVZXBD(Mem{Base: wp}, idx)
	v0, v1 = ZMM(), ZMM()
	VPERMD(tab, idx, v0)
	VPSRLD(U8(4), idx, idx)
	VPERMD(tab, idx, v1)
	if c.low == 1 {
		lows := YMM()
		VMOVDQU32(Mem{Base: wp, Disp: 16}, lows) // EVEX: the allocator may pick Y16-Y31
		VPERMB(lows.AsZ(), lo, mask, v0)
		VPERMB(lows.AsZ(), hi, mask, v1)
	} else {
		VPERMB(Mem{Base: wp, Disp: 16}, lo, mask, v0)
		VPERMB(Mem{Base: wp, Disp: 48}, hi, mask, v1)
	}
	return v0, v1
}

// codedSetup loads the coding's byte indexes and merge mask.
func codedSetup(c coding) (lo, hi VecVirtual, mask OpmaskVirtual) {
	lo, hi = ZMM(), ZMM()
	VMOVDQU64(codedIdx[c.name][0], lo)
	VMOVDQU64(codedIdx[c.name][1], hi)
	mask = K()
	m := GP64()
	MOVQ(U64(c.mask()), m)
	KMOVQ(m, mask)
	return lo, hi, mask
}

// codedTable loads a row's table of high bytes as dwords, shifted into
// place, and steps wp past it.
func codedTable(wp GPVirtual) VecVirtual {
	tab := ZMM()
	VPMOVZXBD(Mem{Base: wp}, tab)
	VPSLLD(U8(24), tab, tab)
	ADDQ(U8(16), wp)
	return tab
}

// codedChunks emits a row's loop over its chunks (wp and b its cursor
// and count): the row's table, then each chunk's 32 weights widened
// (v0, v1) for body, until the row is done (_rowdone follows).
func codedChunks(name string, c coding, w, chunks, wp, b GPVirtual, lo, hi VecVirtual, mask OpmaskVirtual, body func(v0, v1 VecVirtual)) {
	MOVQ(w, wp)
	MOVQ(chunks, b)
	tab := codedTable(wp)
	Label(name + "_chunk")
	TESTQ(b, b)
	JZ(LabelRef(name + "_rowdone"))
	v0, v1 := codedChunk(c, wp, tab, lo, hi, mask)
	body(v0, v1)
	ADDQ(U8(c.chunkBytes()), wp)
	DECQ(b)
	JMP(LabelRef(name + "_chunk"))
	Label(name + "_rowdone")
}

// codedPrefetchDist is how far ahead the coded decode kernels prefetch,
// in bytes: the lines of each chunk's span that far on, past rows' ends
// into the next rows, as the float kernels do (floatPrefetchDist). 4 KB
// did better than 2 or 8 KB (interleaved gozoo bench runs of BF16 decode;
// figures in docs/performance.md).
const codedPrefetchDist = 4096

// gemvCoded writes gemv{BF12,F28}AVX512: y[r] = x · w_r for rows coded
// rows of chunks chunks (stride ldw bytes), the products of the weights
// (exceptions aside, which the caller adds).
func gemvCoded(c coding) {
	name := "gemv" + c.name + "AVX512"
	TEXT(name, NOSPLIT, "func(x *float32, w *byte, ldw int, chunks int, rows int, y *float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[r] = x · w_r for rows %s rows of chunks chunks of 32 (stride ldw bytes).", name, c.name))
	x, w, ldw, chunks, rows, y := params("x", "w", "ldw", "chunks", "rows", "y")
	lo, hi, mask := codedSetup(c)
	xp, wp, b := GP64(), GP64(), GP64()
	var tab VecVirtual
	acc := []VecVirtual{ZMM(), ZMM()}
	rowLoop(name, avx512, rows, w, ldw, y, b, acc, func() {
		MOVQ(x, xp)
		MOVQ(w, wp)
		MOVQ(chunks, b)
		tab = codedTable(wp)
	}, func() {
		v0, v1 := codedChunk(c, wp, tab, lo, hi, mask)
		for off := 0; off < c.chunkBytes(); off += 64 {
			streamPrefetch(Mem{Base: wp, Disp: codedPrefetchDist + off})
		}
		VFMADD231PS(Mem{Base: xp}, v0, acc[0])
		VFMADD231PS(Mem{Base: xp, Disp: 64}, v1, acc[1])
		ADDQ(U8(c.chunkBytes()), wp)
		ADDQ(U8(128), xp)
	})
}

// codedRowsMax is the most rows of x the coded products of a few rows
// take (gemm{BF12,F28}x{2..8}AVX512): a batched decode's; prefill widens
// coded rows and runs the float kernels.
const codedRowsMax = 8

// gemmCoded writes gemm{BF12,F28}x<T>AVX512: y[t, r] = x_t · w_r for T
// rows of x (stride ldx floats) and rows coded rows (stride ldw bytes),
// into y (stride ldy floats). A chunk is widened once for the T rows, and
// each row of x sums into two accumulators as gemvCoded's one does, so
// each product is gemv{BF12,F28}'s bit for bit.
func gemmCoded(c coding, T int) {
	name := fmt.Sprintf("gemm%sx%dAVX512", c.name, T)
	TEXT(name, NOSPLIT, "func(x *float32, ldx int, w *byte, ldw int, chunks int, rows int, y *float32, ldy int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes y[t, r] = x_t · w_r for %d rows of x and rows %s rows of chunks chunks of 32.", name, T, c.name))
	x, ldx, w, ldw, chunks, rows := params("x", "ldx", "w", "ldw", "chunks", "rows")
	y, ldy := GP64(), GP64()
	Load(Param("y"), y)
	Load(Param("ldy"), ldy)
	SHLQ(U8(2), ldx) // bytes
	SHLQ(U8(2), ldy)
	lo, hi, mask := codedSetup(c)
	// Row t of x or y lies at base + t·stride: rows 0-3 off base and
	// rows 4-7 off base + 4·stride, each by an index of 1 or 2 strides or
	// by 3 strides.
	x3, y3 := GP64(), GP64()
	LEAQ(Mem{Base: ldx, Index: ldx, Scale: 2}, x3)
	LEAQ(Mem{Base: ldy, Index: ldy, Scale: 2}, y3)
	at := func(base, base4, stride, stride3 GPVirtual, t, disp int) Mem {
		b := base
		if t >= 4 {
			b, t = base4, t-4
		}
		switch t {
		case 0:
			return Mem{Base: b, Disp: disp}
		case 3:
			return Mem{Base: b, Index: stride3, Scale: 1, Disp: disp}
		}
		return Mem{Base: b, Index: stride, Scale: uint8(t), Disp: disp}
	}
	acc := make([][2]VecVirtual, T)
	for t := range acc {
		acc[t] = [2]VecVirtual{ZMM(), ZMM()}
	}
	xp, xp4, yp4, wp, b := GP64(), GP64(), GP64(), GP64(), GP64()
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	for t := range acc {
		VPXORD(acc[t][0], acc[t][0], acc[t][0])
		VPXORD(acc[t][1], acc[t][1], acc[t][1])
	}
	MOVQ(x, xp)
	if T > 4 {
		LEAQ(Mem{Base: x, Index: ldx, Scale: 4}, xp4)
	}
	codedChunks(name, c, w, chunks, wp, b, lo, hi, mask, func(v0, v1 VecVirtual) {
		for off := 0; off < c.chunkBytes(); off += 64 {
			streamPrefetch(Mem{Base: wp, Disp: codedPrefetchDist + off})
		}
		for t := range acc {
			VFMADD231PS(at(xp, xp4, ldx, x3, t, 0), v0, acc[t][0])
			VFMADD231PS(at(xp, xp4, ldx, x3, t, 64), v1, acc[t][1])
		}
		ADDQ(U8(128), xp)
		if T > 4 {
			ADDQ(U8(128), xp4)
		}
	})
	if T > 4 {
		LEAQ(Mem{Base: y, Index: ldy, Scale: 4}, yp4)
	}
	for t := range acc {
		VADDPS(acc[t][1], acc[t][0], acc[t][0])
		reduce(avx512, acc[t][0], at(y, yp4, ldy, y3, t, 0))
	}
	ADDQ(U8(4), y)
	endRows(name, w, ldw, rows)
}

// unpackCoded writes unpack{BF12,F28}AVX512: the float32 values of rows
// coded rows (stride ldw bytes) into dst, row after row.
func unpackCoded(c coding) {
	name := "unpack" + c.name + "AVX512"
	TEXT(name, NOSPLIT, "func(w *byte, ldw int, chunks int, rows int, dst *float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s widens rows %s rows of chunks chunks of 32 (stride ldw bytes) into dst.", name, c.name))
	w, ldw, chunks, rows, dst, _ := params("w", "ldw", "chunks", "rows", "dst")
	lo, hi, mask := codedSetup(c)
	wp, b := GP64(), GP64()
	Label(name + "_row")
	TESTQ(rows, rows)
	JZ(LabelRef(name + "_end"))
	codedChunks(name, c, w, chunks, wp, b, lo, hi, mask, func(v0, v1 VecVirtual) {
		VMOVUPS(v0, Mem{Base: dst})
		VMOVUPS(v1, Mem{Base: dst, Disp: 64})
		ADDQ(U8(128), dst)
	})
	endRows(name, w, ldw, rows)
}
