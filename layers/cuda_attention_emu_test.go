package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/cudaemu"
	"github.com/gozoo/gozoo/ops"
)

// The attention kernels in the host emulator (internal/cudaemu), held to
// the CPU kernels as the GPU tests hold them. Device memory is the
// emulator's arena, mapped at the same addresses in its process, so the
// device pointers stored in memory (the KV pool's slab tables) hold; every
// run checks that no kernel wrote past a buffer.

// emuOp runs kernel k's calls over in on dev, then their host steps, and
// returns its output.
func emuOp(t *testing.T, dev *cudaemu.Device, k ops.Kernel, in ...G.Value) []float32 {
	t.Helper()
	dev.Lock()
	defer dev.Unlock()
	var shapes []tensor.Shape
	var din []cuda.Tensor
	for _, v := range in {
		shapes = append(shapes, v.Shape())
		d, err := dev.UploadValue(v)
		if err != nil {
			t.Fatal(err)
		}
		din = append(din, d)
	}
	shape, err := k.Shape(shapes)
	if err != nil {
		t.Fatal(err)
	}
	out := cuda.Tensor{Shape: []int(shape.Clone()), Type: cuda.F32}
	if out.Ptr, err = dev.Alloc(out.Bytes()); err != nil {
		t.Fatal(err)
	}
	calls, err := ops.New(k).CUDA(&cudaemu.Workspace{Dev: dev}, out, din)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Run(calls...); err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		if c.After != nil {
			if err := c.After(dev); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dev.Float32s(out.Ptr, out.Len())
}

// emuAttnCapacity is the emulated pools' capacity: less than the GPU
// test's (cudaAttnCapacity) to keep the emulator's threads few (attn_probs
// has one a position of the capacity), above the cases' longest sequence.
const emuAttnCapacity = 512

func TestEmuCachedAttention(t *testing.T) {
	eachCUDAAttnCase(t, func(t *testing.T, s cudaAttnShape, fw cudaAttnForward, window int, f16, sink bool) {
		if testing.Short() && sink && (f16 || window > 0) {
			t.Skip("-short: captured probabilities of a full-attention float32 pool only")
		}
		dev := cudaemu.New(t)
		c := newCUDAAttnCase(t, s, fw, window, f16, sink, true)
		pool := uploadPool(t, dev, c.f, fw.T, emuAttnCapacity)
		got := emuOp(t, dev, c.kernel, c.in...)
		cpu := c.kernel
		if sink {
			cpu.sink = &graphs.Sink{}
		}
		want, err := ops.New(cpu).Do(c.in...)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := ops.Float32s(want)
		closeRel(t, "output", got, w, 1e-5)
		pool.checkBlocks(t, c.f)
		if sink {
			gp, wp := graphs.SinkValue(c.kernel.sink), graphs.SinkValue(cpu.sink)
			if !gp.Shape().Eq(wp.Shape()) {
				t.Fatalf("probabilities %v, want %v", gp.Shape(), wp.Shape())
			}
			closeRel(t, "probabilities", gp.Float32s(), wp.Float32s(), 1e-5)
		}
	})
}

func TestEmuBlockAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ images, P, heads, dh int }{{1, 729, 2, 64}, {3, 5, 2, 8}, {1, 70, 1, 200}, {2, 64, 3, 64}} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			dev := cudaemu.New(t)
			k := blockAttention{block: c.P, scale: 1 / float32(math.Sqrt(float64(c.dh)))}
			in := blockAttnInputs(r, c.images, c.P, c.heads, c.dh)
			got := emuOp(t, dev, k, in...)
			want, err := ops.New(k).Do(in...)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := ops.Float32s(want)
			closeRel(t, "output", got, w, 1e-5)
		})
	}
}
