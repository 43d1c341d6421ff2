package layers

import (
	"testing"
	"unsafe"
)

// TestReadRun: adjacent blocks join one logged read, and a gap starts
// the next one; every block's bytes count towards logReads' limit.
func TestReadRun(t *testing.T) {
	buf := make([]byte, 1024)
	at := func(i int) unsafe.Pointer { return unsafe.Pointer(&buf[i]) }
	var r readRun
	r.add(at(0), 100)
	r.add(at(100), 50)
	if r.p != at(0) || r.n != 150 {
		t.Fatalf("adjacent blocks: run at %p of %d bytes, want %p and 150", r.p, r.n, at(0))
	}
	r.add(at(300), 10)
	if r.p != at(300) || r.n != 10 || r.bytes != 160 {
		t.Fatalf("after a gap: run at %p of %d bytes (%d in all), want %p, 10 (160)", r.p, r.n, r.bytes, at(300))
	}
	r.flush()
	if r.n != 0 {
		t.Fatalf("flushed run keeps %d bytes", r.n)
	}
}
