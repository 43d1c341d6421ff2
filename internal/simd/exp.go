package simd

import "math"

// Exp32 is e^x in float32 (Cephes' expf: n·ln2 split off, a degree-6
// polynomial on the rest, within 2 ulp), three times faster than going
// through float64 math.Exp, which the gated MLPs call for every unit.
func Exp32(x float32) float32 {
	switch {
	case x > 88.72283:
		return float32(math.Inf(1))
	case x < -87.33654:
		return 0
	case x != x:
		return x
	}
	n := float32(int32(x*1.442695041 + copysign32(0.5, x)))
	r := x - n*0.693359375 + n*2.12194440e-4
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	y := p*r*r + r + 1
	if n > 127 { // 2^128 is not a float32: scale in two steps
		return 2 * y * math.Float32frombits(uint32(int32(n)+126)<<23)
	}
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}

func copysign32(a, sign float32) float32 {
	if sign < 0 {
		return -a
	}
	return a
}

// ExpShift sets x[i] = Exp32(x[i] - m) and returns the sum of the results
// in float64: a softmax's numerators, shifted by its maximum m (so every
// x[i] <= m). With AVX-512 or AVX2 the runs of 16 go through
// expShiftAVX512 or expShiftAVX2, which compute exactly what Exp32 does
// lane by lane; only the sum's order differs.
func ExpShift(x []float32, m float32) float64 {
	var sum float64
	i := 0
	if m == m && !math.IsInf(float64(m), 0) {
		if n := len(x) &^ 15; n > 0 && haveExpShift() {
			sum, i = asmExpShift(&x[0], n, m), n
		}
	}
	for ; i < len(x); i++ {
		e := Exp32(x[i] - m)
		x[i] = e
		sum += float64(e)
	}
	return sum
}

// Max is the largest of x (not empty); -Inf and NaN as Go's max gives
// them, except that a NaN may give another element with AVX-512 (a
// softmax over x is NaN throughout either way).
func Max(x []float32) float32 {
	m := x[0]
	i := 0
	if n := len(x) &^ 15; n > 0 && haveExpShift() {
		m, i = asmMax(&x[0], n), n
	}
	for _, v := range x[i:] {
		m = max(m, v)
	}
	return m
}

// ScaleF64 sets x[i] = float32(float64(x[i]) * s): a softmax's
// normalization, each product rounded once from float64.
func ScaleF64(x []float32, s float64) {
	i := 0
	if n := len(x) &^ 7; n > 0 && haveScaleF64() {
		asmScaleF64(&x[0], n, s)
		i = n
	}
	for j, v := range x[i:] {
		x[i+j] = float32(float64(v) * s)
	}
}

// SiLU is x·sigmoid(x) = x / (1 + e^-x), with Exp32.
func SiLU(x float32) float32 { return x / (1 + Exp32(-x)) }

// SiLUMul sets out[i] = SiLU(x[i]) · u[i], or SiLU(x[i]) when u is nil,
// for i < len(out): a gated MLP's activation. With AVX-512 or AVX2 the
// runs of 16 go through siluMulAVX512 or siluMulAVX2, which give the same
// float32 as SiLU lane by lane.
func SiLUMul(out, x, u []float32) {
	n := len(out)
	x = x[:n]
	i := 0
	if m := n &^ 15; m > 0 && haveExpShift() {
		if u == nil {
			asmSiLU(&x[0], nil, &out[0], m)
		} else {
			asmSiLU(&x[0], &u[:n][0], &out[0], m)
		}
		i = m
	}
	if u == nil {
		for ; i < n; i++ {
			out[i] = SiLU(x[i])
		}
		return
	}
	u = u[:n]
	for ; i < n; i++ {
		out[i] = SiLU(x[i]) * u[i]
	}
}
