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
