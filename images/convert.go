package images

import (
	"image"
	"image/color"
)

// FromImage converts a decoded image to RGB with Pillow's convert("RGB")
// rules (see the package doc): alpha dropped, 16-bit colour reduced to its
// high byte, 16-bit gray clipped, CMYK through cmyk2rgb, premultiplied RGBA
// un-premultiplied first. An *image.YCbCr is taken to be JFIF (JPEG) data and
// converted as libjpeg-turbo does, fancy chroma upsampling included.
// Orientation is not applied: FromImage sees pixels, not files.
func FromImage(m image.Image) *RGB {
	b := m.Bounds()
	out := NewRGB(b.Dx(), b.Dy())
	w, h := out.W, out.H
	switch s := m.(type) {
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			row := s.Pix[(y)*s.Stride:]
			o := out.Pix[3*y*w:]
			for x := 0; x < w; x++ {
				o[3*x], o[3*x+1], o[3*x+2] = row[4*x], row[4*x+1], row[4*x+2]
			}
		}
	case *image.RGBA:
		for y := 0; y < h; y++ {
			row := s.Pix[(y)*s.Stride:]
			o := out.Pix[3*y*w:]
			for x := 0; x < w; x++ {
				o[3*x], o[3*x+1], o[3*x+2] = unpremultiply(row[4*x : 4*x+4])
			}
		}
	case *image.NRGBA64:
		for y := 0; y < h; y++ {
			row := s.Pix[(y)*s.Stride:]
			o := out.Pix[3*y*w:]
			for x := 0; x < w; x++ {
				o[3*x], o[3*x+1], o[3*x+2] = row[8*x], row[8*x+2], row[8*x+4]
			}
		}
	case *image.RGBA64:
		for y := 0; y < h; y++ {
			row := s.Pix[(y)*s.Stride:]
			o := out.Pix[3*y*w:]
			for x := 0; x < w; x++ {
				p := row[8*x : 8*x+8]
				a := uint32(p[6])<<8 | uint32(p[7])
				for c := 0; c < 3; c++ {
					v := uint32(p[2*c])<<8 | uint32(p[2*c+1])
					if a != 0 && a != 0xffff {
						v = min(0xffff, v*0xffff/a)
					}
					o[3*x+c] = uint8(v >> 8)
				}
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			row := s.Pix[(y)*s.Stride:]
			o := out.Pix[3*y*w:]
			for x := 0; x < w; x++ {
				v := row[x]
				o[3*x], o[3*x+1], o[3*x+2] = v, v, v
			}
		}
	case *image.Gray16:
		for y := 0; y < h; y++ {
			row := s.Pix[(y)*s.Stride:]
			o := out.Pix[3*y*w:]
			for x := 0; x < w; x++ {
				v := clip16to8(uint16(row[2*x])<<8 | uint16(row[2*x+1]))
				o[3*x], o[3*x+1], o[3*x+2] = v, v, v
			}
		}
	case *image.Paletted:
		pal := paletteRGB(s.Palette)
		for y := 0; y < h; y++ {
			row := s.Pix[(y)*s.Stride:]
			o := out.Pix[3*y*w:]
			for x := 0; x < w; x++ {
				p := pal[row[x]]
				o[3*x], o[3*x+1], o[3*x+2] = p[0], p[1], p[2]
			}
		}
	case *image.CMYK:
		for y := 0; y < h; y++ {
			row := s.Pix[(y)*s.Stride:]
			o := out.Pix[3*y*w:]
			for x := 0; x < w; x++ {
				o[3*x], o[3*x+1], o[3*x+2] = cmykToRGB(row[4*x], row[4*x+1], row[4*x+2], row[4*x+3])
			}
		}
	case *image.YCbCr:
		ycbcrToRGB(out, s, jfifRGB)
	case *image.NYCbCrA:
		ycbcrToRGB(out, &s.YCbCr, jfifRGB)
	default:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := color.NRGBA64Model.Convert(m.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA64)
				o := 3 * (y*w + x)
				out.Pix[o], out.Pix[o+1], out.Pix[o+2] = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8)
			}
		}
	}
	return out
}

// unpremultiply is Pillow's unpackRGBa (TIFF associated alpha): colour
// bytes times 255 over alpha, integer division, clipped; alpha 0 gives black.
func unpremultiply(p []uint8) (r, g, b uint8) {
	a := uint32(p[3])
	switch a {
	case 255:
		return p[0], p[1], p[2]
	case 0:
		return 0, 0, 0
	}
	f := func(v uint8) uint8 { return uint8(min(255, uint32(v)*255/a)) }
	return f(p[0]), f(p[1]), f(p[2])
}

// paletteRGB resolves a palette to the colour bytes the file stored: Go's
// PNG decoder gives color.RGBA for opaque entries and color.NRGBA for
// entries with tRNS alpha; both carry the stored bytes unchanged. Indices
// past the palette map to black, as Go's PNG decoder pads palettes.
func paletteRGB(p color.Palette) *[256][3]uint8 {
	var out [256][3]uint8
	for i, c := range p {
		if i >= 256 {
			break
		}
		switch c := c.(type) {
		case color.NRGBA:
			out[i] = [3]uint8{c.R, c.G, c.B}
		case color.RGBA:
			if c.A == 255 || c.A == 0 {
				out[i] = [3]uint8{c.R, c.G, c.B}
			} else {
				n := color.NRGBAModel.Convert(c).(color.NRGBA)
				out[i] = [3]uint8{n.R, n.G, n.B}
			}
		default:
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			out[i] = [3]uint8{n.R, n.G, n.B}
		}
	}
	return &out
}

// muldiv255 is Pillow's MULDIV255: a*b/255 rounded, in integers.
func muldiv255(a, b int) int {
	t := a*b + 128
	return ((t >> 8) + t) >> 8
}

// cmykToRGB is Pillow's cmyk2rgb (libImaging/Convert.c).
func cmykToRGB(c, m, y, k uint8) (uint8, uint8, uint8) {
	nk := 255 - int(k)
	f := func(v uint8) uint8 { return clip8i(nk - muldiv255(int(v), nk)) }
	return f(c), f(m), f(y)
}

func clip8i(v int) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// jpegToRGB converts what image/jpeg returns.
func jpegToRGB(m image.Image) (*RGB, error) {
	return FromImage(m), nil
}

// webpToRGB converts what x/image/webp returns: lossless images are NRGBA
// (exact), lossy ones Y'CbCr in VP8's limited range, which libwebp turns into
// RGB with its own fancy upsampler and fixed-point BT.601 formula; Go's
// image.YCbCr.At would wrongly treat them as full-range JFIF.
func webpToRGB(m image.Image) (*RGB, error) {
	switch s := m.(type) {
	case *image.YCbCr:
		out := NewRGB(s.Rect.Dx(), s.Rect.Dy())
		webpFancy(out, s)
		return out, nil
	case *image.NYCbCrA:
		out := NewRGB(s.Rect.Dx(), s.Rect.Dy())
		webpFancy(out, &s.YCbCr)
		return out, nil
	}
	return FromImage(m), nil
}

// ---- JPEG: libjpeg-turbo's fancy upsampling and jdcolor.c conversion ----

// jfifRGB is libjpeg-turbo's ycc_rgb_convert (jdcolor.c): 16-bit fixed
// point tables with FIX(x) = x*65536 rounded; Cr->R and Cb->B are rounded
// per table entry, the green term is rounded once after the sum.
func jfifRGB(y, cb, cr int) (uint8, uint8, uint8) {
	const (
		fixR  = 91881  // FIX(1.40200)
		fixB  = 116130 // FIX(1.77200)
		fixGR = 46802  // FIX(0.71414)
		fixGB = 22554  // FIX(0.34414)
		half  = 1 << 15
	)
	cb -= 128
	cr -= 128
	r := y + (fixR*cr+half)>>16
	g := y + (-fixGB*cb-fixGR*cr+half)>>16
	b := y + (fixB*cb+half)>>16
	return clip8i(r), clip8i(g), clip8i(b)
}

// ycbcrToRGB upsamples the chroma planes the way libjpeg-turbo does by
// default (do_fancy_upsampling): h2v1 and h2v2 use the triangle filters of
// jdsample.c (3/4 nearer sample + 1/4 further, with its alternating
// rounding biases), h1v2 likewise vertically; other ratios replicate.
// Samples outside the component's real extent (ceil of the luma size over
// the factor) are edge-replicated, as libjpeg's context rows are.
func ycbcrToRGB(out *RGB, s *image.YCbCr, conv func(y, cb, cr int) (uint8, uint8, uint8)) {
	w, h := out.W, out.H
	hf, vf := 1, 1
	switch s.SubsampleRatio {
	case image.YCbCrSubsampleRatio422:
		hf = 2
	case image.YCbCrSubsampleRatio420:
		hf, vf = 2, 2
	case image.YCbCrSubsampleRatio440:
		vf = 2
	case image.YCbCrSubsampleRatio411:
		hf = 4
	case image.YCbCrSubsampleRatio410:
		hf, vf = 4, 2
	}
	// The chroma planes' real size, and an accessor that clamps into it.
	cw, ch := (w+hf-1)/hf, (h+vf-1)/vf
	x0, y0 := s.Rect.Min.X, s.Rect.Min.Y
	cOff := s.COffset(x0, y0) // chroma index of the first sample
	plane := func(p []uint8) func(cx, cy int) int {
		return func(cx, cy int) int {
			cx = max(0, min(cx, cw-1))
			cy = max(0, min(cy, ch-1))
			return int(p[cOff+cy*s.CStride+cx])
		}
	}
	cbAt, crAt := plane(s.Cb), plane(s.Cr)
	fancy := func(at func(cx, cy int) int, x, y int) int {
		switch {
		case hf == 2 && vf == 2:
			// h2v2_fancy_upsample: column sums of 3*nearer row + further row,
			// then 3*nearer column sum + further, biased 8 (even x) or 7.
			cy, cx := y/2, x/2
			ny := cy - 1
			if y%2 == 1 {
				ny = cy + 1
			}
			col := func(cx int) int { return 3*at(cx, cy) + at(cx, ny) }
			this := col(cx)
			if x%2 == 0 {
				if cx == 0 {
					return (this*4 + 8) >> 4
				}
				return (this*3 + col(cx-1) + 8) >> 4
			}
			if cx == cw-1 {
				return (this*4 + 7) >> 4
			}
			return (this*3 + col(cx+1) + 7) >> 4
		case hf == 2 && vf == 1:
			// h2v1_fancy_upsample.
			cx := x / 2
			v := at(cx, y)
			if x%2 == 0 {
				if cx == 0 {
					return v
				}
				return (v*3 + at(cx-1, y) + 1) >> 2
			}
			if cx == cw-1 {
				return v
			}
			return (v*3 + at(cx+1, y) + 2) >> 2
		case hf == 1 && vf == 2:
			// h1v2_fancy_upsample.
			cy := y / 2
			if y%2 == 0 {
				return (3*at(x, cy) + at(x, cy-1) + 1) >> 2
			}
			return (3*at(x, cy) + at(x, cy+1) + 2) >> 2
		default:
			return at(x/hf, y/vf)
		}
	}
	for y := 0; y < h; y++ {
		yrow := s.Y[s.YOffset(x0, y0+y):]
		o := out.Pix[3*y*w:]
		for x := 0; x < w; x++ {
			o[3*x], o[3*x+1], o[3*x+2] = conv(int(yrow[x]), fancy(cbAt, x, y), fancy(crAt, x, y))
		}
	}
}

// ---- WebP: libwebp's fancy upsampler and VP8YuvToRgb ----

// webpRGB is libwebp's VP8YuvToRgb (src/dsp/yuv.h): BT.601 limited range in
// 14-bit fixed point, MultHi(v, c) = (v*c) >> 8, results >> 6 with clipping.
func webpRGB(y, u, v int) (uint8, uint8, uint8) {
	multHi := func(v, c int) int { return (v * c) >> 8 }
	clip := func(v int) uint8 {
		if v&^((256<<6)-1) == 0 {
			return uint8(v >> 6)
		}
		if v < 0 {
			return 0
		}
		return 255
	}
	yy := multHi(y, 19077)
	return clip(yy + multHi(v, 26149) - 14234),
		clip(yy - multHi(u, 6419) - multHi(v, 13320) + 8708),
		clip(yy + multHi(u, 33050) - 17685)
}

// webpFancy is libwebp's EmitFancyRGB with the C UpsampleRgbLinePair: output
// row 0 and (for even heights) the last row use one chroma row; each other
// pair of rows (2k-1, 2k) interpolates chroma rows k-1 and k with weights
// 9/16, 3/16, 3/16, 1/16 (computed through the two diagonal averages).
func webpFancy(out *RGB, s *image.YCbCr) {
	w, h := out.W, out.H
	x0, y0 := s.Rect.Min.X, s.Rect.Min.Y
	cOff := s.COffset(x0, y0)
	crow := func(p []uint8, cy int) []uint8 { return p[cOff+cy*s.CStride:] }
	ypix := func(y int) []uint8 { return s.Y[s.YOffset(x0, y0+y):] }
	// linePair writes top (and bottom, if bottomY >= 0) output rows from the
	// chroma rows tu/tv (top) and cu/cv (current).
	linePair := func(topY, bottomY int, tu, tv, cu, cv []uint8) {
		put := func(row, x int, u, v int) {
			yv := ypix(row)[x]
			o := 3 * (row*w + x)
			out.Pix[o], out.Pix[o+1], out.Pix[o+2] = webpRGB(int(yv), u, v)
		}
		lastPair := (w - 1) >> 1
		tlU, tlV := int(tu[0]), int(tv[0])
		lU, lV := int(cu[0]), int(cv[0])
		put(topY, 0, (3*tlU+lU+2)>>2, (3*tlV+lV+2)>>2)
		if bottomY >= 0 {
			put(bottomY, 0, (3*lU+tlU+2)>>2, (3*lV+tlV+2)>>2)
		}
		for x := 1; x <= lastPair; x++ {
			tU, tV := int(tu[x]), int(tv[x])
			U, V := int(cu[x]), int(cv[x])
			avgU := tlU + tU + lU + U + 8
			avgV := tlV + tV + lV + V + 8
			d12U, d12V := (avgU+2*(tU+lU))>>3, (avgV+2*(tV+lV))>>3
			d03U, d03V := (avgU+2*(tlU+U))>>3, (avgV+2*(tlV+V))>>3
			put(topY, 2*x-1, (d12U+tlU)>>1, (d12V+tlV)>>1)
			put(topY, 2*x, (d03U+tU)>>1, (d03V+tV)>>1)
			if bottomY >= 0 {
				put(bottomY, 2*x-1, (d03U+lU)>>1, (d03V+lV)>>1)
				put(bottomY, 2*x, (d12U+U)>>1, (d12V+V)>>1)
			}
			tlU, tlV, lU, lV = tU, tV, U, V
		}
		if w&1 == 0 {
			put(topY, w-1, (3*tlU+lU+2)>>2, (3*tlV+lV+2)>>2)
			if bottomY >= 0 {
				put(bottomY, w-1, (3*lU+tlU+2)>>2, (3*lV+tlV+2)>>2)
			}
		}
	}
	u0, v0 := crow(s.Cb, 0), crow(s.Cr, 0)
	linePair(0, -1, u0, v0, u0, v0)
	for k := 1; 2*k-1 < h; k++ {
		tu, tv := crow(s.Cb, k-1), crow(s.Cr, k-1)
		if 2*k >= h {
			// Even height: the last row mirrors its own chroma row.
			linePair(2*k-1, -1, tu, tv, tu, tv)
			break
		}
		linePair(2*k-1, 2*k, tu, tv, crow(s.Cb, k), crow(s.Cr, k))
	}
}
