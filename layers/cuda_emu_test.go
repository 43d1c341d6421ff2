package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/cudaemu"
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

func f32Value(data []float32, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// matmulCase makes x [T, K], a weight [N, K] of type d and a bias, and
// the scale of each output (Σ|x·w| + |b|).
func matmulCase(r *rand.Rand, d graphs.DType, T, N, K int, bias bool) (in []G.Value, scale []float64) {
	x := randVals(r, T*K, 1)
	w, wv := storedWeight(r, d, 0.1, []int{N}, K)
	in = []G.Value{f32Value(x, T, K), w}
	scale = absProducts(x, T, K, wv, N)
	if bias {
		b := randVals(r, N, 1)
		in = append(in, f32Value(b, N))
		for i := range scale {
			scale[i] += math.Abs(float64(b[i%N]))
		}
	}
	return in, scale
}

func TestKernelsEmulatedMatMul(t *testing.T) {
	emu := cudaemu.Build(t, "matmul")
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
