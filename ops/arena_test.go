package ops

import "testing"

// TestShared: the nodes of one session (one arena) share one state of a
// type; another session has its own; a kernel called outside a graph gets
// a fresh one each time.
func TestShared(t *testing.T) {
	type scratch struct{ buf []float32 }
	mk := func() *scratch { return &scratch{} }
	a, b := NewArena(), NewArena()
	n1, n2, other := &Out{arena: a}, &Out{arena: a}, &Out{arena: b}
	s1 := Shared(n1, mk)
	if s2 := Shared(n2, mk); s2 != s1 {
		t.Error("two nodes of one arena got different shared states")
	}
	if Shared(other, mk) == s1 {
		t.Error("two arenas share a state")
	}
	type other2 struct{ n int }
	if Shared(n1, func() *other2 { return &other2{} }) == nil {
		t.Error("a second type got no state")
	}
	if Shared[scratch](nil, mk) == Shared[scratch](nil, mk) {
		t.Error("calls outside a graph share a state")
	}
}
