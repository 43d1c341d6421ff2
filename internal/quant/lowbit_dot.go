package quant

import "encoding/binary"

// dotSmall is ggml's vec_dot_q4_1_q8_1, _q5_1_q8_1 and _iq4_nl_q8_0 as
// the x86 kernels compute them: an integer sum per block scaled by
// d_w·d_x; for Q4_1 and Q5_1 the min enters as m_w·s with the
// activations' f16 s, summed apart and added at the end.
func dotSmall(f Format, w []byte, q []int8, d []float32) float32 {
	bb := f.BlockBytes()
	var sum, mins float32
	for b := 0; b < len(q)/32; b++ {
		blk, qs := w[b*bb:(b+1)*bb], q[b*32:b*32+32]
		var s int32
		switch f {
		case Q4_1:
			for j := 0; j < 16; j++ {
				s += int32(blk[4+j]&15)*int32(qs[j]) + int32(blk[4+j]>>4)*int32(qs[j+16])
			}
			mins += half(blk[2:]) * d[2*b+1]
			sum += half(blk) * d[2*b] * float32(s)
		case Q5_1:
			qh := binary.LittleEndian.Uint32(blk[4:])
			for j := 0; j < 16; j++ {
				lo := int32(blk[8+j]&15) | int32(qh>>j&1)<<4
				hi := int32(blk[8+j]>>4) | int32(qh>>(j+16)&1)<<4
				s += lo*int32(qs[j]) + hi*int32(qs[j+16])
			}
			mins += half(blk[2:]) * d[2*b+1]
			sum += half(blk) * d[2*b] * float32(s)
		case IQ4_NL:
			for j := 0; j < 16; j++ {
				s += int32(kvaluesIQ4NL[blk[2+j]&15])*int32(qs[j]) + int32(kvaluesIQ4NL[blk[2+j]>>4])*int32(qs[j+16])
			}
			sum += d[b] * half(blk) * float32(s)
		}
	}
	return sum + mins
}

// dotK is ggml's vec_dot_q2_K_q8_K, _q3_K_q8_K, _q5_K_q8_K and
// _iq4_xs_q8_K: per super-block one integer sum weighted by the
// sub-block scales, times d_w·d_x, less (Q2_K, Q5_K) dmin·d_x times the
// mins against the activations' sums of 16.
func dotK(f Format, w []byte, q []int8, d []float32, sums []int16) float32 {
	bb := f.BlockBytes()
	var sum float32
	for b := 0; b < len(q)/256; b++ {
		blk, qs, bs := w[b*bb:(b+1)*bb], q[b*256:b*256+256], sums[b*16:b*16+16]
		var isum, mins int32
		switch f {
		case Q2_K:
			sc, q2 := blk[0:16], blk[16:80]
			for i, s := range bs {
				mins += int32(s) * int32(sc[i]>>4)
			}
			for h := 0; h < 2; h++ {
				for j := 0; j < 4; j++ {
					for p := 0; p < 2; p++ {
						var s int32
						for l := 0; l < 16; l++ {
							s += int32(q2[32*h+16*p+l]>>(2*j)&3) * int32(qs[128*h+32*j+16*p+l])
						}
						isum += int32(sc[8*h+2*j+p]&15) * s
					}
				}
			}
			sum += d[b]*half(blk[80:])*float32(isum) - d[b]*half(blk[82:])*float32(mins)
		case Q3_K:
			hm, q3, sc := blk[0:32], blk[32:96], blk[96:108]
			for h := 0; h < 2; h++ {
				for j := 0; j < 4; j++ {
					bit := byte(1) << (4*h + j)
					for p := 0; p < 2; p++ {
						var s int32
						for l := 0; l < 16; l++ {
							v := int32(q3[32*h+16*p+l] >> (2 * j) & 3)
							if hm[16*p+l]&bit == 0 {
								v -= 4
							}
							s += v * int32(qs[128*h+32*j+16*p+l])
						}
						isum += int32(Q3KScale(8*h+2*j+p, sc)) * s
					}
				}
			}
			sum += d[b] * half(blk[108:]) * float32(isum)
		case Q5_K:
			scales, qh, q5 := blk[4:16], blk[16:48], blk[48:176]
			for c := 0; c < 4; c++ {
				sc1, m1 := scaleMinK4(2*c, scales)
				sc2, m2 := scaleMinK4(2*c+1, scales)
				var s1, s2 int32
				for l := 0; l < 32; l++ {
					lo := int32(q5[32*c+l]&15) | int32(qh[l]>>(2*c)&1)<<4
					hi := int32(q5[32*c+l]>>4) | int32(qh[l]>>(2*c+1)&1)<<4
					s1 += lo * int32(qs[64*c+l])
					s2 += hi * int32(qs[64*c+32+l])
				}
				isum += int32(sc1)*s1 + int32(sc2)*s2
				mins += int32(m1)*(int32(bs[4*c])+int32(bs[4*c+1])) + int32(m2)*(int32(bs[4*c+2])+int32(bs[4*c+3]))
			}
			sum += d[b]*half(blk)*float32(isum) - d[b]*half(blk[2:])*float32(mins)
		case IQ4_XS:
			sh := binary.LittleEndian.Uint16(blk[2:])
			sl, q4 := blk[4:8], blk[8:136]
			for sb := 0; sb < 8; sb++ {
				var s int32
				for j := 0; j < 16; j++ {
					v := q4[16*sb+j]
					s += int32(kvaluesIQ4NL[v&15])*int32(qs[32*sb+j]) + int32(kvaluesIQ4NL[v>>4])*int32(qs[32*sb+16+j])
				}
				isum += int32(IQ4XSScale(sb, sh, sl)) * s
			}
			sum += d[b] * half(blk) * float32(isum)
		}
	}
	return sum
}
