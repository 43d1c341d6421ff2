// Package mmap maps checkpoint files read-only for both loaders
// (safetensors and GGUF): weights are used in place, outside the Go heap,
// and the kernel pages them in as they are first read.
package mmap

import "unsafe"

// Within says whether b lies inside mapping: bytes of the file, which
// nothing writes, so a backend may prepare other forms of them.
func Within(b, mapping []byte) bool {
	if len(b) == 0 || len(mapping) == 0 {
		return false
	}
	p, m := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(mapping)))
	return p >= m && p+uintptr(len(b)) <= m+uintptr(len(mapping))
}
