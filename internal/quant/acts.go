package quant

import (
	"math"

	"github.com/x448/float16"
)

// Fast mode: llama.cpp's CPU matmuls do not multiply quantized weights by
// float32 activations. They first quantize each activation row to 8 bits
// (the weight format's "vec_dot_type": Q8_0 blocks of 32 for Q8_0, Q4_0,
// Q5_0 and IQ4_NL weights, Q8_1 (Q8_0 plus a block sum) for Q4_1 and Q5_1,
// Q8_K blocks of 256 for the K-quants and IQ4_XS) and take integer dot
// products block by block, scaled by both blocks' scales. The functions
// here are that arithmetic in plain Go, the reference the SIMD kernels of
// internal/simd are tested against.

// ActBlock is the block size activations are quantized in for products
// with weights of format f: 32 (Q8_0) or 256 (Q8_K).
func ActBlock(f Format) int {
	if f.BlockSize() == 256 {
		return 256
	}
	return 32
}

// ActScales is the number of float32s QuantizeActs writes to d per
// activation block: 2 for Q4_1 and Q5_1, whose activations are Q8_1 (the
// scale, then s = f16(d·Σq) that the weights' min multiplies), else 1.
func ActScales(f Format) int {
	if f == Q4_1 || f == Q5_1 {
		return 2
	}
	return 1
}

// KQuant reports whether f's activations are quantized as Q8_K (with the
// sums of every 16 values that the K-quant products use for their mins).
func KQuant(f Format) bool { return ActBlock(f) == 256 }

// QuantizeActs quantizes the activations x (whole blocks of ActBlock(f))
// into q, one scale per block into d and, for Q8_K, the sum of every 16
// quantized values into sums.
//
// Q8_0 follows ggml-cpu's x86 quantize_row_q8_0: the scale is the block's
// largest magnitude over 127 stored as f16, the values round(x·127/max)
// rounded half to even (_mm256_round_ps). Q8_K follows
// quantize_row_q8_K_ref, which x86 uses: the value of largest magnitude
// (the first on ties) sets iscale = -127/max, values are
// min(127, nearest_int(iscale·x)), and the float32 scale is 1/iscale.
func QuantizeActs(f Format, x []float32, q []int8, d []float32, sums []int16) {
	if KQuant(f) {
		quantizeQ8K(x, q, d, sums)
		return
	}
	if ActScales(f) == 2 {
		quantizeQ8_1(x, q, d)
		return
	}
	for b := 0; b < len(x)/32; b++ {
		xs, qs := x[b*32:b*32+32], q[b*32:b*32+32]
		var amax float32
		for _, v := range xs {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d[b] = float16.Fromfloat32(amax / 127).Float32()
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		for j, v := range xs {
			qs[j] = int8(math.RoundToEven(float64(v * id)))
		}
	}
}

// quantizeQ8_1 is ggml-cpu's x86 quantize_row_q8_1: Q8_0's scale and
// values, and per block s = f16(d·Σq) with the float32 d before its f16
// rounding; d holds (f16 d, s) pairs.
func quantizeQ8_1(x []float32, q []int8, d []float32) {
	for b := 0; b < len(x)/32; b++ {
		xs, qs := x[b*32:b*32+32], q[b*32:b*32+32]
		var amax float32
		for _, v := range xs {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		dd := amax / 127
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		var s int32
		for j, v := range xs {
			qs[j] = int8(math.RoundToEven(float64(v * id)))
			s += int32(qs[j])
		}
		d[2*b] = float16.Fromfloat32(dd).Float32()
		d[2*b+1] = float16.Fromfloat32(dd * float32(s)).Float32()
	}
}

func quantizeQ8K(x []float32, q []int8, d []float32, sums []int16) {
	for b := 0; b < len(x)/256; b++ {
		xs, qs := x[b*256:b*256+256], q[b*256:b*256+256]
		var amax, mx float32
		for _, v := range xs {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			d[b] = 0
			clear(qs)
			clear(sums[b*16 : b*16+16])
			continue
		}
		iscale := -127 / mx
		for j, v := range xs {
			qs[j] = int8(min(127, nearestInt(iscale*v)))
		}
		for g := 0; g < 16; g++ {
			var s int32
			for _, v := range qs[g*16 : g*16+16] {
				s += int32(v)
			}
			sums[b*16+g] = int16(s)
		}
		d[b] = 1 / iscale
	}
}

// DotActs is the product of one weight row w (format f, len(q) values) with
// activations quantized by QuantizeActs, in ggml's vec_dot_*_q8_0 /
// vec_dot_*_q8_K arithmetic: an exact integer sum per block, scaled in
// float32 by the weight block's scale times the activation block's, and
// for Q4_K less dmin times the mins against the 16-value sums.
func DotActs(f Format, w []byte, q []int8, d []float32, sums []int16) float32 {
	var sum float32
	switch f {
	case Q8_0:
		for b := 0; b < len(q)/32; b++ {
			blk, qs := w[b*34:b*34+34], q[b*32:b*32+32]
			var s int32
			for j, v := range qs {
				s += int32(int8(blk[2+j])) * int32(v)
			}
			sum += half(blk) * d[b] * float32(s)
		}
	case Q4_0:
		for b := 0; b < len(q)/32; b++ {
			blk, qs := w[b*18:b*18+18], q[b*32:b*32+32]
			var s int32
			for j := 0; j < 16; j++ {
				s += (int32(blk[2+j]&15) - 8) * int32(qs[j])
				s += (int32(blk[2+j]>>4) - 8) * int32(qs[j+16])
			}
			sum += half(blk) * d[b] * float32(s)
		}
	case Q5_0:
		for b := 0; b < len(q)/32; b++ {
			blk, qs := w[b*22:b*22+22], q[b*32:b*32+32]
			qh := uint32(blk[2]) | uint32(blk[3])<<8 | uint32(blk[4])<<16 | uint32(blk[5])<<24
			var s int32
			for j := 0; j < 16; j++ {
				lo := int32(blk[6+j]&15) | int32(qh>>j&1)<<4
				hi := int32(blk[6+j]>>4) | int32(qh>>(j+16)&1)<<4
				s += (lo-16)*int32(qs[j]) + (hi-16)*int32(qs[j+16])
			}
			sum += half(blk) * d[b] * float32(s)
		}
	case Q4_K:
		for b := 0; b < len(q)/256; b++ {
			blk, qs := w[b*144:b*144+144], q[b*256:b*256+256]
			scales, nib := blk[4:16], blk[16:144]
			var sumi, mins int32
			for c := 0; c < 4; c++ {
				sc1, m1 := scaleMinK4(2*c, scales)
				sc2, m2 := scaleMinK4(2*c+1, scales)
				var s1, s2 int32
				for l := 0; l < 32; l++ {
					s1 += int32(nib[32*c+l]&15) * int32(qs[64*c+l])
					s2 += int32(nib[32*c+l]>>4) * int32(qs[64*c+32+l])
				}
				sumi += int32(sc1)*s1 + int32(sc2)*s2
				bs := sums[b*16+4*c : b*16+4*c+4]
				mins += int32(m1)*(int32(bs[0])+int32(bs[1])) + int32(m2)*(int32(bs[2])+int32(bs[3]))
			}
			dd := d[b] * half(blk)
			dmin := d[b] * half(blk[2:])
			sum += dd*float32(sumi) - dmin*float32(mins)
		}
	case Q6_K:
		for b := 0; b < len(q)/256; b++ {
			blk, qs := w[b*210:b*210+210], q[b*256:b*256+256]
			ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
			var sumi int32
			for h := 0; h < 2; h++ {
				l0, h0, s0, x0 := ql[64*h:], qh[32*h:], sc[8*h:], qs[128*h:]
				var g [8]int32 // sums per 16 values: scales index l/16 + 2k
				for l := 0; l < 32; l++ {
					q1 := int32(l0[l]&15|(h0[l]>>0&3)<<4) - 32
					q2 := int32(l0[l+32]&15|(h0[l]>>2&3)<<4) - 32
					q3 := int32(l0[l]>>4|(h0[l]>>4&3)<<4) - 32
					q4 := int32(l0[l+32]>>4|(h0[l]>>6&3)<<4) - 32
					is := l / 16
					g[is+0] += q1 * int32(x0[l])
					g[is+2] += q2 * int32(x0[l+32])
					g[is+4] += q3 * int32(x0[l+64])
					g[is+6] += q4 * int32(x0[l+96])
				}
				for i, s := range g {
					sumi += int32(int8(s0[i])) * s
				}
			}
			sum += d[b] * half(blk[208:]) * float32(sumi)
		}
	case Q4_1, Q5_1, IQ4_NL:
		return dotSmall(f, w, q, d)
	case Q2_K, Q3_K, Q5_K, IQ4_XS:
		return dotK(f, w, q, d, sums)
	}
	return sum
}
