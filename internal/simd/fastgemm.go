package simd

import (
	"sync"
	"unsafe"

	"github.com/x448/float16"

	"github.com/gozoo/gozoo/internal/quant"
)

// Fast mode's prefill on CPUs with AVX-512 VNNI: each thread repacks
// eight weight rows at a time into packed8, the layout of fastGemm8 (see
// _gen/fastgemm.go), and runs every row of activations past them. The
// repacking costs one pass over the weights per product, small beside
// the product itself once a prompt has a few rows, and needs no second
// copy of the model.

// packed8 is eight weight rows of Q8_0-family blocks repacked: per block,
// eight 32-byte vectors whose lane c holds four consecutive weights of
// row c as unsigned bytes (Q4_0: the nibble q; Q8_0: the value + 128),
// and the eight rows' block scales as float32.
type packed8 struct {
	b   []byte
	dw  []float32
	tmp []float32 // outputs of a group with fewer than eight rows
}

var packedPool = sync.Pool{New: func() any { return new(packed8) }}

// fastGemmFormat says whether f has a fastGemm8 path, and the offset its
// repacked weights carry.
func fastGemmFormat(f quant.Format) (offset int32, ok bool) {
	switch f {
	case quant.Q8_0:
		return 128, true
	case quant.Q4_0:
		return 8, true
	}
	return 0, false
}

// pack repacks rows (at most 8) weight rows of blocks blocks from w (row
// stride rb bytes); missing rows are zero.
func (p *packed8) pack(f quant.Format, w []byte, rb, rows, blocks int) {
	p.b = grow(p.b, blocks*256)
	p.dw = grow(p.dw, blocks*8)
	if rows < 8 {
		clear(p.b)
		clear(p.dw)
	}
	// Whole words at a time, unaligned loads (amd64 and arm64 allow
	// them); a bounds check per word made this an eighth of a prefill.
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&p.b[0])), blocks*64)
	for c := 0; c < rows; c++ {
		row := w[c*rb : (c+1)*rb]
		switch f {
		case quant.Q8_0:
			_ = row[blocks*34-1]
			for b := 0; b < blocks; b++ {
				blk := unsafe.Pointer(&row[b*34])
				p.dw[b*8+c] = float16.Frombits(*(*uint16)(blk)).Float32()
				src := (*[8]uint32)(unsafe.Add(blk, 2))
				dst := (*[64]uint32)(words[b*64:])
				for j := 0; j < 8; j++ {
					dst[8*j+c] = src[j] ^ 0x80808080
				}
			}
		case quant.Q4_0:
			_ = row[blocks*18-1]
			for b := 0; b < blocks; b++ {
				blk := unsafe.Pointer(&row[b*18])
				p.dw[b*8+c] = float16.Frombits(*(*uint16)(blk)).Float32()
				src := (*[4]uint32)(unsafe.Add(blk, 2))
				dst := (*[64]uint32)(words[b*64:])
				for j := 0; j < 4; j++ {
					v := src[j]
					dst[8*j+c] = v & 0x0f0f0f0f
					dst[8*(j+4)+c] = v >> 4 & 0x0f0f0f0f
				}
			}
		}
	}
}

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
// quantized to Q8_0 blocks, eight weight rows at a time.
func gemmFast(y []float32, T int, w Weight, out, in, r0, r1 int, a *acts) {
	rb, blocks := w.bytes(in), in/32
	p := packedPool.Get().(*packed8)
	for j0 := r0; j0 < r1; j0 += 8 {
		rows := min(8, r1-j0)
		p.pack(w.Format, w.Bytes[j0*rb:], rb, rows, blocks)
		if rows == 8 {
			asmFastGemm8(p, blocks, a.q, in, a.d, a.corr, T, y[j0:], out)
			continue
		}
		p.tmp = grow(p.tmp, T*8)
		asmFastGemm8(p, blocks, a.q, in, a.d, a.corr, T, p.tmp, 8)
		for t := 0; t < T; t++ {
			copy(y[t*out+j0:t*out+j0+rows], p.tmp[t*8:])
		}
	}
	packedPool.Put(p)
}
