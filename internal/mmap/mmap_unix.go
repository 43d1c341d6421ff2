//go:build unix

package mmap

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
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

// Release gives the whole pages of b, part of a read-only file mapping,
// back to the kernel: they leave the process's resident set, and a later
// read faults them in again from the file.
func Release(b []byte) {
	page := uintptr(os.Getpagesize())
	if len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	start := int((page - p%page) % page)
	end := len(b) - int((p+uintptr(len(b)))%page)
	if end > start {
		_ = unix.Madvise(b[start:end], unix.MADV_DONTNEED)
	}
}
