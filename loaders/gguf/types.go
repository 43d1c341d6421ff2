package gguf

import (
	"strconv"
	"strings"
)

// Type is a ggml tensor type id, as stored in a GGUF tensor info.
type Type uint32

// The ggml types this package knows the block layout of. Ids missing here
// (4 and 5 were removed from ggml; the IQ types other than IQ4_NL and
// IQ4_XS, the integer types and the newer float formats are not handled)
// are refused at Open.
const (
	TypeF32    Type = 0  // float32
	TypeF16    Type = 1  // IEEE half
	TypeQ4_0   Type = 2  // blocks of 32: f16 d, 16 bytes of 4-bit values
	TypeQ4_1   Type = 3  // blocks of 32: f16 d, f16 m, 16 bytes of 4-bit values
	TypeQ5_0   Type = 6  // blocks of 32: f16 d, 4 bytes of high bits, 16 bytes of low nibbles
	TypeQ5_1   Type = 7  // blocks of 32: f16 d, f16 m, high bits, low nibbles
	TypeQ8_0   Type = 8  // blocks of 32: f16 d, 32 int8
	TypeQ8_1   Type = 9  // blocks of 32: f16 d, f16 s, 32 int8
	TypeQ2_K   Type = 10 // super-blocks of 256, 84 bytes
	TypeQ3_K   Type = 11 // super-blocks of 256, 110 bytes
	TypeQ4_K   Type = 12 // super-blocks of 256: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles
	TypeQ5_K   Type = 13 // super-blocks of 256, 176 bytes
	TypeQ6_K   Type = 14 // super-blocks of 256: 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d
	TypeQ8_K   Type = 15 // super-blocks of 256: f32 d, 256 int8, 16 int16 sums
	TypeIQ4_NL Type = 20 // blocks of 32: f16 d, 16 bytes of indices into kvalues_iq4nl
	TypeIQ4_XS Type = 23 // super-blocks of 256: f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of indices
	TypeBF16   Type = 30 // upper half of a float32
)

// typeInfo is the layout of one known type.
type typeInfo struct {
	name       string
	blockSize  int // values per block
	blockBytes int // bytes per block
	supported  bool
}

// types is indexed by type id; the zero typeInfo marks an unknown id.
var types = [...]typeInfo{
	TypeF32:    {"F32", 1, 4, true},
	TypeF16:    {"F16", 1, 2, true},
	TypeQ4_0:   {"Q4_0", 32, 18, true},
	TypeQ4_1:   {"Q4_1", 32, 20, true},
	TypeQ5_0:   {"Q5_0", 32, 22, true},
	TypeQ5_1:   {"Q5_1", 32, 24, true},
	TypeQ8_0:   {"Q8_0", 32, 34, true},
	TypeQ8_1:   {"Q8_1", 32, 36, false},
	TypeQ2_K:   {"Q2_K", 256, 84, true},
	TypeQ3_K:   {"Q3_K", 256, 110, true},
	TypeQ4_K:   {"Q4_K", 256, 144, true},
	TypeQ5_K:   {"Q5_K", 256, 176, true},
	TypeQ6_K:   {"Q6_K", 256, 210, true},
	TypeQ8_K:   {"Q8_K", 256, 292, false},
	TypeIQ4_NL: {"IQ4_NL", 32, 18, true},
	TypeIQ4_XS: {"IQ4_XS", 256, 136, true},
	TypeBF16:   {"BF16", 1, 2, true},
}

// String returns ggml's name of the type ("Q4_K"), or "Type(n)" for an id
// this package does not know.
func (t Type) String() string {
	if ti := t.info(); ti.blockSize != 0 {
		return ti.name
	}
	return "Type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// info returns the layout of t, the zero typeInfo for an unknown id.
func (t Type) info() typeInfo {
	if uint64(t) < uint64(len(types)) {
		return types[t]
	}
	return typeInfo{}
}

// BlockSize returns the number of values in one block of t: 1 for F32, F16
// and BF16, 32 for the Q*_0/Q*_1 types, 256 for the K-quants; 0 for an
// unknown type.
func (t Type) BlockSize() int { return t.info().blockSize }

// BlockBytes returns the number of bytes one block of t takes; 0 for an
// unknown type.
func (t Type) BlockBytes() int { return t.info().blockBytes }

// Supported reports whether Dequantize handles t (SupportedTypes lists
// them).
func (t Type) Supported() bool { return t.info().supported }

// SupportedTypes names the types Dequantize handles, in id order, for
// errors that say what a file may hold.
func SupportedTypes() string {
	var names []string
	for _, ti := range types {
		if ti.supported {
			names = append(names, ti.name)
		}
	}
	return strings.Join(names, ", ")
}
