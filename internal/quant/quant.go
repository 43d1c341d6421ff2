// Package quant holds llama.cpp's block-quantized weight formats as the
// zoo keeps them in memory (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K) and the plain-Go
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
)

var formats = [...]struct {
	name              string
	blockSize, blockB int
}{
	Q8_0: {"Q8_0", 32, 34},
	Q4_0: {"Q4_0", 32, 18},
	Q4_K: {"Q4_K", 256, 144},
	Q6_K: {"Q6_K", 256, 210},
	Q5_0: {"Q5_0", 32, 22},
}

func (f Format) String() string {
	if f.valid() {
		return formats[f].name
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

func (f Format) valid() bool { return f >= Q8_0 && f <= Q5_0 }

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
			blk := src[b*144 : b*144+144]
			d, dmin := half(blk), half(blk[2:])
			scales, qs := blk[4:16], blk[16:144]
			y := dst[b*256 : b*256+256]
			for c := 0; c < 4; c++ {
				sc1, m1 := scaleMinK4(2*c, scales)
				sc2, m2 := scaleMinK4(2*c+1, scales)
				d1, min1 := d*float32(sc1), dmin*float32(m1)
				d2, min2 := d*float32(sc2), dmin*float32(m2)
				q := qs[32*c : 32*c+32]
				for l := 0; l < 32; l++ {
					y[64*c+l] = d1*float32(q[l]&15) - min1
					y[64*c+32+l] = d2*float32(q[l]>>4) - min2
				}
			}
		}
	case Q6_K:
		for b := 0; b < len(dst)/256; b++ {
			blk := src[b*210 : b*210+210]
			ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
			d := half(blk[208:])
			y := dst[b*256 : b*256+256]
			for half := 0; half < 2; half++ {
				l0, h0, s0, y0 := ql[64*half:], qh[32*half:], sc[8*half:], y[128*half:]
				for l := 0; l < 32; l++ {
					is := l / 16
					q1 := int(l0[l]&15|(h0[l]>>0&3)<<4) - 32
					q2 := int(l0[l+32]&15|(h0[l]>>2&3)<<4) - 32
					q3 := int(l0[l]>>4|(h0[l]>>4&3)<<4) - 32
					q4 := int(l0[l+32]>>4|(h0[l]>>6&3)<<4) - 32
					y0[l] = d * float32(int8(s0[is])) * float32(q1)
					y0[l+32] = d * float32(int8(s0[is+2])) * float32(q2)
					y0[l+64] = d * float32(int8(s0[is+4])) * float32(q3)
					y0[l+96] = d * float32(int8(s0[is+6])) * float32(q4)
				}
			}
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
	default:
		panic(fmt.Sprintf("quant: DequantizeRow of %s", f))
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
