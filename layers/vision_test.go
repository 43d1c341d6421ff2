package layers

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// The encoder kernels against plain float64 references.

func TestActivations(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	x := randVals(r, 24, 3)
	ref := map[string]func(float64) float64{
		"gelu_new": func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) },
		"gelu":     func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) },
		"relu":     func(x float64) float64 { return math.Max(x, 0) },
		"silu":     func(x float64) float64 { return x / (1 + math.Exp(-x)) },
	}
	for name, f := range ref {
		g := newGraph(t)
		out := g.run(ops.Apply(activate{act: name, dims: 2}, g.input("x", x, 4, 6)))[0]
		want := make([]float64, len(x))
		for i, v := range x {
			want[i] = f(float64(v))
		}
		assertClose(t, name, out, want, 1e-5)
	}
	if _, err := activation("swish2"); err == nil {
		t.Error("an unknown activation was accepted")
	}
}

func TestLayerNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const T, D = 3, 8
	x, w, b := randVals(r, T*D, 2), randVals(r, D, 1), randVals(r, D, 1)
	for i := range x[:D] {
		x[i] += 100 // a large mean: the variance must not cancel
	}
	g := newGraph(t)
	out := g.run(ops.Apply(layerNorm{eps: 1e-6, dims: 2}, g.input("x", x, T, D), g.input("w", w, D), g.input("b", b, D)))[0]
	want := make([]float64, len(x))
	for r := 0; r < T; r++ {
		var mean, v float64
		for _, e := range x[r*D : (r+1)*D] {
			mean += float64(e) / D
		}
		for _, e := range x[r*D : (r+1)*D] {
			v += (float64(e) - mean) * (float64(e) - mean) / D
		}
		for j := 0; j < D; j++ {
			want[r*D+j] = (float64(x[r*D+j])-mean)/math.Sqrt(v+1e-6)*float64(w[j]) + float64(b[j])
		}
	}
	assertClose(t, "layer norm", out, want, 1e-5)
}

func TestBlockAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	// Two blocks of 5 rows, 3 heads of 18 (neither a multiple of the lanes).
	const N, P, H, Dh = 2, 5, 3, 18
	q, k, v := randVals(r, N*P*H*Dh, 1), randVals(r, N*P*H*Dh, 1), randVals(r, N*P*H*Dh, 1)
	scale := 1 / math.Sqrt(Dh)
	g := newGraph(t)
	out := g.run(ops.Apply(blockAttention{block: P, scale: float32(scale)},
		g.input("q", q, N*P, H, Dh), g.input("k", k, N*P, H, Dh), g.input("v", v, N*P, H, Dh)))[0]
	want := make([]float64, len(q))
	at := func(x []float32, row, h, d int) float64 { return float64(x[(row*H+h)*Dh+d]) }
	for b := 0; b < N; b++ {
		for h := 0; h < H; h++ {
			for i := 0; i < P; i++ {
				s := make([]float64, P)
				var m, sum float64 = math.Inf(-1), 0
				for j := range s {
					for d := 0; d < Dh; d++ {
						s[j] += at(q, b*P+i, h, d) * at(k, b*P+j, h, d)
					}
					s[j] *= scale
					m = math.Max(m, s[j])
				}
				for j := range s {
					s[j] = math.Exp(s[j] - m)
					sum += s[j]
				}
				for d := 0; d < Dh; d++ {
					var o float64
					for j := range s {
						o += s[j] / sum * at(v, b*P+j, h, d)
					}
					want[((b*P+i)*H+h)*Dh+d] = o
				}
			}
		}
	}
	assertClose(t, "block attention", out, want, 1e-5)
}

func TestPatchEmbed(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	// 2 images of 3 channels, 7x9 pixels, patch 3: 2x3 patches, the last
	// pixel row and nothing else dropped.
	const N, C, H, W, p, D = 2, 3, 7, 9, 3, 4
	px, w, b := randVals(r, N*C*H*W, 1), randVals(r, D*C*p*p, 1), randVals(r, D, 1)
	g := newGraph(t)
	out := g.run(ops.Apply(patchEmbed{patch: p, dtype: graphs.F32, name: "w"}, g.input("px", px, N, C, H, W), g.input("w", w, D, C, p, p), g.input("b", b, D)))[0]
	gh, gw := H/p, W/p
	want := make([]float64, N*gh*gw*D)
	for n := 0; n < N; n++ {
		for py := 0; py < gh; py++ {
			for pxi := 0; pxi < gw; pxi++ {
				for o := 0; o < D; o++ {
					s := float64(b[o])
					for c := 0; c < C; c++ {
						for y := 0; y < p; y++ {
							for x := 0; x < p; x++ {
								s += float64(px[((n*C+c)*H+py*p+y)*W+pxi*p+x]) * float64(w[((o*C+c)*p+y)*p+x])
							}
						}
					}
					want[((n*gh+py)*gw+pxi)*D+o] = s
				}
			}
		}
	}
	assertClose(t, "patch embedding", out, want, 1e-5)
}

func TestPixelShuffleAndHeadRange(t *testing.T) {
	// One image of 4x4 patches of 2 channels, scale 2.
	const side, s, D = 4, 2, 2
	x := make([]float32, side*side*D)
	for i := range x {
		x[i] = float32(i)
	}
	g := newGraph(t)
	out := g.run(PixelShuffle(g.input("x", x, side*side, D), side, s))[0]
	want := make([]float64, len(x))
	o := side / s
	for i := 0; i < o; i++ {
		for j := 0; j < o; j++ {
			for dy := 0; dy < s; dy++ {
				for dx := 0; dx < s; dx++ {
					for c := 0; c < D; c++ {
						want[(i*o+j)*D*s*s+(dy*s+dx)*D+c] = float64(x[((i*s+dy)*side+j*s+dx)*D+c])
					}
				}
			}
		}
	}
	assertClose(t, "pixel shuffle", out, want, 0)

	// Heads 1..2 of [2, 4, 3].
	y := make([]float32, 2*4*3)
	for i := range y {
		y[i] = float32(i)
	}
	g = newGraph(t)
	got := g.run(ops.Apply(headRange{from: 1, count: 2}, g.input("y", y, 2, 4, 3)))[0]
	var wantH []float64
	for t := 0; t < 2; t++ {
		for h := 1; h < 3; h++ {
			for d := 0; d < 3; d++ {
				wantH = append(wantH, float64(y[(t*4+h)*3+d]))
			}
		}
	}
	assertClose(t, "head range", got, wantH, 0)
}
