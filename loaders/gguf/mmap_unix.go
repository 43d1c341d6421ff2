//go:build unix

package gguf

import (
	"os"
	"syscall"

	"github.com/gozoo/gozoo/internal/simd"
)

// mapFile maps the first size bytes of f read-only and returns the mapping
// and a function that unmaps it. A zero-length file maps to nil.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	simd.Mapped(b) // its BF16, F32 and quantized matrices may be packed for decode
	return b, func() error {
		simd.Unmapped(b)
		return syscall.Munmap(b)
	}, nil
}
