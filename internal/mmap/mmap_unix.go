//go:build unix

package mmap

import (
	"os"
	"syscall"
)

// File maps the first size bytes of f read-only and returns the mapping
// and a function that unmaps it. A zero-length file maps to nil.
func File(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
