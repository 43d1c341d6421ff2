package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantizeRoundTrip quantizes random rows and dequantizes them back:
// the error relative to each block's largest magnitude stays within what
// the format allows (the golden README's measured bounds for llama.cpp's
// own files: Q8_0 0.0044, Q6_K 0.016, Q4_K 0.10, Q4_0 0.125; Q5_0 half
// of Q4_0's).
func TestQuantizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, tc := range []struct {
		f     Format
		bound float64
	}{{Q8_0, 0.0045}, {Q4_0, 0.126}, {Q5_0, 0.065}, {Q4_K, 0.11}, {Q6_K, 0.017},
		// llama.cpp's own files (golden.json quant_error_max_rel_to_block_absmax):
		// Q4_1 0.067, Q5_K 0.054, IQ4_NL 0.127, Q3_K 0.224; Q5_1 and IQ4_XS
		// carry one bit / one scale level more or less than their kin.
		{Q4_1, 0.07}, {Q5_1, 0.036}, {Q2_K, 0.45}, {Q3_K, 0.23}, {Q5_K, 0.056}, {IQ4_NL, 0.13}, {IQ4_XS, 0.14}} {
		const n = 4096
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64()) * 0.05
		}
		x[7] = 0 // zeros and a whole zero block
		clear(x[256:512])
		rb, _ := tc.f.RowBytes(n)
		q := make([]byte, rb)
		QuantizeRow(tc.f, x, q)
		y := make([]float32, n)
		DequantizeRow(tc.f, q, y)
		bs := tc.f.BlockSize()
		worst := 0.0
		for b := 0; b < n/bs; b++ {
			var amax float64
			for _, v := range x[b*bs : (b+1)*bs] {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			for i := b * bs; i < (b+1)*bs; i++ {
				d := math.Abs(float64(y[i] - x[i]))
				if amax == 0 {
					if d != 0 {
						t.Fatalf("%s: a zero block came back as %g", tc.f, y[i])
					}
					continue
				}
				worst = math.Max(worst, d/amax)
			}
		}
		if worst > tc.bound || worst == 0 {
			t.Errorf("%s: worst error %.4g of the block's largest value, want (0, %g]", tc.f, worst, tc.bound)
		}
		t.Logf("%s: worst relative error %.4g", tc.f, worst)
	}
}

func TestNearestInt(t *testing.T) {
	for v, want := range map[float32]int{0.5: 0, 1.5: 2, 2.5: 2, -0.5: 0, -1.5: -2, 3.49: 3, -7.6: -8} {
		if got := nearestInt(v); got != want {
			t.Errorf("nearestInt(%g) = %d, want %d", v, got, want)
		}
	}
}

// refDequantK is ggml's dequantize_row_q4_K and _q6_K, element by element.
func refDequantK(f Format, src []byte, y []float32) {
	switch f {
	case Q4_K:
		for b := 0; b < len(y)/256; b++ {
			blk := src[b*144:]
			d, dmin := half(blk), half(blk[2:])
			for c := 0; c < 4; c++ {
				sc1, m1 := scaleMinK4(2*c, blk[4:16])
				sc2, m2 := scaleMinK4(2*c+1, blk[4:16])
				for l := 0; l < 32; l++ {
					q := blk[16+32*c+l]
					y[b*256+64*c+l] = d*float32(sc1)*float32(q&15) - dmin*float32(m1)
					y[b*256+64*c+32+l] = d*float32(sc2)*float32(q>>4) - dmin*float32(m2)
				}
			}
		}
	case Q6_K:
		for b := 0; b < len(y)/256; b++ {
			blk := src[b*210:]
			d := half(blk[208:])
			for h := 0; h < 2; h++ {
				ql, qh, sc := blk[64*h:], blk[128+32*h:], blk[192+8*h:]
				for l := 0; l < 32; l++ {
					is := l / 16
					q1 := int(ql[l]&15|(qh[l]&3)<<4) - 32
					q2 := int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
					q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
					q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
					o := y[b*256+128*h:]
					o[l] = d * float32(int8(sc[is])) * float32(q1)
					o[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
					o[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
					o[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
				}
			}
		}
	}
}

// TestDequantizeKMatchesGGML: the K-quant widening gives ggml's values
// bit for bit, on random bytes (every scale, min and code).
func TestDequantizeKMatchesGGML(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, f := range []Format{Q4_K, Q6_K} {
		const n = 8 * 256
		rb, _ := f.RowBytes(n)
		src := make([]byte, rb)
		for i := range src {
			src[i] = byte(r.IntN(256))
		}
		// Finite scales: a random F16 can be Inf or NaN.
		for b := 0; b < n/256; b++ {
			blk := src[b*f.BlockBytes():]
			if f == Q4_K {
				blk[1], blk[3] = 0x3c, 0x38
			} else {
				blk[209] = 0x3a
			}
		}
		got, want := make([]float32, n), make([]float32, n)
		DequantizeRow(f, src, got)
		refDequantK(f, src, want)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s value %d: %g, ggml %g", f, i, got[i], want[i])
			}
		}
	}
}

func BenchmarkDequantize(b *testing.B) {
	for _, f := range []Format{Q8_0, Q4_0, Q4_K, Q6_K} {
		b.Run(f.String(), func(b *testing.B) {
			const n = 4096
			rb, _ := f.RowBytes(n)
			src, y := make([]byte, rb), make([]float32, n)
			for b := 0; b < n/f.BlockSize(); b++ {
				src[b*f.BlockBytes()+1] = 0x3c
			}
			b.SetBytes(n * 4)
			for b.Loop() {
				DequantizeRow(f, src, y)
			}
		})
	}
}
