package train_test

import (
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/train"
)

// TestAdamWStackedParts: a stacked weight stepped with its parts'
// gradients, as Gradients names a MoE's experts, moves exactly as with
// the whole gradient.
func TestAdamWStackedParts(t *testing.T) {
	mk := func(parts []string) *graphs.Param {
		p := &graphs.Param{Name: "experts.gate_proj", Shape: []int{2, 1, 3}, Role: graphs.Matrix, Parts: parts}
		w := []float32{0.5, -1, 2, 0.25, 3, -0.75}
		if err := p.Set(graphs.F32, tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(w))); err != nil {
			t.Fatal(err)
		}
		return p
	}
	parts := []string{"experts.0.gate_proj.weight", "experts.1.gate_proj.weight"}
	whole, split := mk(nil), mk(parts)
	optWhole, err := train.NewAdamW([]*graphs.Param{whole}, train.AdamWConfig{WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	optParts, err := train.NewAdamW([]*graphs.Param{split}, train.AdamWConfig{WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	dense := func(v []float32, shape ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(slices.Clone(v)))
	}
	for _, g := range [][]float32{{0.1, -0.2, 0.3, 0, 1.5, -2}, {-1, 0.5, 0.25, 2, -0.125, 0.75}} {
		if err := optWhole.Step(map[string]*tensor.Dense{whole.Name: dense(g, 2, 1, 3)}, 0.01); err != nil {
			t.Fatal(err)
		}
		if err := optParts.Step(map[string]*tensor.Dense{parts[0]: dense(g[:3], 1, 3), parts[1]: dense(g[3:], 1, 3)}, 0.01); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := whole.Float32s(), split.Float32s(); !slices.Equal(a, b) {
		t.Errorf("stepped by parts %v, whole %v", b, a)
	}
	if err := optParts.Step(map[string]*tensor.Dense{parts[0]: dense([]float32{1, 2}, 2)}, 0.01); err == nil {
		t.Error("a part's gradient of the wrong size was accepted")
	}
	if err := optParts.Step(map[string]*tensor.Dense{parts[0]: dense([]float32{1, 2, 3}, 1, 3), split.Name: dense(make([]float32, 6), 2, 1, 3)}, 0.01); err == nil {
		t.Error("gradients for a stacked weight and one of its parts were both accepted")
	}
}
