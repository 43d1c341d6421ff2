package gguf

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/x448/float16"
)

// The expected values here are computed independently of dequant.go: the
// reference functions below index every output value directly from the
// README's formulas and do the arithmetic in float64, rounding to float32
// after each operation ggml performs in float32 (exact for +, -, * of
// float32 operands, whose float64 result is rounded once), and the hand-built
// blocks also spell out a few values as literals.

// r rounds to float32 and back, the effect of one float32 operation.
func r(x float64) float64 { return float64(float32(x)) }

// refHalf converts half bits by the IEEE definition, in float64.
func refHalf(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 31
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * m * math.Exp2(-24)
	case 31:
		if m == 0 {
			return sign * math.Inf(1)
		}
		return math.NaN()
	}
	return sign * (1 + m/1024) * math.Exp2(float64(e-15))
}

func refQ8_0(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/32*34:]
		d := refHalf(binary.LittleEndian.Uint16(blk))
		out[i] = r(float64(int8(blk[2+i%32])) * d)
	}
	return out
}

func refQ4_0(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/32*18:]
		d := refHalf(binary.LittleEndian.Uint16(blk))
		j := i % 32
		var q int
		if j < 16 {
			q = int(blk[2+j] % 16)
		} else {
			q = int(blk[2+j-16] / 16)
		}
		out[i] = r(float64(q-8) * d)
	}
	return out
}

// refScaleMin is the README's 6-bit unpacking, written with division and
// modulo instead of masks.
func refScaleMin(scales []byte, j int) (sc, m int) {
	if j < 4 {
		return int(scales[j]) % 64, int(scales[j+4]) % 64
	}
	sc = int(scales[j+4])%16 + int(scales[j-4])/64*16
	m = int(scales[j+4])/16 + int(scales[j])/64*16
	return sc, m
}

func refQ4K(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/256*144:]
		d := refHalf(binary.LittleEndian.Uint16(blk[0:]))
		dmin := refHalf(binary.LittleEndian.Uint16(blk[2:]))
		k := i % 256
		sub := k / 32 // sub-block 0..7
		chunk := k / 64
		b := blk[16+32*chunk+k%32]
		q := int(b) % 16
		if sub%2 == 1 {
			q = int(b) / 16
		}
		sc, m := refScaleMin(blk[4:16], sub)
		out[i] = r(r(r(d*float64(sc))*float64(q)) - r(dmin*float64(m)))
	}
	return out
}

func refQ6K(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/256*210:]
		d := refHalf(binary.LittleEndian.Uint16(blk[208:]))
		k := i % 256
		h, rest := k/128, k%128
		part, l := rest/32, rest%32 // q1..q4 is part 0..3
		lowByte := blk[64*h+l+32*(part%2)]
		low := int(lowByte) % 16
		if part >= 2 {
			low = int(lowByte) / 16
		}
		high := int(blk[128+32*h+l]) >> (2 * part) % 4
		q := low + 16*high - 32
		sc := float64(int8(blk[192+8*h+l/16+2*part]))
		out[i] = r(r(d*sc) * float64(q))
	}
	return out
}

// refQ5_0 follows ggml's dequantize_row_q5_0: the fifth bit of value j
// is bit j of the 32-bit qh (low nibbles) or bit j+16 (high nibbles).
func refQ5_0(src []byte, n int) []float64 {
	out := make([]float64, n)
	for b := 0; b < n/32; b++ {
		blk := src[b*22:]
		d := float32(refHalf(binary.LittleEndian.Uint16(blk)))
		qh := binary.LittleEndian.Uint32(blk[2:])
		for j := 0; j < 16; j++ {
			lo := int(blk[6+j]&15) | int(qh>>j&1)<<4
			hi := int(blk[6+j]>>4) | int(qh>>(j+16)&1)<<4
			out[b*32+j] = float64(float32(lo-16) * d)
			out[b*32+j+16] = float64(float32(hi-16) * d)
		}
	}
	return out
}

// refQ4_1 and refQ5_1: y = r(q·d) + m, rounded again (no fused add).
func refQ4_1(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/32*20:]
		d := refHalf(binary.LittleEndian.Uint16(blk))
		m := refHalf(binary.LittleEndian.Uint16(blk[2:]))
		j := i % 32
		q := int(blk[4+j%16]) % 16
		if j >= 16 {
			q = int(blk[4+j%16]) / 16
		}
		out[i] = r(r(float64(q)*d) + m)
	}
	return out
}

func refQ5_1(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/32*24:]
		d := refHalf(binary.LittleEndian.Uint16(blk))
		m := refHalf(binary.LittleEndian.Uint16(blk[2:]))
		j := i % 32
		q := int(blk[8+j%16]) % 16
		if j >= 16 {
			q = int(blk[8+j%16]) / 16
		}
		q += 16 * int(binary.LittleEndian.Uint32(blk[4:])>>j&1)
		out[i] = r(r(float64(q)*d) + m)
	}
	return out
}

// kq16 splits a value index of a Q2_K / Q3_K super-block into its half,
// its 2-bit field, the byte of the field and its 16-value sub-block.
func kq16(k int) (h, j, byteIdx, sub int) {
	h, j = k/128, k%128/32
	p, l := k%32/16, k%16
	return h, j, 32*h + 16*p + l, 8*h + 2*j + p
}

func refQ2K(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/256*84:]
		d := refHalf(binary.LittleEndian.Uint16(blk[80:]))
		dmin := refHalf(binary.LittleEndian.Uint16(blk[82:]))
		_, j, bi, sub := kq16(i % 256)
		q := int(blk[16+bi]) >> (2 * j) % 4
		sc, m := int(blk[sub])%16, int(blk[sub])/16
		out[i] = r(r(r(d*float64(sc))*float64(q)) - r(dmin*float64(m)))
	}
	return out
}

func refQ3K(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/256*110:]
		d := refHalf(binary.LittleEndian.Uint16(blk[108:]))
		h, j, bi, sub := kq16(i % 256)
		q := int(blk[32+bi]) >> (2 * j) % 4
		if int(blk[bi%32])>>(4*h+j)%2 == 0 {
			q -= 4
		}
		sc := blk[96:108]
		low := int(sc[sub%8]) >> (4 * (sub / 8)) % 16
		high := int(sc[8+sub%4]) >> (2 * (sub / 4)) % 4
		out[i] = r(r(d*float64(low+16*high-32)) * float64(q))
	}
	return out
}

func refQ5K(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/256*176:]
		d := refHalf(binary.LittleEndian.Uint16(blk[0:]))
		dmin := refHalf(binary.LittleEndian.Uint16(blk[2:]))
		k := i % 256
		sub, chunk := k/32, k/64
		b := blk[48+32*chunk+k%32]
		q := int(b) % 16
		if sub%2 == 1 {
			q = int(b) / 16
		}
		q += 16 * (int(blk[16+k%32]) >> sub % 2)
		sc, m := refScaleMin(blk[4:16], sub)
		out[i] = r(r(r(d*float64(sc))*float64(q)) - r(dmin*float64(m)))
	}
	return out
}

var refIQ4 = [16]float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func refIQ4NL(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/32*18:]
		d := refHalf(binary.LittleEndian.Uint16(blk))
		j := i % 32
		idx := int(blk[2+j%16]) % 16
		if j >= 16 {
			idx = int(blk[2+j%16]) / 16
		}
		out[i] = r(d * refIQ4[idx])
	}
	return out
}

func refIQ4XS(src []byte, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		blk := src[i/256*136:]
		d := refHalf(binary.LittleEndian.Uint16(blk))
		sh := int(binary.LittleEndian.Uint16(blk[2:]))
		k := i % 256
		sb, j := k/32, k%32
		ls := int(blk[4+sb/2])>>(4*(sb%2))%16 + 16*(sh>>(2*sb)%4)
		idx := int(blk[8+16*sb+j%16]) % 16
		if j >= 16 {
			idx = int(blk[8+16*sb+j%16]) / 16
		}
		out[i] = r(r(d*float64(ls-32)) * refIQ4[idx])
	}
	return out
}

func reference(t Type, src []byte, n int) []float64 {
	switch t {
	case TypeQ4_1:
		return refQ4_1(src, n)
	case TypeQ5_1:
		return refQ5_1(src, n)
	case TypeQ2_K:
		return refQ2K(src, n)
	case TypeQ3_K:
		return refQ3K(src, n)
	case TypeQ5_K:
		return refQ5K(src, n)
	case TypeIQ4_NL:
		return refIQ4NL(src, n)
	case TypeIQ4_XS:
		return refIQ4XS(src, n)
	case TypeQ5_0:
		return refQ5_0(src, n)
	case TypeQ8_0:
		return refQ8_0(src, n)
	case TypeQ4_0:
		return refQ4_0(src, n)
	case TypeQ4_K:
		return refQ4K(src, n)
	case TypeQ6_K:
		return refQ6K(src, n)
	case TypeF16:
		out := make([]float64, n)
		for i := range out {
			out[i] = refHalf(binary.LittleEndian.Uint16(src[2*i:]))
		}
		return out
	case TypeBF16:
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16))
		}
		return out
	case TypeF32:
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:])))
		}
		return out
	}
	panic("no reference for " + t.String())
}

// sameBits compares exactly: equal bits, or both NaN.
func sameBits(got float32, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(float64(got))
	}
	return math.Float32bits(got) == math.Float32bits(float32(want))
}

func checkAgainstReference(t *testing.T, label string, ty Type, src []byte, n int) {
	t.Helper()
	want := reference(ty, src, n)
	got := make([]float32, n)
	if err := Dequantize(ty, src, got); err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	bad := 0
	for i := range got {
		if !sameBits(got[i], want[i]) {
			if bad < 5 {
				t.Errorf("%s %s: [%d] = %g (%#08x), want %g", label, ty, i, got[i], math.Float32bits(got[i]), want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s %s: %d of %d values differ", label, ty, bad, n)
	}
}

// q4KBlock packs a Q4_K block from its parts, doing the inverse of the
// scale unpacking by hand.
func q4KBlock(d, dmin uint16, sc, m [8]uint8, qs [128]uint8) []byte {
	b := make([]byte, 144)
	binary.LittleEndian.PutUint16(b[0:], d)
	binary.LittleEndian.PutUint16(b[2:], dmin)
	s := b[4:16]
	for j := range 4 {
		s[j] = sc[j] | (sc[j+4]>>4)<<6
		s[j+4] = m[j] | (m[j+4]>>4)<<6
		s[j+8] = sc[j+4]&15 | (m[j+4]&15)<<4
	}
	copy(b[16:], qs[:])
	return b
}

func TestDequantizeHandBuilt(t *testing.T) {
	// Q8_0: d = 0.25, q = j-16; second block d = 1, q[0] = -128, q[1] = 127.
	q8 := make([]byte, 68)
	binary.LittleEndian.PutUint16(q8, f16bits(0.25))
	for j := range 32 {
		q8[2+j] = byte(int8(j - 16))
	}
	binary.LittleEndian.PutUint16(q8[34:], f16bits(1))
	q8[36], q8[37] = 0x80, 0x7f

	// Q4_0: d = 0.5, byte j has low nibble j and high nibble 15-j.
	q4 := make([]byte, 18)
	binary.LittleEndian.PutUint16(q4, f16bits(0.5))
	for j := range 16 {
		q4[2+j] = byte(j | (15-j)<<4)
	}

	// Q4_K: d = 2, dmin = 0.5, scales and mins using all six bits.
	var qs [128]uint8
	qs[0] = 0x5a
	qs[64] = 0x03
	qs[96] = 0xf0
	q4k := q4KBlock(f16bits(2), f16bits(0.5), [8]uint8{1, 2, 3, 4, 33, 47, 63, 60}, [8]uint8{0, 5, 10, 63, 17, 32, 48, 1}, qs)

	// Q6_K: d = 0.5.
	q6k := make([]byte, 210)
	ql, qh, sc := q6k[0:128], q6k[128:192], q6k[192:208]
	binary.LittleEndian.PutUint16(q6k[208:], f16bits(0.5))
	ql[0], qh[0] = 0x21, 0xe4 // qh bit pairs 0, 1, 2, 3
	ql[32] = 0x0f
	sc[0], sc[1], sc[2], sc[4], sc[6], sc[8] = 2, 4, 0xfd /* -3 */, 10, 0x80 /* -128 */, 1
	qh[16] = 0x03

	for _, tc := range []struct {
		t    Type
		src  []byte
		n    int
		spot map[int]float32
	}{
		{TypeQ8_0, q8, 64, map[int]float32{0: -4, 16: 0, 31: 3.75, 32: -128, 33: 127, 34: 0}},
		{TypeQ4_0, q4, 32, map[int]float32{0: -4, 15: 3.5, 16: 3.5, 31: -4, 8: 0}},
		{TypeQ4_K, q4k, 256, map[int]float32{
			0:   2*1*10 - 0.5*0, // low nibble of 0x5a, sub-block 0
			32:  2*2*5 - 0.5*5,  // high nibble, sub-block 1
			1:   0,              // q 0, m 0
			33:  -2.5,           // q 0, sub-block 1: -dmin*m
			64:  -5,             // sub-block 2: m 10
			96:  -31.5,          // sub-block 3: m 63
			128: 2*33*3 - 0.5*17,
			160: -16,             // sub-block 5: m 32
			192: -24,             // sub-block 6: q 0, m 48
			224: 2*60*15 - 0.5*1, // high nibble of 0xf0, sub-block 7
		}},
		{TypeQ6_K, q6k, 256, map[int]float32{
			0:   1 * -31,       // (1 | 0<<4) - 32, scale 2
			32:  -1.5 * -1,     // (15 | 1<<4) - 32, scale -3
			64:  5 * 2,         // (2 | 2<<4) - 32, scale 10
			96:  -64 * 16,      // (0 | 3<<4) - 32, scale -128
			16:  2 * 16,        // (0 | 3<<4) - 32, scale 4
			128: 0.5 * 1 * -32, // second half, scale 1
			1:   0.5 * 2 * -32,
		}},
	} {
		got := make([]float32, tc.n)
		if err := Dequantize(tc.t, tc.src, got); err != nil {
			t.Fatal(err)
		}
		for i, want := range tc.spot {
			if got[i] != want {
				t.Errorf("%s [%d] = %g, want %g", tc.t, i, got[i], want)
			}
		}
		checkAgainstReference(t, "hand-built", tc.t, tc.src, tc.n)
	}
}

func TestDequantizeRandomBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ty := range []Type{TypeQ8_0, TypeQ4_0, TypeQ4_K, TypeQ6_K, TypeQ5_0, TypeQ4_1, TypeQ5_1, TypeQ2_K, TypeQ3_K, TypeQ5_K, TypeIQ4_NL, TypeIQ4_XS, TypeF16, TypeBF16, TypeF32} {
		n := 4 * ty.BlockSize() * 8
		if ty.BlockSize() == 1 {
			n = 1024
		}
		src := make([]byte, n/ty.BlockSize()*ty.BlockBytes())
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		// Keep the scales finite and varied: replace each block's halves by
		// random finite halves with mantissa bits set (so the products round).
		bb := ty.BlockBytes()
		for b := 0; b < len(src)/bb && ty.BlockSize() > 1; b++ {
			blk := src[b*bb:]
			halves := map[Type][]int{TypeQ8_0: {0}, TypeQ4_0: {0}, TypeQ4_K: {0, 2}, TypeQ6_K: {208}, TypeQ5_0: {0},
				TypeQ4_1: {0, 2}, TypeQ5_1: {0, 2}, TypeQ2_K: {80, 82}, TypeQ3_K: {108}, TypeQ5_K: {0, 2}, TypeIQ4_NL: {0}, TypeIQ4_XS: {0}}[ty]
			for _, off := range halves {
				h := uint16(rng.IntN(0x7800)) | uint16(rng.IntN(2))<<15 // exponent < 30: finite
				binary.LittleEndian.PutUint16(blk[off:], h)
			}
		}
		checkAgainstReference(t, "random", ty, src, n)
	}
}

func TestHalfExhaustive(t *testing.T) {
	src := make([]byte, 2<<16)
	for h := range 1 << 16 {
		binary.LittleEndian.PutUint16(src[2*h:], uint16(h))
	}
	got := make([]float32, 1<<16)
	if err := Dequantize(TypeF16, src, got); err != nil {
		t.Fatal(err)
	}
	for h := range 1 << 16 {
		lib := float16.Frombits(uint16(h)).Float32()
		if !sameBits(got[h], refHalf(uint16(h))) || (!math.IsNaN(float64(lib)) && math.Float32bits(lib) != math.Float32bits(got[h])) {
			t.Fatalf("half %#04x = %g (%#08x), want %g (x448/float16 %#08x)", h, got[h], math.Float32bits(got[h]), refHalf(uint16(h)), math.Float32bits(lib))
		}
	}
	for h, want := range map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x3555: 0.333251953125, 0x0001: 5.960464477539063e-08, 0x0400: 6.103515625e-05, 0x7c00: float32(math.Inf(1))} {
		if got[h] != want {
			t.Errorf("half %#04x = %g, want %g", h, got[h], want)
		}
	}
	if !math.Signbit(float64(got[0x8000])) || got[0x8000] != 0 {
		t.Errorf("half 0x8000 = %g, want -0", got[0x8000])
	}
}

func TestBF16AndF32(t *testing.T) {
	bf := []byte{0x80, 0x3f, 0x49, 0xc0, 0x80, 0x7f, 0x01, 0x00}
	got := make([]float32, 4)
	if err := Dequantize(TypeBF16, bf, got); err != nil {
		t.Fatal(err)
	}
	want := []float32{1, -3.140625, float32(math.Inf(1)), math.Float32frombits(0x10000)}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bf16 [%d] = %g, want %g", i, got[i], want[i])
		}
	}
	f := binary.LittleEndian.AppendUint32(nil, math.Float32bits(math.Pi))
	f = binary.LittleEndian.AppendUint32(f, math.Float32bits(-1e-30))
	got = got[:2]
	if err := Dequantize(TypeF32, f, got); err != nil || got[0] != math.Pi || got[1] != -1e-30 {
		t.Errorf("f32 = %v, %v", got, err)
	}
}

func TestDequantizeErrors(t *testing.T) {
	for _, tc := range []struct {
		t    Type
		src  int
		dst  int
		want string
	}{
		{TypeQ8_1, 36, 32, "dequantizing Q8_1 is not supported (supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16)"},
		{Type(99), 100, 1, "Type(99) is not supported"},
		{TypeQ4_0, 18, 31, "31 values of Q4_0: not a multiple of the block size 32"},
		{TypeQ4_K, 144, 255, "not a multiple of the block size 256"},
		{TypeQ6_K, 209, 256, "256 values of Q6_K needs 210 bytes, got 209"},
		{TypeF16, 3, 2, "needs 4 bytes, got 3"},
	} {
		err := Dequantize(tc.t, make([]byte, tc.src), make([]float32, tc.dst))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.t, err, tc.want)
		}
	}
	// A longer src is fine: only the whole blocks needed are read.
	if err := Dequantize(TypeQ8_0, make([]byte, 100), make([]float32, 64)); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		t        Type
		src, dst int
	}{{TypeQ8_1, 36, 32}, {TypeQ8_0, 33, 32}, {TypeQ4_K, 144, 128}, {TypeF32, 7, 2}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("DequantizeRow(%s, %d bytes, %d values) did not panic", tc.t, tc.src, tc.dst)
				}
			}()
			DequantizeRow(tc.t, make([]byte, tc.src), make([]float32, tc.dst))
		}()
	}
}
