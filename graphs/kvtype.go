package graphs

import (
	"fmt"
	"strings"
)

// KVCacheType is how a KV pool stores keys and values: float32, F16, or
// llama.cpp's Q8_0 / Q4_0 blocks of 32 values along a head's dimension,
// each block with an F16 scale.
type KVCacheType uint8

const (
	// KVF32 keeps keys and values exactly (the default).
	KVF32 KVCacheType = iota
	// KVF16 rounds them to F16 (Options.KVCacheF16).
	KVF16
	// KVQ8_0 stores blocks of 32 int8 and an F16 scale: 34 bytes per 32
	// values.
	KVQ8_0
	// KVQ4_0 stores blocks of 32 4-bit values and an F16 scale: 18 bytes
	// per 32 values.
	KVQ4_0
)

// KVQuantBlock is the number of values in a quantized cache's block.
const KVQuantBlock = 32

var kvTypeNames = [...]string{"f32", "f16", "q8_0", "q4_0"}

func (t KVCacheType) String() string {
	if int(t) < len(kvTypeNames) {
		return kvTypeNames[t]
	}
	return fmt.Sprintf("KVCacheType(%d)", uint8(t))
}

// ParseKVCacheType reads a cache type as llama.cpp's --cache-type-k names
// it: f32, f16, q8_0 or q4_0.
func ParseKVCacheType(s string) (KVCacheType, error) {
	for i, n := range kvTypeNames {
		if strings.EqualFold(s, n) {
			return KVCacheType(i), nil
		}
	}
	return 0, fmt.Errorf("unknown KV cache type %q (want one of %s)", s, strings.Join(kvTypeNames[:], ", "))
}

// Quantized reports whether t stores blocks of KVQuantBlock values.
func (t KVCacheType) Quantized() bool { return t == KVQ8_0 || t == KVQ4_0 }

// blockBytes is the size of one quantized block (0 for F32 and F16).
func (t KVCacheType) blockBytes() int {
	switch t {
	case KVQ8_0:
		return 2 + KVQuantBlock
	case KVQ4_0:
		return 2 + KVQuantBlock/2
	}
	return 0
}

// RowBytes is the size of a stored row of dim values, or an error when a
// quantized type's blocks do not divide dim (llama.cpp refuses the same).
func (t KVCacheType) RowBytes(dim int) (int, error) {
	switch t {
	case KVF32:
		return 4 * dim, nil
	case KVF16:
		return 2 * dim, nil
	case KVQ8_0, KVQ4_0:
		if dim%KVQuantBlock != 0 {
			return 0, fmt.Errorf("a %s KV cache stores blocks of %d values, which do not divide a head's %d", t, KVQuantBlock, dim)
		}
		return dim / KVQuantBlock * t.blockBytes(), nil
	}
	return 0, fmt.Errorf("unknown KV cache type %d", uint8(t))
}

// kvType is the cache type the options ask for: KVCache, or F16 under the
// older KVCacheF16 switch.
func (o Options) kvType() (KVCacheType, error) {
	t := o.KVCache
	if int(t) >= len(kvTypeNames) {
		return 0, fmt.Errorf("Options.KVCache: unknown KV cache type %d", uint8(t))
	}
	if o.KVCacheF16 {
		if t != KVF32 && t != KVF16 {
			return 0, fmt.Errorf("Options.KVCacheF16 asks for an f16 KV cache and Options.KVCache for %s", t)
		}
		t = KVF16
	}
	return t, nil
}

// KVType is the cache type the options ask for (KVCache, or KVF16 under
// KVCacheF16; KVF32 when they disagree, which NewBatch refuses).
func (o Options) KVType() KVCacheType {
	t, err := o.kvType()
	if err != nil {
		return KVF32
	}
	return t
}
