package quant

import (
	"encoding/binary"
	"math"

	"github.com/x448/float16"
)

// The quantizers below follow ggml's reference quantizers
// (quantize_row_*_ref in ggml-quants.c, the ones llama-quantize uses
// without an importance matrix), float32 arithmetic in their order, so
// that a file written here holds what llama.cpp would have written.

// QuantizeRow quantizes len(src) values (whole blocks) into dst, which
// holds len(src)/BlockSize blocks.
func QuantizeRow(f Format, src []float32, dst []byte) {
	bs, bb := f.BlockSize(), f.BlockBytes()
	for b := 0; b < len(src)/bs; b++ {
		x, y := src[b*bs:(b+1)*bs], dst[b*bb:(b+1)*bb]
		switch f {
		case Q8_0:
			quantizeQ8_0(x, y)
		case Q4_0:
			quantizeQ4_0(x, y)
		case Q5_0:
			quantizeQ5_0(x, y)
		case Q4_K:
			quantizeQ4K(x, y)
		case Q6_K:
			quantizeQ6K(x, y)
		case Q4_1:
			quantizeQ4_1(x, y)
		case Q5_1:
			quantizeQ5_1(x, y)
		case Q2_K:
			quantizeQ2K(x, y)
		case Q3_K:
			quantizeQ3K(x, y)
		case Q5_K:
			quantizeQ5K(x, y)
		case IQ4_NL:
			quantizeIQ4(x, y, false)
		case IQ4_XS:
			quantizeIQ4(x, y, true)
		default:
			panic("quant: QuantizeRow of " + f.String())
		}
	}
}

func putHalf(b []byte, v float32) { binary.LittleEndian.PutUint16(b, float16.Fromfloat32(v).Bits()) }

// nearestInt rounds to the nearest integer, ties to even, as ggml's
// nearest_int does (through the float32 mantissa); |v| <= 4194303.
func nearestInt(v float32) int {
	// float32(v): inlined into nearestInt(a*b), a*b + 12582912 must not
	// become one fused multiply-add (GOAMD64=v3 fuses).
	i := int32(math.Float32bits(float32(v) + 12582912))
	return int(i&0x007fffff) - 0x00400000
}

func quantizeQ8_0(x []float32, y []byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(y, d)
	for j, v := range x {
		y[2+j] = byte(int8(math.Round(float64(v * id)))) // roundf: half away from zero
	}
}

// absMax returns the value of largest magnitude (the first of equals).
func absMax(x []float32) float32 {
	var amax, m float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); amax < a {
			amax, m = a, v
		}
	}
	return m
}

func quantizeQ4_0(x []float32, y []byte) {
	d := absMax(x) / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(y, d)
	for j := 0; j < 16; j++ {
		x0, x1 := x[j]*id, x[16+j]*id
		y[2+j] = byte(min(15, int8(x0+8.5))) | byte(min(15, int8(x1+8.5)))<<4
	}
}

func quantizeQ5_0(x []float32, y []byte) {
	d := absMax(x) / -16
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(y, d)
	var qh uint32
	for j := 0; j < 16; j++ {
		xi0 := uint32(min(31, int8(x[j]*id+16.5)))
		xi1 := uint32(min(31, int8(x[16+j]*id+16.5)))
		y[6+j] = byte(xi0&15 | (xi1&15)<<4)
		qh |= (xi0 & 0x10) >> 4 << j
		qh |= (xi1 & 0x10) >> 4 << (j + 16)
	}
	binary.LittleEndian.PutUint32(y[2:], qh)
}

// groupMaxEps is ggml's GROUP_MAX_EPS: a group below it is all zeros.
const groupMaxEps = 1e-15

// makeQXQuants is ggml's make_qx_quants with rmse_type 1 and no
// importance weights: the signed scale of n values quantized to
// [-nmax, nmax-1], their levels (offset by nmax) in L.
func makeQXQuants(nmax int, x []float32, L []int8) float32 {
	var maxv, amax float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, maxv = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	iscale := -float32(nmax) / maxv
	var sumlx, suml2 float32
	for i, v := range x {
		l := max(-nmax, min(nmax-1, nearestInt(iscale*v)))
		L[i] = int8(l + nmax)
		w := v * v
		sumlx += float32(w * v * float32(l))
		suml2 += float32(w * float32(l) * float32(l))
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + 0.1*float32(is)) / maxv
		sumlx, suml2 = 0, 0
		for _, v := range x {
			l := max(-nmax, min(nmax-1, nearestInt(iscale*v)))
			w := v * v
			sumlx += float32(w * v * float32(l))
			suml2 += float32(w * float32(l) * float32(l))
		}
		if suml2 > 0 && sumlx*sumlx > best*suml2 {
			for i, v := range x {
				L[i] = int8(nmax + max(-nmax, min(nmax-1, nearestInt(iscale*v))))
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

func quantizeQ6K(x []float32, y []byte) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbsScale float32
	for ib := 0; ib < 16; ib++ {
		s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
		scales[ib] = s
		if a := float32(math.Abs(float64(s))); a > maxAbsScale {
			maxAbsScale, maxScale = a, s
		}
	}
	if maxAbsScale < groupMaxEps {
		clear(y)
		return
	}
	iscale := -128 / maxScale
	putHalf(y[208:], 1/iscale)
	sc := y[192:208]
	for ib := range scales {
		sc[ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
	}
	d0 := float16.Frombits(binary.LittleEndian.Uint16(y[208:])).Float32()
	for j := 0; j < 16; j++ {
		d := d0 * float32(int8(sc[j]))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			l := max(-32, min(31, nearestInt(x[16*j+ii]/d)))
			L[16*j+ii] = int8(l + 32)
		}
	}
	ql, qh := y[0:128], y[128:192]
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			q1, q2, q3, q4 := byte(L[j+l]), byte(L[j+l+32]), byte(L[j+l+64]), byte(L[j+l+96])
			ql[l] = q1&15 | (q3&15)<<4
			ql[l+32] = q2&15 | (q4&15)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
		ql, qh = ql[64:], qh[32:]
	}
}

// makeQKX2Quants is ggml's make_qkx2_quants: an unsigned scale and a min
// for n values quantized to [0, nmax] by weighted least squares over
// nstep+1 candidate scales, the error measured as w·|diff| (useMad) or
// w·diff²; it returns the scale and -min. Sums round as C's
// left-to-right w*l*l and w*(diff*diff).
func makeQKX2Quants(nmax int, x, weights []float32, L, aux []uint8, rmin, rdelta float32, nstep int, useMad bool) (scale, theMin float32) {
	minv, maxv := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < len(x); i++ {
		minv, maxv = min(minv, x[i]), max(maxv, x[i])
		sumW += weights[i]
		sumX += float32(weights[i] * x[i])
	}
	minv = min(minv, 0)
	if maxv == minv {
		clear(L)
		return 0, -minv
	}
	errOf := func(diff float32) float32 {
		if useMad {
			return float32(math.Abs(float64(diff)))
		}
		return diff * diff
	}
	iscale := float32(nmax) / (maxv - minv)
	scale = 1 / iscale
	var bestErr float32
	for i, v := range x {
		L[i] = uint8(max(0, min(nmax, nearestInt(iscale*(v-minv)))))
		diff := float32(scale*float32(L[i])) + minv - v
		bestErr += float32(weights[i] * errOf(diff))
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + float32(nmax)) / (maxv - minv)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := max(0, min(nmax, nearestInt(iscale*(v-minv))))
			aux[i] = uint8(l)
			w := weights[i]
			sumL += float32(w * float32(l))
			sumL2 += float32(w * float32(l) * float32(l))
			sumXL += float32(w * float32(l) * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var cur float32
			for i, v := range x {
				diff := float32(thisScale*float32(aux[i])) + thisMin - v
				cur += float32(weights[i] * errOf(diff))
			}
			if cur < bestErr {
				copy(L, aux[:len(x)])
				bestErr, scale, minv = cur, thisScale, thisMin
			}
		}
	}
	return scale, -minv
}

// quantizeKScaleMin is the part of Q4_K's and Q5_K's reference
// quantizers they share (ggml's quantize_row_q4_K_ref and _q5_K_ref): each
// sub-block's scale and min searched for levels 0..nmax, both packed as
// 6-bit values beside the f16 d and dmin in y[0:16], and every value's
// level in L from the rounded scales.
func quantizeKScaleMin(x []float32, y []byte, L *[256]uint8, nmax int, rmin float32, nstep int) {
	var aux [32]uint8
	var weights [32]float32
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + float32(math.Abs(float64(v)))
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], aux[:], rmin, 0.1, nstep, false)
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := y[4:16]
	clear(sc)
	for j := 0; j < 8; j++ {
		ls := byte(min(63, nearestInt(invScale*scales[j])))
		lm := byte(min(63, nearestInt(invMin*mins[j])))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&15 | (lm&15)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putHalf(y[0:], maxScale/63)
	putHalf(y[2:], maxMin/63)
	d0, dmin0 := half(y[0:]), half(y[2:])
	for j := 0; j < 8; j++ {
		s, m := scaleMinK4(j, sc)
		d := d0 * float32(s)
		if d == 0 {
			continue
		}
		dm := dmin0 * float32(m)
		for ii := 0; ii < 32; ii++ {
			L[32*j+ii] = uint8(max(0, min(nmax, nearestInt((x[32*j+ii]+dm)/d))))
		}
	}
}

func quantizeQ4K(x []float32, y []byte) {
	var L [256]uint8
	quantizeKScaleMin(x, y, &L, 15, -1, 20)
	q := y[16:144]
	for j := 0; j < 256; j += 64 {
		for l := 0; l < 32; l++ {
			q[l] = L[j+l] | L[j+l+32]<<4
		}
		q = q[32:]
	}
}
