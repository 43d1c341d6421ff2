package graphs

import (
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/ops"
)

// TestDevTapeReusesAliasedBuffers: an op that launches nothing (a
// checkpoint) passes its input's buffer on, and that buffer goes back to
// the free list once the last reader of either node is planned, so the
// ops after it take it instead of allocating.
func TestDevTapeReusesAliasedBuffers(t *testing.T) {
	g := G.NewGraph()
	const T, D = 4, 8
	x := G.NewMatrix(g, G.Float32, G.WithShape(T, D), G.WithName("x"))
	e := G.NewMatrix(g, G.Float32, G.WithShape(T, D), G.WithName("e"))
	m := G.NewVector(g, G.Int, G.WithShape(T), G.WithName("mask"))
	replace := func(h *G.Node) *G.Node { return ops.Apply(replaceRows{}, h, e, m) }
	a := replace(x)
	c := ops.Apply(checkpoint{name: "a", dims: 2, rc: &runContext{}}, a)
	h := replace(replace(replace(c)))
	tp, err := newTape(h.Graph())
	if err != nil {
		t.Fatal(err)
	}
	d, err := planDevTape(nil, &fakeMem{next: 1 << 32}, "plan", tp, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// x, e and mask, then two buffers the four replacements take in turn.
	if len(d.owned) != 5 {
		t.Errorf("%d buffers planned, want 5 (3 inputs, 2 the ops share)", len(d.owned))
	}
	if d.vals[tp.index[c]].Ptr != d.vals[tp.index[a]].Ptr {
		t.Error("the checkpoint's output is not its input's buffer")
	}
}

// TestDevTapeFreesOnce: an op that reads one buffer twice frees it once,
// so two later ops cannot be planned on the same buffer.
func TestDevTapeFreesOnce(t *testing.T) {
	g := G.NewGraph()
	const T, D = 4, 8
	x := G.NewMatrix(g, G.Float32, G.WithShape(T, D), G.WithName("x"))
	m := G.NewVector(g, G.Int, G.WithShape(T), G.WithName("mask"))
	a := ops.Apply(replaceRows{}, x, x, m)
	b := ops.Apply(replaceRows{}, a, a, m) // a, read twice, is free after this
	c := ops.Apply(replaceRows{}, b, x, m)
	h := ops.Apply(replaceRows{}, c, b, m) // reads b and c as it writes
	tp, err := newTape(h.Graph())
	if err != nil {
		t.Fatal(err)
	}
	d, err := planDevTape(nil, &fakeMem{next: 1 << 32}, "plan", tp, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	p := func(n *G.Node) uint64 { return uint64(d.vals[tp.index[n]].Ptr) }
	if p(h) == p(b) || p(h) == p(c) || p(b) == p(c) {
		t.Errorf("b %#x, c %#x and h %#x: one buffer for two nodes live at once", p(b), p(c), p(h))
	}
}
