//go:build cudaemu

package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// The attention kernels on a host emulator of CUDA (GOZOO_CUDA_EMU: its
// binary), for a machine without a GPU: device memory is an arena the
// emulator maps at emuBase, so device pointers stored in memory (the slab
// tables) hold.
const emuBase = 0x7e0000000000

type emuMem struct {
	t    *testing.T
	mem  []byte
	bufs map[int]cuda.Ptr
	red  []int // offsets of the red zones after each buffer
}

// emuRed is the bytes after each buffer that a kernel must not write.
const emuRed = 256

func (m *emuMem) Lock()   {}
func (m *emuMem) Unlock() {}
func (m *emuMem) Alloc(n int) (cuda.Ptr, error) {
	n = (n + 255) &^ 255
	p := cuda.Ptr(emuBase + len(m.mem))
	for range n + emuRed {
		m.mem = append(m.mem, 0xff) // NaN floats, -1 ints: unwritten reads show
	}
	m.red = append(m.red, len(m.mem)-emuRed)
	return p, nil
}
func (m *emuMem) Free(cuda.Ptr) {}
func (m *emuMem) Upload(dst cuda.Ptr, src unsafe.Pointer, n int) error {
	copy(m.mem[dst-emuBase:][:n], unsafe.Slice((*byte)(src), n))
	return nil
}
func (m *emuMem) Download(dst unsafe.Pointer, src cuda.Ptr, n int) error {
	copy(unsafe.Slice((*byte)(dst), n), m.mem[src-emuBase:][:n])
	return nil
}
func (m *emuMem) Scratch(i, n int) (cuda.Ptr, error) {
	if p, ok := m.bufs[i]; ok {
		return p, nil
	}
	if m.bufs == nil {
		m.bufs = map[int]cuda.Ptr{}
	}
	p, _ := m.Alloc(n)
	m.bufs[i] = p
	return p, nil
}

func (m *emuMem) upload(v G.Value) cuda.Tensor {
	d := v.(*tensor.Dense)
	t := cuda.Tensor{Shape: []int(d.Shape().Clone())}
	var src unsafe.Pointer
	var n int
	switch x := d.Data().(type) {
	case []float32:
		t.Type, src, n = cuda.F32, unsafe.Pointer(unsafe.SliceData(x)), 4*len(x)
	case []int:
		i32 := make([]int32, len(x))
		for i, v := range x {
			i32[i] = int32(v)
		}
		t.Type, src, n = cuda.I32, unsafe.Pointer(unsafe.SliceData(i32)), 4*len(x)
	}
	t.Ptr, _ = m.Alloc(n)
	m.Upload(t.Ptr, src, n)
	return t
}

// run runs calls on the emulator, then their host steps.
func (m *emuMem) run(calls []cuda.Call) {
	t := m.t
	bin := os.Getenv("GOZOO_CUDA_EMU")
	if bin == "" {
		t.Skip("GOZOO_CUDA_EMU is not set")
	}
	var lines strings.Builder
	for _, c := range calls {
		if c.K == nil {
			continue
		}
		var a cuda.Args
		if err := c.K.Pack(&a, c.Args...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&lines, "%s %d %d %d %d %d %d %d %d", c.K.Name, c.Grid.X, c.Grid.Y, c.Grid.Z, c.Block.X, c.Block.Y, c.Block.Z, c.Shared, len(c.Args))
		for i := range c.Args {
			fmt.Fprintf(&lines, " %x", a.Slot(i))
		}
		lines.WriteString("\n")
	}
	dir := t.TempDir()
	arena, callsFile := filepath.Join(dir, "arena"), filepath.Join(dir, "calls")
	if err := os.WriteFile(arena, m.mem, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(callsFile, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, fmt.Sprint(emuBase), arena, callsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("emulator: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("%s", out)
	}
	if m.mem, err = os.ReadFile(arena); err != nil {
		t.Fatal(err)
	}
	for _, off := range m.red {
		for i, b := range m.mem[off : off+emuRed] {
			if b != 0xff {
				t.Fatalf("a kernel wrote %d bytes past the buffer before arena offset %d", i+1, off)
			}
		}
	}
	for _, c := range calls {
		if c.After != nil {
			if err := c.After(m); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (m *emuMem) op(k ops.Kernel, in ...G.Value) []float32 {
	var shapes []tensor.Shape
	var din []cuda.Tensor
	for _, v := range in {
		shapes = append(shapes, v.Shape())
		din = append(din, m.upload(v))
	}
	shape, err := k.Shape(shapes)
	if err != nil {
		m.t.Fatal(err)
	}
	out := cuda.Tensor{Shape: []int(shape.Clone()), Type: cuda.F32}
	out.Ptr, _ = m.Alloc(out.Bytes())
	calls, err := ops.New(k).CUDA(m, out, din)
	if err != nil {
		m.t.Fatal(err)
	}
	m.run(calls)
	host := make([]float32, out.Len())
	m.Download(unsafe.Pointer(unsafe.SliceData(host)), out.Ptr, 4*len(host))
	return host
}

func TestEmuCachedAttention(t *testing.T) {
	eachCUDAAttnCase(t, func(t *testing.T, s cudaAttnShape, fw cudaAttnForward, window int, f16, sink bool) {
		m := &emuMem{t: t}
		c := newCUDAAttnCase(t, s, fw, window, f16, sink, true)
		pool := uploadPool(t, m, c.f, fw.T, cudaAttnCapacity)
		got := m.op(c.kernel, c.in...)
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
			m := &emuMem{t: t}
			k := blockAttention{block: c.P, scale: 1 / float32(math.Sqrt(float64(c.dh)))}
			in := blockAttnInputs(r, c.images, c.P, c.heads, c.dh)
			got := m.op(k, in...)
			want, err := ops.New(k).Do(in...)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := ops.Float32s(want)
			closeRel(t, "output", got, w, 1e-5)
		})
	}
}
