package gguf

import (
	"encoding/binary"
	"math"
)

// builder writes GGUF bytes by hand, for crafted (often malformed) files.
type builder struct{ b []byte }

func (w *builder) pos() int { return len(w.b) }

func (w *builder) bytes() []byte { return w.b }

func (w *builder) raw(p ...byte) *builder { w.b = append(w.b, p...); return w }

func (w *builder) text(s string) *builder { w.b = append(w.b, s...); return w }

func (w *builder) zeros(n int) *builder { w.b = append(w.b, make([]byte, n)...); return w }

func (w *builder) u8(v uint8) *builder { return w.raw(v) }

func (w *builder) u16(v uint16) *builder { w.b = binary.LittleEndian.AppendUint16(w.b, v); return w }

func (w *builder) u32(v uint32) *builder { w.b = binary.LittleEndian.AppendUint32(w.b, v); return w }

func (w *builder) u64(v uint64) *builder { w.b = binary.LittleEndian.AppendUint64(w.b, v); return w }

func (w *builder) f32(v float32) *builder { return w.u32(math.Float32bits(v)) }

func (w *builder) f64(v float64) *builder { return w.u64(math.Float64bits(v)) }

// str writes a GGUF string: u64 length, bytes.
func (w *builder) str(s string) *builder { return w.u64(uint64(len(s))).text(s) }

// header writes magic, version and the two counts.
func (w *builder) header(version uint32, nTensors, nKV uint64) *builder {
	return w.text("GGUF").u32(version).u64(nTensors).u64(nKV)
}

// kvU32 writes a metadata entry with a u32 value.
func (w *builder) kvU32(key string, v uint32) *builder { return w.str(key).u32(vtU32).u32(v) }

// kvStr writes a metadata entry with a string value.
func (w *builder) kvStr(key, v string) *builder { return w.str(key).u32(vtString).str(v) }

// tensor writes a tensor info.
func (w *builder) tensor(name string, dims []uint64, t Type, off uint64) *builder {
	w.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		w.u64(d)
	}
	return w.u32(uint32(t)).u64(off)
}

// pad writes zeros up to the next multiple of align.
func (w *builder) pad(align int) *builder {
	for len(w.b)%align != 0 {
		w.b = append(w.b, 0)
	}
	return w
}

// f16bits returns the half-precision bits of v, which must be exactly
// representable as a normal half (the tests only use such values).
func f16bits(v float32) uint16 {
	if v == 0 {
		return 0
	}
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	if exp <= 0 || exp >= 31 || mant&0x1fff != 0 {
		panic("f16bits: not an exact normal half")
	}
	return sign | uint16(exp)<<10 | uint16(mant>>13)
}
