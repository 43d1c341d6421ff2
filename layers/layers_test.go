package layers

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
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
	switch data.(type) {
	case []int:
		dt = tensor.Int
	case []uint16:
		dt = tensor.Uint16
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

// refMatmulT is x [T, in] · wᵀ for w [out, in], in float64.
func refMatmulT(x []float32, T, in int, w []float32, out int) []float64 {
	y := make([]float64, T*out)
	for t := 0; t < T; t++ {
		for o := 0; o < out; o++ {
			var s float64
			for i := 0; i < in; i++ {
				s += float64(x[t*in+i]) * float64(w[o*in+i])
			}
			y[t*out+o] = s
		}
	}
	return y
}

// stored rounds w to a storage type and returns the storage and the values
// it holds, widened.
func stored(w []float32, dtype graphs.DType) (any, []float32) {
	if dtype == graphs.F32 {
		return w, w
	}
	bits := make([]uint16, len(w))
	vals := make([]float32, len(w))
	for i, v := range w {
		if dtype == graphs.BF16 {
			bits[i] = uint16(math.Float32bits(v) >> 16)
		} else {
			bits[i] = float16.Fromfloat32(v).Bits()
		}
	}
	graphs.Widen(vals, bits, dtype)
	return bits, vals
}

func TestMatmulT(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// 700 x 300 splits into several row blocks for the 16-bit kernels.
	for _, sz := range []struct{ in, out int }{{7, 3}, {700, 300}} {
		for _, dtype := range []graphs.DType{graphs.F32, graphs.BF16, graphs.F16} {
			for _, T := range []int{1, 5} {
				for _, bias := range []bool{false, true} {
					g := newGraph(t)
					x, b := randVals(r, T*sz.in, 1), randVals(r, sz.out, 1)
					data, w := stored(randVals(r, sz.out*sz.in, 0.1), dtype)
					in := []*G.Node{g.input("x", x, T, sz.in), g.input("w", data, sz.out, sz.in)}
					if bias {
						in = append(in, g.input("b", b, sz.out))
					}
					out := g.run(ops.Apply(matmulT{dtype: dtype, bias: bias, name: "w"}, in...))[0]
					want := refMatmulT(x, T, sz.in, w, sz.out)
					if bias {
						for i := range want {
							want[i] += float64(b[i%sz.out])
						}
					}
					assertClose(t, dtype.String()+" matmul", out, want, 2e-5*math.Sqrt(float64(sz.in)))
				}
			}
		}
	}
}

func TestEmbeddingLookup(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const V, D = 9, 4
	for _, dtype := range []graphs.DType{graphs.F32, graphs.BF16, graphs.F16} {
		data, table := stored(randVals(r, V*D, 1), dtype)
		g := newGraph(t)
		out := g.run(ops.Apply(embeddingLookup{dtype: dtype, name: "e"}, g.input("table", data, V, D), g.input("ids", []int{3, 0, 8}, 3)))[0]
		var want []float64
		for _, id := range []int{3, 0, 8} {
			for d := 0; d < D; d++ {
				want = append(want, float64(table[id*D+d]))
			}
		}
		assertClose(t, dtype.String()+" embedding", out, want, 0)
	}
	g := newGraph(t)
	ops.Apply(embeddingLookup{dtype: graphs.F32, name: "e"}, g.input("table", make([]float32, V*D), V, D), g.input("ids", []int{1, V}, 2))
	m := G.NewTapeMachine(g.g)
	defer m.Close()
	if err := m.RunAll(); err == nil || !strings.Contains(err.Error(), "token 9") {
		t.Errorf("an id past the vocabulary gave %v, want an error naming token 9", err)
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
	out := g.run(ops.Apply(rmsNorm{eps: 1e-6, dims: 2}, xn, wn), ops.Apply(rmsNorm{eps: 1e-6, offset: 1, dims: 2}, xn, wn))
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
		rp := NewRoPE(dh, 10000, 1)
		out := g.run(rp.kernelOn(g.input("x", x, T, H, dh), g.input("positions", []int{pos, pos + 1, pos + 2}, T)))[0]
		assertClose(t, "rope", out, refRoPE(x, T, H, dh, 10000, pos), 1e-5)
	}
	// A padding row (position -1) comes out zero.
	g := newGraph(t)
	out := g.run(NewRoPE(dh, 10000, 1).kernelOn(g.input("x", x, T, H, dh), g.input("positions", []int{4, 5, -1}, T)))[0]
	for _, v := range out[2*H*dh:] {
		if v != 0 {
			t.Fatal("a padding row was rotated")
		}
	}
	// Linear scaling divides the frequencies.
	f1, f4 := NewRoPE(dh, 1e6, 1).InvFreq, NewRoPE(dh, 1e6, 4).InvFreq
	for i := range f1 {
		if math.Abs(float64(f4[i])*4-float64(f1[i])) > 1e-6*float64(f1[i]) {
			t.Fatalf("factor 4: %g vs %g", f4[i], f1[i])
		}
	}
}

func (r *RoPE) kernelOn(x, positions *G.Node) *G.Node {
	return ops.Apply(r.kernel(), x, positions)
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

// attnFixture is a one-layer KV pool of hkv heads of dh.
func attnFixture(t testing.TB, hkv, dh, window, block int, f16 bool) *graphs.KVFixture {
	kind := graphs.FullCache
	if window > 0 {
		kind = graphs.SlidingCache
	}
	f, err := graphs.NewKVFixture(graphs.LayerCache{Kind: kind, KVHeads: hkv, KeyDim: dh, ValueDim: dh, Window: window}, block, f16)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCachedAttention runs one forward of one or more sequences over the
// paged pool: each sequence's earlier keys are in its blocks, the forward
// adds its own, and every row attends within its sequence only. Each case
// runs with the probabilities captured, without (prefills then attend by
// tiles, compared with the untiled kernel too), and in an F16 pool, whose
// reference reads the keys and values rounded as the pool stores them.
func TestCachedAttention(t *testing.T) {
	const hq, hkv = 4, 2
	type seq struct{ pos, n int }
	cases := []struct {
		name   string
		T      int
		window int
		block  int
		dh     int // 0: 8
		seqs   []seq
	}{
		{"prefill from 0", 5, 0, 4, 0, []seq{{0, 5}}},
		{"padded prefill", 8, 0, 4, 0, []seq{{0, 3}}},
		{"chunk after a prefix", 4, 0, 4, 0, []seq{{6, 4}}},
		{"decode", 1, 0, 4, 0, []seq{{9, 1}}},
		{"decode in one block", 1, 0, 32, 0, []seq{{9, 1}}},
		{"sliding window prefill", 8, 3, 4, 0, []seq{{0, 7}}},
		{"sliding window decode", 1, 4, 4, 0, []seq{{10, 1}}},
		{"sliding chunk longer than the window", 8, 3, 2, 0, []seq{{5, 7}}},
		{"three sequences decoding", 4, 0, 4, 0, []seq{{9, 1}, {0, 1}, {17, 1}}},
		{"prefill beside decodes", 8, 0, 4, 0, []seq{{3, 1}, {0, 5}, {12, 1}}},
		{"sliding, two sequences", 8, 3, 2, 0, []seq{{6, 3}, {2, 4}}},
		// Longer than a tile (attnTileRows) and a key chunk (attnKeyChunk),
		// with tiles that do not start on blocks.
		{"long prefill from 0", 261, 0, 32, 0, []seq{{0, 261}}},
		{"long chunk after a prefix", 200, 0, 32, 64, []seq{{300, 200}}},
		{"long chunk, blocks of 12", 203, 0, 12, 16, []seq{{301, 200}}},
		{"long chunk, heads of 20", 130, 0, 16, 20, []seq{{530, 130}}},
		{"long chunk, window smaller than a tile", 200, 20, 16, 0, []seq{{300, 200}}},
		{"long chunk, window larger than a tile", 200, 100, 32, 16, []seq{{300, 200}}},
		{"long chunk, window larger than a key chunk", 200, 300, 32, 0, []seq{{300, 200}}},
		{"long chunks of several sequences", 420, 0, 16, 16, []seq{{100, 70}, {0, 1}, {250, 129}, {40, 100}, {7, 1}}},
		{"sliding, long chunks of several sequences", 400, 50, 16, 0, []seq{{100, 70}, {0, 1}, {250, 129}, {40, 100}}},
	}
	for _, c := range cases {
		for _, f16 := range []bool{false, true} {
			name := c.name
			if f16 {
				name += "/kv=f16"
			}
			t.Run(name, func(t *testing.T) {
				dh := c.dh
				if dh == 0 {
					dh = 8
				}
				r := rand.New(rand.NewPCG(7, uint64(len(c.name))))
				f := attnFixture(t, hkv, dh, c.window, c.block, f16)
				q := randVals(r, c.T*hq*dh, 1)
				stepK, stepV := make([]float32, c.T*hkv*dh), make([]float32, c.T*hkv*dh)
				positions := make([]int, c.T)
				for i := range positions {
					positions[i] = -1
				}
				var runs []graphs.FixtureRun
				all := make([][2][]float32, len(c.seqs)) // every position's keys and values, [L, Hkv, Dh]
				row := 0
				for i, sq := range c.seqs {
					L := sq.pos + sq.n
					all[i] = [2][]float32{randVals(r, L*hkv*dh, 1), randVals(r, L*hkv*dh, 1)}
					for j := 0; j < sq.pos; j++ { // earlier positions are in the pool
						for g := 0; g < hkv; g++ {
							if err := f.Store(i, j, g, all[i][0][(j*hkv+g)*dh:][:dh], all[i][1][(j*hkv+g)*dh:][:dh]); err != nil {
								t.Fatal(err)
							}
						}
					}
					copy(stepK[row*hkv*dh:], all[i][0][sq.pos*hkv*dh:])
					copy(stepV[row*hkv*dh:], all[i][1][sq.pos*hkv*dh:])
					for j := 0; j < sq.n; j++ {
						positions[row+j] = sq.pos + j
					}
					runs = append(runs, graphs.FixtureRun{Seq: i, Row: row, Len: sq.n, Pos: sq.pos})
					row += sq.n
					if f16 {
						for _, x := range all[i] {
							for j, v := range x {
								x[j] = float16.Fromfloat32(v).Float32()
							}
						}
					}
				}
				if err := f.Plan(runs...); err != nil {
					t.Fatal(err)
				}
				forward := func(sink *graphs.Sink) []float32 {
					g := newGraph(t)
					return g.run(ops.Apply(cachedAttention{name: "attn", scale: 0.3, window: c.window, kv: f.KV, sink: sink},
						g.input("q", q, c.T, hq, dh), g.input("k", stepK, c.T, hkv, dh), g.input("v", stepV, c.T, hkv, dh),
						g.input("positions", positions, c.T)))[0]
				}
				sink := &graphs.Sink{}
				captured := forward(sink)
				tiled := forward(nil)
				attnUntiled = true
				untiled := forward(nil)
				attnUntiled = false
				attnGroupAll = true // decode rows by kv head
				grouped := forward(nil)
				attnGroupAll = false
				for i, x := range tiled {
					if d := math.Abs(float64(x - untiled[i])); !(d <= 1e-5*max(1, math.Abs(float64(untiled[i])))) {
						t.Fatalf("value %d: tiled %g, untiled %g", i, x, untiled[i])
					}
					if d := math.Abs(float64(grouped[i] - untiled[i])); !(d <= 1e-5*max(1, math.Abs(float64(untiled[i])))) {
						t.Fatalf("value %d: decode by kv head %g, by query head %g", i, grouped[i], untiled[i])
					}
				}
				p, _ := ops.Float32s(sinkValue(sink))
				keys := len(p) / (c.T * hq)
				for i, sq := range c.seqs {
					r0 := runs[i].Row
					want := refAttention(q[r0*hq*dh:], all[i][0], all[i][1], sq.n, hq, hkv, dh, sq.pos, 0.3, c.window)
					assertClose(t, fmt.Sprintf("sequence %d captured", i), captured[r0*hq*dh:(r0+sq.n)*hq*dh], want, 1e-5)
					assertClose(t, fmt.Sprintf("sequence %d", i), tiled[r0*hq*dh:(r0+sq.n)*hq*dh], want, 1e-5)
					// The pool now holds the forward's keys and values.
					for j := sq.pos; j < sq.pos+sq.n; j++ {
						for g := 0; g < hkv; g++ {
							k, v := f.Load(i, j, g)
							if !slices.Equal(k, all[i][0][(j*hkv+g)*dh:][:dh]) || !slices.Equal(v, all[i][1][(j*hkv+g)*dh:][:dh]) {
								t.Fatalf("sequence %d position %d head %d not written", i, j, g)
							}
						}
					}
					// Captured probabilities: [T, heads, keys], rows summing
					// to 1 over their own sequence's positions.
					for tt := r0; tt < r0+sq.n; tt++ {
						for h := 0; h < hq; h++ {
							var sum float64
							for k, v := range p[(tt*hq+h)*keys : (tt*hq+h+1)*keys] {
								if k > sq.pos+tt-r0 && v != 0 {
									t.Fatalf("row %d head %d has probability %g on future position %d", tt, h, v, k)
								}
								sum += float64(v)
							}
							if math.Abs(sum-1) > 1e-5 {
								t.Fatalf("row %d head %d: probabilities sum to %g", tt, h, sum)
							}
						}
					}
				}
				for _, out := range [][]float32{captured, tiled} {
					for i, x := range out[row*hq*dh:] {
						if x != 0 {
							t.Fatalf("padded row value %d = %g, want 0", i, x)
						}
					}
				}
			})
		}
	}
}

func sinkValue(k *graphs.Sink) G.Value { return graphs.SinkValue(k) }

// TestCachedAttentionRejectsMissingBlocks: rows whose positions lie past
// their sequence's blocks are an error, not a read out of bounds.
func TestCachedAttentionRejectsMissingBlocks(t *testing.T) {
	f := attnFixture(t, 1, 2, 0, 2, false)
	if err := f.Plan(graphs.FixtureRun{Seq: 0, Row: 0, Len: 2, Pos: 0}); err != nil {
		t.Fatal(err)
	}
	g := newGraph(t)
	ops.Apply(cachedAttention{name: "a", scale: 1, kv: f.KV},
		g.input("q", make([]float32, 2*1*2), 2, 1, 2), g.input("k", make([]float32, 2*1*2), 2, 1, 2), g.input("v", make([]float32, 2*1*2), 2, 1, 2),
		g.input("positions", []int{3, 4}, 2))
	// The plan says positions 0..1; claim 3..4 instead.
	if err := f.Plan(graphs.FixtureRun{Seq: 1, Row: 0, Len: 2, Pos: 0}); err != nil {
		t.Fatal(err)
	}
	f.KV.Runs()[0].Pos = 3
	m := G.NewTapeMachine(g.g)
	defer m.Close()
	if err := m.RunAll(); err == nil || !strings.Contains(err.Error(), "blocks") {
		t.Fatalf("rows 3..4 with blocks for 2 positions gave %v", err)
	}
}

func TestGatedAct(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	gate, up := randVals(r, 12, 2), randVals(r, 12, 1)
	for _, act := range []string{"silu", "gelu_pytorch_tanh"} {
		g := newGraph(t)
		out := g.run(ops.Apply(gatedAct{act: act}, g.input("g", gate, 3, 4), g.input("u", up, 3, 4)))[0]
		want := make([]float64, len(gate))
		for i, v := range gate {
			x := float64(v)
			a := x / (1 + math.Exp(-x))
			if act != "silu" {
				a = 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
			}
			want[i] = a * float64(up[i])
		}
		assertClose(t, act, out, want, 1e-5)
	}
}

// TestSparseMoE runs the op against a float64 reference, on few rows
// (the experts side by side) and on more than expertsAtOnce (one after
// another).
func TestSparseMoE(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const D, F, E, K = 6, 4, 4, 2
	for _, c := range []struct {
		T    int
		norm bool
	}{{5, false}, {5, true}, {expertsAtOnce + 4, true}} {
		T, norm := c.T, c.norm
		x, router := randVals(r, T*D, 1), randVals(r, E*D, 1)
		g := newGraph(t)
		var raw [][3][]float32
		var gs, us, ds []float32 // the experts stacked, as the op binds them
		for e := 0; e < E; e++ {
			gw, uw, dw := randVals(r, F*D, 0.5), randVals(r, F*D, 0.5), randVals(r, D*F, 0.5)
			raw = append(raw, [3][]float32{gw, uw, dw})
			gs, us, ds = append(gs, gw...), append(us, uw...), append(ds, dw...)
		}
		in := []*G.Node{g.input("x", x, T, D), g.input("router", router, E, D),
			g.input("gate", gs, E, F, D), g.input("up", us, E, F, D), g.input("down", ds, E, D, F)}
		out := g.run(ops.Apply(sparseMoE{name: "moe", experts: E, topK: K, normTopK: norm, act: "silu"}, in...))[0]

		// Reference: every row, softmax over all experts, top K, weighted sum.
		logits := refMatmulT(x, T, D, router, E)
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
				gate, up := refMatmulT(row, 1, D, raw[e][0], F), refMatmulT(row, 1, D, raw[e][1], F)
				h := make([]float32, F)
				for i := range h {
					h[i] = float32(gate[i] / (1 + math.Exp(-gate[i])) * up[i])
				}
				y := refMatmulT(h, 1, F, raw[e][2], D)
				for j := 0; j < D; j++ {
					want[t*D+j] += w * y[j]
				}
			}
		}
		assertClose(t, "moe", out, want, 1e-5)
	}
}

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

// TestOpSkeleton: an op without a CUDA kernel or a gradient says so by
// name, and ops that differ in a parameter hash apart.
func TestOpSkeleton(t *testing.T) {
	op := ops.New(cachedAttention{name: "layers.3", scale: 1, kv: attnFixture(t, 1, 2, 0, 4, false).KV})
	if _, err := ops.New(keepValue{}).CUDA(nil, cuda.Tensor{}, nil); !errors.Is(err, ops.ErrNoCUDA) || !strings.Contains(err.Error(), "keep has no CUDA kernel") {
		t.Errorf("CUDA: %v", err)
	}
	if _, err := op.SymDiff(nil, nil, nil); !errors.Is(err, ops.ErrNoGrad) || !strings.Contains(err.Error(), "attention layers.3 has no gradient") {
		t.Errorf("SymDiff: %v", err)
	}
	a, b := ops.New(rmsNorm{eps: 1e-6, dims: 2}), ops.New(rmsNorm{eps: 1e-5, dims: 2})
	if a.Hashcode() == b.Hashcode() || a.String() == b.String() {
		t.Error("ops differing in eps hash alike")
	}
	if op.Arity() != 4 {
		t.Errorf("attention arity %d, want 4", op.Arity())
	}
}

// TestArenaRecycles runs a small graph of these ops on an arena twice: the
// values are right, a value read twice survives its first reader, a value
// a stock op reads is never recycled, and the second run takes no new
// buffers.
func TestArenaRecycles(t *testing.T) {
	g := newGraph(t)
	x := g.input("x", []float32{1, 2, 3, 4}, 2, 2)
	y1 := Scale(x, 2)
	y2 := Scale(y1, 3)
	y3 := Add(y1, y2) // y1 is read twice
	y4 := Scale(y3, 0.5)
	y5 := Scale(y4, 10)
	neg, err := G.Neg(y2) // a stock op pins y2
	if err != nil {
		t.Fatal(err)
	}
	arena := ops.NewArena()
	ops.Plan(g.g, arena)
	m := G.NewTapeMachine(g.g)
	defer m.Close()
	var held int
	for run := 0; run < 2; run++ {
		arena.Reset()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		got := append([]float32(nil), y5.Value().Data().([]float32)...)
		if want := []float32{40, 80, 120, 160}; !slices.Equal(got, want) {
			t.Fatalf("run %d: %v, want %v", run, got, want)
		}
		if n := neg.Value().Data().([]float32); !slices.Equal(n, []float32{-6, -12, -18, -24}) {
			t.Fatalf("run %d: the stock op read %v", run, n)
		}
		if run == 0 {
			held = arena.Buffers()
		} else if arena.Buffers() != held {
			t.Errorf("the second run took %d buffers, the first %d", arena.Buffers(), held)
		}
		m.Reset()
	}
	// y1, y3 and y4 share at most two buffers; y2 and y5 keep their own.
	if held == 0 || held > 2 {
		t.Errorf("the arena holds %d buffers for values of which at most two are live at once", held)
	}
}

// TestGatedActInPlace: a gated activation whose gate and up are read by
// nothing else writes into one of their buffers, so the arena holds no
// buffer for it; one whose input another op still reads leaves that input
// whole. Both give act(gate)·up.
func TestGatedActInPlace(t *testing.T) {
	x := []float32{-3, -1, 0, 0.5, 1, 2, 4, 8}
	want := make([]float32, len(x))
	for i, v := range x {
		want[i] = silu(2*v) * (3 * v)
	}
	for _, shared := range []bool{false, true} {
		g := newGraph(t)
		in := g.input("x", slices.Clone(x), 2, 4)
		gate, up := Scale(in, 2), Scale(in, 3)
		h := ops.Apply(gatedAct{act: "silu"}, gate, up)
		out := Scale(h, 1)
		var keep *G.Node
		if shared {
			keep = Scale(Add(gate, h), 1) // gate outlives the activation
		}
		arena := ops.NewArena()
		ops.Plan(g.g, arena)
		m := G.NewTapeMachine(g.g)
		arena.Reset()
		if err := m.RunAll(); err != nil {
			t.Fatal(err)
		}
		if got := out.Value().Data().([]float32); !slices.Equal(got, want) {
			t.Errorf("shared=%v: %v, want %v", shared, got, want)
		}
		if shared {
			got := keep.Value().Data().([]float32)
			for i, v := range x {
				if w := 2*v + want[i]; got[i] != w {
					t.Fatalf("the gate read after the activation: %v at %d, want %v", got[i], i, w)
				}
			}
		} else if n := arena.Buffers(); n != 2 {
			// gate and up; h takes one of theirs, out the other's.
			t.Errorf("the arena holds %d buffers, want 2", n)
		}
		m.Close()
	}
}

// TestKernelsAllocateNothing runs each kernel of a decode step again and
// again on its arena: after the first run, none allocates (their outputs,
// headers and scratch are reused). Gorgonia's machine still allocates per
// node; BenchmarkDecode in zoo/qwen3 reports the total.
func TestKernelsAllocateNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const D, F, H, Hkv, Dh = 64, 128, 4, 2, 16
	kv := attnFixture(t, Hkv, Dh, 0, 8, false)
	if err := kv.Plan(graphs.FixtureRun{Seq: 0, Row: 0, Len: 1, Pos: 9}); err != nil {
		t.Fatal(err)
	}
	bf, _ := stored(randVals(r, F*D, 0.1), graphs.BF16)
	cases := []struct {
		name string
		k    ops.Kernel
		in   func(g *graphT) []*G.Node
	}{
		{"matmul f32", matmulT{dtype: graphs.F32, name: "w"}, func(g *graphT) []*G.Node {
			return []*G.Node{g.input("x", randVals(r, D, 1), 1, D), g.input("w", randVals(r, F*D, 1), F, D)}
		}},
		{"matmul bf16", matmulT{dtype: graphs.BF16, name: "w"}, func(g *graphT) []*G.Node {
			return []*G.Node{g.input("x", randVals(r, D, 1), 1, D), g.input("w", bf, F, D)}
		}},
		{"rms norm", rmsNorm{eps: 1e-6, dims: 2}, func(g *graphT) []*G.Node {
			return []*G.Node{g.input("x", randVals(r, D, 1), 1, D), g.input("w", randVals(r, D, 1), D)}
		}},
		{"rope", rope{invFreq: NewRoPE(Dh, 1e4, 1).InvFreq, id: "r"}, func(g *graphT) []*G.Node {
			return []*G.Node{g.input("x", randVals(r, H*Dh, 1), 1, H, Dh), g.input("p", []int{7}, 1)}
		}},
		{"gated act", gatedAct{act: "silu"}, func(g *graphT) []*G.Node {
			return []*G.Node{g.input("g", randVals(r, F, 1), 1, F), g.input("u", randVals(r, F, 1), 1, F)}
		}},
		{"add", add{dims: 2}, func(g *graphT) []*G.Node {
			return []*G.Node{g.input("a", randVals(r, D, 1), 1, D), g.input("b", randVals(r, D, 1), 1, D)}
		}},
		{"attention", cachedAttention{name: "a", scale: 0.25, kv: kv.KV}, func(g *graphT) []*G.Node {
			return []*G.Node{g.input("q", randVals(r, H*Dh, 1), 1, H, Dh), g.input("k", randVals(r, Hkv*Dh, 1), 1, Hkv, Dh),
				g.input("v", randVals(r, Hkv*Dh, 1), 1, Hkv, Dh), g.input("p", []int{9}, 1)}
		}},
		{"embedding", embeddingLookup{dtype: graphs.F32, name: "e"}, func(g *graphT) []*G.Node {
			return []*G.Node{g.input("t", randVals(r, F*D, 1), F, D), g.input("ids", []int{5}, 1)}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGraph(t)
			in := c.in(g)
			n := ops.Apply(c.k, in...)
			arena := ops.NewArena()
			ops.Plan(g.g, arena)
			vals := make([]G.Value, len(in))
			for i, x := range in {
				vals[i] = x.Value()
			}
			op := n.Op()
			if _, err := op.Do(vals...); err != nil {
				t.Fatal(err)
			}
			if a := testing.AllocsPerRun(20, func() {
				arena.Reset()
				if _, err := op.Do(vals...); err != nil {
					t.Fatal(err)
				}
			}); a != 0 {
				t.Errorf("%s allocates %.0f times a run", c.name, a)
			}
		})
	}
}

func TestExp32(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x <= 88.5; x += 0.00731 {
		got, want := float64(exp32(x)), math.Exp(float64(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 { // 2.5 float32 ulp
		t.Errorf("exp32 is off by up to %g relative", worst)
	}
	for _, c := range []struct{ x, want float32 }{{-100, 0}, {100, float32(math.Inf(1))}, {0, 1}} {
		if got := exp32(c.x); got != c.want {
			t.Errorf("exp32(%g) = %g, want %g", c.x, got, c.want)
		}
	}
	if got := exp32(float32(math.NaN())); got == got {
		t.Error("exp32(NaN) is a number")
	}
}
