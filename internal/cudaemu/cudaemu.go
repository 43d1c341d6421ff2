// Package cudaemu runs an op's CUDA calls on the host, for kernel tests on
// a machine without a GPU: the kernels' CUDA C (cuda/kernels/*.cu) is
// compiled with the host's C++ compiler against emu.h, which emulates the
// CUDA built-ins (every thread a fiber; barriers, shuffles and ballots
// among them), and cuBLAS products are plain float32 loops. It checks a
// kernel's indexing, decoding and synchronisation, not its speed nor the
// GPU's floating point (the host's expf, for one, is not the device's).
//
// Tests call Build, which skips them where no C++ compiler is found; the
// emulator is built once per set of sources and kept in the user's cache.
package cudaemu

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/ops"
)

// Emulator is a built emulator of some kernel modules.
type Emulator struct{ bin string }

var (
	buildMu sync.Mutex
	built   = map[string]*Emulator{}
)

// srcDirs are the emulator's sources (src: emu.h, emu.cc) and cuda/kernels.
func srcDirs() (emuDir, kernelDir string) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	return filepath.Join(dir, "src"), filepath.Join(dir, "..", "..", "cuda", "kernels")
}

// dynShared is an `extern __shared__ T name[];` declaration, which the
// emulator points at its dynamic shared memory.
var dynShared = regexp.MustCompile(`extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([A-Za-z_][A-Za-z0-9_ ]*?)\s*(\w+)\s*\[\s*\]\s*;`)

// Build compiles the emulator of the given modules (cuda/kernels/NAME.cu),
// or skips t where there is no C++ compiler.
func Build(t testing.TB, modules ...string) *Emulator {
	t.Helper()
	cxx, err := exec.LookPath("g++")
	if err != nil {
		if cxx, err = exec.LookPath("c++"); err != nil {
			t.Skip("no C++ compiler (g++) for the CUDA emulator")
		}
	}
	e, err := build(cxx, modules)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func build(cxx string, modules []string) (*Emulator, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	emuDir, kernelDir := srcDirs()
	sort.Strings(modules)
	// The sources: the runtime, and per module a unit that includes its
	// .cu in a namespace and registers its kernels.
	units := map[string][]byte{}
	h := sha256.New()
	for _, f := range []string{"emu.h", "emu.cc", "cuda_fp16.h"} {
		b, err := os.ReadFile(filepath.Join(emuDir, f))
		if err != nil {
			return nil, err
		}
		h.Write(b)
	}
	headers, _ := filepath.Glob(filepath.Join(kernelDir, "*.cuh"))
	for _, f := range headers {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		h.Write(b)
	}
	for _, m := range modules {
		src, err := os.ReadFile(filepath.Join(kernelDir, m+".cu"))
		if err != nil {
			return nil, err
		}
		src = dynShared.ReplaceAll(src, []byte("$1 *$2 = ($1 *)emu::dynamic_shared;"))
		var u bytes.Buffer
		fmt.Fprintf(&u, "#include \"emu.h\"\n#include <cuda_fp16.h>\nnamespace mod_%s {\n#line 1 %q\n%s\n}\n", m, m+".cu", src)
		for _, k := range cuda.Kernels() {
			if k.Module == m {
				fmt.Fprintf(&u, "static emu::Reg reg_%s(%q, &mod_%s::%s);\n", k.Name, k.Name, m, k.Name)
			}
		}
		units["mod_"+m+".cc"] = u.Bytes()
		h.Write(u.Bytes())
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	if e := built[sum]; e != nil {
		return e, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "gozoo-cudaemu", sum)
	bin := filepath.Join(dir, "emu")
	if _, err := os.Stat(bin); err == nil {
		built[sum] = &Emulator{bin: bin}
		return built[sum], nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Another test process may build the same emulator: each writes its
	// own files and renames the binary into place.
	tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
	args := []string{"-std=c++20", "-O2", "-ffp-contract=off", "-fno-fast-math", "-I", emuDir, "-I", kernelDir,
		"-o", tmp, filepath.Join(emuDir, "emu.cc")}
	names := make([]string, 0, len(units))
	for name := range units {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, fmt.Sprintf("%s.%d.cc", strings.TrimSuffix(name, ".cc"), os.Getpid()))
		if err := os.WriteFile(p, units[name], 0o644); err != nil {
			return nil, err
		}
		defer os.Remove(p)
		args = append(args, p)
	}
	cmd := exec.Command(cxx, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the CUDA emulator: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return nil, err
	}
	built[sum] = &Emulator{bin: bin}
	return built[sum], nil
}

// Memory is emulated device memory: buffers at made-up addresses.
type Memory struct {
	next cuda.Ptr
	bufs []*buffer
}

type buffer struct {
	addr cuda.Ptr
	data []byte
}

// Alloc returns a buffer of n bytes, filled with 0xff (a float32 NaN):
// a kernel that reads what nothing wrote shows it.
func (m *Memory) Alloc(n int) cuda.Ptr {
	if m.next == 0 {
		m.next = 1 << 32
	}
	b := &buffer{addr: m.next, data: bytes.Repeat([]byte{0xff}, n)}
	m.bufs = append(m.bufs, b)
	m.next += cuda.Ptr(n+255) &^ 255
	m.next += 256 // a gap, so no buffer runs into the next
	return b.addr
}

// Bytes is the buffer at p.
func (m *Memory) Bytes(p cuda.Ptr) []byte {
	for _, b := range m.bufs {
		if b.addr == p {
			return b.data
		}
	}
	return nil
}

// Workspace is a cuda.Workspace on the emulated memory.
type Workspace struct {
	Mem  *Memory
	bufs map[int]cuda.Ptr
}

// Scratch implements cuda.Workspace.
func (w *Workspace) Scratch(i, n int) (cuda.Ptr, error) {
	if p, ok := w.bufs[i]; ok {
		if len(w.Mem.Bytes(p)) < n {
			return 0, fmt.Errorf("scratch %d asked again with %d bytes, more than its %d", i, n, len(w.Mem.Bytes(p)))
		}
		return p, nil
	}
	if w.bufs == nil {
		w.bufs = map[int]cuda.Ptr{}
	}
	p := w.Mem.Alloc(max(n, 1))
	w.bufs[i] = p
	return p, nil
}

// Upload puts a host value in emulated memory as cudatest.Upload puts it
// on a device: float32 as F32, ints as int32, uint16 and bytes as they are.
func (m *Memory) Upload(v G.Value) (cuda.Tensor, error) {
	d, err := ops.Dense(v)
	if err != nil {
		return cuda.Tensor{}, err
	}
	t := cuda.Tensor{Shape: []int(d.Shape().Clone())}
	var raw []byte
	switch x := d.Data().(type) {
	case []float32:
		t.Type, raw = cuda.F32, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))
	case []int:
		raw = make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(int32(v)))
		}
		t.Type = cuda.I32
	case []uint16:
		t.Type, raw = cuda.U16, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 2*len(x))
	case []byte:
		t.Type, raw = cuda.Bytes, x
	default:
		return t, fmt.Errorf("cannot upload %T", x)
	}
	t.Ptr = m.Alloc(len(raw))
	copy(m.Bytes(t.Ptr), raw)
	return t, nil
}

// Run runs calls on the memory in the emulator.
func (e *Emulator) Run(m *Memory, calls []cuda.Call) error {
	var job bytes.Buffer
	u64 := func(v uint64) { binary.Write(&job, binary.LittleEndian, v) }
	u64(uint64(len(m.bufs)))
	for _, b := range m.bufs {
		u64(uint64(b.addr))
		u64(uint64(len(b.data)))
		job.Write(b.data)
	}
	var n uint64
	for _, c := range calls {
		if c.K != nil || c.Gemm != nil {
			n++
		}
	}
	u64(n)
	for _, c := range calls {
		switch {
		case c.Gemm != nil:
			g := c.Gemm
			u64(4)
			job.WriteString("gemm")
			for _, v := range []uint64{uint64(g.Y), uint64(g.X), uint64(g.W), uint64(g.T), uint64(g.N), uint64(g.K), uint64(g.Half)} {
				u64(v)
			}
		case c.K != nil:
			if err := c.Check(); err != nil {
				return err
			}
			var a cuda.Args
			if err := c.K.Pack(&a, c.Args...); err != nil {
				return err
			}
			u64(uint64(len(c.K.Name)))
			job.WriteString(c.K.Name)
			for _, v := range []int{c.Grid.X, c.Grid.Y, c.Grid.Z, c.Block.X, c.Block.Y, c.Block.Z, c.Shared, len(c.K.Params)} {
				u64(uint64(v))
			}
			job.WriteString(c.K.Params)
			for i := range c.K.Params {
				u64(a.Slot(i))
			}
		}
	}
	dir, err := os.MkdirTemp("", "cudaemu")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "job"), filepath.Join(dir, "out")
	if err := os.WriteFile(in, job.Bytes(), 0o644); err != nil {
		return err
	}
	if msg, err := exec.Command(e.bin, in, out).CombinedOutput(); err != nil {
		return fmt.Errorf("emulator: %v\n%s", err, strings.TrimSpace(string(msg)))
	}
	res, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	for _, b := range m.bufs {
		if len(res) < len(b.data) {
			return fmt.Errorf("emulator: short output")
		}
		copy(b.data, res[:len(b.data)])
		res = res[len(b.data):]
	}
	return nil
}

// RunOp runs kernel k's CUDA calls over host inputs in the emulator and
// returns its float32 output, as cudatest.Run does on a device.
func (e *Emulator) RunOp(k ops.Kernel, in ...G.Value) (*tensor.Dense, error) {
	m := &Memory{}
	var shapes []tensor.Shape
	var din []cuda.Tensor
	for _, v := range in {
		shapes = append(shapes, v.Shape())
		t, err := m.Upload(v)
		if err != nil {
			return nil, err
		}
		din = append(din, t)
	}
	shape, err := k.Shape(shapes)
	if err != nil {
		return nil, err
	}
	out := cuda.Tensor{Shape: []int(shape.Clone()), Type: cuda.F32}
	out.Ptr = m.Alloc(max(4*out.Len(), 4))
	calls, err := ops.New(k).CUDA(&Workspace{Mem: m}, out, din)
	if err != nil {
		return nil, err
	}
	if err := e.Run(m, calls); err != nil {
		return nil, err
	}
	raw := m.Bytes(out.Ptr)
	host := make([]float32, out.Len())
	for i := range host {
		host[i] = *(*float32)(unsafe.Pointer(&raw[4*i]))
	}
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(host)), nil
}
