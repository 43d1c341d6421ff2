package graphs

import (
	"math"

	"github.com/x448/float16"
)

func widenBF16(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i, b := range src {
		dst[i] = math.Float32frombits(uint32(b) << 16)
	}
}

func f16ToF32(h uint16) float32 { return float16.Frombits(h).Float32() }

// toF16 rounds x to F16 bits (to nearest, ties to even), as the F16 KV
// cache stores keys and values.
func toF16(dst []uint16, x []float32) {
	for i, v := range x {
		dst[i] = float16.Fromfloat32(v).Bits()
	}
}
