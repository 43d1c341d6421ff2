package simd

import (
	"testing"
	"unsafe"
)

// TestDecodeOrder checks that the order of decode products is learned
// from one full step, and that each product points the prefetcher at the
// one after it, round the step's end.
func TestDecodeOrder(t *testing.T) {
	a, b, c := span{0x1000, 64}, span{0x2000, 128}, span{0x3000, 256}
	var o decodeOrder
	published.Store(nil)
	defer func() { published.Store(nil); prefetchFrom.Store(0) }()
	for _, s := range []span{a, b, c} {
		o.ran(s)
		if got := prefetchFrom.Load(); got != 0 {
			t.Fatalf("before a full step: prefetchFrom %d", got)
		}
	}
	steps := []struct {
		ran  span
		next int64 // index of the product to prefetch, plus one
	}{{a, 2}, {b, 3}, {c, 1}, {a, 2}, {c, 1}, {span{0x9000, 8}, 0}}
	for i, st := range steps {
		o.ran(st.ran)
		if got := prefetchFrom.Load(); got != st.next {
			t.Errorf("step %d (%#x): prefetchFrom %d, want %d", i, st.ran.p, got, st.next)
		}
	}
	if pub := published.Load(); pub == nil || !equalSpans(*pub, []span{a, b, c}) {
		t.Fatalf("published order %v", pub)
	}
}

// TestPrefetcherRestart checks that moving the start inside the stretch
// already prefetched keeps the cursor and counts those bytes as done, and
// that any other start begins afresh.
func TestPrefetcherRestart(t *testing.T) {
	steps := []span{{0x1000, 100}, {0x2000, 200}, {0x3000, 300}, {0x4000, 400}}
	cases := []struct {
		name                 string
		from, i, off, passed int // the state before: from is the old start index + 1
		j                    int // the new start
		wantI, wantDone      int
	}{
		{"inside", 1, 2, 50, 2, 1, 2, 250},
		{"at the cursor", 1, 2, 50, 2, 2, 2, 50},
		{"past the cursor", 1, 2, 50, 2, 3, 3, 0},
		{"behind the old start", 2, 3, 0, 2, 0, 0, 0},
		{"wrapped", 4, 1, 10, 2, 0, 1, 110},
		{"none before", 0, 0, 0, 0, 2, 2, 0},
	}
	for _, tc := range cases {
		f := prefetcher{from: int64(tc.from), i: tc.i, off: tc.off, passed: tc.passed}
		f.restart(steps, tc.j)
		if f.i != tc.wantI || f.done != tc.wantDone {
			t.Errorf("%s: cursor %d, done %d; want %d, %d", tc.name, f.i, f.done, tc.wantI, tc.wantDone)
		}
	}
}

// TestReads checks that bytes a step reads between its products join the
// decode order as products do, that an empty read is not logged, and that
// Reads gives the team back.
func TestReads(t *testing.T) {
	saved := order
	order = decodeOrder{}
	defer func() { order = saved; published.Store(nil); prefetchFrom.Store(0) }()
	buf := make([]byte, 4096)
	Reads(unsafe.Pointer(&buf[64]), 1000)
	Reads(unsafe.Pointer(&buf[0]), 0)
	want := []span{{uintptr(unsafe.Pointer(&buf[64])), 1000}}
	if len(team) == 0 {
		want = nil // one CPU: no worker to prefetch with
	}
	if !equalSpans(order.seen, want) {
		t.Fatalf("logged %v, want %v", order.seen, want)
	}
	if !teamBusy.CompareAndSwap(false, true) {
		t.Fatal("Reads kept the team")
	}
	teamBusy.Store(false)
}
