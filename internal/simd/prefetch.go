package simd

import (
	"sync/atomic"
	"unsafe"
)

// A decode step runs the same matrix-vector products in the same order,
// token after token, and between them the caller does the small ops
// (norms, RoPE, the KV cache write, sampling) alone while the team idles.
// The decode order is learned here, and an idle worker spends those gaps
// prefetching the weights that come next into the shared L3 cache, so the
// next product reads part of them from cache instead of memory.

// span is a weight's bytes: an address (not a pointer, so that a closed
// model's weights are not kept alive: prefetching never faults) and a
// length.
type span struct {
	p uintptr
	n int
}

// prefetchAhead is how far past the next product the worker prefetches:
// half the 32 MB L3 of the machines we measure on, so lines are not
// evicted before they are read (interleaved gozoo bench runs of
// SmolLM2-135M BF16 decode; the distances tried are in
// docs/performance.md).
const prefetchAhead = 16 << 20

// prefetchChunk is what the worker prefetches between looks at its slot,
// so a posted job waits well under a microsecond.
const prefetchChunk = 16 << 10

// decodeOrder learns the sequence of decode products. Only the caller
// holding the team touches it.
type decodeOrder struct {
	seen []span // the products of the step in progress
	pos  int    // where the last product sat in the published order
}

var (
	order decodeOrder
	// published is the last full step's order (immutable once stored).
	published atomic.Pointer[[]span]
	// prefetchFrom is the index in published of the next product, plus
	// one (0: nothing to prefetch).
	prefetchFrom atomic.Int64
)

// spanOf is the storage of w's first n values.
func spanOf(w Weight, n int) span {
	var p unsafe.Pointer
	switch {
	case w.Kind == F32 && len(w.F32s) > 0:
		p = unsafe.Pointer(&w.F32s[0])
	case (w.Kind == BF16 || w.Kind == F16) && len(w.U16s) > 0:
		p = unsafe.Pointer(&w.U16s[0])
	case w.Kind == Quant && len(w.Bytes) > 0:
		p = unsafe.Pointer(&w.Bytes[0])
	case w.Kind == Coded:
		p = unsafe.Pointer(&w.coded.data[0])
	case w.Kind == X16:
		p = unsafe.Pointer(&w.x16.data[0])
	case w.Kind == Panels:
		p = unsafe.Pointer(&w.panels.data[0])
	}
	return span{uintptr(p), w.bytes(n)}
}

// Reads logs that a decode step reads the n bytes at p here, between its
// products (a layer's cached keys and values): later steps' prefetching
// then takes them in order with the weights. A step's keys were last read
// a whole step of weights ago, so they come from memory, not the cache.
// It does nothing while another caller has the team.
func Reads(p unsafe.Pointer, n int) {
	if len(team) == 0 || n <= 0 || !teamBusy.CompareAndSwap(false, true) {
		return
	}
	order.ran(span{uintptr(p), n})
	teamBusy.Store(false)
}

// ran records that the product over s ran, and points the worker at the
// products that follow it. A step is complete when its first product comes
// round again; it is published if it differs from the last (which
// allocates only when the model or the graph changes).
func (o *decodeOrder) ran(s span) {
	if len(o.seen) > 0 && s == o.seen[0] {
		if pub := published.Load(); pub == nil || !equalSpans(*pub, o.seen) {
			step := append([]span(nil), o.seen...)
			published.Store(&step)
			o.pos = 0
		}
		o.seen = o.seen[:0]
	}
	if len(o.seen) < 4096 {
		o.seen = append(o.seen, s)
	}
	pub := published.Load()
	if pub == nil {
		return
	}
	steps := *pub
	i := o.pos + 1
	if i >= len(steps) || steps[i] != s {
		for i = range steps {
			if steps[i] == s {
				break
			}
		}
		if i == len(steps) || steps[i] != s {
			prefetchFrom.Store(0)
			return
		}
	}
	o.pos = i
	prefetchFrom.Store(int64((i+1)%len(steps)) + 1)
}

func equalSpans(a, b []span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// prefetcher is a worker's progress through the published order.
type prefetcher struct {
	pub    *[]span // the order it follows
	from   int64   // the prefetchFrom it works for
	i, off int     // the next line: product i, byte off
	done   int     // bytes prefetched since from
	passed int     // products passed since from: a whole step is enough
}

// step prefetches the next chunk and reports whether there was one.
func (f *prefetcher) step() bool {
	from := prefetchFrom.Load()
	pub := published.Load()
	if from == 0 || pub == nil || !canPrefetch() {
		return false
	}
	steps := *pub
	if pub != f.pub {
		f.pub, f.from = pub, 0
	}
	if from != f.from {
		f.restart(steps, int(from-1)%len(steps))
		f.from = from
	}
	if f.done >= prefetchAhead || f.passed >= len(steps) {
		return false
	}
	s := steps[f.i]
	n := min(prefetchChunk, s.n-f.off)
	if n > 0 {
		prefetch(s.p+uintptr(f.off), (n+63)/64)
	}
	f.off += n
	f.done += n
	if f.off >= s.n {
		f.i, f.off = (f.i+1)%len(steps), 0
		f.passed++
	}
	return true
}

// restart moves the start to product j. Lines already prefetched past j
// count as done: when j lies between the old start and the cursor, the
// cursor stays.
func (f *prefetcher) restart(steps []span, j int) {
	n := len(steps)
	old := int(f.from-1) % n
	if f.from == 0 || f.i >= n || (j-old+n)%n > (f.i-old+n)%n || f.passed >= n {
		f.i, f.off, f.done, f.passed = j, 0, 0, 0
		return
	}
	f.done, f.passed = f.off, 0
	for k := j; k != f.i; k = (k + 1) % n {
		f.done += steps[k].n
		f.passed++
	}
}
