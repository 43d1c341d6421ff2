package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/ops"
)

// selectRows takes row t of s where mask[t] != 0, else of y (any shape
// [T, ...]): in a batch mixing adapters, s = y + update, so a row of the
// adapter's sequences gets the sum and every other row y itself, each
// exactly what it would be alone.
type selectRows struct {
	dims, slot int
}

func (k selectRows) Name() string { return fmt.Sprintf("lora rows %d", k.slot) }
func (k selectRows) String() string {
	return fmt.Sprintf("SelectRows{dims=%d,slot=%d}", k.dims, k.slot)
}
func (k selectRows) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(k.dims, nil), ops.T(1, tensor.Int), ops.T(k.dims, nil)}
}
func (k selectRows) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) || len(in[2]) != 1 || in[2][0] != in[0][0] {
		return nil, fmt.Errorf("rows %v and %v with a mask %v", in[0], in[1], in[2])
	}
	return in[0].Clone(), nil
}
func (k selectRows) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	y, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	s, err := ops.Float32s(in[1])
	if err != nil {
		return nil, err
	}
	mask, ok := in[2].Data().([]int)
	if !ok {
		return nil, fmt.Errorf("%s: a mask of %T", k.Name(), in[2].Data())
	}
	out := o.Float32s(len(y))
	w := len(y) / len(mask)
	for t, m := range mask {
		src := y
		if m != 0 {
			src = s
		}
		copy(out[t*w:(t+1)*w], src[t*w:(t+1)*w])
	}
	return o.Tensor(out, in[0].Shape().Clone()...), nil
}

// CUDA is replace_rows over rows of any width.
func (k selectRows) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := cuda.CheckInputs(in, cuda.F32, cuda.F32, cuda.I32); err != nil {
		return nil, err
	}
	y, s, mask := in[0], in[1], in[2]
	if len(y.Shape) == 0 || len(mask.Shape) != 1 || mask.Shape[0] != y.Shape[0] || y.Len() != s.Len() {
		return nil, fmt.Errorf("rows %v and %v with a mask %v", y.Shape, s.Shape, mask.Shape)
	}
	if err := cuda.CheckOutput(out, y.Shape); err != nil {
		return nil, err
	}
	n := y.Len()
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("rows %v do not fit an int32 index", y.Shape)
	}
	return cuda.Map(cuda.ReplaceRows, n, out.Ptr, y.Ptr, s.Ptr, mask.Ptr, n, n/y.Shape[0])
}
