//go:build unix

package loaders

import (
	"os"
	"syscall"

	"github.com/gozoo/gozoo/internal/simd"
)

// mapFile maps a whole file read-only. The returned release function unmaps
// it. Mapping instead of reading keeps the file's bytes out of the Go heap:
// weights are used in place, and the kernel pages them in as they are
// first read.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	simd.Mapped(b) // its BF16, F32 and quantized matrices may be packed for decode
	return b, func() error {
		simd.Unmapped(b)
		return syscall.Munmap(b)
	}, nil
}
