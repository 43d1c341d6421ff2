//go:build unix

package loaders

import (
	"os"
	"syscall"
)

// mapFile maps a whole file read-only. The returned release function unmaps
// it. Mapping instead of reading keeps the file's bytes out of the Go heap:
// the kernel pages them in as tensors are converted and drops them again
// when told (see dropPages).
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

// dropPages tells the kernel the converted source bytes are no longer needed,
// so they stop counting towards the resident set. Only whole pages inside b
// are dropped; b must lie within a mapping made by mapFile.
func dropPages(mapping, b []byte) {
	if len(b) == 0 || len(mapping) == 0 {
		return
	}
	page := os.Getpagesize()
	base := uintptrOf(mapping)
	start := uintptrOf(b) - base
	end := start + uintptr(len(b))
	s := (start + uintptr(page) - 1) / uintptr(page) * uintptr(page)
	e := end / uintptr(page) * uintptr(page)
	if e <= s {
		return
	}
	_ = syscall.Madvise(mapping[s:e], syscall.MADV_DONTNEED)
}
