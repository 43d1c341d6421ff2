package graphs

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/ops"
)

// The CUDA side of graphs' own ops: picking and replacing rows, the
// captures' copies, and the cancellation checks, which the device runs
// as nothing.

// CUDA gathers the rows; an index outside [0, T) (the CPU's -1, and what
// the CPU refuses) gives a row of zeros, since a kernel cannot fail.
func (pickRows) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32, cuda.I32); err != nil {
		return nil, err
	}
	h, rows := in[0], in[1]
	if len(h.Shape) != 2 || len(rows.Shape) != 1 || rows.Shape[0] > h.Shape[0] {
		return nil, fmt.Errorf("want h [T, D] and at most T row indices, got %v and %v", h.Shape, rows.Shape)
	}
	R, T, D := rows.Shape[0], h.Shape[0], h.Shape[1]
	if err := cuda.CheckOutput(out, []int{R, D}); err != nil {
		return nil, err
	}
	if h.Len() > math.MaxInt32 {
		return nil, fmt.Errorf("h %v does not fit an int32 index", h.Shape)
	}
	return cuda.Map(cuda.PickRows, R*D, out.Ptr, h.Ptr, rows.Ptr, R, T, D)
}

func (replaceRows) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32, cuda.F32, cuda.I32); err != nil {
		return nil, err
	}
	h, e, mask := in[0], in[1], in[2]
	if len(h.Shape) != 2 || !slices.Equal(h.Shape, e.Shape) || len(mask.Shape) != 1 || mask.Shape[0] != h.Shape[0] {
		return nil, fmt.Errorf("rows %v, embeddings %v and mask %v differ", h.Shape, e.Shape, mask.Shape)
	}
	if err := cuda.CheckOutput(out, h.Shape); err != nil {
		return nil, err
	}
	n := h.Len()
	return cuda.Map(cuda.ReplaceRows, n, out.Ptr, h.Ptr, e.Ptr, mask.Ptr, n, h.Shape[1])
}

// CUDA copies the tapped value to the op's output, and after the step
// downloads that copy into a host buffer of the op's and stores it in the
// sink, as the CPU kernel stores its copy: one float32 tensor of the
// value's shape, the same buffer every run.
func (k captureCopy) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32); err != nil {
		return nil, err
	}
	x := in[0]
	if err := cuda.CheckOutput(out, x.Shape); err != nil {
		return nil, err
	}
	if k.sink == nil {
		return nil, fmt.Errorf("capture %s has no sink", k.name)
	}
	n := x.Len()
	calls, err := cuda.Map(cuda.Copy32, n, out.Ptr, x.Ptr, n)
	if err != nil {
		return nil, err
	}
	host := make([]float32, n)
	value := ops.NewF32(host, slices.Clone(x.Shape)...)
	src, sink := out.Ptr, k.sink
	store := func(d cuda.Downloader) error {
		if n > 0 {
			if err := d.Download(unsafe.Pointer(&host[0]), src, 4*n); err != nil {
				return fmt.Errorf("capture %s: %w", k.name, err)
			}
		}
		sink.Store(value)
		return nil
	}
	return append(calls, cuda.Call{After: store}), nil
}

// CUDA is nothing on the device: a device step cannot be stopped between
// its launches, so the check passes the positions through (the runtime
// reads the output as its input).
func (k cancelCheck) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%d device inputs, want 2", len(in))
	}
	return []cuda.Call{}, nil
}

// CUDA is nothing on the device, as cancelCheck's.
func (k checkpoint) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%d device inputs, want 1", len(in))
	}
	return []cuda.Call{}, nil
}
