package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// weightOf stores w as kind and returns the values it then holds.
func weightOf(w []float32, kind Kind) (Weight, []float32) {
	switch kind {
	case F32:
		return Weight{Kind: F32, F32s: w}, w
	}
	u := make([]uint16, len(w))
	v := make([]float32, len(w))
	for i, x := range w {
		if kind == BF16 {
			u[i] = uint16(math.Float32bits(x) >> 16)
			v[i] = math.Float32frombits(uint32(u[i]) << 16)
		} else {
			u[i] = float16.Fromfloat32(x).Bits()
			v[i] = float16.Frombits(u[i]).Float32()
		}
	}
	return Weight{Kind: kind, U16s: u}, v
}

// TestMulT checks every kernel shape and tail against a float64
// reference, on the CPU's kernels and on plain Go.
func TestMulT(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(1, 2))
	for _, path := range []bool{true, false} {
		Force(path)
		for _, kind := range []Kind{F32, BF16, F16} {
			for _, T := range []int{1, 2, 3, 5, 8, 37} {
				for _, sz := range [][2]int{{7, 3}, {16, 4}, {100, 9}, {576, 130}, {64, 1}, {64, 24}} {
					in, out := sz[0], sz[1]
					x := make([]float32, T*in)
					raw := make([]float32, out*in)
					for i := range x {
						x[i] = float32(r.NormFloat64())
					}
					for i := range raw {
						raw[i] = float32(r.NormFloat64() * 0.1)
					}
					w, vals := weightOf(raw, kind)
					y := make([]float32, T*out)
					for i := range y {
						y[i] = float32(math.NaN()) // every value must be written
					}
					MulT(y, x, T, w, out, in)
					for tt := 0; tt < T; tt++ {
						for o := 0; o < out; o++ {
							var want float64
							for c := 0; c < in; c++ {
								want += float64(x[tt*in+c]) * float64(vals[o*in+c])
							}
							if d := math.Abs(float64(y[tt*out+o]) - want); !(d <= 1e-5*math.Sqrt(float64(in))) {
								t.Fatalf("%s %v T=%d in=%d out=%d: y[%d,%d] = %g, want %g", Name(), kind, T, in, out, tt, o, y[tt*out+o], want)
							}
						}
					}
				}
			}
		}
	}
}

func TestKernelsArePicked(t *testing.T) {
	Force(true)
	t.Logf("kernels: %s", Name())
	if Name() == "go" && detect() != nil {
		t.Error("the CPU has kernels but none are active")
	}
}

// BenchmarkMatVec is one decode row against Qwen3-0.6B's MLP up
// projection [3072, 1024]: memory-bound, read as GB/s of weights.
func BenchmarkMatVec(b *testing.B) {
	for _, kind := range []Kind{F32, BF16, F16} {
		for _, path := range []bool{true, false} {
			Force(path)
			b.Run(fmt.Sprintf("%v/%s", kindName(kind), Name()), func(b *testing.B) { benchMul(b, kind, 1, 1024, 3072) })
		}
	}
	Force(true)
}

// BenchmarkGEMM is a 128-row prefill chunk against the same weight:
// compute-bound, read as GFLOP/s.
func BenchmarkGEMM(b *testing.B) {
	for _, kind := range []Kind{F32, BF16, F16} {
		for _, path := range []bool{true, false} {
			Force(path)
			b.Run(fmt.Sprintf("%v/%s", kindName(kind), Name()), func(b *testing.B) { benchMul(b, kind, 128, 1024, 3072) })
		}
	}
	Force(true)
}

func kindName(k Kind) string { return [...]string{"f32", "bf16", "f16"}[k] }

func benchMul(b *testing.B, kind Kind, T, in, out int) {
	x := make([]float32, T*in)
	raw := make([]float32, in*out)
	for i := range raw {
		raw[i] = float32(i%7) * 0.01
	}
	w, _ := weightOf(raw, kind)
	y := make([]float32, T*out)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		MulT(y, x, T, w, out, in)
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	bytes := float64(in * out * 4)
	if kind != F32 {
		bytes /= 2
	}
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(2*float64(T*in*out)/sec/1e9, "GFLOP/s")
}

func TestDotsT(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(5, 6))
	for _, is := range append(supported(), nil) { // every kernel set, then plain Go
		active = is
		for _, c := range [][6]int{{1, 7, 32, 128, 128, 10}, {5, 9, 16, 48, 16, 9}, {17, 33, 64, 80, 64, 40}, {1, 3, 20, 20, 20, 3}} {
			n, m, k, ldx, ldw, ldy := c[0], c[1], c[2], c[3], c[4], c[5]
			x := make([]float32, n*ldx)
			w := make([]float32, m*ldw)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			for i := range w {
				w[i] = float32(r.NormFloat64())
			}
			y := make([]float32, n*ldy)
			DotsT(y, ldy, x, ldx, n, w, ldw, m, k, 0.5)
			for i := 0; i < n; i++ {
				for j := 0; j < m; j++ {
					var want float64
					for c := 0; c < k; c++ {
						want += float64(x[i*ldx+c]) * float64(w[j*ldw+c])
					}
					want *= 0.5
					if d := math.Abs(float64(y[i*ldy+j]) - want); d > 1e-4 {
						t.Fatalf("%s %v: y[%d,%d] = %g, want %g", Name(), c, i, j, y[i*ldy+j], want)
					}
				}
			}
		}
	}
}

func TestWeighRows(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(7, 8))
	for _, is := range append(supported(), nil) { // every kernel set, then plain Go
		active = is
		for _, c := range [][3]int{{5, 64, 64}, {9, 128, 256}, {3, 200, 200}, {0, 64, 64}, {7, 40, 48}} {
			rows, dv, ldv := c[0], c[1], c[2]
			p := make([]float32, rows+1)
			v := make([]float32, (rows+1)*ldv)
			for i := range p {
				p[i] = float32(r.Float64())
			}
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			for _, add := range []bool{false, true} {
				out := make([]float32, dv)
				for i := range out {
					out[i] = 1
				}
				WeighRows(out, p, v, ldv, rows, add)
				for col := 0; col < dv; col++ {
					var want float64
					if add {
						want = 1
					}
					for row := 0; row < rows; row++ {
						want += float64(p[row]) * float64(v[row*ldv+col])
					}
					if d := math.Abs(float64(out[col]) - want); d > 1e-4 {
						t.Fatalf("%s rows=%d dv=%d add=%v: out[%d] = %g, want %g", Name(), rows, dv, add, col, out[col], want)
					}
				}
			}
		}
	}
}

// TestF16Rows checks DotsTF16 and WeighRowsF16, the KV cache's half
// precision rows: widening F16 is exact, so on either path they must give
// bit for bit what DotsT and WeighRows give on the widened values.
func TestF16Rows(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(9, 10))
	half := func(n int) ([]uint16, []float32) {
		h, f := make([]uint16, n), make([]float32, n)
		for i := range h {
			h[i] = float16.Fromfloat32(float32(r.NormFloat64())).Bits()
			f[i] = float16.Frombits(h[i]).Float32()
		}
		return h, f
	}
	for _, is := range append(supported(), nil) { // every kernel set, then plain Go
		active = is
		for _, c := range [][6]int{{1, 7, 32, 128, 128, 10}, {5, 9, 16, 48, 16, 9}, {1, 33, 64, 80, 64, 40}, {1, 3, 20, 20, 20, 3}} {
			n, m, k, ldx, ldw, ldy := c[0], c[1], c[2], c[3], c[4], c[5]
			x := make([]float32, n*ldx)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			wh, wf := half(m * ldw)
			got, want := make([]float32, n*ldy), make([]float32, n*ldy)
			DotsTF16(got, ldy, x, ldx, n, wh, ldw, m, k, 0.5)
			DotsT(want, ldy, x, ldx, n, wf, ldw, m, k, 0.5)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s DotsTF16 %v: y[%d] = %g, DotsT on the widened rows %g", Name(), c, i, got[i], want[i])
				}
			}
		}
		for _, c := range [][3]int{{5, 64, 64}, {9, 128, 256}, {3, 200, 200}, {0, 64, 64}, {7, 40, 48}} {
			rows, dv, ldv := c[0], c[1], c[2]
			p := make([]float32, rows+1)
			for i := range p {
				p[i] = float32(r.Float64())
			}
			vh, vf := half((rows + 1) * ldv)
			for _, add := range []bool{false, true} {
				got, want := make([]float32, dv), make([]float32, dv)
				for i := range got {
					got[i], want[i] = 1, 1
				}
				WeighRowsF16(got, p, vh, ldv, rows, add)
				WeighRows(want, p, vf, ldv, rows, add)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%s WeighRowsF16 rows=%d dv=%d add=%v: out[%d] = %g, WeighRows on the widened rows %g", Name(), rows, dv, add, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestWidenedTiles checks that a prefill on 16-bit weights, whose tiles
// read rows widened once per block of x (asmWiden16), gives what the same
// weights as float32 give, bit for bit.
func TestWidenedTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const out, in, T = 20, 264, 13
	x := make([]float32, T*in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, k := range []Kind{BF16, F16} {
		u := make([]uint16, out*in)
		f := make([]float32, out*in)
		for i := range u {
			v := float32(r.NormFloat64())
			if k == BF16 {
				u[i] = uint16(math.Float32bits(v) >> 16)
			} else {
				u[i] = float16.Fromfloat32(v).Bits()
			}
		}
		Weight{Kind: k, U16s: u}.widen(f, 0)
		got, want := make([]float32, T*out), make([]float32, T*out)
		MulT(got, x, T, Weight{Kind: k, U16s: u}, out, in)
		MulT(want, x, T, Weight{Kind: F32, F32s: f}, out, in)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%v row %d col %d: %g, as float32 weights %g", k, i/out, i%out, got[i], want[i])
			}
		}
	}
}

// TestGemmPanels checks every micro-kernel shape (rows 1..6 and past,
// column blocks of 16 and 8, a Go tail) with and without add, against
// float64, and that columns past n and rows past m are left alone.
func TestGemmPanels(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(9, 10))
	for _, is := range append(supported(), nil) { // every kernel set, then plain Go
		active = is
		for _, c := range [][5]int{{1, 8, 1, 4, 9}, {6, 16, 64, 64, 16}, {13, 29, 7, 9, 31}, {32, 64, 100, 100, 70}, {5, 3, 5, 5, 3}, {7, 40, 0, 1, 40}, {4, 24, 3, 3, 24}} {
			m, n, k, lda, ldc := c[0], c[1], c[2], c[3], c[4]
			ps := 16*k + 5 // a panel stride past the panel
			a := make([]float32, m*lda)
			b := make([]float32, (n+15)/16*ps)
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			for i := range b {
				b[i] = float32(r.NormFloat64())
			}
			for _, add := range []bool{false, true} {
				cm := make([]float32, m*ldc+1)
				for i := range cm {
					cm[i] = float32(i%5) - 2
				}
				GemmPanels(m, n, k, 0.5, a, lda, b, ps, cm, ldc, add)
				for i := 0; i < m; i++ {
					for j := 0; j < ldc; j++ {
						before := float64(((i*ldc + j) % 5) - 2)
						want := before // untouched past n
						if j < n {
							want = 0
							for d := 0; d < k; d++ {
								want += float64(a[i*lda+d]) * float64(b[(j/16)*ps+d*16+j%16])
							}
							want *= 0.5
							if add {
								want += before
							}
						}
						if d := math.Abs(float64(cm[i*ldc+j]) - want); d > 1e-4 {
							t.Fatalf("%s %v add=%v: c[%d,%d] = %g, want %g", Name(), c, add, i, j, cm[i*ldc+j], want)
						}
					}
				}
				if last := cm[m*ldc]; last != float32((m*ldc)%5)-2 {
					t.Fatalf("%s %v: wrote past the last row", Name(), c)
				}
			}
		}
	}
}

// TestFromF16 widens every F16 value, by the vector kernel and by the
// table for a tail of 7, as the float16 package converts it.
func TestFromF16(t *testing.T) {
	src := make([]uint16, 1<<16+7)
	for i := range src {
		src[i] = uint16(i)
	}
	dst := make([]float32, len(src))
	FromF16(dst, src)
	for i, h := range src {
		want := float16.Frombits(h).Float32()
		if math.Float32bits(dst[i]) != math.Float32bits(want) && !(want != want && dst[i] != dst[i]) {
			t.Fatalf("F16 %#04x at %d: %g (%#08x), want %g", h, i, dst[i], math.Float32bits(dst[i]), want)
		}
	}
}
