package simd

import (
	"encoding/binary"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gozoo/gozoo/internal/quant"
)

// X16 keeps a quantized matrix regrouped by 16 rows for decode (on
// AVX-512: x16Exact's formats, for exact decode), in as many bytes
// (Q4_K's 6-bit scales and mins are unpacked to bytes: 2.8% more). On one thread, exact decode is bound by
// the vector pipes, not by memory: a row's kernel spends, per 32
// weights, a widening and a shift of the nibbles, two table lookups, two
// multiply-adds and one instruction for the block's scale d. With the
// same column of 16 rows in one vector, x's value is a broadcast operand
// of the multiply-add, the scale is applied once to 16 rows' block sums,
// and 4-byte words of 16 rows lie side by side, so that a load at byte
// offset i puts the rows' byte i of a word in the low bits of 16 lanes,
// where a lookup reads it (Q4_0) or a mask keeps it (Q8_0) with no
// widening. Q4_K's mins and scales go the same way: its weights are
// (d·sc_j)·q - dmin·m_j, and the kernel sums q·x by sub-block for 16 rows,
// scales the sums, and takes dmin·Σ_j m_j·(x's sum over sub-block j) off.
// Q6_K's 6-bit values are rearranged 5 to a word (putQ6K), where a mask
// leaves each as an exact q·2^6k, and its 32 is taken off through x's
// sums as Q4_K's mins are. With two threads decode is bound by memory
// instead, and there a regrouped matrix is one stream per thread, which
// the kernels prefetch 6 KB ahead, spread over each block's instructions.
// BenchmarkX16 (one thread) and BenchmarkX16Stream (two, as decode runs
// them) compare the row kernels with the regrouped ones; their figures
// are in docs/performance.md.
//
// A group of 16 rows is its blocks one after another; a block is the 16
// rows' d (16 halves; Q4_K: then dmin, and 4 words of scales and mins;
// Q5_K: then dmin, and its 12 bytes of 6-bit scales and mins as 3 words;
// Q6_K: then 4 words of scales; Q4_1 and Q5_1: then m, and Q5_1's fifth
// bits as a word, q5Bits; Q5_0: then its fifth bits so; IQ4_XS: then its 8 sub-block scales as bytes,
// each sub-block's 16 rows together; Q2_K, Q3_K: see putK23), then the
// words of their quantized values (Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1: 4 words,
// Q8_0: 8, Q2_K: 16, Q3_K: 24, Q4_K and IQ4_XS: 32, Q5_K: 40 (qh, then
// qs), Q6_K: 48), each as 16 rows' 4
// bytes: row r's word i at byte head + 64i + 4r. The kernels' loads run
// up to 3 bytes past a block, which the padding after the last group
// covers.
//
// On AVX-512 the formats past Q4_0, Q8_0, Q4_K and Q6_K have kernels on
// the same regroupings as AVX2's (gemv*x16AVX512: IQ4_NL and IQ4_XS by
// table, Q2_K by two field tables, Q3_K's and Q5's high bits merged into
// the index; Q5_0 regroups on AVX-512 only, where it also has few-row
// kernels). On AVX2 exact decode reads fast mode's regroupings
// (gemvX16*AVX2, the formats of x16AVX2), and Q5_K's, Q4_K's and Q6_K's:
// x's values are written eight times once per product, as AVX2's
// multiply-add has no broadcast operand. Products of more rows (prefill,
// batched decode) widen each group into a k×16 panel with the file's
// values (x16Panel*AVX2, on both) and multiply there; elsewhere they
// rebuild rows in the file's layout.
//
// As coded matrices: matrices of a read-only file mapping, packed when a model
// binds them to a Linear in exact mode (PackQuant), and their pages given
// back to the kernel.

// x16 is a regrouped matrix [out, in] (out a multiple of 16, in of the
// block size).
type x16 struct {
	f           quant.Format
	out, in     int
	head, words int // x16Head[f], x16Words[f]: rebuilding rows reads them per block
	data        []byte
}

// x16Words is the words of a block's values in the formats that regroup
// (IQ4_NL for fast mode only: see PackQuantFast).
var x16Words = map[quant.Format]int{quant.Q4_0: 4, quant.Q8_0: 8, quant.Q4_K: 32, quant.Q6_K: 48, quant.IQ4_NL: 4, quant.Q4_1: 4, quant.Q5_0: 4, quant.Q5_1: 4, quant.IQ4_XS: 32,
	quant.Q2_K: 16, quant.Q3_K: 8 + 16, quant.Q5_K: 8 + 32}

// x16Head is the bytes of a regrouped block before its values: the 16
// rows' d (and Q4_K's dmin, and its scales and mins, unpacked to bytes in
// 4 words; Q6_K's scales in 4 words; Q4_1's and Q5_1's m, and Q5_1's
// fifth bits as a word, see q5Bits, as Q5_0's after its d; IQ4_XS's sub-block scales ls−32 as
// bytes, sub-block b's 16 at 32+16b; Q2_K's dmin and Q2_K's and Q3_K's
// scales by pairs of sub-blocks, putK23).
var x16Head = map[quant.Format]int{quant.Q4_0: 32, quant.Q8_0: 32, quant.Q4_K: 64 + 4*64, quant.Q6_K: 32 + 4*64, quant.IQ4_NL: 32,
	quant.Q4_1: 64, quant.Q5_0: 32 + 64, quant.Q5_1: 64 + 64, quant.IQ4_XS: 32 + 8*16, quant.Q2_K: 64 + 8*32, quant.Q3_K: 32 + 8*32, quant.Q5_K: 64 + 3*64}

// x16Exact is the formats with AVX-512 regrouped exact kernels (their
// formats; x16AVX2 is AVX2's).
var x16Exact = [256]bool{quant.Q4_0: true, quant.Q8_0: true, quant.Q4_K: true, quant.Q6_K: true, quant.IQ4_NL: true, quant.IQ4_XS: true, quant.Q2_K: true, quant.Q3_K: true, quant.Q5_0: true, quant.Q5_1: true, quant.Q5_K: true}

// blockBytes is the bytes of one regrouped block of 16 rows.
func (p *x16) blockBytes() int { return p.head + 64*p.words }

// groupBytes is the bytes of a group of 16 rows.
func (p *x16) groupBytes() int { return p.in / p.f.BlockSize() * p.blockBytes() }

// packX16 regroups w, the blocks of f of a matrix [out, in], in slabs of
// about 4 MB split over the CPUs, and releases each slab's source pages
// once it is copied (with release set).
func packX16(w []byte, f quant.Format, out, in int, release func([]byte)) *x16 {
	p := &x16{f: f, out: out, in: in, head: x16Head[f], words: x16Words[f]}
	rb := in / f.BlockSize() * f.BlockBytes()
	if p.data = packMemory(out/16*p.groupBytes() + 64); p.data == nil {
		return nil
	}
	bySlabs(out, rb, func(g int) {
		for r := 0; r < 16; r++ {
			p.putRow(16*g+r, w[(16*g+r)*rb:(16*g+r+1)*rb])
		}
	}, func(r0, r1 int) {
		if release != nil {
			release(w[r0*rb : r1*rb])
		}
	})
	return p
}

// bySlabs runs group(g) for each group of 16 of out rows (rb bytes each),
// slab by slab of about 4 MB shared over the threads, and calls done(r0,
// r1) after each slab of rows: a packing's pass over its source, whose
// pages are given back slab by slab.
func bySlabs(out, rb int, group func(g int), done func(r0, r1 int)) {
	n := runtime.GOMAXPROCS(0)
	slab := max(16, (4<<20)/rb&^15)
	for r0 := 0; r0 < out; r0 += slab {
		r1 := min(out, r0+slab)
		groups := (r1 - r0) / 16
		var wg sync.WaitGroup
		for i := range n {
			a, b := r0/16+groups*i/n, r0/16+groups*(i+1)/n
			wg.Go(func() {
				for g := a; g < b; g++ {
					group(g)
				}
			})
		}
		wg.Wait()
		done(r0, r1)
	}
}

// block is regrouped block b of row r's group, and r's place in it.
func (p *x16) block(r, b int) ([]byte, int) {
	return p.data[r/16*p.groupBytes()+b*p.blockBytes():], r % 16
}

// putRow writes row r from src, its blocks in the file's layout.
func (p *x16) putRow(r int, src []byte) {
	bb, head, words := p.f.BlockBytes(), p.head, p.words
	for b := 0; b < p.in/p.f.BlockSize(); b++ {
		dst, rr := p.block(r, b)
		blk := src[b*bb:]
		switch p.f {
		case quant.Q6_K:
			putQ6K(dst, rr, blk)
			continue
		case quant.Q2_K, quant.Q3_K:
			putK23(p.f, dst, rr, blk, head)
			continue
		}
		dst[2*rr], dst[2*rr+1] = blk[0], blk[1]
		vals := blk[2:]
		switch p.f {
		case quant.IQ4_XS:
			sh := binary.LittleEndian.Uint16(blk[2:])
			for sb := range 8 {
				dst[32+16*sb+rr] = byte(int8(quant.IQ4XSScale(sb, sh, blk[4:8])))
			}
			vals = blk[8:]
		case quant.Q4_1, quant.Q5_1:
			dst[32+2*rr], dst[32+2*rr+1] = blk[2], blk[3]
			vals = blk[4:]
			if p.f == quant.Q5_1 {
				binary.LittleEndian.PutUint32(dst[64+4*rr:], q5Bits(binary.LittleEndian.Uint32(blk[4:])))
				vals = blk[8:]
			}
		case quant.Q5_0:
			binary.LittleEndian.PutUint32(dst[32+4*rr:], q5Bits(binary.LittleEndian.Uint32(blk[2:])))
			vals = blk[6:]
		}
		if p.f == quant.Q5_K {
			dst[32+2*rr], dst[32+2*rr+1] = blk[2], blk[3]
			for t := range 3 {
				copy(dst[64+64*t+4*rr:64+64*t+4*rr+4], blk[4+4*t:])
			}
			vals = blk[16:]
		}
		if p.f == quant.Q4_K {
			dst[32+2*rr], dst[32+2*rr+1] = blk[2], blk[3]
			for j := 0; j < 8; j++ {
				sc, m := quant.ScaleMinK4(j, blk[4:16])
				dst[64+64*(j/4)+4*rr+j%4] = sc
				dst[64+64*(2+j/4)+4*rr+j%4] = m
			}
			vals = blk[16:]
		}
		for i := 0; i < words; i++ {
			copy(dst[head+64*i+4*rr:head+64*i+4*rr+4], vals[4*i:])
		}
	}
}

// rowBytes writes row r in the file's layout into dst.
func (p *x16) rowBytes(r int, dst []byte) { p.rowPart(r, dst, true) }

// x16Vals is where a block's values start in the file's layout, for the
// formats whose values rowsBytes gathers by kernel.
var x16Vals = map[quant.Format]int{quant.Q4_0: 2, quant.Q8_0: 2, quant.IQ4_NL: 2, quant.Q4_1: 4, quant.Q5_0: 6, quant.Q5_1: 8,
	quant.IQ4_XS: 8, quant.Q4_K: 16, quant.Q5_K: 16, quant.Q2_K: 16, quant.Q3_K: 0}

// rowsBytes writes rows [r0, r0+g) in the file's layout into dst, one
// after another: each whole half group's values by x16Gather8AVX2 where it
// runs (rebuilding rows this way is prefill's share of a regrouping), the
// rest row by row.
func (p *x16) rowsBytes(r0, g int, dst []byte) {
	rb := p.in / p.f.BlockSize() * p.f.BlockBytes()
	vals, ok := x16Vals[p.f]
	gather := ok && p.words%4 == 0 && canGather()
	for r := r0; r < r0+g; {
		at := dst[(r-r0)*rb:]
		if !gather || r%8 != 0 || r+8 > r0+g {
			p.rowPart(r, at[:rb], true)
			r++
			continue
		}
		if p.f.BlockSize() == 32 {
			p.heads32(r, 8, at[:8*rb], rb)
		} else {
			for i := range 8 {
				p.rowPart(r+i, at[i*rb:(i+1)*rb], false)
			}
		}
		if !asmGatherX16(p, r, vals, at[:8*rb], rb) {
			for i := range 8 {
				p.rowPart(r+i, at[i*rb:(i+1)*rb], true)
			}
		}
		r += 8
	}
}

// heads32 writes the heads of rows [r0, r0+g) of one group of a format
// with blocks of 32 (d; Q4_1 and Q5_1: m, and Q5_1's fifth bits in the
// file's order) into the rows at dst, rb bytes apart: rowPart's work for
// these formats, whose short blocks made its loop with checked indexing
// per block a tenth of a SmolLM2-135M Q5_K_M prefill.
func (p *x16) heads32(r0, g int, dst []byte, rb int) {
	nb, bb, step := p.in/32, p.f.BlockBytes(), p.blockBytes()
	group := p.data[r0/16*p.groupBytes():]
	if len(group) < nb*step || len(dst) < g*rb || rb != nb*bb || r0%16+g > 16 {
		panic("simd: heads32 out of range")
	}
	withMin, q5, q50 := p.f == quant.Q4_1 || p.f == quant.Q5_1, p.f == quant.Q5_1, p.f == quant.Q5_0
	sp, dp := unsafe.Pointer(unsafe.SliceData(group)), unsafe.Pointer(unsafe.SliceData(dst))
	for r := range g {
		rr := r0%16 + r
		for b := range nb {
			// Each pointer from its base: none may point past its
			// allocation, even unused (checkptr, under -race).
			s, d := unsafe.Add(sp, b*step+2*rr), unsafe.Add(dp, r*rb+b*bb)
			*(*uint16)(d) = *(*uint16)(s)
			if withMin {
				*(*uint16)(unsafe.Add(d, 2)) = *(*uint16)(unsafe.Add(s, 32))
			}
			if q5 {
				*(*uint32)(unsafe.Add(d, 4)) = q5Unbits(*(*uint32)(unsafe.Add(s, 64+2*rr)))
			}
			if q50 {
				*(*uint32)(unsafe.Add(d, 2)) = q5Unbits(*(*uint32)(unsafe.Add(s, 32+2*rr)))
			}
		}
	}
}

// rowPart writes row r in the file's layout into dst, its values only
// with words.
func (p *x16) rowPart(r int, dst []byte, withWords bool) {
	bb, head, words := p.f.BlockBytes(), p.head, p.words
	group, rr, step := p.data[r/16*p.groupBytes():], r%16, p.blockBytes()
	for b := 0; b < p.in/p.f.BlockSize(); b++ {
		src := group[b*step:]
		blk := dst[b*bb:]
		switch p.f {
		case quant.Q6_K:
			getQ6K(blk, src, rr)
			continue
		case quant.Q2_K, quant.Q3_K:
			getK23(p.f, blk, src, rr, head, withWords)
			continue
		}
		blk[0], blk[1] = src[2*rr], src[2*rr+1]
		vals := blk[2:]
		switch p.f {
		case quant.IQ4_XS:
			var sh uint16
			clear(blk[4:8])
			for sb := range 8 {
				ls := byte(int8(src[32+16*sb+rr]) + 32)
				blk[4+sb/2] |= ls & 15 << (4 * (sb % 2))
				sh |= uint16(ls>>4) << (2 * sb)
			}
			binary.LittleEndian.PutUint16(blk[2:], sh)
			vals = blk[8:]
		case quant.Q4_1, quant.Q5_1:
			blk[2], blk[3] = src[32+2*rr], src[32+2*rr+1]
			vals = blk[4:]
			if p.f == quant.Q5_1 {
				binary.LittleEndian.PutUint32(blk[4:], q5Unbits(binary.LittleEndian.Uint32(src[64+4*rr:])))
				vals = blk[8:]
			}
		case quant.Q5_0:
			binary.LittleEndian.PutUint32(blk[2:], q5Unbits(binary.LittleEndian.Uint32(src[32+4*rr:])))
			vals = blk[6:]
		}
		if p.f == quant.Q5_K {
			blk[2], blk[3] = src[32+2*rr], src[32+2*rr+1]
			for t := range 3 {
				copy(blk[4+4*t:8+4*t], src[64+64*t+4*rr:])
			}
			vals = blk[16:]
		}
		if p.f == quant.Q4_K {
			blk[2], blk[3] = src[32+2*rr], src[32+2*rr+1]
			var sc, m [8]byte
			for j := 0; j < 8; j++ {
				sc[j] = src[64+64*(j/4)+4*rr+j%4]
				m[j] = src[64+64*(2+j/4)+4*rr+j%4]
			}
			// ggml's 12 bytes: sub-blocks 0-3 in the low 6 bits of bytes
			// 0-7, the top 2 bits of 4-7 above them, the low 4 bits of
			// 4-7 in bytes 8-11.
			for j := 0; j < 4; j++ {
				blk[4+j] = sc[j] | sc[j+4]>>4<<6
				blk[8+j] = m[j] | m[j+4]>>4<<6
				blk[12+j] = sc[j+4]&15 | m[j+4]&15<<4
			}
			vals = blk[16:]
		}
		if withWords {
			gatherWords(vals[:4*words], src[head+4*rr:head+64*(words-1)+4*rr+4], words)
		}
	}
}

// q5Bits rearranges a Q5_1 block's fifth bits qh (value v's at bit v) for
// the regrouped kernel (fastX16Min in the generator): value 4j+k's at bit
// j of byte k, so that the bits of the four values a byte of word i holds
// in its low nibbles (4i+k) and high nibbles (16+4i+k) are bits i and 4+i
// of byte k. q5Unbits is its inverse.
func q5Bits(qh uint32) uint32 {
	return q5Tables[0][0][qh&255] | q5Tables[0][1][qh>>8&255] | q5Tables[0][2][qh>>16&255] | q5Tables[0][3][qh>>24]
}

func q5Unbits(r uint32) uint32 {
	return q5Tables[1][0][r&255] | q5Tables[1][1][r>>8&255] | q5Tables[1][2][r>>16&255] | q5Tables[1][3][r>>24]
}

// q5Tables[0][b][v] is q5Bits of v as byte b of qh, the rest zero;
// q5Tables[1] is q5Unbits' (rebuilding rows runs it once a block).
var q5Tables = func() (t [2][4][256]uint32) {
	for b := range 4 {
		for v := range 256 {
			for k := range 8 {
				if v>>k&1 == 1 {
					i := 8*b + k // value i's bit; rearranged, bit i of a byte
					t[0][b][v] |= 1 << (8*(i%4) + i/4)
					t[1][b][v] |= 1 << (4*(i%8) + i/8)
				}
			}
		}
	}
	return t
}()

// gatherWords copies words 4-byte words, 64 bytes apart in src, to dst
// one after another: a row's values out of a regrouped block. Fast
// prefill rebuilds rows this way for the formats it does not stage from
// the regrouping, and with bounds checked per word it took a tenth of a
// Qwen3-0.6B IQ4_XS prefill.
func gatherWords(dst, src []byte, words int) {
	if len(dst) < 4*words || len(src) < 64*(words-1)+4 {
		panic("simd: gatherWords out of range")
	}
	d, s := unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src))
	for i := range words {
		*(*uint32)(unsafe.Add(d, 4*i)) = *(*uint32)(unsafe.Add(s, 64*i))
	}
}

// putK23 writes the Q2_K or Q3_K super-block blk as row rr of the
// regrouped block dst (fastX16Q23K in the generator): the 16 rows' d
// (Q2_K: then their dmin), then the sub-block scales by pairs, row rr's
// two bytes of pair p at head+32p+2rr (Q2_K: the file's sc|m<<4 bytes;
// Q3_K: its 6-bit scales less 32, as int8), then Q3_K's hmask as 8 words
// and the 2-bit values as 16 words.
func putK23(f quant.Format, dst []byte, rr int, blk []byte, head int) {
	if f == quant.Q2_K {
		dst[2*rr], dst[2*rr+1] = blk[80], blk[81]
		dst[32+2*rr], dst[32+2*rr+1] = blk[82], blk[83]
		for p := range 8 {
			dst[64+32*p+2*rr], dst[64+32*p+2*rr+1] = blk[2*p], blk[2*p+1]
		}
		for i := range 16 {
			copy(dst[head+64*i+4*rr:head+64*i+4*rr+4], blk[16+4*i:])
		}
		return
	}
	dst[2*rr], dst[2*rr+1] = blk[108], blk[109]
	for s := range 16 {
		dst[32+32*(s/2)+2*rr+s%2] = byte(int8(quant.Q3KScale(s, blk[96:108])))
	}
	for i := range 24 { // hmask, then qs: the file's first 96 bytes
		copy(dst[head+64*i+4*rr:head+64*i+4*rr+4], blk[4*i:])
	}
}

// getK23 is putK23's inverse: row rr of the regrouped block src in the
// file's layout into blk.
func getK23(f quant.Format, blk, src []byte, rr, head int, withWords bool) {
	if f == quant.Q2_K {
		blk[80], blk[81] = src[2*rr], src[2*rr+1]
		blk[82], blk[83] = src[32+2*rr], src[32+2*rr+1]
		for p := range 8 {
			blk[2*p], blk[2*p+1] = src[64+32*p+2*rr], src[64+32*p+2*rr+1]
		}
		if withWords {
			gatherWords(blk[16:80], src[head+4*rr:], 16)
		}
		return
	}
	blk[108], blk[109] = src[2*rr], src[2*rr+1]
	var sc [12]byte
	for s := range 16 {
		v := byte(int8(src[32+32*(s/2)+2*rr+s%2]) + 32)
		sc[s%8] |= v & 15 << (4 * (s / 8))
		sc[8+s%4] |= v >> 4 << (2 * (s / 4))
	}
	copy(blk[96:108], sc[:])
	if withWords {
		gatherWords(blk[:96], src[head+4*rr:], 24)
	}
}

// Q6_K's regrouped block (gemvQ6_Kx16 in the generator) takes as many
// bytes as the file's: after the 16 rows' d, sub-block j's scale is byte
// j%4 of word j/4, and its 16 values, 6 bits each, fill words 4+3j+t:
// value 16j+5t+k at bit 6k of word t (a field masked in place is then
// q·2^6k, exact as a float), and the last value's bits 2t, 2t+1 at bits
// 30-31. q6kAt is where row rr's byte k of word i of that block is.
func q6kAt(i, k, rr int) int { return 32 + 64*i + 4*rr + k }

// putQ6K writes the Q6_K super-block blk as row rr of the regrouped
// block dst.
func putQ6K(dst []byte, rr int, blk []byte) {
	dst[2*rr], dst[2*rr+1] = blk[208], blk[209]
	var q [256]uint32
	ql, qh := blk[:128], blk[128:192]
	// Value 128h+32c+l: the low nibble of ql[64h+l] (c = 0), of
	// ql[64h+32+l] (c = 1), their high nibbles (c = 2, 3); its top 2 bits
	// at bit 2c of qh[32h+l].
	for h := 0; h < 2; h++ {
		for l := 0; l < 32; l++ {
			a, b, hb := uint32(ql[64*h+l]), uint32(ql[64*h+32+l]), uint32(qh[32*h+l])
			q[128*h+l] = a&15 | hb&3<<4
			q[128*h+32+l] = b&15 | hb>>2&3<<4
			q[128*h+64+l] = a>>4 | hb>>4&3<<4
			q[128*h+96+l] = b>>4 | hb>>6<<4
		}
	}
	for j := 0; j < 16; j++ {
		dst[q6kAt(j/4, j%4, rr)] = blk[192+j]
		v := q[16*j : 16*j+16]
		for t := 0; t < 3; t++ {
			word := v[15]>>(2*t)<<30 | v[5*t] | v[5*t+1]<<6 | v[5*t+2]<<12 | v[5*t+3]<<18 | v[5*t+4]<<24
			binary.LittleEndian.PutUint32(dst[q6kAt(4+3*j+t, 0, rr):], word)
		}
	}
}

// getQ6K writes row rr of the regrouped Q6_K block src as a super-block
// in the file's layout into blk.
func getQ6K(blk, src []byte, rr int) {
	blk[208], blk[209] = src[2*rr], src[2*rr+1]
	var q [256]byte
	for j := 0; j < 16; j++ {
		blk[192+j] = src[q6kAt(j/4, j%4, rr)]
		var w [3]uint32
		for t := range w {
			w[t] = binary.LittleEndian.Uint32(src[q6kAt(4+3*j+t, 0, rr):])
		}
		v := q[16*j : 16*j+16]
		for t, word := range w {
			v[5*t], v[5*t+1], v[5*t+2] = byte(word&63), byte(word>>6&63), byte(word>>12&63)
			v[5*t+3], v[5*t+4] = byte(word>>18&63), byte(word>>24&63)
		}
		v[15] = byte(w[0]>>30 | w[1]>>30<<2 | w[2]>>30<<4)
	}
	ql, qh := blk[:128], blk[128:192]
	for h := 0; h < 2; h++ {
		for l := 0; l < 32; l++ {
			q0, q1, q2, q3 := q[128*h+l], q[128*h+32+l], q[128*h+64+l], q[128*h+96+l]
			ql[64*h+l] = q0&15 | q2<<4
			ql[64*h+32+l] = q1&15 | q3<<4
			qh[32*h+l] = q0>>4 | q1>>4<<2 | q2>>4<<4 | q3>>4<<6
		}
	}
}

// widenRows dequantizes rows [r0, r0+g) into dst: each row is put back
// in the file's layout and dequantized there, exactly as before packing.
func (p *x16) widenRows(r0, g int, dst []float32) {
	rb := p.in / p.f.BlockSize() * p.f.BlockBytes()
	bp := byteBuf.Get().(*[]byte)
	defer byteBuf.Put(bp)
	if cap(*bp) < g*rb {
		*bp = make([]byte, g*rb)
	}
	buf := (*bp)[:g*rb]
	p.rowsBytes(r0, g, buf)
	Weight{Kind: Quant, Format: p.f, Bytes: buf}.widenRows(0, g, p.in, dst)
}

var byteBuf = sync.Pool{New: func() any { return new([]byte) }}

// mulRowsX16 is mulRows for a regrouped weight: decode runs the kernel
// over the whole groups of [r0, r1) (the team's chunks are whole groups),
// more rows of x run on each group widened into a panel where a kernel
// widens the format, anything else goes through widened rows.
func mulRowsX16(y, x []float32, T int, w Weight, out, in, r0, r1 int) {
	p := w.x16
	if T == 1 && r0%16 == 0 && r1%16 == 0 && asmGemvX16(p, x, w.sums, r0, r1, y) {
		return
	}
	if p.byRows(T) && r0%16 == 0 && r1%16 == 0 && p.mulRowByRow(y, x, T, w.sums, out, r0, r1) {
		return
	}
	if T > 1 && r0%16 == 0 && r1%16 == 0 && p.mulPanels(y, x, T, out, r0, r1) {
		return
	}
	mulRowGroups(y, x, T, w, out, in, r0, r1)
}

// x16RowsMax is the most rows of x a regrouped product runs on the decode
// kernel (mulRowByRow) rather than on panels: widening a group into a
// panel costs about a row's product. Q8_0, Q4_K and Q5_0 run up to
// x16FewRows[f] rows so, four at a time (gemm{Q8_0,Q4_K,Q5_0}x16x*AVX512 widen
// each column once for the four), up to where panels catch up
// (docs/performance.md, "A few rows on regrouped weights").
var x16RowsMax = 3

var x16FewRows = [256]int{quant.Q8_0: 64, quant.Q4_K: 32, quant.Q5_0: 64}

// byRows says whether a product of T rows on p runs by rows.
func (p *x16) byRows(T int) bool {
	return T > 1 && (T <= x16RowsMax || T <= x16FewRows[p.f] && canGemmX16(p.f))
}

// x16RowSums is MulT's inputs for the exact regrouped kernels of a product
// of T rows: each row's sums of n values (none for n = 0), then with bcast
// its values eight times, row after row, in *buf.
func x16RowSums(x []float32, T, in, n int, bcast bool, buf *[]float32) []float32 {
	per := x16RowInputs(in, n, bcast)
	if cap(*buf) < T*per {
		*buf = make([]float32, T*per)
	}
	all := (*buf)[:T*per]
	for t := range T {
		row := all[t*per : (t+1)*per : (t+1)*per]
		s := row[:0]
		s = x16Sums(x[t*in:(t+1)*in], n, &s)
		if bcast {
			s = broadcastAfter(s, x[t*in:(t+1)*in], &row)
		}
	}
	return all
}

// x16RowInputs is the length of a row's inputs in x16RowSums.
func x16RowInputs(in, n int, bcast bool) int {
	per := 0
	if n > 0 {
		per = in / n
	}
	if bcast {
		per += 8 * in
	}
	return per
}

// mulRowByRow computes y's columns [r0, r1) (whole groups) for T rows of
// x on the decode kernel, a row (Q8_0 and Q4_K: four) at a time over
// slabs of groups that stay in the core's cache between rows: each row's
// result is the same bits as alone. sums is x16RowSums'. False where no
// decode kernel runs here.
func (p *x16) mulRowByRow(y, x []float32, T int, sums []float32, out, r0, r1 int) bool {
	n, bcast := x16Inputs(p.f)
	per := x16RowInputs(p.in, n, bcast)
	if !exactX16OK(p.f) || len(sums) < T*per {
		return false
	}
	slab := max(16, (256<<10)/p.groupBytes()*16)
	for s0 := r0; s0 < r1; s0 += slab {
		s1 := min(r1, s0+slab)
		for t := 0; t < T; {
			if R := min(T-t, 4); R > 1 && asmGemmX16(p, x[t*p.in:(t+R)*p.in], sums[t*per:], per, R, s0, s1, y[t*out:], out) {
				t += R
				continue
			}
			if !asmGemvX16(p, x[t*p.in:(t+1)*p.in], sums[t*per:(t+1)*per], s0, s1, y[t*out:]) {
				return false
			}
			t++
		}
	}
	return true
}

// mulPanels computes y's columns [r0, r1) (whole groups) for T rows of x,
// each group widened into a panel and multiplied there (GemmPanels: each
// output sums its products in order), or reports false where no kernel
// widens p's format.
func (p *x16) mulPanels(y, x []float32, T, out, r0, r1 int) bool {
	if !canPanelX16(p.f) {
		return false
	}
	bp := rowBuf.Get().(*[]float32)
	defer rowBuf.Put(bp)
	if cap(*bp) < 16*p.in {
		*bp = make([]float32, 16*p.in)
	}
	panel := (*bp)[:16*p.in]
	for g := r0 / 16; g < r1/16; g++ {
		asmPanelX16(p, g, panel)
		GemmPanels(T, 16, p.in, 1, x, p.in, panel, 16*p.in, y[16*g:], out, false)
	}
	return true
}

// x16Sum is the sub-block of the K-quants' regrouped exact kernels on
// AVX-512, which take their weights' offsets (Q4_K's mins, Q6_K's 32)
// through x's sums over each sub-block. x16AVX2 is the formats with AVX2
// exact kernels on fast mode's regroupings, which read x's values each
// eight times (AVX2's multiply-add has no broadcast operand), after x's
// sums over x16SumAVX2 values where they take an offset (Q2_K's mins,
// Q3_K's, Q4_0's and Q6_K's 4, 8 and 32, Q5_1's m and Q4_K's and Q5_K's
// mins).
var (
	x16Sum     = [256]int{quant.Q4_K: 32, quant.Q6_K: 16, quant.Q2_K: 16, quant.Q3_K: 16, quant.Q5_1: 32, quant.Q5_K: 32}
	x16AVX2    = [256]bool{quant.Q2_K: true, quant.Q3_K: true, quant.Q4_0: true, quant.IQ4_NL: true, quant.IQ4_XS: true, quant.Q5_K: true, quant.Q6_K: true, quant.Q5_1: true, quant.Q4_K: true, quant.Q8_0: true}
	x16SumAVX2 = [256]int{quant.Q2_K: 16, quant.Q3_K: 16, quant.Q4_0: 32, quant.Q5_K: 32, quant.Q6_K: 16, quant.Q5_1: 32, quant.Q4_K: 32}
)

// x16Sums computes sums, x's sums over each n values (16 or 32), for a
// product of a regrouped K-quant weight (none for n = 0).
func x16Sums(x []float32, n int, sums *[]float32) []float32 {
	if n == 0 {
		return nil
	}
	if cap(*sums) < len(x)/n {
		*sums = make([]float32, len(x)/n)
	}
	s := (*sums)[:len(x)/n]
	for j := range s {
		v := x[n*j : n*j+n]
		var a, b, c, d float32
		for i := 0; i < n; i += 4 {
			a, b, c, d = a+v[i], b+v[i+1], c+v[i+2], d+v[i+3]
		}
		s[j] = (a + b) + (c + d)
	}
	return s
}

var sumsBuf = sync.Pool{New: func() any { return new([]float32) }}

// broadcastAfter returns sums followed by each of x's values eight times,
// in *buf (which holds sums at its start).
func broadcastAfter(sums, x []float32, buf *[]float32) []float32 {
	n := len(sums) + 8*len(x)
	if cap(*buf) < n {
		grown := make([]float32, n)
		copy(grown, sums)
		*buf = grown
	}
	s := (*buf)[:n]
	if !asmBroadcast(x, s[len(sums):]) {
		for i, v := range x {
			for l := range 8 {
				s[len(sums)+8*i+l] = v
			}
		}
	}
	return s
}

// PackQuant regroups the matrix w [out, in] for exact decode where a
// kernel reads the regrouping here (x16Exact's formats on AVX-512,
// x16AVX2's on AVX2 and AVX-512; see X16 above), or returns nil where
// none does, out is not a multiple of 16, or GOZOO_PACK=off. w must lie in
// a read-only file mapping: its pages are given back to the kernel once
// regrouped.
func PackQuant(w []byte, f quant.Format, out, in int) *Packing {
	if packOff || !(exactX16OK(f) || packAll && x16Exact[f]) {
		return nil
	}
	// Every size: a small matrix's product runs on one thread, where the
	// regrouped kernels are 1.5 to 2.5 times the row kernels (fast mode's
	// too).
	return packQuant(w, f, out, in, 1)
}

// PackQuantFast regroups a Q4_0, IQ4_NL, Q8_0, Q4_1, Q5_1, IQ4_XS, Q2_K or
// Q3_K matrix by 16 rows for fast mode's decode on AVX2 and AVX-512
// (fastX16*AVX2: a weight row in each int32 lane), or returns nil as
// PackQuant does. Fast prefill stages or rebuilds groups of rows from it,
// or on AVX-512 repacks Q4_0, IQ4_NL, Q8_0 and IQ4_XS groups for the VNNI
// kernels (gemmFastX16). On AVX-512 VNNI it regroups Q4_K too, which the
// VNNI kernels read as it is, decode and products of rows alike
// (fastX16Q4_KVNNI, fastGemmX16Q4_Kx*VNNI).
func PackQuantFast(w []byte, f quant.Format, out, in int) *Packing {
	if packOff || !(fastX16OK(f) || packAll && x16Words[f] > 0) {
		return nil
	}
	return packQuant(w, f, out, in, 1) // every size, as PackQuant
}

// packQuant regroups w where it holds at least min bytes.
func packQuant(w []byte, f quant.Format, out, in, min int) *Packing {
	if x16Words[f] == 0 || out%16 != 0 || in%f.BlockSize() != 0 || len(w) == 0 {
		return nil
	}
	rb := in / f.BlockSize() * f.BlockBytes()
	if out*rb < min || len(w) < out*rb {
		return nil
	}
	x := packX16(w[:out*rb], f, out, in, release)
	if x == nil {
		return nil
	}
	return newPacking(nil, x, nil)
}
