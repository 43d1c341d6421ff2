package graphs

import (
	"testing"

	"gorgonia.org/tensor"
)

type countedForm struct{ released *int }

func (f countedForm) Release() { *f.released++ }

// TestPrepare: a weight builds each form once (a refusal too), lists the
// forms it holds, and releases them when its data changes (Set) or its set
// is released.
func TestPrepare(t *testing.T) {
	ps := NewParams()
	p := ps.Root().Param("w", Matrix, 2, 3)
	builds, released := 0, 0
	build := func() Form { builds++; return countedForm{&released} }
	refuse := func() Form { builds++; return nil }
	for range 3 {
		if p.Prepare("cpu", build) == nil || p.Prepare("none", refuse) != nil {
			t.Fatal("Prepare lost a form or made one from a refusal")
		}
	}
	if builds != 2 || len(p.Forms()) != 1 || p.Prepared("cpu") == nil || p.Prepared("gpu") != nil {
		t.Fatalf("%d builds, %d forms: want each key built once and one form held", builds, len(p.Forms()))
	}
	data := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6)))
	p.ReadOnly = true
	if err := p.Set(F32, data); err != nil {
		t.Fatal(err)
	}
	if released != 1 || p.Prepared("cpu") != nil || p.ReadOnly {
		t.Fatalf("after Set: %d released, form %v, read-only %v: want the stale form gone", released, p.Prepared("cpu"), p.ReadOnly)
	}
	p.Prepare("cpu", build)
	ps.Release()
	if released != 2 || len(p.Forms()) != 0 {
		t.Fatalf("after Params.Release: %d released, %d forms held", released, len(p.Forms()))
	}
}

// TestStackDropsForms: stacking a parameter's mapped slices (a training
// step binds experts whole) makes a heap copy that training may write, so
// the forms made of the slices are released and the weight is no longer
// read-only.
func TestStackDropsForms(t *testing.T) {
	ps := NewParams()
	p := ps.Root().Param("experts", Matrix, 2, 2, 3)
	parts := []*tensor.Dense{
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, 2, 3, 4, 5, 6})),
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{7, 8, 9, 10, 11, 12})),
	}
	if err := p.SetSlices(F32, parts); err != nil {
		t.Fatal(err)
	}
	p.ReadOnly = true // as the loader sets it for slices of a mapping
	released := 0
	p.Prepare("cpu-expert-packings", func() Form { return countedForm{&released} })
	p.Stack()
	if released != 1 || p.Prepared("cpu-expert-packings") != nil || p.ReadOnly {
		t.Fatalf("after Stack: %d released, form %v, read-only %v: want the slices' forms gone", released, p.Prepared("cpu-expert-packings"), p.ReadOnly)
	}
	if got := p.Data.Data().([]float32); len(got) != 12 || got[6] != 7 {
		t.Fatalf("stacked %v", got)
	}
}
