package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dequantize widens n = len(dst) values of type t from src into dst. n must
// be a multiple of t's block size and src must hold at least the n/BlockSize
// whole blocks (only those are read). The results are bit-identical to
// ggml's dequantize_row_* (ggml-quants.c): float32 arithmetic in ggml's
// order, with no fused multiply-add.
func Dequantize(t Type, src []byte, dst []float32) error {
	if !t.Supported() {
		return fmt.Errorf("gguf: dequantizing %s is not supported (only F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)", t)
	}
	bs := t.BlockSize()
	if len(dst)%bs != 0 {
		return fmt.Errorf("gguf: dequantizing %d values of %s: not a multiple of the block size %d", len(dst), t, bs)
	}
	need := len(dst) / bs * t.BlockBytes()
	if len(src) < need {
		return fmt.Errorf("gguf: dequantizing %d values of %s needs %d bytes, got %d", len(dst), t, need, len(src))
	}
	DequantizeRow(t, src[:need], dst)
	return nil
}

// DequantizeRow is Dequantize without the checks, for hot loops over rows
// whose shapes were validated already (Open validates every tensor): it
// widens len(dst) values, whole blocks, from src. It panics if t is not
// supported, if src is shorter than len(dst)/t.BlockSize() blocks, or (for
// the quantized types) if len(dst) is not a multiple of the block size.
func DequantizeRow(t Type, src []byte, dst []float32) {
	switch t {
	case TypeF32:
		dequantF32(src, dst)
	case TypeF16:
		dequantF16(src, dst)
	case TypeBF16:
		dequantBF16(src, dst)
	case TypeQ8_0:
		dequantQ8_0(src, dst)
	case TypeQ4_0:
		dequantQ4_0(src, dst)
	case TypeQ4_K:
		dequantQ4K(src, dst)
	case TypeQ6_K:
		dequantQ6K(src, dst)
	default:
		panic("gguf: DequantizeRow: type " + t.String() + " is not supported")
	}
}

// checkBlocks panics unless n is a whole number of blocks of size bs.
func checkBlocks(n, bs int, t Type) {
	if n%bs != 0 {
		panic(fmt.Sprintf("gguf: DequantizeRow: %d values of %s is not a whole number of blocks of %d", n, t, bs))
	}
}

// halfToFloat32 converts IEEE binary16 bits to float32 (exactly: every half
// is a float32). NaN payloads are kept.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch exp {
	case 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal half: normalise into a float32 exponent.
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

func half(b []byte) float32 { return halfToFloat32(binary.LittleEndian.Uint16(b)) }

func dequantF32(src []byte, dst []float32) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = halfToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func dequantBF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

// Q8_0: f16 d, int8 q[32]; y = q*d.
func dequantQ8_0(src []byte, dst []float32) {
	checkBlocks(len(dst), 32, TypeQ8_0)
	nb := len(dst) / 32
	src = src[:nb*34]
	for b := range nb {
		blk := src[b*34 : b*34+34]
		d := half(blk[0:2])
		q := blk[2:34]
		y := dst[b*32 : b*32+32]
		for j := range y {
			y[j] = float32(int8(q[j])) * d
		}
	}
}

// Q4_0: f16 d, 16 bytes; y[j] = (low nibble - 8)*d, y[j+16] = (high nibble - 8)*d.
func dequantQ4_0(src []byte, dst []float32) {
	checkBlocks(len(dst), 32, TypeQ4_0)
	nb := len(dst) / 32
	src = src[:nb*18]
	for b := range nb {
		blk := src[b*18 : b*18+18]
		d := half(blk[0:2])
		qs := blk[2:18]
		y := dst[b*32 : b*32+32]
		for j := range 16 {
			y[j] = float32(int(qs[j]&15)-8) * d
			y[j+16] = float32(int(qs[j]>>4)-8) * d
		}
	}
}

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12 packed bytes of a Q4_K block (ggml's get_scale_min_k4).
func scaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&15 | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles; 4 chunks of
// 64 values, low nibbles with sub-block 2c, high nibbles with 2c+1:
// y = (d*sc)*q - dmin*m.
func dequantQ4K(src []byte, dst []float32) {
	checkBlocks(len(dst), 256, TypeQ4_K)
	nb := len(dst) / 256
	src = src[:nb*144]
	for b := range nb {
		blk := src[b*144 : b*144+144]
		d := half(blk[0:2])
		dmin := half(blk[2:4])
		scales := blk[4:16]
		qs := blk[16:144]
		y := dst[b*256 : b*256+256]
		for c := range 4 {
			sc, m := scaleMinK4(2*c, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*c+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			q := qs[32*c : 32*c+32]
			lo := y[64*c : 64*c+32]
			hi := y[64*c+32 : 64*c+64]
			for l := range 32 {
				// The explicit conversions round the products, so the Go
				// compiler cannot fuse them with the subtraction (as ggml's
				// reference code does not either).
				lo[l] = float32(d1*float32(q[l]&15)) - m1
				hi[l] = float32(d2*float32(q[l]>>4)) - m2
			}
		}
	}
}

// Q6_K: ql[128], qh[64], int8 scales[16], f16 d; two halves of 128 values.
func dequantQ6K(src []byte, dst []float32) {
	checkBlocks(len(dst), 256, TypeQ6_K)
	nb := len(dst) / 256
	src = src[:nb*210]
	for b := range nb {
		blk := src[b*210 : b*210+210]
		d := half(blk[208:210])
		for h := range 2 {
			ql := blk[64*h : 64*h+64]
			qh := blk[128+32*h : 128+32*h+32]
			sc := blk[192+8*h : 192+8*h+8]
			y := dst[b*256+128*h : b*256+128*h+128]
			for l := range 32 {
				is := l / 16
				q1 := int((ql[l]&15)|(qh[l]&3)<<4) - 32
				q2 := int((ql[l+32]&15)|((qh[l]>>2)&3)<<4) - 32
				q3 := int((ql[l]>>4)|((qh[l]>>4)&3)<<4) - 32
				q4 := int((ql[l+32]>>4)|((qh[l]>>6)&3)<<4) - 32
				y[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				y[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				y[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				y[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
		}
	}
}
