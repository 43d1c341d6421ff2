package layers

import (
	"fmt"

	"github.com/gozoo/gozoo/cuda"
)

// The device side of the SigLIP tower's patch embedding and pixel shuffle
// (cuda/kernels/vision.cu).

// CUDA implements ops.CUDAKernel: the patches laid out as rows (im2col,
// into scratch 0), then the product with the weight as a matrix
// [D, C·p·p] in its stored type, exact as the CPU's (mulT), plus the bias.
func (k patchEmbed) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%d inputs, want 3 (pixels, weight, bias)", len(in))
	}
	px, w, b := in[0], in[1], in[2]
	p := k.patch
	if err := checkTensor("pixels", px, cuda.F32, -1, -1, -1, -1); err != nil {
		return nil, err
	}
	N, C, H, W := px.Shape[0], px.Shape[1], px.Shape[2], px.Shape[3]
	if p <= 0 || H < p || W < p {
		return nil, fmt.Errorf("images of %dx%d pixels hold no %dx%d patch", W, H, p, p)
	}
	if err := checkTensor("weight", w, deviceType(k.dtype), -1, C, p, -1); err != nil {
		return nil, err
	}
	if cols, err := weightCols(k.dtype, w.Shape[3]); err != nil {
		return nil, fmt.Errorf("weight: %w", err)
	} else if cols != p {
		return nil, fmt.Errorf("weight %v does not fit %d-channel patches of %d", w.Shape, C, p)
	}
	D, Kc := w.Shape[0], C*p*p
	if err := checkTensor("bias", b, cuda.F32, D); err != nil {
		return nil, err
	}
	rows := N * (H / p) * (W / p)
	if err := checkTensor("output", out, cuda.F32, rows, D); err != nil {
		return nil, err
	}
	if rows == 0 {
		return nil, nil
	}
	cols, err := ws.Scratch(0, 4*rows*Kc)
	if err != nil {
		return nil, err
	}
	grid, block := elementwise(rows * Kc)
	calls := []cuda.Call{{K: cuda.Im2Col, Grid: grid, Block: block, Args: []any{cols, px.Ptr, int64(rows * Kc), C, H, W, p}}}
	mm, err := product{y: out.Ptr, x: cols, w: w.Ptr, bias: b.Ptr, T: rows, N: D, K: Kc, dtype: k.dtype, scratch: 1}.calls(ws)
	if err != nil {
		return nil, err
	}
	return append(calls, mm...), nil
}

// CUDA implements ops.CUDAKernel: one launch that moves every value.
func (k pixelShuffle) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%d inputs, want 1", len(in))
	}
	x := in[0]
	s, side := k.scale, k.side
	if err := checkTensor("x", x, cuda.F32, -1, -1); err != nil {
		return nil, err
	}
	if s <= 0 || side%s != 0 || x.Shape[0]%(side*side) != 0 {
		return nil, fmt.Errorf("features %v are not images of %dx%d patches that split into %dx%d blocks", x.Shape, side, side, s, s)
	}
	if err := checkTensor("output", out, cuda.F32, x.Shape[0]/(s*s), x.Shape[1]*s*s); err != nil {
		return nil, err
	}
	n := x.Len()
	if n == 0 {
		return nil, nil
	}
	grid, block := elementwise(n)
	return []cuda.Call{{K: cuda.PixelShuffle, Grid: grid, Block: block, Args: []any{out.Ptr, x.Ptr, int64(n), side, s, x.Shape[1]}}}, nil
}
