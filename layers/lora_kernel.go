package layers

import (
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/ops"
)

// maskRows keeps the rows of d [T, ...] whose entry in mask [T] is
// nonzero and zeroes the others: a mixed batch's LoRA update reaches only
// the rows of the adapter's sequences. Multiplying by 1 and adding the
// zeros are exact, so a row's result equals its run alone.
type maskRows struct {
	dims, slot int
}

func (k maskRows) Name() string { return fmt.Sprintf("lora rows %d", k.slot) }
func (k maskRows) String() string {
	return fmt.Sprintf("MaskRows{dims=%d,slot=%d}", k.dims, k.slot)
}
func (k maskRows) Signature() []hm.Type {
	return []hm.Type{ops.T(k.dims, nil), ops.T(1, nil), ops.T(k.dims, nil)}
}
func (k maskRows) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[1]) != 1 || in[1][0] != in[0][0] {
		return nil, fmt.Errorf("a row mask %v for %v", in[1], in[0])
	}
	return in[0].Clone(), nil
}
func (k maskRows) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	d, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	mask, err := ops.Float32s(in[1])
	if err != nil {
		return nil, err
	}
	y := o.Float32s(len(d))
	w := len(d) / len(mask)
	for t, m := range mask {
		if m != 0 {
			copy(y[t*w:(t+1)*w], d[t*w:(t+1)*w])
		} else {
			clear(y[t*w : (t+1)*w])
		}
	}
	return o.Tensor(y, in[0].Shape().Clone()...), nil
}
