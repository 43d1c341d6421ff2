package simd

import (
	"golang.org/x/sys/unix"

	"github.com/gozoo/gozoo/internal/mmap"
)

// release gives the whole pages of b, a read-only file mapping, back to
// the kernel (mmap.Release).
func release(b []byte) { mmap.Release(b) }

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
