//go:build !unix

package gguf

import (
	"io"
	"os"
)

// mapFile reads the whole file where memory mapping is not available.
func mapFile(f *os.File, size int) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, nil, err
	}
	return b, func() error { return nil }, nil
}
