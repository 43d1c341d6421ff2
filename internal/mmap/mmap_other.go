//go:build !unix

package mmap

import (
	"io"
	"os"
)

// File reads the first size bytes of f where memory mapping is not
// available; the release function has nothing to do.
func File(f *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}

// Release has nothing to give back where the file was read, not mapped.
func Release(b []byte) {}
