package quant

import (
	"encoding/binary"
	"math"
)

// Reference quantizers of the formats in lowbit.go: ggml-quants.c's
// quantize_row_q4_1_ref, _q5_1_ref, _q2_K_ref, _q3_K_ref, _q5_K_ref and,
// for IQ4_NL and IQ4_XS (which have no plain reference llama-quantize
// uses), quantize_iq4_nl / quantize_iq4_xs without an importance matrix
// (quantize_row_iq4_nl_impl with ntry 7). Float32 in C's order: a*b*c is
// (a*b)*c.

// minMax is the smallest and largest value of x.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func quantizeQ4_1(x []float32, y []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 15
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(y, d)
	putHalf(y[2:], lo)
	for j := 0; j < 16; j++ {
		x0, x1 := (x[j]-lo)*id, (x[16+j]-lo)*id
		y[4+j] = byte(min(15, int8(x0+0.5))) | byte(min(15, int8(x1+0.5)))<<4
	}
}

func quantizeQ5_1(x []float32, y []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 31
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(y, d)
	putHalf(y[2:], lo)
	var qh uint32
	for j := 0; j < 16; j++ {
		xi0 := uint32(uint8((x[j]-lo)*id + 0.5))
		xi1 := uint32(uint8((x[16+j]-lo)*id + 0.5))
		y[8+j] = byte(xi0&15 | (xi1&15)<<4)
		qh |= (xi0 & 0x10) >> 4 << j
		qh |= (xi1 & 0x10) >> 4 << (j + 16)
	}
	binary.LittleEndian.PutUint32(y[4:], qh)
}

// pack2Bits stores 256 2-bit levels as Q2_K and Q3_K do: byte 32h + l
// holds values 128h + l + 32k in bits 2k.
func pack2Bits(L []uint8, qs []byte) {
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

func quantizeQ2K(x []float32, y []byte) {
	var L [256]uint8
	var aux [16]uint8
	var weights [16]float32
	var scales, mins [16]float32
	var maxScale, maxMin float32
	for j := 0; j < 16; j++ {
		xs := x[16*j : 16*j+16]
		for l, v := range xs {
			weights[l] = float32(math.Abs(float64(v)))
		}
		scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], aux[:], -0.5, 0.1, 15, true)
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	sc := y[0:16]
	clear(sc)
	if maxScale > 0 {
		iscale := 15 / maxScale
		for j := range sc {
			sc[j] = byte(nearestInt(iscale * scales[j]))
		}
		putHalf(y[80:], maxScale/15)
	} else {
		putHalf(y[80:], 0)
	}
	if maxMin > 0 {
		iscale := 15 / maxMin
		for j := range sc {
			sc[j] |= byte(nearestInt(iscale*mins[j]) << 4)
		}
		putHalf(y[82:], maxMin/15)
	} else {
		putHalf(y[82:], 0)
	}
	d0, dmin0 := half(y[80:]), half(y[82:])
	for j := 0; j < 16; j++ {
		d := d0 * float32(sc[j]&15)
		if d == 0 {
			continue
		}
		dm := dmin0 * float32(sc[j]>>4)
		for ii := 0; ii < 16; ii++ {
			L[16*j+ii] = uint8(max(0, min(3, nearestInt((x[16*j+ii]+dm)/d))))
		}
	}
	pack2Bits(L[:], y[16:80])
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse: a signed scale for
// n values in [-nmax, nmax-1], refined by up to 5 passes of single-value
// changes that raise Σwxl²/Σwl² (w = x²); levels offset by nmax in L.
func makeQ3Quants(nmax int, x []float32, L []int8) float32 {
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
	iscale := float32(-nmax) / maxv
	var sumlx, suml2 float32
	for i, v := range x {
		l := max(-nmax, min(nmax-1, nearestInt(iscale*v)))
		L[i] = int8(l)
		w := v * v
		sumlx += float32(w * v * float32(l))
		suml2 += float32(w * float32(l) * float32(l))
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i, v := range x {
			w := v * v
			li := float32(L[i])
			slx := sumlx - float32(w*v*li)
			if slx > 0 {
				sl2 := suml2 - float32(w*li*li)
				nl := max(-nmax, min(nmax-1, nearestInt(v*sl2/slx)))
				if nl != int(L[i]) {
					fl := float32(nl)
					slx += float32(w * v * fl)
					sl2 += float32(w * fl * fl)
					if sl2 > 0 && slx*slx*suml2 > sumlx*sumlx*sl2 {
						L[i], sumlx, suml2 = int8(nl), slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range L {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

func quantizeQ3K(x []float32, y []byte) {
	var L [256]int8
	var scales [16]float32
	var maxScale, amax float32
	for j := 0; j < 16; j++ {
		scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
		if a := float32(math.Abs(float64(scales[j]))); a > amax {
			amax, maxScale = a, scales[j]
		}
	}
	hm, qs, sc := y[0:32], y[32:96], y[96:108]
	clear(sc)
	if maxScale != 0 {
		iscale := -32 / maxScale
		for j := 0; j < 16; j++ {
			l := byte(max(-32, min(31, int(int8(nearestInt(iscale*scales[j]))))) + 32)
			if j < 8 {
				sc[j] = l & 15
			} else {
				sc[j-8] |= (l & 15) << 4
			}
			sc[8+j%4] |= (l >> 4) << (2 * (j / 4))
		}
		putHalf(y[108:], 1/iscale)
	} else {
		putHalf(y[108:], 0)
	}
	d0 := half(y[108:])
	for j := 0; j < 16; j++ {
		d := d0 * float32(Q3KScale(j, sc))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			L[16*j+ii] = int8(max(-4, min(3, nearestInt(x[16*j+ii]/d))) + 4)
		}
	}
	// Levels 4..7 keep their high bit in hmask (value j: byte j%32, bit
	// j/32) and store level-4 in the 2-bit field.
	clear(hm)
	var U [256]uint8
	for j, l := range L {
		if l > 3 {
			hm[j%32] |= 1 << (j / 32)
			l -= 4
		}
		U[j] = uint8(l)
	}
	pack2Bits(U[:], qs)
}

func quantizeQ5K(x []float32, y []byte) {
	var L [256]uint8
	quantizeKScaleMin(x, y, &L, 31, -0.5, 15)
	qh, ql := y[16:48], y[48:176]
	clear(qh)
	for c := 0; c < 4; c++ {
		for j := 0; j < 32; j++ {
			l1, l2 := L[64*c+j], L[64*c+32+j]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= 1 << (2 * c)
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= 2 << (2 * c)
			}
			ql[32*c+j] = l1 | l2<<4
		}
	}
}

// bestIndexIQ4 is ggml's best_index_int8 over kvaluesIQ4NL: the level
// nearest x, the upper one on a tie.
func bestIndexIQ4(x float32) uint8 {
	K := &kvaluesIQ4NL
	if x <= float32(K[0]) {
		return 0
	}
	if x >= float32(K[15]) {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(K[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-float32(K[mu-1]) < float32(K[mu])-x {
		return uint8(mu - 1)
	}
	return uint8(mu)
}

// quantizeIQ4 is quantize_row_iq4_nl_impl with no importance weights
// (w = x²) and ntry 7: per 32 values the scale that best fits the table
// among 15 trial scales; IQ4_XS (xs) then stores 6-bit sub-block scales
// under one f16 d, IQ4_NL the block's scale as its d.
func quantizeIQ4(x []float32, y []byte, xs bool) {
	const ntry = 7
	nb := len(x) / 32
	var L [256]uint8
	var scales [8]float32
	var maxScale, amaxScale float32
	k0 := float32(kvaluesIQ4NL[0])
	for ib := 0; ib < nb; ib++ {
		xb, Lb := x[32*ib:32*ib+32], L[32*ib:32*ib+32]
		var amax, maxv float32
		for _, v := range xb {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, maxv = a, v
			}
		}
		if amax < groupMaxEps {
			scales[ib] = 0
			continue
		}
		d := -maxv / k0
		id := 1 / d
		var sumqx, sumq2 float32
		for j, v := range xb {
			l := bestIndexIQ4(id * v)
			Lb[j] = l
			q, w := float32(kvaluesIQ4NL[l]), v*v
			sumqx += float32(w * q * v)
			sumq2 += float32(w * q * q)
		}
		d = sumqx / sumq2
		best := d * sumqx
		for itry := -ntry; itry <= ntry; itry++ {
			id = (float32(itry) + k0) / maxv
			sumqx, sumq2 = 0, 0
			for _, v := range xb {
				q, w := float32(kvaluesIQ4NL[bestIndexIQ4(id*v)]), v*v
				sumqx += float32(w * q * v)
				sumq2 += float32(w * q * q)
			}
			if sumq2 > 0 && sumqx*sumqx > best*sumq2 {
				d = sumqx / sumq2
				best = d * sumqx
			}
		}
		scales[ib] = d
		if a := float32(math.Abs(float64(d))); a > amaxScale {
			amaxScale, maxScale = a, d
		}
	}
	var q4 []byte
	if xs {
		q4 = y[8:136]
		sh, sl := uint16(0), y[4:8]
		clear(sl)
		d := -maxScale / 32
		putHalf(y, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for ib := 0; ib < nb; ib++ {
			l := max(-32, min(31, nearestInt(id*scales[ib])))
			dl := d * float32(l)
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			for j, v := range x[32*ib : 32*ib+32] {
				L[32*ib+j] = bestIndexIQ4(idl * v)
			}
			l += 32
			sl[ib/2] |= byte(l&15) << (4 * (ib % 2))
			sh |= uint16(l>>4) << (2 * (ib % 8))
		}
		binary.LittleEndian.PutUint16(y[2:], sh)
	} else {
		q4 = y[2:18]
		putHalf(y, scales[0])
		var id float32
		if scales[0] != 0 {
			id = 1 / scales[0]
		}
		for j, v := range x[:32] {
			L[j] = bestIndexIQ4(id * v)
		}
	}
	for i := 0; i < nb; i++ {
		for j := 0; j < 16; j++ {
			q4[16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}
