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
