//go:build !purego

package simd

import (
	"math"
	"testing"
)

// TestHalfTable: every half in halfTable is the float32 that VCVTPH2PS
// makes of it (the conversion the exact kernels did before they read
// their scales from the table), as the Q4_0 dequantization kernel shows
// with a block of d = h and every value q - 8 = 1.
func TestHalfTable(t *testing.T) {
	if s := supported(); len(s) == 0 || s[0] != avx512 {
		t.Skip("no AVX-512 on this CPU")
	}
	const n = 1 << 16
	w := make([]byte, 18*n)
	for h := 0; h < n; h++ {
		b := w[18*h:]
		b[0], b[1] = byte(h), byte(h>>8)
		for i := 2; i < 18; i++ {
			b[i] = 0x99
		}
	}
	dst := make([]float32, 32*n)
	dequantQ4_0AVX512(&w[0], 18*n, n, 1, &dst[0])
	for h := 0; h < n; h++ {
		got, want := halfTable[h], dst[32*h]
		if math.IsNaN(float64(want)) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("half %#04x: table %g, VCVTPH2PS NaN", h, got)
			}
			continue
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("half %#04x: table %g (%#08x), VCVTPH2PS %g (%#08x)", h, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}
