// Package cudatest runs one op on a CUDA device beside its CPU kernel, for
// the kernel tests: inputs go up, the op's calls run, the output comes
// down. Tests that need a device call Device, which skips them with the
// reason "no CUDA driver" on a machine without one.
package cudatest

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/ops"
)

// Device opens device 0 or skips the test.
func Device(t testing.TB) *cuda.Device {
	t.Helper()
	dev, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("no CUDA driver: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// Workspace is scratch memory for one op's calls.
type Workspace struct {
	dev  *cuda.Device
	bufs map[int]cuda.Ptr
}

// Scratch implements cuda.Workspace.
func (w *Workspace) Scratch(i, n int) (cuda.Ptr, error) {
	if p, ok := w.bufs[i]; ok {
		return p, nil
	}
	p, err := w.dev.Alloc(max(n, 1))
	if err != nil {
		return 0, err
	}
	if w.bufs == nil {
		w.bufs = map[int]cuda.Ptr{}
	}
	w.bufs[i] = p
	return p, nil
}

// Upload copies a host value to the device: float32 as F32, ints as
// int32, uint16 and byte storage as they are.
func Upload(dev *cuda.Device, v G.Value) (cuda.Tensor, error) {
	d, err := ops.Dense(v)
	if err != nil {
		return cuda.Tensor{}, err
	}
	t := cuda.Tensor{Shape: []int(d.Shape().Clone())}
	if d.Shape().IsScalar() {
		t.Shape = []int{1}
	}
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
	case []uint16:
		t.Type, src, n = cuda.U16, unsafe.Pointer(unsafe.SliceData(x)), 2*len(x)
	case []byte:
		t.Type, src, n = cuda.Bytes, unsafe.Pointer(unsafe.SliceData(x)), len(x)
	case float32:
		f := []float32{x}
		t.Type, src, n = cuda.F32, unsafe.Pointer(&f[0]), 4
	default:
		return t, fmt.Errorf("cannot upload %T", x)
	}
	if t.Ptr, err = dev.Alloc(max(n, 1)); err != nil {
		return t, err
	}
	return t, dev.Upload(t.Ptr, src, n)
}

// Run runs kernel k on the device over host inputs and returns its
// float32 output.
func Run(dev *cuda.Device, k ops.Kernel, in ...G.Value) (*tensor.Dense, error) {
	dev.Lock()
	defer dev.Unlock()
	var shapes []tensor.Shape
	var din []cuda.Tensor
	defer func() {
		for _, t := range din {
			dev.Free(t.Ptr)
		}
	}()
	for _, v := range in {
		shapes = append(shapes, v.Shape())
		t, err := Upload(dev, v)
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
	if out.Ptr, err = dev.Alloc(max(out.Bytes(), 4)); err != nil {
		return nil, err
	}
	defer dev.Free(out.Ptr)
	ws := &Workspace{dev: dev}
	defer func() {
		for _, p := range ws.bufs {
			dev.Free(p)
		}
	}()
	calls, err := ops.New(k).CUDA(ws, out, din)
	if err != nil {
		return nil, err
	}
	if err := dev.Run(calls...); err != nil {
		return nil, err
	}
	if err := dev.Sync(); err != nil {
		return nil, err
	}
	for _, c := range calls {
		if c.After != nil {
			if err := c.After(dev); err != nil {
				return nil, err
			}
		}
	}
	host := make([]float32, out.Len())
	if len(host) > 0 {
		if err := dev.Download(unsafe.Pointer(&host[0]), out.Ptr, 4*len(host)); err != nil {
			return nil, err
		}
	}
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(host)), nil
}

// Fake is a cuda.Workspace for host tests: it hands out distinct
// non-zero addresses and never touches a device.
type Fake struct{ next cuda.Ptr }

// Scratch implements cuda.Workspace.
func (f *Fake) Scratch(i, n int) (cuda.Ptr, error) {
	f.next += 1 << 20
	return f.next, nil
}

// Tensors gives host values fake device addresses, as Upload would give
// them types and shapes, for checking an op's calls without a device.
func Tensors(in ...G.Value) []cuda.Tensor {
	var out []cuda.Tensor
	for i, v := range in {
		t := cuda.Tensor{Ptr: cuda.Ptr(0x10000000 * (i + 1)), Shape: []int(v.Shape().Clone())}
		switch v.Dtype() {
		case tensor.Float32:
			t.Type = cuda.F32
		case tensor.Int:
			t.Type = cuda.I32
		case tensor.Uint16:
			t.Type = cuda.U16
		default:
			t.Type = cuda.Bytes
		}
		out = append(out, t)
	}
	return out
}

// Check runs k's CUDA method on fake addresses for host inputs and
// checks every call's parameters against its kernel's declaration.
func Check(k ops.Kernel, in ...G.Value) ([]cuda.Call, error) {
	var shapes []tensor.Shape
	for _, v := range in {
		shapes = append(shapes, v.Shape())
	}
	shape, err := k.Shape(shapes)
	if err != nil {
		return nil, err
	}
	out := cuda.Tensor{Ptr: 0x7000000000, Shape: []int(shape.Clone()), Type: cuda.F32}
	calls, err := ops.New(k).CUDA(&Fake{next: 0x8000000000}, out, Tensors(in...))
	if err != nil {
		return nil, err
	}
	if len(calls) == 0 {
		return nil, fmt.Errorf("%s: no calls", k.Name())
	}
	for i, c := range calls {
		if err := c.Check(); err != nil {
			return nil, fmt.Errorf("%s call %d: %w", k.Name(), i, err)
		}
	}
	return calls, nil
}
