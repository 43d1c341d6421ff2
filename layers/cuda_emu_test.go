package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/cudaemu"
	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/ops"
)

// The device kernels run in the host emulator (internal/cudaemu) at small
// shapes that reach every path: partial chunks and tiles, the scalar path
// of rows that are not multiples of 8, every row count of the few-row
// kernel, the gathered products of a MoE. They are held to the CPU ops
// as the GPU tests are, up to float32 summation order.

func cpuValue(t *testing.T, k ops.Kernel, in ...G.Value) []float32 {
	t.Helper()
	v, err := ops.New(k).Do(in...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ops.Float32s(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func f32Dense(data []float32, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// matmulCase makes x [T, K], a weight [N, K] of type d and a bias, and
// the scale of each output (Σ|x·w| + |b|).
func matmulCase(r *rand.Rand, d graphs.DType, T, N, K int, bias bool) (in []G.Value, scale []float64) {
	x := randVals(r, T*K, 1)
	w, wv := storedWeight(r, d, 0.1, []int{N}, K)
	in = []G.Value{f32Dense(x, T, K), w}
	scale = absProducts(x, T, K, wv, N)
	if bias {
		b := randVals(r, N, 1)
		in = append(in, f32Dense(b, N))
		for i := range scale {
			scale[i] += math.Abs(float64(b[i%N]))
		}
	}
	return in, scale
}

func TestKernelsEmulatedMatMul(t *testing.T) {
	emu := cudaemu.Build(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, d := range allTypes {
		sizes := [][2]int{{67, 512}} // N, K
		if _, q := d.Quant(); !q {
			sizes = append(sizes, [2]int{13, 40}, [2]int{9, 100}) // a partial chunk; K % 8 != 0
		} else if fits(d, 96) {
			sizes = append(sizes, [2]int{13, 96})
		}
		for _, sz := range sizes {
			N, K := sz[0], sz[1]
			for i, T := range []int{1, 3, 8, 9, 70} {
				for _, fast := range []bool{false, true} {
					bias := (i+btoi(fast))%2 == 0
					name := fmt.Sprintf("%s/N%d/K%d/T%d/bias=%v/fast=%v", d, N, K, T, bias, fast)
					in, scale := matmulCase(r, d, T, N, K, bias)
					k := matmulT{dtype: d, bias: bias, name: "w", fast: fast}
					ref := k
					if _, q := d.Quant(); q {
						ref.fast = false // the device's quantized products are exact in both modes
					}
					want := cpuValue(t, ref, in...)
					got, err := emu.RunOp(k, in...)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if err := closeTo(got.Float32s(), want, scale, 1e-5); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
			}
		}
	}
}

func TestKernelsEmulatedEmbedding(t *testing.T) {
	emu := cudaemu.Build(t)
	r := rand.New(rand.NewPCG(23, 24))
	for _, d := range allTypes {
		for _, D := range []int{512, 96, 100, 40} {
			if !fits(d, D) {
				continue
			}
			const V = 11
			table, _ := storedWeight(r, d, 1, []int{V}, D)
			ids := []int{3, 0, 10, 3, 7}
			k := embeddingLookup{dtype: d, name: "e"}
			idv := tensor.New(tensor.WithShape(len(ids)), tensor.WithBacking(ids))
			want := cpuValue(t, k, table, idv)
			got, err := emu.RunOp(k, table, idv)
			if err != nil {
				t.Fatalf("%s D=%d: %v", d, D, err)
			}
			if err := closeTo(got.Float32s(), want, nil, 0); err != nil {
				t.Errorf("%s D=%d: %v", d, D, err)
			}
			// Ids outside the table give zeros on the device (the CPU refuses
			// them, or zeroes padding).
			bad := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int{-1, V, 2}))
			got, err = emu.RunOp(k, table, bad)
			if err != nil {
				t.Fatal(err)
			}
			g := got.Float32s()
			for i, v := range g[:2*D] {
				if v != 0 {
					t.Fatalf("%s D=%d: value %d of an id outside the table is %g, want 0", d, D, i, v)
				}
			}
			if err := closeTo(g[2*D:], want[3*D:4*D], nil, 0); err == nil {
				t.Fatalf("%s D=%d: row of id 2 matched id 3's", d, D)
			}
		}
	}
}

// halfFields are the byte offsets of the f16 fields (d, m, dmin) in a
// block of each quantized type.
var halfFields = map[graphs.DType][]int{
	graphs.Q8_0: {0}, graphs.Q4_0: {0}, graphs.Q5_0: {0}, graphs.Q4_1: {0, 2}, graphs.Q5_1: {0, 2},
	graphs.IQ4_NL: {0}, graphs.Q2_K: {80, 82}, graphs.Q3_K: {108}, graphs.Q4_K: {0, 2},
	graphs.Q5_K: {0, 2}, graphs.Q6_K: {208}, graphs.IQ4_XS: {0},
}

// TestKernelsEmulatedRandomBlocks holds every quantized type's device
// decoder to internal/quant's DequantizeRow bit for bit on blocks of
// random bytes (every bit of the scales, mins, high bits and masks set
// either way; the f16 fields any finite value, subnormals included),
// through the embedding lookup, which writes the decoded values as they
// are, and through the one-row product with one-hot activations, which
// sums each value with zeros.
func TestKernelsEmulatedRandomBlocks(t *testing.T) {
	emu := cudaemu.Build(t)
	r := rand.New(rand.NewPCG(27, 28))
	for _, d := range allTypes {
		f, ok := d.Quant()
		if !ok {
			continue
		}
		offs, ok := halfFields[d]
		if !ok {
			t.Fatalf("%s: no f16 fields listed", d)
		}
		const V, D = 7, 512
		nb := D / f.BlockSize()
		raw := make([]byte, V*nb*f.BlockBytes())
		for i := range raw {
			raw[i] = byte(r.Uint32())
		}
		for b := 0; b < V*nb; b++ {
			for _, o := range offs {
				hb := &raw[b*f.BlockBytes()+o+1]
				if *hb&0x7c == 0x7c { // Inf or NaN: make it finite
					*hb &^= 0x40
				}
			}
		}
		want := make([]float32, V*D)
		rb := nb * f.BlockBytes()
		for v := 0; v < V; v++ {
			quant.DequantizeRow(f, raw[v*rb:(v+1)*rb], want[v*D:(v+1)*D])
		}
		table := tensor.New(tensor.WithShape(V, rb), tensor.WithBacking(raw))
		ids := []int{0, 1, 2, 3, 4, 5, 6}
		got, err := emu.RunOp(embeddingLookup{dtype: d, name: "e"}, table, tensor.New(tensor.WithShape(V), tensor.WithBacking(ids)))
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		for i, v := range got.Float32s() {
			if math.Float32bits(v) != math.Float32bits(want[i]) {
				t.Fatalf("%s: embedding value %d (row %d, column %d) is %g, DequantizeRow's %g", d, i, i/D, i%D, v, want[i])
			}
		}
		// Column k of the weight: x one-hot at k gives y[n] = w[n, k] + 0s.
		for _, k := range []int{0, 5, 37, 100, 255, 256 + 131, D - 1} {
			x := make([]float32, D)
			x[k] = 1
			got, err := emu.RunOp(matmulT{dtype: d, name: "w"}, f32Dense(x, 1, D), table)
			if err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			for n, v := range got.Float32s() {
				if w := want[n*D+k]; v != w && !(v == 0 && w == 0) {
					t.Fatalf("%s: product with column %d, row %d is %g, DequantizeRow's %g", d, k, n, v, w)
				}
			}
		}
	}
}

// moeCase makes a MoE's inputs: x [T, D], a router [E, D] and stacked
// gate, up [E, F, D] and down [E, D, F] of the given types; and the bound
// of each output's difference between two summation orders (moeBound).
func moeCase(r *rand.Rand, k sparseMoE, T, D, F int) ([]G.Value, []float64) {
	E := k.experts
	// Router logits of a few units, as a trained router's.
	router, rv := storedWeight(r, k.routerType, 2/math.Sqrt(float64(D)), []int{E}, D)
	x := randVals(r, T*D, 1)
	in := []G.Value{f32Dense(x, T, D), router}
	var wv [3][]float32
	for j, shape := range [][2]int{{F, D}, {F, D}, {D, F}} {
		w, v := storedWeight(r, k.expertTypes[j], 0.3, []int{E, shape[0]}, shape[1])
		in = append(in, w)
		wv[j] = v
	}
	return in, moeBound(k, x, T, D, F, rv, wv)
}

// moeBound is, for each output of a MoE, how far two float32 summation
// orders may take it apart. 1e-5 of Σ over the row's experts of
// p·Σ_f |h_f·down[d, f]| (h the expert's activation): the down product's
// Σ|x·w|, which bounds what the order changes in it and what differences
// in h (from the gate and up products' order) become. Then the routing
// weights: a logit moves by up to 1e-5 of its Σ|x·router|, a weight p by
// p times a few such moves (its own, the softmax's sum, the top k's sum),
// and the output by that times the expert's |y_d|. In fast mode, with
// 16-bit down weights or the GELU table (llama.cpp's: its input rounded to
// F16), an h or a gate output that differs in the last place of float32
// may round to the next 16-bit value, 2^-8 apart at worst: two such terms
// more, of the largest p·|h_f·down[d, f]| or p·|g_f·u_f·down[d, f]|.
// Float32 exact-mode arithmetic on the widened weights; only a bound.
func moeBound(k sparseMoE, x []float32, T, D, F int, router []float32, w [3][]float32) []float64 {
	E := k.experts
	logits := make([]float32, T*E)
	mulT(logits, x, T, weight{dtype: graphs.F32, f32: router, rows: E, cols: D}, E, D)
	lscale := absProducts(x, T, D, router, E)
	rows, weights := route(logits, T, E, k.topK, k.normTopK)
	act, _ := activationFor(k.act, false)
	flips := k.fast && (k.expertTypes[2] == graphs.BF16 || k.expertTypes[2] == graphs.F16 ||
		k.act == "gelu_pytorch_tanh" || k.act == "gelu_new")
	sum, top := make([]float64, T*D), make([]float64, T*D)
	for e := 0; e < E; e++ {
		down := w[2][e*D*F : (e+1)*D*F]
		for i, t := range rows[e] {
			xr := x[t*D : (t+1)*D]
			g, u, h := make([]float32, F), make([]float32, F), make([]float32, F)
			mulT(g, xr, 1, weight{dtype: graphs.F32, f32: w[0][e*F*D : (e+1)*F*D], rows: F, cols: D}, F, D)
			mulT(u, xr, 1, weight{dtype: graphs.F32, f32: w[1][e*F*D : (e+1)*F*D], rows: F, cols: D}, F, D)
			for j := range g {
				h[j] = act(g[j]) * u[j]
			}
			y := make([]float32, D)
			mulT(y, h, 1, weight{dtype: graphs.F32, f32: down, rows: D, cols: F}, D, F)
			a := absProducts(h, 1, F, down, D)
			var dl float64 // the largest move of row t's logits
			for _, v := range lscale[t*E : (t+1)*E] {
				dl = max(dl, 1e-5*v)
			}
			p := float64(weights[e][i])
			for d := range a {
				sum[t*D+d] += 1e-5*p*a[d] + 4*dl*p*math.Abs(float64(y[d]))
				if !flips {
					continue
				}
				var m float64
				for f, v := range down[d*F : (d+1)*F] {
					m = max(m, math.Abs(float64(h[f])*float64(v)), math.Abs(float64(g[f])*float64(u[f])*float64(v)))
				}
				top[t*D+d] = max(top[t*D+d], p*m)
			}
		}
	}
	for i := range sum {
		sum[i] += 2 * top[i] / 256
	}
	return sum
}

func TestKernelsEmulatedMoE(t *testing.T) {
	emu := cudaemu.Build(t)
	r := rand.New(rand.NewPCG(25, 26))
	type mcase struct {
		E, K, D, F int
		router     graphs.DType
		experts    [3]graphs.DType
		act        string
	}
	f, b, h := graphs.F32, graphs.BF16, graphs.F16
	cases := []mcase{
		{8, 2, 64, 32, f, [3]graphs.DType{f, f, f}, "silu"},
		{8, 2, 64, 32, b, [3]graphs.DType{b, b, b}, "silu"},
		{8, 3, 64, 32, f, [3]graphs.DType{h, h, b}, "gelu_pytorch_tanh"},
		// Quantized weights and F32 only: the device's fast mode is then
		// the CPU's exact one.
		{8, 2, 64, 32, f, [3]graphs.DType{graphs.Q8_0, graphs.Q4_0, graphs.Q5_0}, "silu"},
		{6, 2, 64, 32, graphs.Q8_0, [3]graphs.DType{f, f, f}, "gelu"},
		{4, 2, 256, 256, f, [3]graphs.DType{graphs.Q4_K, graphs.Q4_K, graphs.Q6_K}, "relu"},
		{8, 2, 64, 32, f, [3]graphs.DType{graphs.Q4_1, graphs.Q5_1, graphs.IQ4_NL}, "silu"},
		{4, 2, 256, 256, graphs.IQ4_XS, [3]graphs.DType{graphs.Q2_K, graphs.Q3_K, graphs.Q5_K}, "silu"},
		{5, 5, 40, 24, f, [3]graphs.DType{b, f, b}, "silu"},
	}
	for ci, c := range cases {
		for _, T := range []int{1, 5, 8, 9, 70} {
			for _, fast := range []bool{false, true} {
				k := sparseMoE{name: "moe", experts: c.E, topK: c.K, normTopK: T%2 == 1, act: c.act,
					routerType: c.router, expertTypes: c.experts, fast: fast}
				name := fmt.Sprintf("case %d (%v %v %s)/T%d/fast=%v", ci, c.router, c.experts, c.act, T, fast)
				in, scale := moeCase(r, k, T, c.D, c.F)
				ref := k
				for _, d := range append(c.experts[:], c.router) {
					if _, q := d.Quant(); q {
						ref.fast = false // the device's quantized products are exact in both modes
					}
				}
				want := cpuValue(t, ref, in...)
				got, err := emu.RunOp(k, in...)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if err := closeTo(got.Float32s(), want, scale, 1); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
}

func TestKernelsEmulatedVision(t *testing.T) {
	emu := cudaemu.Build(t)
	r := rand.New(rand.NewPCG(27, 28))
	for _, d := range []graphs.DType{graphs.F32, graphs.BF16, graphs.F16} {
		for _, side := range []int{40, 64} { // 8 patches (the few-row kernel, trailing pixels dropped), 32
			const N, C, P, D = 2, 3, 16, 24
			px := f32Dense(randVals(r, N*C*side*side, 1), N, C, side, side)
			w, _ := storedWeight(r, d, 0.1, []int{D, C, P}, P)
			bias := f32Dense(randVals(r, D, 1), D)
			k := patchEmbed{patch: P, dtype: d, name: "patch"}
			want := cpuValue(t, k, px, w, bias)
			got, err := emu.RunOp(k, px, w, bias)
			if err != nil {
				t.Fatalf("%s side %d: %v", d, side, err)
			}
			if err := closeTo(got.Float32s(), want, nil, 1e-5); err != nil {
				t.Errorf("%s side %d: %v", d, side, err)
			}
		}
	}
	const N, side, s, D = 2, 8, 2, 5
	x := f32Dense(randVals(r, N*side*side*D, 1), N*side*side, D)
	k := pixelShuffle{side: side, scale: s}
	want := cpuValue(t, k, x)
	got, err := emu.RunOp(k, x)
	if err != nil {
		t.Fatal(err)
	}
	if err := closeTo(got.Float32s(), want, nil, 0); err != nil {
		t.Errorf("pixel shuffle: %v", err)
	}
}

// TestKernelsEmulatedActivations holds moe_act to activationFor value by
// value: the exp-based ones within 1e-6 of max(|result|, |g·u|) (the
// host's and the device's expf are not the CPU's Exp32, and the tanh
// GELU's 2 - 2/(e^2u+1) loses the relative precision of a small result
// for negative inputs), fast mode's GELU table exactly.
func TestKernelsEmulatedActivations(t *testing.T) {
	dev := cudaemu.New(t)
	dev.Lock()
	defer dev.Unlock()
	r := rand.New(rand.NewPCG(29, 30))
	const n = 4096
	g := randVals(r, n, 4)
	g[0], g[1], g[2], g[3] = -10, 10, -9.99, 0
	u := randVals(r, n, 1)
	for _, c := range []struct {
		name string
		fast bool
	}{{"silu", false}, {"gelu_pytorch_tanh", false}, {"gelu_pytorch_tanh", true}, {"gelu", false}, {"relu", false}} {
		code, err := actCode(c.name, c.fast)
		if err != nil {
			t.Fatal(err)
		}
		gt, err := dev.UploadValue(f32Dense(g, n))
		if err != nil {
			t.Fatal(err)
		}
		ut, err := dev.UploadValue(f32Dense(u, n))
		if err != nil {
			t.Fatal(err)
		}
		h, err := dev.Alloc(4 * n)
		if err != nil {
			t.Fatal(err)
		}
		if err := dev.Run(cuda.Call{K: cuda.MoEAct, Grid: cuda.D1(4), Block: cuda.D1(256),
			Args: []any{h, gt.Ptr, ut.Ptr, int64(n), code}}); err != nil {
			t.Fatal(err)
		}
		got := dev.Float32s(h, n)
		act, _ := activationFor(c.name, c.fast)
		tol := 1e-6
		if c.fast {
			tol = 0
		}
		for i := range got {
			want := act(g[i]) * u[i]
			scale := max(math.Abs(float64(want)), math.Abs(float64(g[i]*u[i])))
			if d := math.Abs(float64(got[i] - want)); !(d <= tol*scale) {
				t.Errorf("%s fast=%v: act(%g)·%g = %g, want %g", c.name, c.fast, g[i], u[i], got[i], want)
				break
			}
		}
	}
}

// TestKernelsEmulatedBasic runs the GPU tests' cases of the basic ops
// (norms, RoPE, activations, residual adds, head moves: cudaCases) in the
// emulator, held to the CPU ops as on a GPU.
func TestKernelsEmulatedBasic(t *testing.T) {
	emu := cudaemu.Build(t)
	for _, c := range cudaCases() {
		t.Run(c.op+"/"+strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			want, err := ops.New(c.k).Do(c.in...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := emu.RunOp(c.k, c.in...)
			if err != nil {
				t.Fatal(err)
			}
			compareCUDA(t, got, want)
		})
	}
}
