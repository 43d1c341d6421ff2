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
