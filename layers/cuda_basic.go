package layers

import (
	"fmt"
	"math"
	"slices"

	"github.com/gozoo/gozoo/cuda"
)

// The CUDA side of the small kernels (kernels.go, mlp.go, layernorm.go):
// each returns its launches of cuda/kernels/basic.cu. The kernels compute
// what the CPU kernels compute, float32 operation for float32 operation
// and float64 where the CPU goes through float64; only the norms' sums
// run in another order.

// normBlock is the block of a norm over rows of d values: a multiple of
// the warp, at most cuda.Block.
func normBlock(d int) int { return min(cuda.Block, max(32, (d+31)/32*32)) }

// actCode is activationFor's function as a kernel's activation code.
func actCode(name string, fast bool) (int, error) {
	switch name {
	case "silu":
		return cuda.ActSiLU, nil
	case "gelu_pytorch_tanh", "gelu_new":
		if fast {
			return cuda.ActGELUTanhTable, nil
		}
		return cuda.ActGELUTanh, nil
	case "gelu":
		return cuda.ActGELUErf, nil
	case "relu":
		return cuda.ActReLU, nil
	}
	_, err := activationFor(name, fast)
	return 0, err
}

func (k rmsNorm) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32, cuda.F32); err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	if len(x.Shape) == 0 || len(w.Shape) != 1 || w.Shape[0] == 0 || x.Shape[len(x.Shape)-1] != w.Shape[0] {
		return nil, fmt.Errorf("x %v does not end in the weight's %v", x.Shape, w.Shape)
	}
	if err := cuda.CheckOutput(out, x.Shape); err != nil {
		return nil, err
	}
	d := w.Shape[0]
	rows := x.Len() / d
	if rows == 0 {
		return nil, nil
	}
	return []cuda.Call{{K: cuda.RMSNorm, Grid: cuda.D1(rows), Block: cuda.D1(normBlock(d)),
		Args: []any{out.Ptr, x.Ptr, w.Ptr, rows, d, k.eps, k.offset}}}, nil
}

func (k layerNorm) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32, cuda.F32, cuda.F32); err != nil {
		return nil, err
	}
	x, w, b := in[0], in[1], in[2]
	if len(x.Shape) == 0 || len(w.Shape) != 1 || w.Shape[0] == 0 || !slices.Equal(w.Shape, b.Shape) || x.Shape[len(x.Shape)-1] != w.Shape[0] {
		return nil, fmt.Errorf("x %v does not end in the weight's %v and bias's %v", x.Shape, w.Shape, b.Shape)
	}
	if err := cuda.CheckOutput(out, x.Shape); err != nil {
		return nil, err
	}
	d := w.Shape[0]
	rows := x.Len() / d
	if rows == 0 {
		return nil, nil
	}
	return []cuda.Call{{K: cuda.LayerNorm, Grid: cuda.D1(rows), Block: cuda.D1(normBlock(d)),
		Args: []any{out.Ptr, x.Ptr, w.Ptr, b.Ptr, rows, d, int64(math.Float64bits(k.eps))}}}, nil
}

func (k rope) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32, cuda.I32); err != nil {
		return nil, err
	}
	// The kernel takes a fixed table; dynamic NTK's follows the positions,
	// which stay on the device.
	if k.dyn != nil {
		return nil, fmt.Errorf("rope with dynamic NTK scaling has no CUDA kernel")
	}
	x, pos := in[0], in[1]
	half := len(k.invFreq)
	if len(x.Shape) != 3 || x.Shape[2] != 2*half || len(pos.Shape) != 1 || pos.Shape[0] != x.Shape[0] {
		return nil, fmt.Errorf("want x [T, H, %d] and positions [T], got %v and %v", 2*half, x.Shape, pos.Shape)
	}
	if half == 0 || half > cuda.RoPEMaxHalf {
		return nil, fmt.Errorf("head dimension %d: the kernel takes 2 to %d", 2*half, 2*cuda.RoPEMaxHalf)
	}
	if err := cuda.CheckOutput(out, x.Shape); err != nil {
		return nil, err
	}
	T, H := x.Shape[0], x.Shape[1]
	if x.Len() > math.MaxInt32 {
		return nil, fmt.Errorf("x %v does not fit an int32 index", x.Shape)
	}
	if T == 0 || H == 0 {
		return nil, nil
	}
	args := make([]any, 0, 6+cuda.RoPEMaxHalf)
	args = append(args, out.Ptr, x.Ptr, pos.Ptr, H, half, k.scale)
	for i := range cuda.RoPEMaxHalf {
		var f float32
		if i < half {
			f = k.invFreq[i]
		}
		args = append(args, f)
	}
	return []cuda.Call{{K: cuda.RoPE, Grid: cuda.Dim3{X: T, Y: cuda.Blocks(H*half, cuda.Block), Z: 1},
		Block: cuda.D1(cuda.Block), Args: args}}, nil
}

func (k gatedAct) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32, cuda.F32); err != nil {
		return nil, err
	}
	g, u := in[0], in[1]
	if !slices.Equal(g.Shape, u.Shape) {
		return nil, fmt.Errorf("gate %v and up %v differ", g.Shape, u.Shape)
	}
	if err := cuda.CheckOutput(out, g.Shape); err != nil {
		return nil, err
	}
	code, err := actCode(k.act, k.fast)
	if err != nil {
		return nil, err
	}
	n := g.Len()
	return cuda.Map(cuda.GatedAct, n, out.Ptr, g.Ptr, u.Ptr, n, code)
}

func (k activate) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32); err != nil {
		return nil, err
	}
	if err := cuda.CheckOutput(out, in[0].Shape); err != nil {
		return nil, err
	}
	code, err := actCode(k.act, k.fast)
	if err != nil {
		return nil, err
	}
	n := in[0].Len()
	return cuda.Map(cuda.Act, n, out.Ptr, in[0].Ptr, n, code)
}

func (k pointwise) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32); err != nil {
		return nil, err
	}
	if err := cuda.CheckOutput(out, in[0].Shape); err != nil {
		return nil, err
	}
	n := in[0].Len()
	switch k.kind {
	case "scale":
		return cuda.Map(cuda.ScaleF32, n, out.Ptr, in[0].Ptr, n, k.p)
	case "softcap":
		return cuda.Map(cuda.Softcap, n, out.Ptr, in[0].Ptr, n, k.p)
	}
	return nil, fmt.Errorf("unknown pointwise op %q", k.kind)
}

func (k add) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32, cuda.F32); err != nil {
		return nil, err
	}
	a, b := in[0], in[1]
	if !slices.Equal(a.Shape, b.Shape) {
		return nil, fmt.Errorf("%v and %v differ", a.Shape, b.Shape)
	}
	if err := cuda.CheckOutput(out, a.Shape); err != nil {
		return nil, err
	}
	n := a.Len()
	return cuda.Map(cuda.AddF32, n, out.Ptr, a.Ptr, b.Ptr, n)
}

func (k headRange) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32); err != nil {
		return nil, err
	}
	x := in[0].Shape
	if len(x) != 3 || k.from < 0 || k.count <= 0 || k.from+k.count > x[1] {
		return nil, fmt.Errorf("heads %d..%d of %v", k.from, k.from+k.count-1, x)
	}
	if err := cuda.CheckOutput(out, []int{x[0], k.count, x[2]}); err != nil {
		return nil, err
	}
	if in[0].Len() > math.MaxInt32 {
		return nil, fmt.Errorf("x %v does not fit an int32 index", x)
	}
	n := out.Len()
	return cuda.Map(cuda.HeadRange, n, out.Ptr, in[0].Ptr, n, x[1], x[2], k.from, k.count)
}

func (k headRows) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32); err != nil {
		return nil, err
	}
	x := in[0].Shape
	if k.hd < 2 || k.hd%2 != 0 || len(x) == 0 || x[len(x)-1]%k.hd != 0 {
		return nil, fmt.Errorf("%v in heads of %d", x, k.hd)
	}
	if err := cuda.CheckOutput(out, x); err != nil {
		return nil, err
	}
	inverse := 0
	if k.inverse {
		inverse = 1
	}
	n := in[0].Len()
	return cuda.Map(cuda.HeadRows, n, out.Ptr, in[0].Ptr, n, k.hd, inverse)
}
