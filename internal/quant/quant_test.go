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
	}{{Q8_0, 0.0045}, {Q4_0, 0.126}, {Q5_0, 0.065}, {Q4_K, 0.11}, {Q6_K, 0.017}} {
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
