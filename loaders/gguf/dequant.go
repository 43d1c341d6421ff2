package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gozoo/gozoo/internal/quant"
)

// Dequantize widens n = len(dst) values of type t from src into dst. n must
// be a multiple of t's block size and src must hold at least the n/BlockSize
// whole blocks (only those are read). The results are bit-identical to
// ggml's dequantize_row_* (ggml-quants.c): float32 arithmetic in ggml's
// order, with no fused multiply-add.
func Dequantize(t Type, src []byte, dst []float32) error {
	if !t.Supported() {
		return fmt.Errorf("gguf: dequantizing %s is not supported (supported: %s)", t, SupportedTypes())
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
	default:
		// The block formats live in internal/quant, which the kernels
		// share: one implementation of ggml's order.
		f, ok := t.Format()
		if !ok {
			panic("gguf: DequantizeRow: type " + t.String() + " is not supported")
		}
		checkBlocks(len(dst), f.BlockSize(), t)
		quant.DequantizeRow(f, src, dst)
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

// Format is the block format of a quantized type the zoo keeps in memory,
// from internal/quant.
func (t Type) Format() (quant.Format, bool) {
	f, ok := typeFormats[t]
	return f, ok
}

var typeFormats = map[Type]quant.Format{
	TypeQ8_0: quant.Q8_0, TypeQ4_0: quant.Q4_0, TypeQ4_K: quant.Q4_K, TypeQ6_K: quant.Q6_K,
	TypeQ5_0: quant.Q5_0, TypeQ4_1: quant.Q4_1, TypeQ5_1: quant.Q5_1, TypeQ2_K: quant.Q2_K,
	TypeQ3_K: quant.Q3_K, TypeQ5_K: quant.Q5_K, TypeIQ4_NL: quant.IQ4_NL, TypeIQ4_XS: quant.IQ4_XS,
}
