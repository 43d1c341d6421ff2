package main

import (
	"path/filepath"
	"strings"

	"github.com/gozoo/gozoo/loaders/gguf"
)

// isGGUFPath reports whether a --tokenizer argument names a GGUF file (by
// its .gguf extension) rather than a tokenizer.json directory.
func isGGUFPath(path string) bool {
	return strings.EqualFold(filepath.Ext(path), ".gguf")
}

// ggufMetadata returns the key-value metadata of the GGUF file at path, in
// the form tokenizer.FromGGUFMetadata takes (scalars as their sized Go
// types, arrays as typed slices; copies, safe after the file closes).
func ggufMetadata(path string) (map[string]any, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Metadata, nil
}
