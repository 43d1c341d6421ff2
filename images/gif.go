package images

import (
	"errors"
	"image"
)

// gifToRGB renders a GIF's first frame as Pillow 9.4 does: a canvas of the
// logical screen size filled with the frame's transparent index (else index
// 0), the frame's pixels at their offset, every index looked up in the
// frame's raw colour table (local, else global). Go's decoder replaced the
// transparent entry by transparent black, so the table is read back from the
// file here.
func gifToRGB(m image.Image, data []byte, cfg image.Config) (*RGB, error) {
	p, ok := m.(*image.Paletted)
	if !ok {
		return FromImage(m), nil
	}
	table, trans, err := gifFirstFrameTable(data)
	if err != nil {
		return nil, err
	}
	var pal [256][3]uint8
	for i := 0; i < 256 && 3*i+2 < len(table); i++ {
		pal[i] = [3]uint8{table[3*i], table[3*i+1], table[3*i+2]}
	}
	out := NewRGB(cfg.Width, cfg.Height)
	fill := pal[0]
	if trans >= 0 {
		fill = pal[trans]
	}
	for i := 0; i < len(out.Pix); i += 3 {
		out.Pix[i], out.Pix[i+1], out.Pix[i+2] = fill[0], fill[1], fill[2]
	}
	r := p.Rect.Intersect(image.Rect(0, 0, cfg.Width, cfg.Height))
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := pal[p.Pix[p.PixOffset(x, y)]]
			o := 3 * (y*out.W + x)
			out.Pix[o], out.Pix[o+1], out.Pix[o+2] = c[0], c[1], c[2]
		}
	}
	return out, nil
}

// gifFirstFrameTable walks a GIF up to its first image descriptor and
// returns the colour table that frame uses and its transparent index (-1 for
// none), taken from the graphic control extensions before it as Pillow does
// (a later extension without the transparency flag keeps an earlier index).
func gifFirstFrameTable(d []byte) (table []byte, trans int, err error) {
	bad := errors.New("malformed GIF structure")
	if len(d) < 13 {
		return nil, -1, bad
	}
	trans = -1
	i := 13
	if flags := d[10]; flags&0x80 != 0 {
		n := 3 << (flags&7 + 1)
		if i+n > len(d) {
			return nil, -1, bad
		}
		table = d[i : i+n]
		i += n
	}
	skipBlocks := func() bool {
		for i < len(d) {
			n := int(d[i])
			i++
			if n == 0 {
				return true
			}
			i += n
		}
		return false
	}
	for i < len(d) {
		switch d[i] {
		case 0x21: // extension
			if i+2 > len(d) {
				return nil, -1, bad
			}
			label := d[i+1]
			i += 2
			if label == 0xf9 && i < len(d) && d[i] >= 4 && i+5 <= len(d) {
				if d[i+1]&1 != 0 {
					trans = int(d[i+4])
				}
			}
			if !skipBlocks() {
				return nil, -1, bad
			}
		case 0x2c: // image descriptor
			if i+10 > len(d) {
				return nil, -1, bad
			}
			if flags := d[i+9]; flags&0x80 != 0 {
				n := 3 << (flags&7 + 1)
				if i+10+n > len(d) {
					return nil, -1, bad
				}
				table = d[i+10 : i+10+n]
			}
			if table == nil {
				return nil, -1, errors.New("GIF has no colour table")
			}
			return table, trans, nil
		case 0x3b:
			return nil, -1, errors.New("GIF has no image")
		default:
			i++ // Pillow skips unknown bytes
		}
	}
	return nil, -1, bad
}
