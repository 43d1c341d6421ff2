package layers

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/cudatest"
	"github.com/gozoo/gozoo/ops"
)

// Host checks of the device calls at the real models' shapes: which
// launches an op returns, their grids, and every launch's parameters
// against its kernel's declaration (cudatest.Check), without a GPU.

// linearShape is a projection [out, in] of a real model.
type linearShape struct {
	name    string
	in, out int
}

var modelLinears = []linearShape{
	// Qwen3-0.6B.
	{"qwen3 q", 1024, 2048}, {"qwen3 kv", 1024, 1024}, {"qwen3 gate/up", 1024, 3072},
	{"qwen3 down", 3072, 1024}, {"qwen3 head", 1024, 151936},
	// SmolLM2-135M.
	{"smollm2 q", 576, 576}, {"smollm2 kv", 576, 192}, {"smollm2 gate/up", 576, 1536},
	{"smollm2 down", 1536, 576}, {"smollm2 head", 576, 49152},
}

func TestMatMulTCUDACalls(t *testing.T) {
	for _, sh := range modelLinears {
		for _, d := range allTypes {
			if !fits(d, sh.in) {
				continue // a Q4_K_M file keeps such rows in Q5_0 or Q8_0
			}
			for _, T := range []int{1, 8, 512} {
				for _, fast := range []bool{false, true} {
					for _, bias := range []bool{false, true} {
						name := fmt.Sprintf("%s %s T=%d fast=%v bias=%v", sh.name, d, T, fast, bias)
						k := matmulT{dtype: d, bias: bias, name: "w", fast: fast}
						in := []G.Value{f32s(T, sh.in), weightOf(d, sh.out, sh.in)}
						if bias {
							in = append(in, f32s(sh.out))
						}
						calls, err := cudatest.Check(k, in...)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if err := checkProductCalls(calls, d, fast, bias, T, sh.out, sh.in, 1); err != nil {
							t.Errorf("%s: %v", name, err)
						}
					}
				}
			}
		}
	}
	// Heads only change the output's shape.
	k := matmulT{dtype: graphs.BF16, name: "q", heads: 16}
	calls, err := cudatest.Check(k, f32s(8, 1024), weightOf(graphs.BF16, 2048, 1024))
	if err != nil || len(calls) != 1 || calls[0].K != cuda.MatMulFewBF16 || calls[0].Args[4] != 8 {
		t.Errorf("heads: %v %v", calls, err)
	}
}

// checkProductCalls checks the launches of one product (see product).
func checkProductCalls(calls []cuda.Call, d graphs.DType, fast, bias bool, T, N, K, experts int) error {
	want := []string{}
	half := d == graphs.BF16 || d == graphs.F16
	switch {
	case experts > 1:
		want = append(want, mmByType[d].kernel(T).Name)
	case d == graphs.F32:
		want = append(want, "gemm")
	case fast && half:
		want = append(want, cuda.ToHalf.Name, "gemm")
	default:
		want = append(want, mmByType[d].kernel(T).Name)
	}
	if bias && want[len(want)-1] == "gemm" {
		want = append(want, cuda.AddBias.Name)
	}
	var got []string
	for _, c := range calls {
		if c.Gemm != nil {
			got = append(got, "gemm")
			g := c.Gemm
			wantHalf := cuda.HalfType(0)
			if half && fast {
				wantHalf = cuda.BF16
				if d == graphs.F16 {
					wantHalf = cuda.F16
				}
			}
			if g.T != T || g.N != N || g.K != K || g.Half != wantHalf {
				return fmt.Errorf("gemm %+v, want T %d N %d K %d half %d", *g, T, N, K, wantHalf)
			}
			continue
		}
		got = append(got, c.K.Name)
		if c.K.Params == "ppppiiilppii" {
			rows, tile := 8, 64
			if T <= fewRows {
				rows, tile = 1, 8
			} else {
				rows = cuda.Blocks(T, 64)
			}
			if tile == 64 && (c.Grid != cuda.Dim3{X: cuda.Blocks(N, 64), Y: rows, Z: experts}) ||
				tile == 8 && (c.Grid != cuda.Dim3{X: cuda.Blocks(N, 8), Y: 1, Z: experts}) || c.Block != cuda.D1(256) {
				return fmt.Errorf("%s: grid %v block %v for T %d N %d", c.K.Name, c.Grid, c.Block, T, N)
			}
			if (c.Args[3].(cuda.Ptr) != 0) != bias || c.Args[4] != T || c.Args[5] != N || c.Args[6] != K {
				return fmt.Errorf("%s: args %v, want bias %v T %d N %d K %d", c.K.Name, c.Args, bias, T, N, K)
			}
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		return fmt.Errorf("calls %v, want %v", got, want)
	}
	return nil
}

// kernel is the product kernel of T rows.
func (ks mmKernels) kernel(T int) *cuda.Kernel {
	if T == 1 {
		return ks.vec
	}
	if T <= fewRows {
		return ks.few
	}
	return ks.tile
}

func TestEmbeddingCUDACalls(t *testing.T) {
	for _, tab := range []struct{ V, D int }{{151936, 1024}, {49152, 576}} {
		for _, d := range allTypes {
			if !fits(d, tab.D) {
				continue
			}
			for _, T := range []int{1, 512} {
				k := embeddingLookup{dtype: d, name: "e"}
				calls, err := cudatest.Check(k, weightOf(d, tab.V, tab.D), shaped(tensor.Int, T))
				if err != nil {
					t.Fatalf("%s %v: %v", d, tab, err)
				}
				if len(calls) != 1 || calls[0].K != mmByType[d].embed || calls[0].Grid.X != T ||
					calls[0].Args[3] != T || calls[0].Args[4] != tab.V || calls[0].Args[5] != tab.D {
					t.Errorf("%s %v T=%d: %+v", d, tab, T, calls)
				}
			}
		}
	}
}

func TestSparseMoECUDACalls(t *testing.T) {
	f, b := graphs.F32, graphs.BF16
	for _, c := range []struct {
		E, K, D, F int
		router     graphs.DType
		experts    [3]graphs.DType
	}{
		{8, 2, 64, 32, f, [3]graphs.DType{f, f, f}},
		{8, 2, 64, 32, b, [3]graphs.DType{b, b, b}},
		{8, 2, 64, 32, f, [3]graphs.DType{graphs.Q8_0, graphs.Q8_0, graphs.Q5_0}},
		// Qwen3-30B-A3B: 128 experts, top 8, hidden 2048, intermediate 768.
		{128, 8, 2048, 768, b, [3]graphs.DType{b, b, b}},
		{128, 8, 2048, 768, f, [3]graphs.DType{graphs.Q4_K, graphs.Q4_K, graphs.Q6_K}},
		{128, 8, 2048, 768, graphs.Q8_0, [3]graphs.DType{graphs.Q8_0, graphs.Q8_0, graphs.Q8_0}},
	} {
		for _, T := range []int{1, 8, 512} {
			for _, fast := range []bool{false, true} {
				k := sparseMoE{name: "moe", experts: c.E, topK: c.K, normTopK: true, act: "silu",
					routerType: c.router, expertTypes: c.experts, fast: fast}
				name := fmt.Sprintf("%d experts top %d [%d, %d] %v %v T=%d fast=%v", c.E, c.K, c.D, c.F, c.router, c.experts, T, fast)
				calls, err := cudatest.Check(k, f32s(T, c.D), weightOf(c.router, c.E, c.D),
					stackOf(c.experts[0], []int{c.E}, c.F, c.D), stackOf(c.experts[1], []int{c.E}, c.F, c.D),
					stackOf(c.experts[2], []int{c.E}, c.D, c.F))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				// The router's product, then the routing, then the experts'.
				var i int
				for i < len(calls) && calls[i].K != cuda.MoERoute {
					i++
				}
				if err := checkProductCalls(calls[:i], c.router, fast, false, T, c.E, c.D, 1); err != nil {
					t.Errorf("%s: router: %v", name, err)
				}
				var rest []string
				for _, cl := range calls[i:] {
					rest = append(rest, cl.K.Name)
					if cl.K.Params == "ppppiiilppii" && (cl.Grid.Z != c.E || cl.Args[8].(cuda.Ptr) == 0) {
						t.Errorf("%s: %s is not gathered over the experts: grid %v", name, cl.K.Name, cl.Grid)
					}
				}
				want := []string{"moe_route", "moe_lists"}
				round := func(d graphs.DType) {
					if fast && (d == graphs.BF16 || d == graphs.F16) {
						want = append(want, "round_half")
					}
				}
				round(c.experts[0])
				want = append(want, mmByType[c.experts[0]].kernel(T).Name, mmByType[c.experts[1]].kernel(T).Name, "moe_act")
				round(c.experts[2])
				want = append(want, mmByType[c.experts[2]].kernel(T).Name, "moe_combine")
				if strings.Join(rest, ",") != strings.Join(want, ",") {
					t.Errorf("%s: calls %v, want %v", name, rest, want)
				}
			}
		}
	}
}

func TestVisionCUDACalls(t *testing.T) {
	// SmolVLM's SigLIP: 512-pixel images, 16-pixel patches, hidden 768.
	for _, d := range []graphs.DType{graphs.F32, graphs.BF16, graphs.F16} {
		k := patchEmbed{patch: 16, dtype: d, name: "patch"}
		calls, err := cudatest.Check(k, f32s(1, 3, 512, 512), shaped(d.Storage(), 768, 3, 16, 16), f32s(768))
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if calls[0].K != cuda.Im2Col {
			t.Errorf("%s: first call %v, want im2col", d, calls[0].K)
		}
		if err := checkProductCalls(calls[1:], d, false, true, 1024, 768, 768, 1); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	calls, err := cudatest.Check(pixelShuffle{side: 32, scale: 4}, f32s(1024, 768))
	if err != nil || len(calls) != 1 || calls[0].K != cuda.PixelShuffle {
		t.Errorf("pixel shuffle: %v %v", calls, err)
	}
}

// TestWrongShapesCUDA: inputs that do not fit give errors, not launches.
func TestWrongShapesCUDA(t *testing.T) {
	ws := &cudatest.Fake{}
	tens := func(typ cuda.Type, shape ...int) cuda.Tensor {
		return cuda.Tensor{Ptr: 0x10000000, Shape: shape, Type: typ}
	}
	out := func(shape ...int) cuda.Tensor { return cuda.Tensor{Ptr: 0x20000000, Shape: shape, Type: cuda.F32} }
	moe := sparseMoE{name: "moe", experts: 8, topK: 2, act: "silu", routerType: graphs.F32,
		expertTypes: [3]graphs.DType{graphs.F32, graphs.F32, graphs.F32}}
	moeIn := func(gate cuda.Tensor) []cuda.Tensor {
		return []cuda.Tensor{tens(cuda.F32, 4, 64), tens(cuda.F32, 8, 64), gate, tens(cuda.F32, 8, 32, 64), tens(cuda.F32, 8, 64, 32)}
	}
	cases := []struct {
		name string
		k    ops.Kernel
		out  cuda.Tensor
		in   []cuda.Tensor
		want string
	}{
		{"x width", matmulT{dtype: graphs.F32, name: "w"}, out(4, 8), []cuda.Tensor{tens(cuda.F32, 4, 15), tens(cuda.F32, 8, 16)}, "x is"},
		{"weight type", matmulT{dtype: graphs.BF16, name: "w"}, out(4, 8), []cuda.Tensor{tens(cuda.F32, 4, 16), tens(cuda.F32, 8, 16)}, "weight is"},
		{"partial block", matmulT{dtype: graphs.Q8_0, name: "w"}, out(4, 8), []cuda.Tensor{tens(cuda.F32, 4, 32), tens(cuda.Bytes, 8, 35)}, "whole blocks"},
		{"bias", matmulT{dtype: graphs.F32, bias: true, name: "w"}, out(4, 8), []cuda.Tensor{tens(cuda.F32, 4, 16), tens(cuda.F32, 8, 16), tens(cuda.F32, 7)}, "bias is"},
		{"no bias", matmulT{dtype: graphs.F32, bias: true, name: "w"}, out(4, 8), []cuda.Tensor{tens(cuda.F32, 4, 16), tens(cuda.F32, 8, 16)}, "inputs"},
		{"output", matmulT{dtype: graphs.F32, name: "w"}, out(4, 9), []cuda.Tensor{tens(cuda.F32, 4, 16), tens(cuda.F32, 8, 16)}, "output is"},
		{"heads", matmulT{dtype: graphs.F32, name: "w", heads: 3}, out(4, 8), []cuda.Tensor{tens(cuda.F32, 4, 16), tens(cuda.F32, 8, 16)}, "heads"},
		{"unaligned", matmulT{dtype: graphs.BF16, name: "w"}, out(4, 8), []cuda.Tensor{{Ptr: 0x10000008, Shape: []int{4, 16}, Type: cuda.F32}, tens(cuda.U16, 8, 16)}, "aligned"},
		{"ids type", embeddingLookup{dtype: graphs.F32, name: "e"}, out(3, 16), []cuda.Tensor{tens(cuda.F32, 10, 16), tens(cuda.F32, 3)}, "ids is"},
		{"lookup output", embeddingLookup{dtype: graphs.F32, name: "e"}, out(3, 15), []cuda.Tensor{tens(cuda.F32, 10, 16), tens(cuda.I32, 3)}, "output is"},
		{"moe gate", moe, out(4, 64), moeIn(tens(cuda.F32, 8, 32, 63)), "gate"},
		{"moe experts", moe, out(4, 64), moeIn(tens(cuda.F32, 7, 32, 64)), "gate is"},
		{"moe sliced", sparseMoE{name: "moe", experts: 8, topK: 2, act: "silu", sliced: &expertSet{}}, out(4, 64), moeIn(tens(cuda.F32, 8, 32, 64)), "per-expert"},
		{"moe top k", sparseMoE{name: "moe", experts: 64, topK: 33, act: "silu"}, out(4, 64), moeIn(tens(cuda.F32, 8, 32, 64)), "top 33"},
		{"moe act", sparseMoE{name: "moe", experts: 8, topK: 2, act: "swish"}, out(4, 64), moeIn(tens(cuda.F32, 8, 32, 64)), "activation"},
		{"patch channels", patchEmbed{patch: 16, dtype: graphs.F32}, out(4, 8), []cuda.Tensor{tens(cuda.F32, 1, 3, 32, 32), tens(cuda.F32, 8, 4, 16, 16), tens(cuda.F32, 8)}, "weight is"},
		{"patch small", patchEmbed{patch: 16, dtype: graphs.F32}, out(0, 8), []cuda.Tensor{tens(cuda.F32, 1, 3, 8, 32), tens(cuda.F32, 8, 3, 16, 16), tens(cuda.F32, 8)}, "no 16x16 patch"},
		{"shuffle", pixelShuffle{side: 6, scale: 4}, out(4, 80), []cuda.Tensor{tens(cuda.F32, 36, 5)}, "blocks"},
	}
	for _, c := range cases {
		calls, err := ops.New(c.k).CUDA(ws, c.out, c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %d calls, error %v; want one saying %q", c.name, len(calls), err, c.want)
		}
	}
}

// TestCUDAEveryStoredType: every type a weight is stored in (through
// IQ4_XS, the last) has device kernels, in allTypes' list too, and a
// product and a lookup of it pass the host checks; a type outside them is
// refused by name (op, weight and type).
func TestCUDAEveryStoredType(t *testing.T) {
	for d := graphs.F32; d <= graphs.IQ4_XS; d++ {
		if _, ok := mmByType[d]; !ok {
			t.Errorf("%s has no device kernels", d)
		}
		if !slices.Contains(allTypes, d) {
			t.Errorf("%s is missing from allTypes", d)
		}
		if _, err := cudatest.Check(matmulT{dtype: d, name: "w"}, f32s(2, 256), weightOf(d, 64, 256)); err != nil {
			t.Errorf("%s product: %v", d, err)
		}
		if _, err := cudatest.Check(embeddingLookup{dtype: d, name: "e"}, weightOf(d, 64, 256), shaped(tensor.Int, 3)); err != nil {
			t.Errorf("%s lookup: %v", d, err)
		}
	}
	d := graphs.IQ4_XS + 1
	k := matmulT{dtype: d, name: "model.layers.0.mlp.down_proj.weight"}
	_, err := ops.New(k).CUDA(nil, cuda.Tensor{Type: cuda.F32, Shape: []int{2, 64}, Ptr: 1 << 20},
		[]cuda.Tensor{{Type: cuda.F32, Shape: []int{2, 256}, Ptr: 1 << 20}, {Type: cuda.Bytes, Shape: []int{64, 256}, Ptr: 1 << 20}})
	if err == nil || !strings.Contains(err.Error(), "no device product for "+d.String()+" weights") {
		t.Errorf("%s product: %v", d, err)
	}
}
