package layers

import (
	"fmt"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/cudatest"
	"github.com/gozoo/gozoo/ops"
)

// The ops on a GPU against their CPU kernels (skipped without a CUDA
// driver). Exact mode is held to 1e-5 of Σ|x·w| per output (matmulT), to
// what 1e-5 of each product's Σ|x·w| becomes through a MoE (sparseMoE,
// with fast mode's 16-bit roundings: see moeBound), or to 1e-5 of
// |y| + rms(y) (the rest): the two differ in float32 summation order
// only, which these bound. Fast mode's BF16 and F16 products (x rounded to the weight's type,
// cuBLAS on tensor cores) are held to the CPU's fast mode, which rounds x
// the same way and multiplies in float32: the products are exact in
// both, but tensor cores add in float32 with truncated alignment in
// blocks of a few terms (Fasi et al., "Numerical behavior of NVIDIA
// tensor cores", 2021), up to about an ulp of the running sum per block
// rather than per add, so 1e-4 of Σ|x·w|. Quantized weights take the
// exact arithmetic on the device in both modes, so they are held to the
// CPU's exact mode. -short leaves out the vocabularies' heads and the
// Qwen3-MoE-sized experts (the CPU's reference is most of their time).

// gpuRun runs k on the device and returns its output.
func gpuRun(t *testing.T, k ops.Kernel, in ...G.Value) []float32 {
	t.Helper()
	dev := cudatest.Device(t)
	out, err := cudatest.Run(dev, k, in...)
	if err != nil {
		t.Fatalf("%s: %v", k.Name(), err)
	}
	return out.Float32s()
}

func TestCUDAMatMulT(t *testing.T) {
	cudatest.Device(t)
	r := rand.New(rand.NewPCG(31, 32))
	shapes := []linearShape{{"qwen3 q", 1024, 2048}, {"qwen3 down", 3072, 1024}, {"smollm2 gate/up", 576, 1536}, {"smollm2 kv", 576, 192}}
	for _, d := range allTypes {
		for _, sh := range shapes {
			if !fits(d, sh.in) {
				continue
			}
			w, wv := storedWeight(r, d, 0.1, []int{sh.out}, sh.in)
			b := randVals(r, sh.out, 1)
			for i, T := range []int{1, 8, 512} {
				x := randVals(r, T*sh.in, 1)
				scale := absProducts(x, T, sh.in, wv, sh.out)
				for _, fast := range []bool{false, true} {
					bias := (i+btoi(fast))%2 == 0
					checkMatMulGPU(t, fmt.Sprintf("%s %s T=%d", sh.name, d, T), d, fast, bias, 0, T, sh, x, w, b, scale)
				}
			}
		}
	}
	if testing.Short() {
		return
	}
	// The heads: the vocabularies, decode and a few rows.
	for _, c := range []struct {
		sh    linearShape
		types []graphs.DType
	}{
		{modelLinears[4], []graphs.DType{graphs.BF16, graphs.Q8_0, graphs.Q6_K}},
		{modelLinears[9], []graphs.DType{graphs.F32, graphs.BF16, graphs.F16, graphs.Q5_0}},
	} {
		for _, d := range c.types {
			w, wv := storedWeight(r, d, 0.1, []int{c.sh.out}, c.sh.in)
			for _, T := range []int{1, 8} {
				x := randVals(r, T*c.sh.in, 1)
				scale := absProducts(x, T, c.sh.in, wv, c.sh.out)
				for _, fast := range []bool{false, true} {
					checkMatMulGPU(t, fmt.Sprintf("%s %s T=%d", c.sh.name, d, T), d, fast, false, 0, T, c.sh, x, w, nil, scale)
				}
			}
		}
	}
	// Heads only change the output's shape.
	sh := linearShape{"qwen3 q", 1024, 2048}
	w, wv := storedWeight(r, graphs.BF16, 0.1, []int{sh.out}, sh.in)
	x := randVals(r, 3*sh.in, 1)
	checkMatMulGPU(t, "qwen3 q heads", graphs.BF16, false, false, 16, 3, sh, x, w, nil, absProducts(x, 3, sh.in, wv, sh.out))
}

func checkMatMulGPU(t *testing.T, name string, d graphs.DType, fast, bias bool, heads, T int, sh linearShape,
	x []float32, w *tensor.Dense, b []float32, scale []float64) {
	t.Helper()
	k := matmulT{dtype: d, bias: bias, name: "w", fast: fast, heads: heads}
	in := []G.Value{f32Value(x, T, sh.in), w}
	sc := scale
	if bias {
		in = append(in, f32Value(b, sh.out))
		sc = make([]float64, len(scale))
		for i := range sc {
			sc[i] = scale[i] + float64(abs32(b[i%sh.out]))
		}
	}
	ref := k
	_, quantized := d.Quant()
	if quantized {
		ref.fast = false
	}
	want := cpuValue(t, ref, in...)
	got := gpuRun(t, k, in...)
	tol := 1e-5
	if fast && (d == graphs.BF16 || d == graphs.F16) {
		tol = 1e-4
	}
	if err := closeTo(got, want, sc, tol); err != nil {
		t.Errorf("%s fast=%v bias=%v: %v", name, fast, bias, err)
	}
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

func TestCUDAEmbedding(t *testing.T) {
	cudatest.Device(t)
	r := rand.New(rand.NewPCG(33, 34))
	const V = 4096
	for _, D := range []int{1024, 576} {
		for _, d := range allTypes {
			if !fits(d, D) {
				continue
			}
			table, _ := storedWeight(r, d, 1, []int{V}, D)
			ids := []int{0, V - 1, 17, 17, 2048, 3}
			k := embeddingLookup{dtype: d, name: "e"}
			idv := tensor.New(tensor.WithShape(len(ids)), tensor.WithBacking(ids))
			want := cpuValue(t, k, table, idv)
			if err := closeTo(gpuRun(t, k, table, idv), want, nil, 0); err != nil {
				t.Errorf("%s D=%d: %v", d, D, err)
			}
			// Ids outside the table: zeros on the device.
			bad := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{-1, V}))
			for i, v := range gpuRun(t, k, table, bad) {
				if v != 0 {
					t.Fatalf("%s D=%d: value %d of an id outside the table is %g", d, D, i, v)
				}
			}
		}
	}
}

func TestCUDASparseMoE(t *testing.T) {
	cudatest.Device(t)
	r := rand.New(rand.NewPCG(35, 36))
	f, b, h := graphs.F32, graphs.BF16, graphs.F16
	for ci, c := range []struct {
		E, K, D, F int
		router     graphs.DType
		experts    [3]graphs.DType
		act        string
		rows       []int
	}{
		{8, 2, 64, 32, f, [3]graphs.DType{f, f, f}, "silu", []int{1, 8, 100}},
		{8, 2, 64, 32, b, [3]graphs.DType{b, b, b}, "silu", []int{1, 8, 100}},
		{8, 2, 64, 32, f, [3]graphs.DType{h, h, h}, "gelu", []int{1, 8, 100}},
		{8, 2, 64, 32, f, [3]graphs.DType{graphs.Q8_0, graphs.Q4_0, graphs.Q5_0}, "silu", []int{1, 8, 100}},
		// Qwen3-MoE's hidden and intermediate sizes and top 8, of 32
		// experts rather than 128 (the CPU's reference and the test's
		// weights stay small).
		{32, 8, 2048, 768, b, [3]graphs.DType{b, b, b}, "silu", []int{1, 8, 200}},
		{32, 8, 2048, 768, f, [3]graphs.DType{graphs.Q4_K, graphs.Q4_K, graphs.Q6_K}, "silu", []int{1, 8, 200}},
	} {
		if testing.Short() && c.D > 64 {
			continue
		}
		for _, fast := range []bool{false, true} {
			k := sparseMoE{name: "moe", experts: c.E, topK: c.K, normTopK: ci%2 == 0, act: c.act,
				routerType: c.router, expertTypes: c.experts, fast: fast}
			ref := k
			for _, d := range append(c.experts[:], c.router) {
				if _, q := d.Quant(); q {
					ref.fast = false
				}
			}
			for _, T := range c.rows {
				in, scale := moeCase(r, k, T, c.D, c.F)
				want := cpuValue(t, ref, in...)
				if err := closeTo(gpuRun(t, k, in...), want, scale, 1); err != nil {
					t.Errorf("case %d (%d experts top %d, %v %v) T=%d fast=%v: %v", ci, c.E, c.K, c.router, c.experts, T, fast, err)
				}
			}
		}
	}
}

func TestCUDAVision(t *testing.T) {
	cudatest.Device(t)
	r := rand.New(rand.NewPCG(37, 38))
	// SmolVLM's SigLIP: 512-pixel images, 16-pixel patches, hidden 768.
	const C, side, P, D = 3, 512, 16, 768
	px := f32Value(randVals(r, C*side*side, 1), 1, C, side, side)
	bias := f32Value(randVals(r, D, 1), D)
	for _, d := range []graphs.DType{graphs.F32, graphs.BF16, graphs.F16} {
		w, _ := storedWeight(r, d, 0.05, []int{D, C, P}, P)
		k := patchEmbed{patch: P, dtype: d, name: "patch"}
		want := cpuValue(t, k, px, w, bias)
		if err := closeTo(gpuRun(t, k, px, w, bias), want, nil, 1e-5); err != nil {
			t.Errorf("patch embedding %s: %v", d, err)
		}
	}
	x := f32Value(randVals(r, 1024*D, 1), 1024, D)
	k := pixelShuffle{side: 32, scale: 4}
	if err := closeTo(gpuRun(t, k, x), cpuValue(t, k, x), nil, 0); err != nil {
		t.Errorf("pixel shuffle: %v", err)
	}
}
