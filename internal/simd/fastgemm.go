package simd

import (
	"math"
	"sync"
	"unsafe"

	"github.com/x448/float16"

	"github.com/gozoo/gozoo/internal/quant"
)

// Fast mode's prefill on CPUs with AVX-512 VNNI: each thread repacks
// weight rows, sixteen at a time for the Q8_0 family and eight for the
// K-quants, into packedRows, the layout of the fastGemm kernels (see
// _gen/fastgemm.go), and runs every row of activations past them. The
// repacking costs one pass over the weights per product, small beside
// the product itself once a prompt has a few rows, and needs no second
// copy of the model.

// packedRows is weight rows repacked. For the Q8_0 family (pack, 16
// rows), per block: eight vectors of 16 words whose word c holds four
// consecutive weights of row c as unsigned bytes (Q4_0: the nibble q;
// Q5_0: the 5-bit q; Q8_0: the value + 128), and in dw the rows' block
// scales as float32. For the K-quants, see packK.
type packedRows struct {
	b   []byte
	dw  []float32
	tmp []float32 // outputs of a group with fewer than eight rows
}

var packedPool = sync.Pool{New: func() any { return new(packedRows) }}

// fastGemmFormat says whether f has a repacked prefill kernel, and the
// offset its repacked weights carry when the activation block sums must
// take it off (the Q8_0 family; the K-quants' kernels use the Q8_K sums).
func fastGemmFormat(f quant.Format) (offset int32, ok bool) {
	switch f {
	case quant.Q8_0, quant.IQ4_NL: // IQ4_NL repacked as its levels, Q8_0's values
		return 128, true
	case quant.Q4_0:
		return 8, true
	case quant.Q5_0:
		return 16, true
	case quant.Q4_K:
		return 0, true
	case quant.Q6_K:
		return 32, true // decode's lanes only (fastQ6KVNNI)
	case quant.IQ4_XS: // as its levels plus 128, in Q4_K's layout
		return 128, true
	}
	return 0, false
}

// packKBytes is the size of one repacked super-block of kLanes(f) rows.
func packKBytes(f quant.Format) int {
	switch f {
	case quant.Q6_K:
		return 2848
	case quant.IQ4_XS:
		return 5184
	}
	return 5248
}

// kLanes is how many weight rows a K-quant's repacking holds, a lane each:
// sixteen on 512-bit vectors, but Q6_K's eight on 256-bit ones.
func kLanes(f quant.Format) int {
	if f == quant.Q6_K {
		return 8
	}
	return 16
}

// packK repacks rows (at most kLanes(f)) K-quant weight rows of blocks
// super-blocks for fastGemmQ4_K / fastGemmQ6_K / fastGemmIQ4_XS. Per
// super-block, in 32-bit words with lane c for row c:
//
//	Q4_K: words 0-1023  sub-block j's nibbles, 4 values a word, as bytes
//	      (16 rows), words 1024-1151 sc_j (int32), 1152-1279 m_j twice
//	      (int16 pair), 1280-1295 d, 1296-1311 dmin (float32)
//	IQ4_XS: as Q4_K, its levels plus 128 for the nibbles, ls_j−32 for
//	      both sc_j and m_j, and no dmin
//	Q6_K: words 0-511   group g's 6-bit values (16 a group), as bytes
//	      (8 rows), words 512-639 sc_g (int32), 640-703 (sc_2i, sc_2i+1)
//	      (int16 pairs), 704-711 d (float32)
func (p *packedRows) packK(f quant.Format, w []byte, rb, rows, blocks int) {
	size := packKBytes(f)
	p.b = grow(p.b, blocks*size)
	if rows < kLanes(f) {
		clear(p.b)
	}
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&p.b[0])), blocks*size/4)
	if rows == kLanes(f) && asmFastPackK(f, w, rb, blocks, words) {
		return
	}
	packKRows(f, w, rb, rows, blocks, words)
}

// packKRows is packK's loop in Go, into words (p.b as 32-bit words).
func packKRows(f quant.Format, w []byte, rb, rows, blocks int, words []uint32) {
	half := func(b unsafe.Pointer) uint32 { return math.Float32bits(halfAt(b)) }
	// Whole words through array pointers: no bounds check per word.
	for c := 0; c < rows; c++ {
		row := w[c*rb : (c+1)*rb]
		for b := 0; b < blocks; b++ {
			if f == quant.Q4_K {
				blk := row[b*144 : b*144+144]
				dst := (*[1312]uint32)(words[b*1312:])
				for j := 0; j < 8; j++ {
					sc, m := quant.ScaleMinK4(j, blk[4:16])
					dst[1024+16*j+c] = uint32(sc)
					dst[1152+16*j+c] = uint32(m) | uint32(m)<<16
				}
				qs := (*[32]uint32)(unsafe.Pointer(&blk[16]))
				for ch := 0; ch < 4; ch++ {
					lo, hi := dst[256*ch:], dst[256*ch+128:]
					for k := 0; k < 8; k++ {
						v := qs[8*ch+k]
						lo[16*k+c] = v & 0x0f0f0f0f
						hi[16*k+c] = v >> 4 & 0x0f0f0f0f
					}
				}
				dst[1280+c], dst[1296+c] = half(unsafe.Pointer(&blk[0])), half(unsafe.Pointer(&blk[2]))
				continue
			}
			if f == quant.IQ4_XS {
				// Q4_K's layout: sub-block s's low nibbles, then its high
				// ones, its scale ls−32 as sc and as an int16 pair.
				blk := row[b*136 : b*136+136]
				dst := (*[1296]uint32)(words[b*1296:])
				qs := (*[32]uint32)(unsafe.Pointer(&blk[8]))
				sh := uint32(blk[2]) | uint32(blk[3])<<8
				for s := 0; s < 8; s++ {
					ls := int32(blk[4+s/2]>>(4*(s%2))&15) | int32(sh>>(2*s)&3)<<4
					sc := uint32(ls - 32)
					dst[1024+16*s+c] = sc
					dst[1152+16*s+c] = sc&0xffff | sc<<16
					for w := 0; w < 4; w++ {
						v := qs[4*s+w]
						dst[128*s+16*w+c] = iq4Levels(v & 0x0f0f0f0f)
						dst[128*s+16*(w+4)+c] = iq4Levels(v >> 4 & 0x0f0f0f0f)
					}
				}
				dst[1280+c] = half(unsafe.Pointer(&blk[0]))
				continue
			}
			blk := row[b*210 : b*210+210]
			dst := (*[712]uint32)(words[b*712:])
			ql := (*[32]uint32)(unsafe.Pointer(&blk[0]))
			qh := (*[16]uint32)(unsafe.Pointer(&blk[128]))
			sc := blk[192:208]
			for g := 0; g < 16; g++ {
				dst[512+8*g+c] = uint32(int32(int8(sc[g])))
			}
			for i := 0; i < 8; i++ {
				dst[640+8*i+c] = uint32(uint16(int8(sc[2*i]))) | uint32(uint16(int8(sc[2*i+1])))<<16
			}
			// Values 128h + 32k + l, l = 4i..4i+3: low (k < 2) or high
			// nibbles of ql[64h + 32(k%2) + l], bits 2k, 2k+1 of qh[32h + l];
			// group (32k + l)/16 + 8h, word (l%16)/4 of it.
			for h := 0; h < 2; h++ {
				for i := 0; i < 8; i++ {
					hw := qh[8*h+i]
					for k := 0; k < 4; k++ {
						lo := ql[16*h+8*(k%2)+i] >> uint(4*(k/2)) & 0x0f0f0f0f
						v := lo | (hw>>uint(2*k)&0x03030303)<<4
						g := 8*h + 2*k + i/4
						dst[32*g+8*(i%4)+c] = v
					}
				}
			}
			dst[704+c] = half(unsafe.Pointer(&blk[208]))
		}
	}
}

// pack repacks rows (at most 16) weight rows of blocks blocks from w
// (row stride rb bytes) for the Q8_0 family's kernels; missing rows are
// zero.
func (p *packedRows) pack(f quant.Format, w []byte, rb, rows, blocks int) {
	p.b = grow(p.b, blocks*32*16)
	p.dw = grow(p.dw, blocks*16)
	if rows < 16 {
		clear(p.b)
		clear(p.dw)
	}
	// Whole words at a time, unaligned loads (amd64 and arm64 allow
	// them), into fixed-size arrays with the lane masked: no bounds check
	// per word (one a word made this an eighth of a prefill). Word 16j + c
	// of a block is row c's weights 4j..4j+3.
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&p.b[0])), blocks*128)
	if rows == 16 && asmFastPack(f, w, rb, blocks, words, p.dw) {
		return
	}
	p.packRows(f, w, rb, rows, blocks, words)
}

// packRows is pack's loop in Go, into words (p.b as 32-bit words).
func (p *packedRows) packRows(f quant.Format, w []byte, rb, rows, blocks int, words []uint32) {
	bb := f.BlockBytes()
	_ = w[(rows-1)*rb+blocks*bb-1]
	// Block by block, the 16 rows' words of a block written together
	// (row by row, each row's pass wrote a word to every line of the
	// buffer, larger than L1 for 3072 columns).
	for b := 0; b < blocks; b++ {
		dst := (*[128]uint32)(words[b*128:])
		dw := (*[16]float32)(p.dw[b*16:])
		for c := 0; c < rows; c++ {
			blk, lane := unsafe.Pointer(&w[c*rb+b*bb]), c&15
			dw[lane] = halfAt(blk)
			switch f {
			case quant.Q8_0:
				src := (*[8]uint32)(unsafe.Add(blk, 2))
				for j := 0; j < 8; j++ {
					dst[16*j+lane] = src[j] ^ 0x80808080
				}
			case quant.Q5_0:
				qh := *(*uint32)(unsafe.Add(blk, 2))
				src := (*[4]uint32)(unsafe.Add(blk, 6))
				for j := 0; j < 4; j++ {
					v := src[j]
					dst[16*j+lane] = v&0x0f0f0f0f | fifthBits[qh>>(4*j)&15]
					dst[16*(j+4)+lane] = v>>4&0x0f0f0f0f | fifthBits[qh>>(16+4*j)&15]
				}
			case quant.Q4_0:
				src := (*[4]uint32)(unsafe.Add(blk, 2))
				for j := 0; j < 4; j++ {
					v := src[j]
					dst[16*j+lane] = v & 0x0f0f0f0f
					dst[16*(j+4)+lane] = v >> 4 & 0x0f0f0f0f
				}
			case quant.IQ4_NL:
				src := (*[4]uint32)(unsafe.Add(blk, 2))
				for j := 0; j < 4; j++ {
					v := src[j]
					dst[16*j+lane] = iq4Levels(v & 0x0f0f0f0f)
					dst[16*(j+4)+lane] = iq4Levels(v >> 4 & 0x0f0f0f0f)
				}
			}
		}
	}
}

// iq4Levels maps each byte of v, a nibble, to ggml's IQ4_NL level plus
// 128 (unsigned, as the Q8_0 family's repacked weights are).
func iq4Levels(v uint32) uint32 {
	return uint32(iq4LevelsU8[v&15]) | uint32(iq4LevelsU8[v>>8&15])<<8 | uint32(iq4LevelsU8[v>>16&15])<<16 | uint32(iq4LevelsU8[v>>24])<<24
}

var iq4LevelsU8 = func() (t [16]byte) {
	for i, v := range quant.IQ4Values() {
		t[i] = byte(int(v) + 128)
	}
	return t
}()

// gemmFastX16 is gemmFast on a regrouped weight: Q4_0's and IQ4_XS's
// groups of 16 rows are repacked straight from the regrouping
// (fastPackX16*), whose words are already the rows' side by side; Q4_K's,
// Q5_0's, Q8_0's and IQ4_NL's kernels read their regrouping as it is.
func gemmFastX16(y []float32, T int, p *x16, out, in, r0, r1 int, a *acts) bool {
	if r0%16 != 0 || r1%16 != 0 {
		return false
	}
	if p.f == quant.Q4_K || p.f == quant.Q5_0 || (p.f == quant.Q8_0 || p.f == quant.IQ4_NL) && fastGemmOK() {
		for g := r0 / 16; g < r1/16; g++ {
			if g+1 < r1/16 && canPrefetch() {
				prefetch(uintptr(unsafe.Pointer(&p.data[(g+1)*p.groupBytes()])), p.groupBytes()/64)
			}
			var ok bool
			if p.f == quant.Q4_K {
				ok = asmFastGemmX16K(p, g, a.q, a.d, a.sums, T, y[16*g:], out)
			} else {
				ok = asmFastGemmX16Q8(p, g, a.q, a.d, a.corr, T, y[16*g:], out)
			}
			if !ok {
				return false
			}
		}
		return true
	}
	if !canPackX16Fast(p.f) {
		return false
	}
	pr := packedPool.Get().(*packedRows)
	defer packedPool.Put(pr)
	if p.f == quant.IQ4_XS {
		blocks := in / 256
		pr.b = grow(pr.b, blocks*packKBytes(p.f))
		for g := r0 / 16; g < r1/16; g++ {
			asmFastPackX16(p, g, pr)
			asmFastGemmK(p.f, pr, blocks, a.q, in, a.d, a.sums, T, y[16*g:], out)
		}
		return true
	}
	blocks := in / 32
	pr.b = grow(pr.b, blocks*32*16)
	pr.dw = grow(pr.dw, blocks*16)
	for g := r0 / 16; g < r1/16; g++ {
		asmFastPackX16(p, g, pr)
		asmFastGemm16(pr, blocks, a.q, in, a.d, a.corr, T, y[16*g:], out)
	}
	return true
}

// halfAt is the IEEE half at p as a float32 (a conversion by the float16
// package took 6% of a 128-token fast prefill, in repacking the scales).
func halfAt(p unsafe.Pointer) float32 { return halfTable[*(*uint16)(p)] }

// halfTable holds every IEEE half as a float32, as VCVTPH2PS converts
// it: the exact kernels read a block's scale from it by the broadcast
// operand of a multiply, which spends no vector instruction on the
// conversion (256 KB; a model's scales touch few of its lines).
var halfTable = func() *[65536]float32 {
	var t [65536]float32
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return &t
}()

// fifthBits[n] has 0x10 in byte i where bit i of n is set: Q5_0's fifth
// bits, four values at a time.
var fifthBits = func() (t [16]uint32) {
	for n := range t {
		for i := 0; i < 4; i++ {
			if n>>i&1 == 1 {
				t[n] |= 0x10 << (8 * i)
			}
		}
	}
	return t
}()

// blockSums sets corr[i] = offset · (the sum of activation block i), the
// term the repacked weights' offset adds to every dot product.
func blockSums(corr []int32, q []int8, offset int32) {
	for i := range corr {
		var s int32
		for _, v := range q[32*i : 32*i+32] {
			s += int32(v)
		}
		corr[i] = offset * s
	}
}

// gemmFast computes the columns [r0, r1) of y [T, out] from activations
// quantized to Q8_0 or Q8_K blocks, sixteen weight rows at a time (eight
// for Q6_K).
func gemmFast(y []float32, T int, w Weight, out, in, r0, r1 int, a *acts) {
	f, rb := w.Format, w.bytes(in)
	kq := quant.KQuant(f)
	blocks := in / quant.ActBlock(f)
	width := 16
	if kq {
		width = kLanes(f)
	}
	p := packedPool.Get().(*packedRows)
	gemm := func(y []float32, ldy int) {
		switch {
		case kq:
			asmFastGemmK(f, p, blocks, a.q, in, a.d, a.sums, T, y, ldy)
		default:
			asmFastGemm16(p, blocks, a.q, in, a.d, a.corr, T, y, ldy)
		}
	}
	for j0 := r0; j0 < r1; j0 += width {
		rows := min(width, r1-j0)
		if next := j0 + width; next < r1 && canPrefetch() {
			// The next rows come from memory while these run (5% on a
			// 128-token fast prefill, gozoo bench).
			prefetch(uintptr(unsafe.Pointer(&w.Bytes[next*rb])), min(width, r1-next)*rb/64)
		}
		if kq {
			p.packK(f, w.Bytes[j0*rb:], rb, rows, blocks)
		} else {
			p.pack(f, w.Bytes[j0*rb:], rb, rows, blocks)
		}
		if rows == width {
			gemm(y[j0:], out)
			continue
		}
		p.tmp = grow(p.tmp, T*width)
		gemm(p.tmp, width)
		for t := 0; t < T; t++ {
			copy(y[t*out+j0:t*out+j0+rows], p.tmp[t*width:])
		}
	}
	packedPool.Put(p)
}
