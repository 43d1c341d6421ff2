package layers

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Each fragment is run in a real graph on the TapeMachine and compared with
// a plain-Go float64 reference written from the HF modeling code.

func randVals(r *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * scale)
	}
	return out
}

type graphT struct {
	t *testing.T
	g *G.ExprGraph
	n int
}

func newGraph(t *testing.T) *graphT { return &graphT{t: t, g: G.NewGraph()} }

func (g *graphT) input(name string, data any, shape ...int) *G.Node {
	v := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	dt := tensor.Float32
	if _, ok := data.([]int); ok {
		dt = tensor.Int
	}
	return G.NewTensor(g.g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v))
}

func (g *graphT) run(outs ...*G.Node) [][]float32 {
	g.t.Helper()
	m := G.NewTapeMachine(g.g)
	defer m.Close()
	if err := m.RunAll(); err != nil {
		g.t.Fatal(err)
	}
	res := make([][]float32, len(outs))
	for i, o := range outs {
		d := o.Value().(*tensor.Dense)
		if d.IsView() {
			d = d.Materialize().(*tensor.Dense)
		}
		res[i] = append([]float32(nil), d.Data().([]float32)...)
	}
	return res
}

func assertClose(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol || math.IsNaN(d) {
			t.Fatalf("%s[%d] = %g, want %g (diff %g > %g)", what, i, got[i], want[i], d, tol)
		}
	}
}

func refMatmul(x []float32, T, in int, w []float32, out int) []float64 { // w [in, out]
	y := make([]float64, T*out)
	for t := 0; t < T; t++ {
		for o := 0; o < out; o++ {
			var s float64
			for i := 0; i < in; i++ {
				s += float64(x[t*in+i]) * float64(w[i*out+o])
			}
			y[t*out+o] = s
		}
	}
	return y
}

func TestLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, T := range []int{1, 5} {
		for _, bias := range []bool{false, true} {
			g := newGraph(t)
			x, w, b := randVals(r, T*7, 1), randVals(r, 7*3, 1), randVals(r, 3, 1)
			var bn *G.Node
			if bias {
				bn = g.input("b", b, 3)
			}
			out := g.run(Linear(g.input("x", x, T, 7), g.input("w", w, 7, 3), bn))[0]
			want := refMatmul(x, T, 7, w, 3)
			if bias {
				for i := range want {
					want[i] += float64(b[i%3])
				}
			}
			assertClose(t, "linear", out, want, 1e-5)
		}
	}
}

func refRMSNorm(x []float32, w []float32, eps, offset float64) []float64 {
	d := len(w)
	out := make([]float64, len(x))
	for r := 0; r < len(x); r += d {
		var ss float64
		for _, v := range x[r : r+d] {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(d)+eps)
		for j := 0; j < d; j++ {
			out[r+j] = float64(x[r+j]) * inv * (offset + float64(w[j]))
		}
	}
	return out
}

func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x, w := randVals(r, 4*8, 2), randVals(r, 8, 1)
	g := newGraph(t)
	xn, wn := g.input("x", x, 4, 8), g.input("w", w, 8)
	out := g.run(RMSNorm(xn, wn, 1e-6), OffsetRMSNorm(xn, wn, 1e-6))
	assertClose(t, "rmsnorm", out[0], refRMSNorm(x, w, 1e-6, 0), 1e-5)
	assertClose(t, "gemma rmsnorm", out[1], refRMSNorm(x, w, 1e-6, 1), 1e-5)
}

func refRoPE(x []float32, T, H, dh int, theta float64, pos0 int) []float64 {
	out := make([]float64, len(x))
	half := dh / 2
	for t := 0; t < T; t++ {
		for h := 0; h < H; h++ {
			for i := 0; i < half; i++ {
				a := float64(pos0+t) / math.Pow(theta, float64(2*i)/float64(dh))
				o := (t*H + h) * dh
				x1, x2 := float64(x[o+i]), float64(x[o+i+half])
				out[o+i] = x1*math.Cos(a) - x2*math.Sin(a)
				out[o+i+half] = x2*math.Cos(a) + x1*math.Sin(a)
			}
		}
	}
	return out
}

func TestRoPE(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const T, H, dh = 3, 2, 8
	x := randVals(r, T*H*dh, 1)
	for _, pos := range []int{0, 17} {
		g := newGraph(t)
		out := g.run(RoPE(g.input("x", x, T, H, dh), g.input("meta", []int{pos, T}, 2), RoPEFrequencies(dh, 10000, 1), "test"))[0]
		assertClose(t, "rope", out, refRoPE(x, T, H, dh, 10000, pos), 1e-5)
	}
	// Linear scaling divides the frequencies.
	f1, f4 := RoPEFrequencies(dh, 1e6, 1), RoPEFrequencies(dh, 1e6, 4)
	for i := range f1 {
		if math.Abs(float64(f4[i])*4-float64(f1[i])) > 1e-6*float64(f1[i]) {
			t.Fatalf("factor 4: %g vs %g", f4[i], f1[i])
		}
	}
}

// refAttention is eager HF attention for positions pos..pos+n-1 over keys
// 0..pos+n-1 (k, v given per position as [L, Hkv, Dh]).
func refAttention(q []float32, k, v []float32, n, hq, hkv, dh, pos int, scale float64, window int) []float64 {
	out := make([]float64, n*hq*dh)
	rep := hq / hkv
	for t := 0; t < n; t++ {
		p := pos + t
		for h := 0; h < hq; h++ {
			g := h / rep
			scores := make([]float64, p+1)
			m := math.Inf(-1)
			for j := 0; j <= p; j++ {
				if window > 0 && j <= p-window {
					scores[j] = math.Inf(-1)
					continue
				}
				var s float64
				for d := 0; d < dh; d++ {
					s += float64(q[(t*hq+h)*dh+d]) * float64(k[(j*hkv+g)*dh+d])
				}
				scores[j] = s * scale
				m = math.Max(m, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - m)
				sum += scores[j]
			}
			for j := range scores {
				for d := 0; d < dh; d++ {
					out[(t*hq+h)*dh+d] += scores[j] / sum * float64(v[(j*hkv+g)*dh+d])
				}
			}
		}
	}
	return out
}

func TestCausalAttentionOverKVCache(t *testing.T) {
	const hq, hkv, dh, C = 4, 2, 8, 16
	cases := []struct {
		name      string
		pos, n, T int
		window    int
	}{
		{"prefill from 0", 0, 5, 5, 0},
		{"padded prefill", 0, 3, 8, 0},
		{"chunk after a prefix", 6, 4, 4, 0},
		{"decode", 9, 1, 1, 0},
		{"sliding window prefill", 0, 7, 8, 3},
		{"sliding window decode", 10, 1, 1, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(c.pos)))
			L := c.pos + c.n
			// Keys/values of every position, [L, Hkv, Dh]; the prefix is
			// already in the cache, the step's rows come in through KVWrite.
			allK, allV := randVals(r, L*hkv*dh, 1), randVals(r, L*hkv*dh, 1)
			kc, vc := make([]float32, hkv*C*dh), make([]float32, hkv*C*dh)
			for j := 0; j < c.pos; j++ {
				for g := 0; g < hkv; g++ {
					copy(kc[(g*C+j)*dh:][:dh], allK[(j*hkv+g)*dh:][:dh])
					copy(vc[(g*C+j)*dh:][:dh], allV[(j*hkv+g)*dh:][:dh])
				}
			}
			// Stale data past the filled part must never be read.
			for i := range kc {
				if i%(C*dh) >= L*dh {
					kc[i], vc[i] = float32(math.NaN()), float32(math.NaN())
				}
			}
			stepK, stepV := make([]float32, c.T*hkv*dh), make([]float32, c.T*hkv*dh)
			copy(stepK, allK[c.pos*hkv*dh:])
			copy(stepV, allV[c.pos*hkv*dh:])
			q := randVals(r, c.T*hq*dh, 1)
			g := newGraph(t)
			meta := g.input("meta", []int{c.pos, c.n}, 2)
			kn := KVWrite(g.input("kc", kc, hkv, C, dh), g.input("k", stepK, c.T, hkv, dh), meta, "k")
			vn := KVWrite(g.input("vc", vc, hkv, C, dh), g.input("v", stepV, c.T, hkv, dh), meta, "v")
			out := g.run(CausalAttention(g.input("q", q, c.T, hq, dh), kn, vn, meta, 0.3, c.window, "attn"))[0]
			want := refAttention(q, allK, allV, c.n, hq, hkv, dh, c.pos, 0.3, c.window)
			assertClose(t, "attention", out[:c.n*hq*dh], want, 1e-5)
			for i, x := range out[c.n*hq*dh:] {
				if x != 0 {
					t.Fatalf("padded row value %d = %g, want 0", i, x)
				}
			}
			// The cache now holds the step's real rows, in place.
			for j := c.pos; j < L; j++ {
				for g := 0; g < hkv; g++ {
					for d := 0; d < dh; d++ {
						if kc[(g*C+j)*dh+d] != allK[(j*hkv+g)*dh+d] {
							t.Fatalf("cache row %d head %d not written", j, g)
						}
					}
				}
			}
		})
	}
}

func TestKVWriteRejectsOverflow(t *testing.T) {
	g := newGraph(t)
	meta := g.input("meta", []int{3, 2}, 2)
	out := KVWrite(g.input("kc", make([]float32, 1*4*2), 1, 4, 2), g.input("k", make([]float32, 2*1*2), 2, 1, 2), meta, "k")
	m := G.NewTapeMachine(g.g)
	defer m.Close()
	_ = out
	if err := m.RunAll(); err == nil {
		t.Fatal("writing rows 3..5 into a 4-position cache did not fail")
	}
}

func TestGatedMLP(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const T, D, F = 3, 6, 10
	x, wg, wu, wd := randVals(r, T*D, 1), randVals(r, D*F, 0.5), randVals(r, D*F, 0.5), randVals(r, F*D, 0.5)
	for _, act := range []string{"silu", "gelu_pytorch_tanh"} {
		g := newGraph(t)
		out := g.run(GatedMLP(g.input("x", x, T, D), g.input("g", wg, D, F), g.input("u", wu, D, F), g.input("d", wd, F, D), act))[0]
		gate, up := refMatmul(x, T, D, wg, F), refMatmul(x, T, D, wu, F)
		h := make([]float32, T*F)
		for i := range h {
			a := gate[i] / (1 + math.Exp(-gate[i]))
			if act != "silu" {
				a = 0.5 * gate[i] * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(gate[i]+0.044715*math.Pow(gate[i], 3))))
			}
			h[i] = float32(a * up[i])
		}
		assertClose(t, act, out, refMatmul(h, T, F, wd, D), 1e-4)
	}
}

func TestEmbeddingLastRowAndLMHead(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const V, D = 9, 4
	table := randVals(r, V*D, 1)
	g := newGraph(t)
	tn := g.input("table", table, V, D)
	x := Embedding(tn, g.input("ids", []int{3, 0, 8}, 3))
	last := LastRow(x, g.input("last", []int{1}, 1))
	out := g.run(x, LMHead(last, tn), LMHead(x, tn))
	var want []float64
	for _, id := range []int{3, 0, 8} {
		for d := 0; d < D; d++ {
			want = append(want, float64(table[id*D+d]))
		}
	}
	assertClose(t, "embedding", out[0], want, 0)
	// logits[v] = table[v] · table[0] for the row id 0; every row for [T, V].
	logit := func(a, b int) float64 {
		var s float64
		for d := 0; d < D; d++ {
			s += float64(table[a*D+d]) * float64(table[b*D+d])
		}
		return s
	}
	var one, all []float64
	for v := 0; v < V; v++ {
		one = append(one, logit(v, 0))
	}
	for _, id := range []int{3, 0, 8} {
		for v := 0; v < V; v++ {
			all = append(all, logit(v, id))
		}
	}
	assertClose(t, "lm head (last row)", out[1], one, 1e-5)
	assertClose(t, "lm head (all rows)", out[2], all, 1e-5)
}

func TestSparseMoE(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const T, D, F, E, K = 5, 6, 4, 4, 2
	x, router := randVals(r, T*D, 1), randVals(r, D*E, 1)
	for _, norm := range []bool{false, true} {
		g := newGraph(t)
		var experts []ExpertWeights
		var raw [][3][]float32
		for e := 0; e < E; e++ {
			gw, uw, dw := randVals(r, D*F, 0.5), randVals(r, D*F, 0.5), randVals(r, F*D, 0.5)
			raw = append(raw, [3][]float32{gw, uw, dw})
			experts = append(experts, ExpertWeights{
				Gate: g.input(fmtName("g", e), gw, D, F), Up: g.input(fmtName("u", e), uw, D, F), Down: g.input(fmtName("d", e), dw, F, D)})
		}
		out := g.run(SparseMoE(g.input("x", x, T, D), g.input("router", router, D, E), experts, K, norm, "silu", "moe"))[0]

		// Reference: every row, softmax over all experts, top K, weighted sum.
		logits := refMatmul(x, T, D, router, E)
		want := make([]float64, T*D)
		for t := 0; t < T; t++ {
			p := make([]float64, E)
			var sum float64
			for e := 0; e < E; e++ {
				p[e] = math.Exp(logits[t*E+e])
				sum += p[e]
			}
			order := []int{0, 1, 2, 3}
			for i := range order {
				for j := i + 1; j < len(order); j++ {
					if p[order[j]] > p[order[i]] {
						order[i], order[j] = order[j], order[i]
					}
				}
			}
			top := (p[order[0]] + p[order[1]]) / sum
			for _, e := range order[:K] {
				w := p[e] / sum
				if norm {
					w /= top
				}
				row := x[t*D : (t+1)*D]
				gate, up := refMatmul(row, 1, D, raw[e][0], F), refMatmul(row, 1, D, raw[e][1], F)
				h := make([]float32, F)
				for i := range h {
					h[i] = float32(gate[i] / (1 + math.Exp(-gate[i])) * up[i])
				}
				y := refMatmul(h, 1, F, raw[e][2], D)
				for j := 0; j < D; j++ {
					want[t*D+j] += w * y[j]
				}
			}
		}
		assertClose(t, "moe", out, want, 1e-5)
	}
}

func fmtName(p string, e int) string { return p + string(rune('0'+e)) }

func TestScaleAndSoftcap(t *testing.T) {
	x := []float32{-40, -1, 0, 0.5, 3, 100}
	g := newGraph(t)
	xn := g.input("x", x, 2, 3)
	out := g.run(Scale(xn, 8), Softcap(xn, 15))
	var scaled, capped []float64
	for _, v := range x {
		scaled = append(scaled, float64(v)*8)
		capped = append(capped, 15*math.Tanh(float64(v)/15))
	}
	assertClose(t, "scale", out[0], scaled, 0)
	assertClose(t, "softcap", out[1], capped, 1e-5)
}
