package quant

import "encoding/binary"

// The formats below follow ggml-quants.c's dequantize_row_q4_1, _q5_1,
// _q2_K, _q3_K, _q5_K, _iq4_nl and _iq4_xs: float32 products in ggml's
// order. Every product that is then added to or subtracted from is
// wrapped in float32(...): the Go spec lets a compiler fuse x*y+z (and
// GOAMD64=v3 builds do), which would round once where ggml rounds twice.

// kvaluesIQ4NL is ggml-common.h's kvalues_iq4nl: the 16 levels of IQ4_NL
// and IQ4_XS (int8, not symmetric).
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// IQ4Values is a copy of the IQ4_NL / IQ4_XS level table.
func IQ4Values() [16]int8 { return kvaluesIQ4NL }

// dequantSmall widens the 32-value formats Q4_1, Q5_1 and IQ4_NL.
func dequantSmall(f Format, src []byte, dst []float32) {
	bb := f.BlockBytes()
	for b := 0; b < len(dst)/32; b++ {
		blk := src[b*bb : (b+1)*bb]
		y := dst[b*32 : b*32+32]
		d := half(blk)
		switch f {
		case Q4_1:
			m := half(blk[2:])
			for j := 0; j < 16; j++ {
				q := blk[4+j]
				y[j] = float32(float32(q&15)*d) + m
				y[j+16] = float32(float32(q>>4)*d) + m
			}
		case Q5_1:
			m := half(blk[2:])
			qh := binary.LittleEndian.Uint32(blk[4:])
			for j := 0; j < 16; j++ {
				q := blk[8+j]
				h0 := byte((qh>>j)<<4) & 0x10
				h1 := byte(qh>>(j+12)) & 0x10
				y[j] = float32(float32(q&15|h0)*d) + m
				y[j+16] = float32(float32(q>>4|h1)*d) + m
			}
		case IQ4_NL:
			for j := 0; j < 16; j++ {
				q := blk[2+j]
				y[j] = d * float32(kvaluesIQ4NL[q&15])
				y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
			}
		}
	}
}

// dequantK widens the 256-value formats Q2_K, Q3_K, Q5_K and IQ4_XS.
func dequantK(f Format, src []byte, dst []float32) {
	bb := f.BlockBytes()
	for b := 0; b < len(dst)/256; b++ {
		blk := src[b*bb : (b+1)*bb]
		y := (*[256]float32)(dst[b*256:])
		switch f {
		case Q2_K:
			dequantQ2K(blk, y)
		case Q3_K:
			dequantQ3K(blk, y)
		case Q5_K:
			dequantQ5K(blk, y)
		case IQ4_XS:
			dequantIQ4XS(blk, y)
		}
	}
}

// dequantQ2K: scales[16], qs[64], d, dmin (the halves come last). Value
// 128h + 32j + 16p + l is bits 2j of qs[32h + 16p + l], sub-block
// 8h + 2j + p: y = (d·sc)·q − dmin·m.
func dequantQ2K(blk []byte, y *[256]float32) {
	sc, qs := blk[0:16], blk[16:80]
	d, dmin := half(blk[80:]), half(blk[82:])
	for h := 0; h < 2; h++ {
		for j := 0; j < 4; j++ {
			for p := 0; p < 2; p++ {
				s := sc[8*h+2*j+p]
				dl, ml := d*float32(s&15), dmin*float32(s>>4)
				q := qs[32*h+16*p : 32*h+16*p+16]
				out := y[128*h+32*j+16*p : 128*h+32*j+16*p+16]
				for l := range out {
					out[l] = float32(dl*float32(q[l]>>(2*j)&3)) - ml
				}
			}
		}
	}
}

// Q3KScale is Q3_K's signed 6-bit scale of sub-block i (0..15) from the
// 12 packed bytes: low 4 bits from a nibble of bytes 0..7, high 2 bits
// from bytes 8..11, less 32.
func Q3KScale(i int, scales []byte) int {
	lo := scales[i%8] >> (4 * (i / 8)) & 15
	hi := scales[8+i%4] >> (2 * (i / 4)) & 3
	return int(lo|hi<<4) - 32
}

// dequantQ3K: hmask[32], qs[64], scales[12], d (last). A set hmask bit
// means the value is not lowered by 4.
func dequantQ3K(blk []byte, y *[256]float32) {
	hm, qs, sc := blk[0:32], blk[32:96], blk[96:108]
	d := half(blk[108:])
	for h := 0; h < 2; h++ {
		for j := 0; j < 4; j++ {
			bit := byte(1) << (4*h + j)
			for p := 0; p < 2; p++ {
				dl := d * float32(Q3KScale(8*h+2*j+p, sc))
				q := qs[32*h+16*p : 32*h+16*p+16]
				m := hm[16*p : 16*p+16]
				out := y[128*h+32*j+16*p : 128*h+32*j+16*p+16]
				for l := range out {
					v := int(q[l] >> (2 * j) & 3)
					if m[l]&bit == 0 {
						v -= 4
					}
					out[l] = dl * float32(v)
				}
			}
		}
	}
}

// dequantQ5K: d, dmin, scales[12], qh[32], qs[128]. Chunk c of 64 values:
// low nibbles with bit 2c of qh (sub-block 2c), high nibbles with bit
// 2c+1 (sub-block 2c+1).
func dequantQ5K(blk []byte, y *[256]float32) {
	d, dmin := half(blk[0:]), half(blk[2:])
	scales, qh, qs := blk[4:16], blk[16:48], blk[48:176]
	for c := 0; c < 4; c++ {
		sc1, m1 := scaleMinK4(2*c, scales)
		sc2, m2 := scaleMinK4(2*c+1, scales)
		d1, min1 := d*float32(sc1), dmin*float32(m1)
		d2, min2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*c : 32*c+32]
		for l := 0; l < 32; l++ {
			lo := q[l]&15 | (qh[l]>>(2*c)&1)<<4
			hi := q[l]>>4 | (qh[l]>>(2*c+1)&1)<<4
			y[64*c+l] = float32(d1*float32(lo)) - min1
			y[64*c+32+l] = float32(d2*float32(hi)) - min2
		}
	}
}

// IQ4XSScale is IQ4_XS's 6-bit scale of sub-block b (0..7), offset by 32:
// the low 4 bits a nibble of scales_l, the high 2 bits of the u16 scales_h.
func IQ4XSScale(b int, scalesH uint16, scalesL []byte) int {
	lo := scalesL[b/2] >> (4 * (b % 2)) & 15
	hi := byte(scalesH>>(2*b)) & 3
	return int(lo|hi<<4) - 32
}

// dequantIQ4XS: d, scales_h, scales_l[4], qs[128]; sub-block b of 32 is
// dl·K[low nibbles of qs[16b..]] then dl·K[high nibbles].
func dequantIQ4XS(blk []byte, y *[256]float32) {
	d := half(blk)
	sh := binary.LittleEndian.Uint16(blk[2:])
	sl, qs := blk[4:8], blk[8:136]
	for b := 0; b < 8; b++ {
		dl := d * float32(IQ4XSScale(b, sh, sl))
		for j := 0; j < 16; j++ {
			q := qs[16*b+j]
			y[32*b+j] = dl * float32(kvaluesIQ4NL[q&15])
			y[32*b+16+j] = dl * float32(kvaluesIQ4NL[q>>4])
		}
	}
}
