package layers

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/ops"
)

// blockAttention is bidirectional attention of q, k, v [R, H, Dh] within
// consecutive blocks of rows: row r attends to every row of its block, R a
// multiple of the block. The output is [R, H·Dh]. Scores and the weighted
// sums run on internal/simd's dot-product tiles; the softmax has a float32
// exp and float64 sums, as the decoder's.
type blockAttention struct {
	block int
	scale float32
}

func (k blockAttention) Name() string { return "encoder attention" }
func (k blockAttention) String() string {
	return fmt.Sprintf("BlockAttention{block=%d,scale=%g}", k.block, k.scale)
}
func (k blockAttention) Signature() []hm.Type {
	return []hm.Type{ops.T(3, nil), ops.T(3, nil), ops.T(3, nil), ops.T(2, nil)}
}
func (k blockAttention) Shape(in []tensor.Shape) (tensor.Shape, error) {
	q := in[0]
	if len(q) != 3 || !q.Eq(in[1]) || !q.Eq(in[2]) {
		return nil, fmt.Errorf("q %v, k %v and v %v must be the same [R, H, Dh]", in[0], in[1], in[2])
	}
	if k.block <= 0 || q[0]%k.block != 0 {
		return nil, fmt.Errorf("%d rows do not split into blocks of %d", q[0], k.block)
	}
	return tensor.Shape{q[0], q[1] * q[2]}, nil
}
func (k blockAttention) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	var f [3][]float32
	for i := range f {
		var err error
		if f[i], err = ops.Float32s(in[i]); err != nil {
			return nil, err
		}
	}
	s := in[0].Shape()
	R, H, Dh := s[0], s[1], s[2]
	t := &blockTask{q: f[0], k: f[1], v: f[2], out: o.Float32s(R * H * Dh), heads: H, dh: Dh, block: k.block, scale: k.scale}
	// Heads of every block are independent: the team takes them.
	simd.Parallel(R/k.block*H, t)
	return o.Tensor(t.out, R, H*Dh), nil
}

// blockTask is blockAttention's work, one part per (block, head).
type blockTask struct {
	q, k, v, out     []float32
	heads, dh, block int
	scale            float32
}

// pad16 rounds n up to a multiple of 16, the widest kernel's lanes: the
// operands are copied zero-padded to it, so every dot product runs whole
// in the SIMD kernels (zeros add nothing).
func pad16(n int) int { return (n + 15) &^ 15 }

func (t *blockTask) Part(i int) {
	P, Dh, H := t.block, t.dh, t.heads
	b, h := i/H, i%H
	kd, kp := pad16(Dh), pad16(P)
	buf := make([]float32, 2*P*kd+P*kp+Dh*kp)
	q, k := buf[:P*kd], buf[P*kd:2*P*kd]
	scores, vt := buf[2*P*kd:2*P*kd+P*kp], buf[2*P*kd+P*kp:]
	stride := H * Dh
	base := b*P*stride + h*Dh
	for r := 0; r < P; r++ {
		copy(q[r*kd:r*kd+Dh], t.q[base+r*stride:][:Dh])
		copy(k[r*kd:r*kd+Dh], t.k[base+r*stride:][:Dh])
		v := t.v[base+r*stride:][:Dh]
		for c, x := range v {
			vt[c*kp+r] = x
		}
	}
	simd.DotsT(scores, kp, q, kd, P, k, kd, P, kd, t.scale)
	for r := 0; r < P; r++ {
		softmaxRange(scores[r*kp:r*kp+P], 0, P)
	}
	// P·V as dot products of P's rows with Vᵀ's rows.
	simd.DotsT(t.out[base:], stride, scores, kp, P, vt, kp, Dh, kp, 1)
}

// patchEmbed is a Conv2d with kernel = stride = patch and no padding over
// pixels [N, C, H, W]: each patch's C·patch² values, in the weight's
// (channel, row, column) order, times the weight [D, C, patch, patch] as
// a matrix [D, C·patch²], plus the bias. Output [N·P, D], patches in
// row-major order; trailing pixels that fill no patch are dropped.
type patchEmbed struct {
	patch int
	dtype graphs.DType
	name  string
}

func (k patchEmbed) Name() string { return "patch embedding " + k.name }
func (k patchEmbed) String() string {
	return fmt.Sprintf("PatchEmbed{%s,%s,patch=%d}", k.name, k.dtype, k.patch)
}
func (k patchEmbed) Signature() []hm.Type {
	return []hm.Type{ops.T(4, nil), ops.T(4, k.dtype.Storage()), ops.T(1, nil), ops.T(2, nil)}
}
func (k patchEmbed) Shape(in []tensor.Shape) (tensor.Shape, error) {
	x, w, b := in[0], in[1], in[2]
	switch {
	case len(x) != 4 || len(w) != 4 || len(b) != 1:
		return nil, fmt.Errorf("want pixels [N, C, H, W], weight [D, C, p, p] and bias [D]; got %v %v %v", x, w, b)
	case w[1] != x[1] || w[2] != k.patch || w[3] != k.patch || b[0] != w[0]:
		return nil, fmt.Errorf("weight %v and bias %v do not fit %d-channel pixels %v with patch %d", w, b, x[1], x, k.patch)
	case x[2] < k.patch || x[3] < k.patch:
		return nil, fmt.Errorf("images of %dx%d pixels hold no %dx%d patch", x[3], x[2], k.patch, k.patch)
	}
	return tensor.Shape{x[0] * (x[2] / k.patch) * (x[3] / k.patch), w[0]}, nil
}
func (k patchEmbed) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	px, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	w, err := weightData(in[1], k.dtype)
	if err != nil {
		return nil, err
	}
	bias, err := ops.Float32s(in[2])
	if err != nil {
		return nil, err
	}
	s := in[0].Shape()
	N, C, H, W := s[0], s[1], s[2], s[3]
	p := k.patch
	gh, gw := H/p, W/p
	D, K := len(bias), C*p*p
	rows := N * gh * gw
	cols := make([]float32, rows*K) // the patches as rows (im2col)
	for n := 0; n < N; n++ {
		for py := 0; py < gh; py++ {
			for pxi := 0; pxi < gw; pxi++ {
				dst := cols[((n*gh+py)*gw+pxi)*K:]
				for c := 0; c < C; c++ {
					for y := 0; y < p; y++ {
						src := px[((n*C+c)*H+py*p+y)*W+pxi*p:][:p]
						copy(dst[(c*p+y)*p:], src)
					}
				}
			}
		}
	}
	out := o.Float32s(rows * D)
	mulT(out, cols, rows, w, D, K)
	for r := 0; r < rows; r++ {
		row := out[r*D : (r+1)*D]
		for j, v := range bias {
			row[j] += v
		}
	}
	return o.Tensor(out, rows, D), nil
}

// pixelShuffle rearranges x [N·side², D] into [N·(side/s)², D·s²]:
// out[i·(side/s)+j, (dy·s+dx)·D + c] = in[(i·s+dy)·side + (j·s+dx), c] per
// image (Idefics3's pixel_shuffle).
type pixelShuffle struct{ side, scale int }

func (k pixelShuffle) Name() string { return "pixel shuffle" }
func (k pixelShuffle) String() string {
	return fmt.Sprintf("PixelShuffle{side=%d,scale=%d}", k.side, k.scale)
}
func (k pixelShuffle) Signature() []hm.Type { return []hm.Type{ops.T(2, nil), ops.T(2, nil)} }
func (k pixelShuffle) Shape(in []tensor.Shape) (tensor.Shape, error) {
	x := in[0]
	seq := k.side * k.side
	if len(x) != 2 || k.scale <= 0 || k.side%k.scale != 0 || x[0]%seq != 0 {
		return nil, fmt.Errorf("features %v are not images of %dx%d patches that split into %dx%d blocks", x, k.side, k.side, k.scale, k.scale)
	}
	return tensor.Shape{x[0] / (k.scale * k.scale), x[1] * k.scale * k.scale}, nil
}
func (k pixelShuffle) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	D := in[0].Shape()[1]
	s, side := k.scale, k.side
	seq, outSide := side*side, side/s
	N := len(x) / (seq * D)
	out := o.Float32s(len(x))
	for n := 0; n < N; n++ {
		src := x[n*seq*D:]
		dst := out[n*seq*D:]
		for i := 0; i < outSide; i++ {
			for j := 0; j < outSide; j++ {
				row := dst[(i*outSide+j)*D*s*s:]
				for dy := 0; dy < s; dy++ {
					for dx := 0; dx < s; dx++ {
						copy(row[(dy*s+dx)*D:][:D], src[((i*s+dy)*side+j*s+dx)*D:][:D])
					}
				}
			}
		}
	}
	return o.Tensor(out, N*outSide*outSide, D*s*s), nil
}
