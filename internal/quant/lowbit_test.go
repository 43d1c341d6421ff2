package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// The tests below decode the formats of lowbit.go independently, in
// float64, from the block layouts as the GGUF README documents them
// (value by value, not chunk by chunk as the code under test does).

// f16 decodes IEEE half bits without the float16 package.
func f16(b []byte) float64 {
	h := binary.LittleEndian.Uint16(b)
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&31), float64(h&1023)
	if e == 0 {
		return sign * m * math.Pow(2, -24)
	}
	return sign * (1 + m/1024) * math.Pow(2, float64(e-15))
}

var iq4Levels = []float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// decode64 decodes one block of f, value by value. It also returns, per
// value, the magnitudes of the terms a float32 evaluation rounds.
func decode64(f Format, blk []byte) (y, mag []float64) {
	n := f.BlockSize()
	y, mag = make([]float64, n), make([]float64, n)
	for v := 0; v < n; v++ {
		var a, b float64 // y = a + b
		switch f {
		case Q4_1, Q5_1:
			d, m := f16(blk), f16(blk[2:])
			j, hiNib := v%16, v >= 16
			qs := blk[4:]
			q := 0
			if f == Q5_1 {
				qs = blk[8:]
				if binary.LittleEndian.Uint32(blk[4:])>>v&1 == 1 {
					q = 16
				}
			}
			if hiNib {
				q += int(qs[j] >> 4)
			} else {
				q += int(qs[j] & 15)
			}
			a, b = float64(q)*d, m
		case IQ4_NL:
			j := v % 16
			idx := blk[2+j] & 15
			if v >= 16 {
				idx = blk[2+j] >> 4
			}
			a = f16(blk) * iq4Levels[idx]
		case Q2_K, Q3_K:
			h, j, p, l := v/128, v%128/32, v%32/16, v%16
			i := 8*h + 2*j + p
			if f == Q2_K {
				q := float64(blk[16+32*h+16*p+l] >> (2 * j) & 3)
				sc := blk[i]
				a, b = f16(blk[80:])*float64(sc&15)*q, -f16(blk[82:])*float64(sc>>4)
			} else {
				q := float64(blk[32+32*h+16*p+l] >> (2 * j) & 3)
				if blk[16*p+l]>>(4*h+j)&1 == 0 {
					q -= 4
				}
				s := blk[96:108]
				sc := int(s[i%8]>>(4*(i/8))&15|(s[8+i%4]>>(2*(i/4))&3)<<4) - 32
				a = f16(blk[108:]) * float64(sc) * q
			}
		case Q5_K:
			c, hiNib, l := v/64, v%64 >= 32, v%32
			sub := 2*c + btoi(hiNib)
			s := blk[4:16]
			var sc, m int
			if sub < 4 {
				sc, m = int(s[sub]&63), int(s[sub+4]&63)
			} else {
				sc, m = int(s[sub+4]&15|s[sub-4]>>6<<4), int(s[sub+4]>>4|s[sub]>>6<<4)
			}
			q := int(blk[48+32*c+l] & 15)
			if hiNib {
				q = int(blk[48+32*c+l] >> 4)
			}
			q += 16 * int(blk[16+l]>>sub&1)
			a, b = f16(blk)*float64(sc)*float64(q), -f16(blk[2:])*float64(m)
		case IQ4_XS:
			sb, j := v/32, v%32
			sh := binary.LittleEndian.Uint16(blk[2:])
			ls := int(blk[4+sb/2]>>(4*(sb%2))&15) | int(sh>>(2*sb)&3)<<4
			q := blk[8+16*sb+j%16]
			idx := q & 15
			if j >= 16 {
				idx = q >> 4
			}
			a = f16(blk) * float64(ls-32) * iq4Levels[idx]
		}
		y[v], mag[v] = a+b, math.Abs(a)+math.Abs(b)
	}
	return y, mag
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

var lowbitFormats = []Format{Q4_1, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS}

// halfOffsets are the byte offsets of each format's f16 fields.
var halfOffsets = map[Format][]int{Q4_1: {0, 2}, Q5_1: {0, 2}, Q2_K: {80, 82}, Q3_K: {108}, Q5_K: {0, 2}, IQ4_NL: {0}, IQ4_XS: {0}}

// randomBlocks fills n values' worth of blocks with random bytes, the f16
// fields set to finite values of any exponent (a random half can be Inf
// or NaN).
func randomBlocks(r *rand.Rand, f Format, n int) []byte {
	rb, _ := f.RowBytes(n)
	src := make([]byte, rb)
	for i := range src {
		src[i] = byte(r.IntN(256))
	}
	for b := 0; b < n/f.BlockSize(); b++ {
		for _, o := range halfOffsets[f] {
			h := uint16(r.IntN(0x7c00)) | uint16(r.IntN(2))<<15
			binary.LittleEndian.PutUint16(src[b*f.BlockBytes()+o:], h)
		}
	}
	return src
}

// TestDequantizeLowbitRandom: on random blocks every value is within the
// float32 rounding of the float64 decoding: at most 3 roundings (d·sc,
// ·q, then ± the min term, itself rounded once), each within 2^-24 of the
// magnitude of what it rounds, so |got - want| <= 3·2^-24·(|a| + |b|).
func TestDequantizeLowbitRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, f := range lowbitFormats {
		const n = 16 * 256
		src := randomBlocks(r, f, n)
		got := make([]float32, n)
		DequantizeRow(f, src, got)
		for b := 0; b < n/f.BlockSize(); b++ {
			want, mag := decode64(f, src[b*f.BlockBytes():(b+1)*f.BlockBytes()])
			for i, w := range want {
				g := float64(got[b*f.BlockSize()+i])
				if d := math.Abs(g - w); d > 3*math.Pow(2, -24)*mag[i] {
					t.Fatalf("%s block %d value %d: %g, want %g (diff %g)", f, b, i, g, w, d)
				}
			}
		}
	}
}

// TestDequantizeLowbitTraps builds blocks whose values are exact in
// float32 (power-of-two d, small integers) around each format's traps,
// and checks them value for value, plus hand-picked values.
func TestDequantizeLowbitTraps(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	one, half, quarter := []byte{0x00, 0x3c}, []byte{0x00, 0x38}, []byte{0x00, 0x34}
	blocks := map[Format][]byte{}
	for _, f := range lowbitFormats {
		blk := make([]byte, f.BlockBytes())
		for i := range blk {
			blk[i] = byte(r.IntN(256))
		}
		blocks[f] = blk
	}
	// Q4_1 / Q5_1: d = 0.5, m = -3 (0xc200).
	for _, f := range []Format{Q4_1, Q5_1} {
		copy(blocks[f], half)
		copy(blocks[f][2:], []byte{0x00, 0xc2})
	}
	// Q5_1: only value 5 and value 16+3 have their fifth bit.
	binary.LittleEndian.PutUint32(blocks[Q5_1][4:], 1<<5|1<<19)
	blocks[Q5_1][8+5], blocks[Q5_1][8+3] = 0x00, 0x00
	// Q2_K: d and dmin last (1, 0.5); scales[i] = i | (15-i)<<4; the
	// first 2-bit field of byte 16 is 3.
	copy(blocks[Q2_K][80:], one)
	copy(blocks[Q2_K][82:], half)
	for i := 0; i < 16; i++ {
		blocks[Q2_K][i] = byte(i) | byte(15-i)<<4
	}
	blocks[Q2_K][16] = 0x03
	// Q3_K: d last (1); every sub-block scale 1 (encoded 33: low nibble 1
	// in bytes 0..7, high bits 2 in bytes 8..11); qs 0, hmask bit 0 of
	// byte 0 and bit 7 of byte 31 set.
	q3 := blocks[Q3_K]
	clear(q3)
	for i := 0; i < 8; i++ {
		q3[96+i] = 0x11
	}
	for i := 8; i < 12; i++ {
		q3[96+i] = 0xaa
	}
	q3[0], q3[31] = 0x01, 0x80
	copy(q3[108:], one)
	// Q5_K: d = 0.25, dmin = 1.
	copy(blocks[Q5_K], quarter)
	copy(blocks[Q5_K][2:], one)
	// IQ4_NL: d = 2; index j in nibble j.
	copy(blocks[IQ4_NL], []byte{0x00, 0x40})
	for j := 0; j < 16; j++ {
		blocks[IQ4_NL][2+j] = byte(j) | byte(15-j)<<4
	}
	// IQ4_XS: d = 0.25; sub-block 3's scale has low nibble 0xe (high
	// nibble of scales_l[1]) and high bits 01 (bits 6-7 of scales_h):
	// ls = 0x1e = 30, dl = 0.25·(30-32) = -0.5.
	xs := blocks[IQ4_XS]
	copy(xs, quarter)
	binary.LittleEndian.PutUint16(xs[2:], 0b01<<6)
	xs[4+1] = 0xe0
	xs[8+16*3] = 0x0f // value 96: index 15 (113), value 112: index 0 (-127)

	for _, f := range lowbitFormats {
		blk := blocks[f]
		got := make([]float32, f.BlockSize())
		DequantizeRow(f, blk, got)
		want, _ := decode64(f, blk)
		for i, w := range want {
			if float64(got[i]) != w {
				t.Errorf("%s value %d: %g, want %g", f, i, got[i], w)
			}
		}
	}
	pick := func(f Format, i int) float32 {
		y := make([]float32, f.BlockSize())
		DequantizeRow(f, blocks[f], y)
		return y[i]
	}
	for _, c := range []struct {
		f    Format
		i    int
		want float32
		why  string
	}{
		{Q5_1, 5, 16*0.5 - 3, "fifth bit of value 5 (qh bit 5)"},
		{Q5_1, 19, 16*0.5 - 3, "fifth bit of value 19 (qh bit 19, high nibble of qs[3])"},
		{Q2_K, 0, 1*0*3 - 0.5*15, "sub-block 0: scale 0, min 15, from scales[0]; d and dmin at the end"},
		{Q2_K, 16, 1*1*float32(blocks[Q2_K][32]&3) - 0.5*14, "sub-block 1 uses qs[16..31]"},
		{Q3_K, 0, 0, "hmask set: no -4"},
		{Q3_K, 1, -4, "hmask clear: -4"},
		{Q3_K, 255, 0, "value 255: hmask[31] bit 7"},
		{Q3_K, 254, -4, "value 254: hmask[30] bit 7 clear"},
		{IQ4_NL, 3, 2 * -65, "table, not linear: K[3] = -65"},
		{IQ4_NL, 16 + 3, 2 * 53, "high nibble 12: K[12] = 53"},
		{IQ4_XS, 96, -0.5 * 113, "split scale: sub-block 3 = -2·d"},
		{IQ4_XS, 112, -0.5 * -127, "sub-block 3's high nibbles"},
	} {
		if g := pick(c.f, c.i); g != c.want {
			t.Errorf("%s value %d = %g, want %g: %s", c.f, c.i, g, c.want, c.why)
		}
	}
}

// TestDotActsLowbit: the fast-mode product equals the float64 product of
// the dequantized weights with the dequantized activations (q·d) within
// float32 summation of nb block terms, each rounded a few times:
// (nb+4)·2^-24·Σ|w·x̂|; for Q8_1's min term also the f16 rounding of
// s = f16(d·Σq) against the stored f16 d: |m|·|d·Σq|·2^-10 per block.
func TestDotActsLowbit(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, f := range lowbitFormats {
		const n = 4 * 256
		for trial := 0; trial < 20; trial++ {
			// Weights quantized from random values: realistic scales.
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			rb, _ := f.RowBytes(n)
			w := make([]byte, rb)
			QuantizeRow(f, x, w)
			wf := make([]float32, n)
			DequantizeRow(f, w, wf)
			a := make([]float32, n)
			for i := range a {
				a[i] = float32(r.NormFloat64() * 3)
			}
			bs := ActBlock(f)
			q, d, sums := make([]int8, n), make([]float32, n/bs*ActScales(f)), make([]int16, n/16)
			QuantizeActs(f, a, q, d, sums)
			var want, abs, extra float64
			for b := 0; b < n/bs; b++ {
				dx := float64(d[b*ActScales(f)])
				var sq int
				for j := b * bs; j < (b+1)*bs; j++ {
					p := float64(wf[j]) * float64(q[j]) * dx
					want += p
					abs += math.Abs(p)
					sq += int(q[j])
				}
				if ActScales(f) == 2 {
					m := math.Abs(f16(w[b*f.BlockBytes()+2:]))
					extra += m * math.Abs(dx*float64(sq)) * math.Pow(2, -10)
				}
			}
			got := float64(DotActs(f, w, q, d, sums))
			bound := float64(n/bs+4)*math.Pow(2, -24)*abs + extra
			if math.Abs(got-want) > bound {
				t.Fatalf("%s trial %d: DotActs %g, dequantized dot %g, diff %g > %g", f, trial, got, want, math.Abs(got-want), bound)
			}
		}
	}
}

// TestQ8_1Sums: Q4_1 / Q5_1 activations carry per block the f16 scale
// and s = f16(d·Σq) with d = amax/127 before its f16 rounding.
func TestQ8_1Sums(t *testing.T) {
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i%7) - 2.3
	}
	x[9] = 7.77
	q, d := make([]int8, 32), make([]float32, 2)
	QuantizeActs(Q4_1, x, q, d, nil)
	raw := float32(7.77) / 127
	var s int
	for j, v := range x {
		want := int8(math.RoundToEven(float64(v * (127 / float32(7.77)))))
		if q[j] != want {
			t.Fatalf("q[%d] = %d, want %d", j, q[j], want)
		}
		s += int(want)
	}
	var buf [2]byte
	putHalf(buf[:], raw)
	if d[0] != float32(f16(buf[:])) {
		t.Errorf("d = %g, want f16(%g) = %g", d[0], raw, f16(buf[:]))
	}
	putHalf(buf[:], raw*float32(s))
	if d[1] != float32(f16(buf[:])) {
		t.Errorf("s = %g, want f16(%g·%d) = %g", d[1], raw, s, f16(buf[:]))
	}
	if d[1] == d[0]*float32(s) {
		t.Logf("s happens to equal f16 d·Σq here")
	}
}
