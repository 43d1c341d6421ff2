package simd

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// release gives the whole pages of b, a read-only file mapping, back to
// the kernel: they leave the process's resident set, and a later read
// faults them in again from the file.
func release(b []byte) {
	const page = 4096
	p := uintptr(unsafe.Pointer(&b[0]))
	start := int((page - p%page) % page)
	end := len(b) - int((p+uintptr(len(b)))%page)
	if end > start {
		_ = unix.Madvise(b[start:end], unix.MADV_DONTNEED)
	}
}

// packMemory is n zeroed bytes for a packing, mapped outside the Go heap:
// a heap of packed weights would let the collector's goal (twice the live
// heap) hold as much again of garbage (gozoo bench's peak RSS; see
// docs/performance.md). freePacking unmaps it. Nil if the mapping fails:
// the matrix then stays unpacked.
func packMemory(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

// freePacking unmaps memory from packMemory.
func freePacking(b []byte) { _ = unix.Munmap(b) }
