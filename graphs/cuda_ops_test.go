package graphs

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/internal/cudatest"
	"github.com/gozoo/gozoo/ops"
)

// The CUDA side of graphs' ops (cuda_ops.go): launches checked on the
// host, outputs compared with the CPU kernels' on a device
// (TestCUDA..., skipped without a driver).

type cudaOpCase struct {
	op, name string
	k        ops.Kernel
	in       []G.Value
}

func randF32(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64())
	}
	return out
}

func f32Val(data []float32, shape ...int) G.Value { return ops.NewF32(data, shape...) }

func intVal(data ...int) G.Value {
	return tensor.New(tensor.WithShape(len(data)), tensor.WithBacking(data))
}

// cudaOpCases are graphs' ops at the hidden sizes of Qwen3-0.6B (1024),
// SmolLM2-135M (576) and a SigLIP tower (768), for T = 1 and 7 rows.
func cudaOpCases() []cudaOpCase {
	r := rand.New(rand.NewPCG(3, 5))
	var cs []cudaOpCase
	for _, D := range []int{1024, 576, 768} {
		for _, T := range []int{1, 7} {
			tag := func(s string) string { return fmt.Sprintf("D%d/T%d/%s", D, T, s) }
			h := f32Val(randF32(r, T*D), T, D)
			e := f32Val(randF32(r, T*D), T, D)
			pick := map[string][]int{"last": {T - 1}, "all": {}, "none": {-1}}
			for i := range T {
				pick["all"] = append(pick["all"], i)
			}
			masks := map[string][]int{"none": make([]int, T), "all": slices.Repeat([]int{1}, T)}
			if T > 1 {
				pick["some"] = []int{T - 1, -1, 2}
				pick["padded"] = []int{0, 3, 6, -1, -1, -1, -1}
				masks["some"] = []int{0, 1, 1, 0, 0, 1, 0}
			}
			for name, rows := range pick {
				cs = append(cs, cudaOpCase{"pickrows", tag(name), pickRows{}, []G.Value{h, intVal(rows...)}})
			}
			for name, mask := range masks {
				cs = append(cs, cudaOpCase{"replacerows", tag(name), replaceRows{}, []G.Value{h, e, intVal(mask...)}})
			}
			cs = append(cs, cudaOpCase{"capture", tag("hidden"), captureCopy{name: "hidden_states.1", sink: &Sink{}}, []G.Value{h}})
		}
	}
	cs = append(cs, cudaOpCase{"capture", "heads", captureCopy{name: "q", sink: &Sink{}}, []G.Value{f32Val(randF32(r, 7*16*128), 7, 16, 128)}})
	return cs
}

// fakeDownloads is a cuda.Downloader that fills what it is asked for
// with a known pattern and records the requests.
type fakeDownloads struct {
	src []cuda.Ptr
	n   []int
}

func (f *fakeDownloads) Download(dst unsafe.Pointer, src cuda.Ptr, n int) error {
	f.src, f.n = append(f.src, src), append(f.n, n)
	v := unsafe.Slice((*float32)(dst), n/4)
	for i := range v {
		v[i] = float32(i) + 0.5
	}
	return nil
}

// TestCUDAOpCalls checks graphs' ops' launches on the host, and that a
// capture's host step stores the downloaded output in its sink as the
// CPU kernel stores its copy.
func TestCUDAOpCalls(t *testing.T) {
	for _, c := range cudaOpCases() {
		calls, err := cudatest.Check(c.k, c.in...)
		if err != nil {
			t.Errorf("%s %s: %v", c.op, c.name, err)
			continue
		}
		n := 0
		switch c.op {
		case "pickrows":
			n = c.in[1].Shape()[0] * c.in[0].Shape()[1]
		default:
			n = c.in[0].Shape().TotalSize()
		}
		if k := calls[0]; k.K == nil || k.Grid.X*k.Block.X < n {
			t.Errorf("%s %s: first call %+v does not cover %d values", c.op, c.name, k, n)
		}
		if c.op != "capture" {
			if len(calls) != 1 {
				t.Errorf("%s %s: %d calls, want 1", c.op, c.name, len(calls))
			}
			continue
		}
		k := c.k.(captureCopy)
		if len(calls) != 2 || calls[0].K != cuda.Copy32 || calls[1].K != nil || calls[1].After == nil {
			t.Errorf("%s %s: calls %+v, want a copy and a host step", c.op, c.name, calls)
			continue
		}
		var dl fakeDownloads
		for range 2 { // twice: the same tensor every run, as on the CPU
			if err := calls[1].After(&dl); err != nil {
				t.Fatal(err)
			}
		}
		if len(dl.src) != 2 || dl.src[0] != 0x7000000000 || dl.n[0] != 4*n {
			t.Errorf("%s %s: downloads %v of %v bytes, want the output's %d", c.op, c.name, dl.src, dl.n, 4*n)
		}
		got := SinkValue(k.sink)
		want, err := ops.New(captureCopy{name: k.name, sink: &Sink{}}).Do(c.in...)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || !got.Shape().Eq(want.Shape()) || got.Dtype() != tensor.Float32 || k.sink.keyed {
			t.Errorf("%s %s: sink holds %v, want a float32 %v", c.op, c.name, got, want.Shape())
			continue
		}
		if v := got.Float32s(); v[0] != 0.5 || v[n-1] != float32(n-1)+0.5 {
			t.Errorf("%s %s: the sink does not hold the download", c.op, c.name)
		}
	}

	// The cancellation checks are nothing on the device.
	for _, k := range []ops.Kernel{cancelCheck{layer: 3}, checkpoint{name: "layer 3", dims: 2}} {
		var in []cuda.Tensor
		if _, ok := k.(cancelCheck); ok {
			in = cudatest.Tensors(intVal(5), f32Val(make([]float32, 1024), 1, 1024))
		} else {
			in = cudatest.Tensors(f32Val(make([]float32, 1024), 1, 1024))
		}
		out := cuda.Tensor{Ptr: 0x7000000000, Shape: in[0].Shape, Type: cuda.F32}
		calls, err := ops.New(k).CUDA(&cudatest.Fake{}, out, in)
		if err != nil || len(calls) != 0 {
			t.Errorf("%s: %d calls, %v; want none and no error", k.Name(), len(calls), err)
		}
	}
}

// TestCUDAOpCallsRefuse checks that wrong inputs are errors.
func TestCUDAOpCallsRefuse(t *testing.T) {
	h := f32Val(make([]float32, 7*64), 7, 64)
	cases := []struct {
		name string
		k    ops.Kernel
		in   []G.Value
	}{
		{"pick rows, float rows", pickRows{}, []G.Value{h, f32Val([]float32{1, 2}, 2)}},
		{"pick rows, more rows than h", pickRows{}, []G.Value{h, intVal(0, 1, 2, 3, 4, 5, 6, 7)}},
		{"replace rows, float mask", replaceRows{}, []G.Value{h, h, f32Val(make([]float32, 7), 7)}},
		{"replace rows, short mask", replaceRows{}, []G.Value{h, h, intVal(1, 0)}},
		{"capture of ints", captureCopy{name: "ids", sink: &Sink{}}, []G.Value{intVal(1, 2, 3)}},
		{"capture without a sink", captureCopy{name: "h"}, []G.Value{h}},
	}
	for _, c := range cases {
		if calls, err := cudatest.Check(c.k, c.in...); err == nil {
			t.Errorf("%s: %d calls, want an error", c.name, len(calls))
		}
	}
	out := cuda.Tensor{Ptr: 0x7000000000, Shape: []int{7, 64}, Type: cuda.F32}
	if _, err := ops.New(replaceRows{}).CUDA(&cudatest.Fake{}, out, cudatest.Tensors(h, f32Val(make([]float32, 64*7), 64, 7), intVal(make([]int, 7)...))); err == nil {
		t.Error("replace rows of two shapes: no error")
	}
	if _, err := ops.New(cancelCheck{layer: 1}).CUDA(&cudatest.Fake{}, out, nil); err == nil {
		t.Error("cancellation check without inputs: no error")
	}
}

// cudaOpMatch runs one op's cases on the device and compares outputs
// (and sinks) with the CPU kernel's.
func cudaOpMatch(t *testing.T, op string) {
	dev := cudatest.Device(t)
	n := 0
	for _, c := range cudaOpCases() {
		if c.op != op {
			continue
		}
		n++
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			cpu, gpu := c.k, c.k
			if k, ok := c.k.(captureCopy); ok {
				cpu, gpu = captureCopy{name: k.name, sink: &Sink{}}, captureCopy{name: k.name, sink: &Sink{}}
			}
			want, err := ops.New(cpu).Do(c.in...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := cudatest.Run(dev, gpu, c.in...)
			if err != nil {
				t.Fatal(err)
			}
			sameValues(t, "output", got, want)
			if k, ok := gpu.(captureCopy); ok {
				sameValues(t, "sink", SinkValue(k.sink), SinkValue(cpu.(captureCopy).sink))
			}
		})
	}
	if n == 0 {
		t.Fatalf("no cases of %s", op)
	}
}

// sameValues compares two float32 tensors exactly: these ops move values.
func sameValues(t *testing.T, what string, got *tensor.Dense, want G.Value) {
	t.Helper()
	if got == nil || !got.Shape().Eq(want.Shape()) {
		t.Fatalf("%s: %v, want shape %v", what, got, want.Shape())
	}
	w, err := ops.Float32s(want)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got.Float32s() {
		if math.Float32bits(v) != math.Float32bits(w[i]) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, v, w[i])
		}
	}
}

func TestCUDAPickRows(t *testing.T)    { cudaOpMatch(t, "pickrows") }
func TestCUDAReplaceRows(t *testing.T) { cudaOpMatch(t, "replacerows") }
func TestCUDACaptureCopy(t *testing.T) { cudaOpMatch(t, "capture") }
