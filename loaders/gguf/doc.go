// Package gguf reads GGUF files (llama.cpp's model format, versions 3 and 2)
// and dequantizes the ggml weight types F32, F16, BF16, Q8_0, Q4_0, Q5_0,
// Q4_1, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS to float32,
// bit for bit as ggml's dequantize_row_* functions do. Write writes a GGUF v3 file (what gozoo quantize produces).
//
// Open memory-maps the file read-only and parses the header, the metadata
// and the tensor infos; tensor data stays in the mapping and File.Data hands
// it out in place. Metadata values keep their GGUF types (see File.Metadata).
//
// The reader treats every file as hostile. Counts and lengths read from the
// file are checked against the bytes actually left before anything is
// allocated for them, so no allocation is sized by a header field alone;
// array nesting is bounded; tensor shapes, types, alignment, offsets,
// overlaps and duplicate names are validated at Open, so that a File that
// opened can be dequantized without further checks. Every parse error is a
// *FormatError naming the file, the metadata key or tensor at fault, and the
// byte offset in the file where the faulty field was read. No input makes the
// parser panic (FuzzParse).
//
// # Why not github.com/gpustack/gguf-parser-go
//
// That parser (read at commit 139f90d) is built for inspecting remote files
// and estimating memory use, not for loading weights, and fails the
// guarantees above: it sizes slices straight from header fields (make with
// the tensor count, the metadata count, array lengths, n_dims), so a
// 40-byte file can ask for terabytes; string reads ignore short reads and
// trim whitespace from keys and values; arrays come back as []any of boxed
// scalars, not typed slices; nested arrays recurse without a limit; a
// non-u32 general.alignment panics and an alignment of 0 divides by zero;
// the padding computation adds a whole alignment when the header already
// ends aligned; errors carry no byte offsets; it offers no views of tensor
// data and no dequantization; and it pulls in an HTTP client stack
// (httpretty, dnscache, json-iterator, x/crypto, x/exp) we do not need. The
// format is small enough that a validating reader of our own costs less
// than wrapping that one.
//
// The mapping helper of package loaders (mapFile) is unexported, and this
// package must not import loaders (loaders is the natural place to dispatch
// GGUF checkpoints to it), so mmap_unix.go and mmap_other.go carry a small
// copy of the same idea under the same build tags.
package gguf
