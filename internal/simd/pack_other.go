//go:build !linux

package simd

// release keeps the pages where madvise is not at hand.
func release(b []byte) {}

// packMemory is n zeroed bytes for a packing (the Go heap here).
func packMemory(n int) []byte { return make([]byte, n) }

// freePacking leaves a packing's memory to the collector.
func freePacking(b []byte) {}
