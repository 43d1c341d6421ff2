package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// KV is one metadata entry to write. Value takes the Go types File.Metadata
// reads back: uint8 … float64, bool, string, and typed slices of those
// (arrays).
type KV struct {
	Key   string
	Value any
}

// WriteTensor is one tensor to write: Dims in GGUF order (Dims[0] the
// contiguous axis) and its data in type Type, whole blocks per row.
type WriteTensor struct {
	Name string
	Dims []uint64
	Type Type
	Data []byte
}

// Write writes a GGUF v3 file: the metadata in order, the tensor infos,
// and the data section with every tensor aligned to DefaultAlignment (a
// general.alignment entry, if given, must say the same). It checks each
// tensor's data size against its type and shape.
func Write(w io.Writer, meta []KV, tensors []WriteTensor) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	e.raw([]byte("GGUF"))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(meta)))
	for _, kv := range meta {
		if kv.Key == "general.alignment" {
			if a, ok := kv.Value.(uint32); !ok || a != DefaultAlignment {
				return fmt.Errorf("gguf: writing general.alignment %v: only %d is written", kv.Value, DefaultAlignment)
			}
		}
		e.str(kv.Key)
		if err := e.value(kv.Value, true); err != nil {
			return fmt.Errorf("gguf: writing metadata %q: %w", kv.Key, err)
		}
	}
	var offset uint64
	for _, t := range tensors {
		if !t.Type.Supported() && t.Type.BlockSize() == 0 {
			return fmt.Errorf("gguf: writing tensor %q: unknown type %s", t.Name, t.Type)
		}
		n := uint64(1)
		for _, d := range t.Dims {
			n *= d
		}
		bs := uint64(t.Type.BlockSize())
		if len(t.Dims) == 0 || t.Dims[0]%bs != 0 || uint64(len(t.Data)) != n/bs*uint64(t.Type.BlockBytes()) {
			return fmt.Errorf("gguf: writing tensor %q: %d bytes for %s %v", t.Name, len(t.Data), t.Type, t.Dims)
		}
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offset)
		offset = align(offset+uint64(len(t.Data)), DefaultAlignment)
	}
	e.raw(make([]byte, int(align(e.n, DefaultAlignment)-e.n)))
	for _, t := range tensors {
		e.raw(t.Data)
		e.raw(make([]byte, int(align(uint64(len(t.Data)), DefaultAlignment)-uint64(len(t.Data)))))
	}
	if e.err != nil {
		return e.err
	}
	return bw.Flush()
}

func align(n, a uint64) uint64 { return (n + a - 1) / a * a }

// encoder writes little-endian GGUF values, remembering the first error
// and the bytes written.
type encoder struct {
	w   io.Writer
	n   uint64
	err error
}

func (e *encoder) raw(b []byte) {
	if e.err != nil {
		return
	}
	var k int
	k, e.err = e.w.Write(b)
	e.n += uint64(k)
}

func (e *encoder) u32(v uint32) { e.raw(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *encoder) u64(v uint64) { e.raw(binary.LittleEndian.AppendUint64(nil, v)) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.raw([]byte(s)) }

// value writes v, preceded by its value type when typed is set (array
// elements share one type, written once).
func (e *encoder) value(v any, typed bool) error {
	tag := func(t uint32) {
		if typed {
			e.u32(t)
		}
	}
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint8:
		tag(0)
		e.raw([]byte{x})
	case int8:
		tag(1)
		e.raw([]byte{byte(x)})
	case uint16:
		tag(2)
		e.raw(le.AppendUint16(nil, x))
	case int16:
		tag(3)
		e.raw(le.AppendUint16(nil, uint16(x)))
	case uint32:
		tag(4)
		e.u32(x)
	case int32:
		tag(5)
		e.u32(uint32(x))
	case float32:
		tag(6)
		e.u32(math.Float32bits(x))
	case bool:
		tag(7)
		b := byte(0)
		if x {
			b = 1
		}
		e.raw([]byte{b})
	case string:
		tag(8)
		e.str(x)
	case uint64:
		tag(10)
		e.u64(x)
	case int64:
		tag(11)
		e.u64(uint64(x))
	case float64:
		tag(12)
		e.u64(math.Float64bits(x))
	case []uint8:
		return writeArray(e, 0, x)
	case []int32:
		return writeArray(e, 5, x)
	case []uint32:
		return writeArray(e, 4, x)
	case []float32:
		return writeArray(e, 6, x)
	case []bool:
		return writeArray(e, 7, x)
	case []string:
		return writeArray(e, 8, x)
	case []int64:
		return writeArray(e, 11, x)
	case []uint64:
		return writeArray(e, 10, x)
	default:
		return fmt.Errorf("value of type %T cannot be written", v)
	}
	return nil
}

func writeArray[T any](e *encoder, elem uint32, xs []T) error {
	e.u32(9)
	e.u32(elem)
	e.u64(uint64(len(xs)))
	for _, x := range xs {
		if err := e.value(any(x), false); err != nil {
			return err
		}
	}
	return nil
}
