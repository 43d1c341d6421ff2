// Package quant holds llama.cpp's block-quantized weight formats as the
// zoo keeps them in memory (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL; the
// K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS) and the plain-Go
// reference of their arithmetic, which the SIMD kernels of internal/simd
// are tested against:
//
//   - exact dequantization (DequantizeRow): ggml's dequantize_row_* in
//     float32 arithmetic, in its order, so that a row dequantized here
//     equals ggml's own bit for bit;
//   - fast mode's arithmetic (acts.go: QuantizeActs, DotActs): each
//     activation row quantized to Q8_0 or Q8_K blocks and multiplied by
//     the weight blocks in integers, as llama.cpp's CPU backend does;
//   - ggml's reference quantizers (quantize.go: QuantizeRow), with which
//     gozoo quantize writes GGUF files that hold what llama.cpp would
//     have written.
//
// A row is a sequence of whole blocks along the contiguous axis.
package quant

import (
	"fmt"

	"github.com/x448/float16"
)

// Format is a block-quantized weight format.
type Format uint8

const (
	// Q8_0 is blocks of 32: f16 d, 32 int8 q; y = q·d.
	Q8_0 Format = iota + 1
	// Q4_0 is blocks of 32: f16 d, 16 bytes of nibbles; y = (q-8)·d,
	// low nibbles the first 16 values, high nibbles the next 16.
	Q4_0
	// Q4_K is super-blocks of 256: f16 d, f16 dmin, 12 bytes of 6-bit
	// scales and mins for 8 sub-blocks of 32, 128 bytes of nibbles.
	Q4_K
	// Q6_K is super-blocks of 256: 128 bytes of low nibbles, 64 bytes of
	// high 2-bit pairs, 16 int8 scales, f16 d.
	Q6_K
	// Q5_0 is blocks of 32: f16 d, 32 high bits (u32), 16 bytes of low
	// nibbles; y = (q-16)·d. llama.cpp's Q4_K_M falls back to it for rows
	// that are not whole 256-value super-blocks (SmolLM2's 576).
	Q5_0
	// Q4_1 is blocks of 32: f16 d, f16 m, 16 bytes of nibbles; y = q·d + m.
	Q4_1
	// Q5_1 is blocks of 32: f16 d, f16 m, 32 high bits (u32), 16 bytes of
	// low nibbles; y = q·d + m.
	Q5_1
	// Q2_K is super-blocks of 256: 16 bytes of 4-bit scale|min pairs, 64
	// bytes of 2-bit values, then f16 d and f16 dmin (last).
	Q2_K
	// Q3_K is super-blocks of 256: 32 bytes of high bits (hmask), 64 bytes
	// of 2-bit values, 12 bytes of 6-bit scales, f16 d (last).
	Q3_K
	// Q5_K is super-blocks of 256: f16 d, f16 dmin, Q4_K's 12 scale bytes,
	// 32 bytes of fifth bits, 128 bytes of nibbles.
	Q5_K
	// IQ4_NL is blocks of 32: f16 d, 16 bytes of nibbles indexing the
	// non-linear table kvaluesIQ4NL; y = d·K[q].
	IQ4_NL
	// IQ4_XS is super-blocks of 256: f16 d, u16 scales_h, 4 bytes
	// scales_l, 128 bytes of nibbles indexing kvaluesIQ4NL.
	IQ4_XS
)

// lastFormat is the highest Format value: valid formats are Q8_0..lastFormat.
const lastFormat = IQ4_XS

var formats = [...]struct {
	name              string
	blockSize, blockB int
}{
	Q8_0:   {"Q8_0", 32, 34},
	Q4_0:   {"Q4_0", 32, 18},
	Q4_K:   {"Q4_K", 256, 144},
	Q6_K:   {"Q6_K", 256, 210},
	Q5_0:   {"Q5_0", 32, 22},
	Q4_1:   {"Q4_1", 32, 20},
	Q5_1:   {"Q5_1", 32, 24},
	Q2_K:   {"Q2_K", 256, 84},
	Q3_K:   {"Q3_K", 256, 110},
	Q5_K:   {"Q5_K", 256, 176},
	IQ4_NL: {"IQ4_NL", 32, 18},
	IQ4_XS: {"IQ4_XS", 256, 136},
}

func (f Format) String() string {
	if f.valid() {
		return formats[f].name
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

func (f Format) valid() bool { return f >= Q8_0 && f <= lastFormat }

// BlockSize is the number of values in one block.
func (f Format) BlockSize() int { return formats[f].blockSize }

// BlockBytes is the number of bytes of one block.
func (f Format) BlockBytes() int { return formats[f].blockB }

// RowBytes is the size of a row of cols values, or an error when cols is
// not a whole number of blocks.
func (f Format) RowBytes(cols int) (int, error) {
	if !f.valid() {
		return 0, fmt.Errorf("unknown quantized format %d", uint8(f))
	}
	if cols <= 0 || cols%f.BlockSize() != 0 {
		return 0, fmt.Errorf("%s rows of %d values are not whole blocks of %d", f, cols, f.BlockSize())
	}
	return cols / f.BlockSize() * f.BlockBytes(), nil
}

func half(b []byte) float32 { return float16.Frombits(uint16(b[0]) | uint16(b[1])<<8).Float32() }

// DequantizeRow widens len(dst) values (whole blocks) from src into dst.
// Callers have checked the sizes: src holds len(dst)/BlockSize blocks.
func DequantizeRow(f Format, src []byte, dst []float32) {
	switch f {
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*34 : b*34+34]
			d := half(blk)
			y := dst[b*32 : b*32+32]
			for j := range y {
				y[j] = float32(int8(blk[2+j])) * d
			}
		}
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*18 : b*18+18]
			d := half(blk)
			y := dst[b*32 : b*32+32]
			for j := 0; j < 16; j++ {
				q := blk[2+j]
				y[j] = float32(int(q&15)-8) * d
				y[j+16] = float32(int(q>>4)-8) * d
			}
		}
	case Q4_K:
		for b := 0; b < len(dst)/256; b++ {
			dequantQ4K((*[144]byte)(src[b*144:]), (*[256]float32)(dst[b*256:]))
		}
	case Q6_K:
		for b := 0; b < len(dst)/256; b++ {
			dequantQ6K((*[210]byte)(src[b*210:]), (*[256]float32)(dst[b*256:]))
		}
	case Q5_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*22 : b*22+22]
			d := half(blk)
			qh := uint32(blk[2]) | uint32(blk[3])<<8 | uint32(blk[4])<<16 | uint32(blk[5])<<24
			y := dst[b*32 : b*32+32]
			for j := 0; j < 16; j++ {
				q := blk[6+j]
				h0 := byte((qh>>j)<<4) & 0x10
				h1 := byte(qh>>(j+12)) & 0x10
				y[j] = float32(int(q&15|h0)-16) * d
				y[j+16] = float32(int(q>>4|h1)-16) * d
			}
		}
	case Q4_1, Q5_1, IQ4_NL:
		dequantSmall(f, src, dst)
	case Q2_K, Q3_K, Q5_K, IQ4_XS:
		dequantK(f, src, dst)
	default:
		panic(fmt.Sprintf("quant: DequantizeRow of %s", f))
	}
}

// dequantQ4K widens one Q4_K super-block. Each 32-value sub-block has
// one scale and min, so its 16 possible values are computed once (as
// d·sc·q - dmin·m, the same float32 operations per value) and looked up.
func dequantQ4K(blk *[144]byte, y *[256]float32) {
	d, dmin := half(blk[0:]), half(blk[2:])
	scales := blk[4:16]
	var lo, hi [16]float32
	for c := 0; c < 4; c++ {
		sc1, m1 := scaleMinK4(2*c, scales)
		sc2, m2 := scaleMinK4(2*c+1, scales)
		d1, min1 := d*float32(sc1), dmin*float32(m1)
		d2, min2 := d*float32(sc2), dmin*float32(m2)
		for q := range 16 {
			lo[q] = float32(d1*float32(q)) - min1 // no fused multiply-add
			hi[q] = float32(d2*float32(q)) - min2
		}
		q := (*[32]byte)(blk[16+32*c:])
		yl, yh := (*[32]float32)(y[64*c:]), (*[32]float32)(y[64*c+32:])
		for l, v := range q {
			yl[l] = lo[v&15]
			yh[l] = hi[v>>4]
		}
	}
}

// dequantQ6K widens one Q6_K super-block: d·sc·q per value, with d·sc
// computed once per 16 values (the product is evaluated in that order).
func dequantQ6K(blk *[210]byte, y *[256]float32) {
	d := half(blk[208:])
	for h := 0; h < 2; h++ {
		l0, h0 := (*[64]byte)(blk[64*h:]), (*[32]byte)(blk[128+32*h:])
		s0 := (*[8]byte)(blk[192+8*h:])
		y0 := (*[128]float32)(y[128*h:])
		for is := 0; is < 2; is++ {
			d1, d2 := d*float32(int8(s0[is])), d*float32(int8(s0[is+2]))
			d3, d4 := d*float32(int8(s0[is+4])), d*float32(int8(s0[is+6]))
			for l := 16 * is; l < 16*is+16; l++ {
				a, b, c := l0[l], l0[l+32], h0[l]
				y0[l] = d1 * float32(int(a&15|(c&3)<<4)-32)
				y0[l+32] = d2 * float32(int(b&15|(c>>2&3)<<4)-32)
				y0[l+64] = d3 * float32(int(a>>4|(c>>4&3)<<4)-32)
				y0[l+96] = d4 * float32(int(b>>4|(c>>6&3)<<4)-32)
			}
		}
	}
}

// scaleMinK4 unpacks sub-block j's 6-bit scale and min (ggml's
// get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// ScaleMinK4 is Q4_K's 6-bit scale and min of sub-block j (0..7) from a
// super-block's 12 packed bytes.
func ScaleMinK4(j int, scales []byte) (sc, m uint8) { return scaleMinK4(j, scales) }
