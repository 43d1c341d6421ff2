package simd

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpShift: every value ExpShift writes is Exp32's (the AVX-512
// kernel computes the same roundings lane by lane), the sum is theirs up
// to order, and arguments below float32's range give 0.
func TestExpShift(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 15, 16, 17, 33, 64, 100, 257} {
		for _, scale := range []float32{1, 10, 60} {
			x := make([]float32, n)
			m := float32(-3)
			for i := range x {
				x[i] = float32(r.NormFloat64()) * scale
				m = max(m, x[i])
			}
			if n > 5 {
				x[3] = m - 200 // exp underflows to exactly 0
				x[4] = m       // exp(0) = 1
			}
			want := make([]float32, n)
			var wantSum float64
			for i, v := range x {
				want[i] = Exp32(v - m)
				wantSum += float64(want[i])
			}
			got := append([]float32(nil), x...)
			sum := ExpShift(got, m)
			for i := range got {
				if ulps(got[i], want[i]) > 1 {
					t.Fatalf("n=%d scale=%g: exp(%g - %g) = %g, Exp32 gives %g", n, scale, x[i], m, got[i], want[i])
				}
			}
			if math.Abs(sum-wantSum) > 1e-12*math.Max(1, wantSum) {
				t.Errorf("n=%d scale=%g: sum %.17g, want %.17g", n, scale, sum, wantSum)
			}
			if n > 5 && (got[3] != 0 || got[4] != 1) {
				t.Errorf("n=%d: exp(-200) = %g and exp(0) = %g, want 0 and 1", n, got[3], got[4])
			}
		}
	}
}

// TestExp32 checks Exp32 against math.Exp over float32's range.
func TestExp32(t *testing.T) {
	for x := float32(-87); x < 88.5; x += 0.0371 {
		want := float32(math.Exp(float64(x)))
		if u := ulps(Exp32(x), want); u > 2 {
			t.Fatalf("Exp32(%g) = %g, math.Exp gives %g (%d ulps)", x, Exp32(x), want, u)
		}
	}
	if Exp32(-100) != 0 || !math.IsInf(float64(Exp32(100)), 1) || Exp32(float32(math.NaN())) == Exp32(float32(math.NaN())) {
		t.Error("Exp32 out of range or of NaN")
	}
}

func ulps(a, b float32) int64 {
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	if d < 0 {
		d = -d
	}
	return d
}

func BenchmarkExpShift(b *testing.B) {
	x := make([]float32, 256)
	for i := range x {
		x[i] = -float32(i) / 16
	}
	buf := make([]float32, len(x))
	b.SetBytes(4 * int64(len(x)))
	for b.Loop() {
		copy(buf, x)
		ExpShift(buf, 0)
	}
}

// TestSiLUMul: the AVX-512 SiLU gives the scalar SiLU's float32 bit for
// bit, gated or not, over float32's whole range: the tails where exp
// overflows or underflows, its thresholds, subnormal results, ±0, ±Inf and
// NaN.
func TestSiLUMul(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 87.33654, -87.33654, 87.3366, -87.3366, 88.72283, -88.72283,
		88.7229, -88.7229, 88.8, -88.8, 100, -100, 103.9, -103.9, 1e30, -1e30, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 1e-40, -1e-40, 16.5, -16.5}
	for _, n := range []int{0, 1, 15, 16, 17, 100, 1536, 4099} {
		for _, scale := range []float64{1, 8, 40, 95} {
			x, u := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64() * scale)
				u[i] = float32(r.NormFloat64())
			}
			copy(x, special)
			for _, gate := range [][]float32{nil, u} {
				got := make([]float32, n)
				SiLUMul(got, x, gate)
				for i, v := range x {
					want := SiLU(v)
					if gate != nil {
						want *= gate[i]
					}
					if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
						t.Fatalf("n=%d gated=%v: silu(%g) = %g (%#x), scalar %g (%#x)", n, gate != nil, v, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
					}
				}
			}
		}
	}
}

func BenchmarkSiLUMul(b *testing.B) {
	x, u, out := make([]float32, 1536), make([]float32, 1536), make([]float32, 1536)
	for i := range x {
		x[i], u[i] = float32(i%17)-8, 0.5
	}
	for _, on := range []bool{true, false} {
		Force(on)
		b.Run(Name(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				SiLUMul(out, x, u)
			}
		})
	}
	Force(true)
}

// TestMaxScale: Max finds the largest value wherever it sits (in the
// kernel's runs of 16 or the tail), with -Inf and signed zeros; ScaleF64
// rounds each float64 product once, bit for bit as the Go expression.
func TestMaxScale(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 7, 8, 15, 16, 17, 31, 32, 48, 100, 257} {
		for at := 0; at < n; at += max(1, n/5) {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64()*10) - 100
			}
			x[at] = 3.5
			if got := Max(x); got != 3.5 {
				t.Fatalf("n=%d, largest at %d: Max = %g, want 3.5", n, at, got)
			}
		}
		inf := make([]float32, n)
		for i := range inf {
			inf[i] = float32(math.Inf(-1))
		}
		if got := Max(inf); !math.IsInf(float64(got), -1) {
			t.Errorf("n=%d: Max of -Inf = %g", n, got)
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.Float64())
		}
		x[0] = 1e-40 // subnormal
		for _, s := range []float64{1, 1 / 3.0, 1 / 1e-30, 1.0 / 7} {
			want := make([]float32, n)
			for i, v := range x {
				want[i] = float32(float64(v) * s)
			}
			got := append([]float32(nil), x...)
			ScaleF64(got, s)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d s=%g: x[%d] = %g scales to %g, want %g", n, s, i, x[i], got[i], want[i])
				}
			}
		}
	}
}
