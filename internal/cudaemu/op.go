package cudaemu

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/ops"
)

// UploadValue puts a host value in a new allocation as cudatest.Upload
// puts it on a device: float32 as F32, ints as int32, uint16 and bytes as
// they are.
func (d *Device) UploadValue(v G.Value) (cuda.Tensor, error) {
	dn, err := ops.Dense(v)
	if err != nil {
		return cuda.Tensor{}, err
	}
	t := cuda.Tensor{Shape: []int(dn.Shape().Clone())}
	var raw []byte
	switch x := dn.Data().(type) {
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
	if t.Ptr, err = d.Alloc(len(raw)); err != nil {
		return t, err
	}
	if len(raw) > 0 {
		err = d.Upload(t.Ptr, unsafe.Pointer(unsafe.SliceData(raw)), len(raw))
	}
	return t, err
}

// Workspace is a cuda.Workspace on a device: one allocation per index.
type Workspace struct {
	Dev  *Device
	bufs map[int]cuda.Ptr
	size map[int]int
}

// Scratch implements cuda.Workspace.
func (w *Workspace) Scratch(i, n int) (cuda.Ptr, error) {
	if p, ok := w.bufs[i]; ok {
		if w.size[i] < n {
			return 0, fmt.Errorf("scratch %d asked again with %d bytes, more than its %d", i, n, w.size[i])
		}
		return p, nil
	}
	if w.bufs == nil {
		w.bufs, w.size = map[int]cuda.Ptr{}, map[int]int{}
	}
	p, err := w.Dev.Alloc(max(n, 1))
	if err != nil {
		return 0, err
	}
	w.bufs[i], w.size[i] = p, n
	return p, nil
}

// RunOp runs kernel k's CUDA calls over host inputs in the emulator and
// returns its float32 output, as cudatest.Run does on a device. Its
// host steps run after the launches.
func (e *Emulator) RunOp(k ops.Kernel, in ...G.Value) (*tensor.Dense, error) {
	// A device of its own, closed before returning: a process left
	// running would outlive the test (and fail the leak checks of the
	// tests after it).
	d, err := e.Open(0)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	d.Lock()
	defer d.Unlock()
	var shapes []tensor.Shape
	var din []cuda.Tensor
	for _, v := range in {
		shapes = append(shapes, v.Shape())
		t, err := d.UploadValue(v)
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
	if out.Ptr, err = d.Alloc(max(4*out.Len(), 4)); err != nil {
		return nil, err
	}
	calls, err := ops.New(k).CUDA(&Workspace{Dev: d}, out, din)
	if err != nil {
		return nil, err
	}
	if err := d.Run(calls...); err != nil {
		return nil, err
	}
	for _, c := range calls {
		if c.After != nil {
			if err := c.After(d); err != nil {
				return nil, err
			}
		}
	}
	host := d.Float32s(out.Ptr, out.Len())
	return tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(host)), nil
}
