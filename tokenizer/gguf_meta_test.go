package tokenizer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// readGGUFMetadata is a test-only reader of a GGUF file's header and
// metadata (the loaders/gguf package is the real reader). It returns the
// key-value map with the Go types FromGGUFMetadata documents: scalars as
// their sized Go type, arrays as typed slices.
func readGGUFMetadata(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &ggufTestReader{r: bufio.NewReaderSize(f, 1<<20)}
	var magic [4]byte
	r.read(magic[:])
	if r.err == nil && string(magic[:]) != "GGUF" {
		return nil, fmt.Errorf("%s: not a GGUF file", path)
	}
	if v := r.u32(); r.err == nil && v != 3 && v != 2 {
		return nil, fmt.Errorf("%s: GGUF version %d", path, v)
	}
	r.u64() // tensor count
	n := r.u64()
	meta := map[string]any{}
	for i := uint64(0); i < n && r.err == nil; i++ {
		key := r.str()
		meta[key] = r.value(r.u32())
	}
	if r.err != nil {
		return nil, fmt.Errorf("%s: %w", path, r.err)
	}
	return meta, nil
}

type ggufTestReader struct {
	r   *bufio.Reader
	err error
}

func (r *ggufTestReader) read(b []byte) {
	if r.err == nil {
		_, r.err = io.ReadFull(r.r, b)
	}
}

func (r *ggufTestReader) u8() uint8 { var b [1]byte; r.read(b[:]); return b[0] }
func (r *ggufTestReader) u16() uint16 {
	var b [2]byte
	r.read(b[:])
	return binary.LittleEndian.Uint16(b[:])
}
func (r *ggufTestReader) u32() uint32 {
	var b [4]byte
	r.read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}
func (r *ggufTestReader) u64() uint64 {
	var b [8]byte
	r.read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func (r *ggufTestReader) str() string {
	n := r.u64()
	if r.err != nil || n > 1<<30 {
		if r.err == nil {
			r.err = errors.New("string too long")
		}
		return ""
	}
	b := make([]byte, n)
	r.read(b)
	return string(b)
}

func (r *ggufTestReader) value(typ uint32) any {
	switch typ {
	case 0:
		return r.u8()
	case 1:
		return int8(r.u8())
	case 2:
		return r.u16()
	case 3:
		return int16(r.u16())
	case 4:
		return r.u32()
	case 5:
		return int32(r.u32())
	case 6:
		return math.Float32frombits(r.u32())
	case 7:
		return r.u8() != 0
	case 8:
		return r.str()
	case 10:
		return r.u64()
	case 11:
		return int64(r.u64())
	case 12:
		return math.Float64frombits(r.u64())
	case 9:
		et, n := r.u32(), r.u64()
		if r.err != nil || n > 1<<26 {
			if r.err == nil {
				r.err = errors.New("array too long")
			}
			return nil
		}
		return r.array(et, int(n))
	}
	if r.err == nil {
		r.err = fmt.Errorf("unknown value type %d", typ)
	}
	return nil
}

// array reads n elements of type et into a typed slice.
func (r *ggufTestReader) array(et uint32, n int) any {
	switch et {
	case 8:
		return readSlice(r, n, (*ggufTestReader).str)
	case 5:
		return readSlice(r, n, func(r *ggufTestReader) int32 { return int32(r.u32()) })
	case 4:
		return readSlice(r, n, (*ggufTestReader).u32)
	case 6:
		return readSlice(r, n, func(r *ggufTestReader) float32 { return math.Float32frombits(r.u32()) })
	case 0:
		return readSlice(r, n, (*ggufTestReader).u8)
	case 7:
		return readSlice(r, n, func(r *ggufTestReader) bool { return r.u8() != 0 })
	}
	// Other element types: generic values (enough for these tests).
	out := make([]any, n)
	for i := range out {
		out[i] = r.value(et)
	}
	return out
}

func readSlice[T any](r *ggufTestReader, n int, f func(*ggufTestReader) T) []T {
	out := make([]T, n)
	for i := range out {
		if r.err != nil {
			return nil
		}
		out[i] = f(r)
	}
	return out
}
