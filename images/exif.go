package images

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"io"
	"regexp"
	"strings"
)

// The EXIF reader is written by hand because the standard library has none
// and only one tag is needed: pulling in a general EXIF package for the
// orientation would add a dependency far larger than this file. It mirrors
// what Pillow 9.4's Image.getexif finds, which is what ImageOps.exif_transpose
// (and so transformers' load_image) acts on:
//
//   - JPEG: the first APP1 segment starting "Exif\0" (JpegImagePlugin keeps
//     the first), a TIFF structure after the 6-byte "Exif\0\0" header;
//   - PNG: the eXIf chunk, else a "Raw profile type exif" text chunk (tEXt,
//     zTXt or iTXt; ImageMagick's hex dump), else tiff:Orientation in the
//     "XML:com.adobe.xmp" iTXt chunk;
//   - WebP: the EXIF chunk of a VP8X file;
//   - TIFF: the Orientation tag of the image's own first IFD.
//
// Only IFD0's Orientation (0x0112) with a single integer value counts; a
// malformed structure reads as no orientation (Pillow may raise instead).
//
// TIFF caveat: current Pillow applies a TIFF's orientation once, while
// loading (TiffImagePlugin.load_end calls exif_transpose in place and drops
// the tag), so load_image's exif_transpose is then a no-op. Pillow 9.4
// transposed in load_end but kept the tag, so load_image applied it a second
// time (rotations doubled, flips undone). This package applies it once, as
// current Pillow does.
//
// JPEG XMP orientation is not consulted: Pillow stores JPEG XMP under
// info["xmp"], while getexif only looks at info["XML:com.adobe.xmp"] (PNG
// iTXt).

// Orientation returns the EXIF orientation (1..8) stored in an encoded image
// of the given format ("jpeg", "png", "webp", "tiff"; others have none), or 1
// when there is none or it cannot be read.
func Orientation(data []byte, format string) int {
	var o int
	switch format {
	case "jpeg":
		o = jpegOrientation(data)
	case "png":
		o = pngOrientation(data)
	case "webp":
		o = webpOrientation(data)
	case "tiff":
		o = tiffOrientation(data)
	}
	if o < 1 || o > 8 {
		return 1
	}
	return o
}

// Transpose applies an EXIF orientation as Pillow's exif_transpose does:
// 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE,
// 6 ROTATE_270 (clockwise), 7 TRANSVERSE, 8 ROTATE_90 (counter-clockwise).
// Other values return m unchanged.
func Transpose(m *RGB, orientation int) *RGB {
	if orientation < 2 || orientation > 8 {
		return m
	}
	w, h := m.W, m.H
	ow, oh := w, h
	if orientation >= 5 {
		ow, oh = h, w
	}
	out := NewRGB(ow, oh)
	for y := 0; y < oh; y++ {
		for x := 0; x < ow; x++ {
			var sx, sy int
			switch orientation {
			case 2:
				sx, sy = w-1-x, y
			case 3:
				sx, sy = w-1-x, h-1-y
			case 4:
				sx, sy = x, h-1-y
			case 5:
				sx, sy = y, x
			case 6:
				sx, sy = y, h-1-x
			case 7:
				sx, sy = w-1-y, h-1-x
			case 8:
				sx, sy = w-1-y, x
			}
			copy(out.Pix[3*(y*ow+x):3*(y*ow+x)+3], m.Pix[3*(sy*w+sx):3*(sy*w+sx)+3])
		}
	}
	return out
}

func jpegOrientation(d []byte) int {
	if len(d) < 4 || d[0] != 0xff || d[1] != 0xd8 {
		return 1
	}
	i := 2
	for i+4 <= len(d) {
		if d[i] != 0xff {
			return 1
		}
		marker := d[i+1]
		if marker == 0xff { // fill byte
			i++
			continue
		}
		if marker == 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker == 0x01 {
			i += 2
			continue
		}
		if marker == 0xda || marker == 0xd9 { // start of scan, end of image
			return 1
		}
		n := int(binary.BigEndian.Uint16(d[i+2:]))
		if n < 2 || i+2+n > len(d) {
			return 1
		}
		seg := d[i+4 : i+2+n]
		if marker == 0xe1 && bytes.HasPrefix(seg, []byte("Exif\x00")) {
			// Pillow keeps the first such segment and strips the header
			// only when it is the full "Exif\0\0".
			if !bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
				return 1
			}
			return tiffOrientation(seg[6:])
		}
		i += 2 + n
	}
	return 1
}

var xmpOrientation = regexp.MustCompile(`tiff:Orientation(="|>)([0-9])`)

func pngOrientation(d []byte) int {
	const sig = "\x89PNG\r\n\x1a\n"
	if !bytes.HasPrefix(d, []byte(sig)) {
		return 1
	}
	var exif, rawProfile []byte
	var xmp string
	for i := len(sig); i+8 <= len(d); {
		n := int(binary.BigEndian.Uint32(d[i:]))
		typ := string(d[i+4 : i+8])
		if n < 0 || i+8+n > len(d) {
			break
		}
		body := d[i+8 : i+8+n]
		switch typ {
		case "eXIf":
			exif = body
		case "tEXt", "zTXt", "iTXt":
			key, text, ok := pngText(typ, body)
			if !ok {
				break
			}
			switch key {
			case "Raw profile type exif":
				rawProfile = text
			case "XML:com.adobe.xmp":
				xmp = string(text)
			}
		case "IEND":
			i = len(d)
			continue
		}
		i += 12 + n
	}
	if exif != nil {
		return tiffOrientation(exif)
	}
	if rawProfile != nil {
		// Pillow: bytes.fromhex("".join(text.split("\n")[3:])).
		lines := strings.Split(string(rawProfile), "\n")
		if len(lines) > 3 {
			b, err := hex.DecodeString(strings.Join(lines[3:], ""))
			if err == nil {
				return tiffOrientation(bytes.TrimPrefix(b, []byte("Exif\x00\x00")))
			}
		}
		return 1
	}
	if m := xmpOrientation.FindStringSubmatch(xmp); m != nil {
		return int(m[2][0] - '0')
	}
	return 1
}

// pngText splits a text chunk into keyword and (decompressed) text.
func pngText(typ string, body []byte) (string, []byte, bool) {
	k := bytes.IndexByte(body, 0)
	if k < 0 {
		return "", nil, false
	}
	key, rest := string(body[:k]), body[k+1:]
	switch typ {
	case "tEXt":
		return key, rest, true
	case "zTXt":
		if len(rest) < 1 {
			return "", nil, false
		}
		t, err := inflate(rest[1:])
		return key, t, err == nil
	default: // iTXt: compression flag, method, language\0, translated keyword\0, text
		if len(rest) < 2 {
			return "", nil, false
		}
		compressed := rest[0] == 1
		rest = rest[2:]
		for range 2 {
			j := bytes.IndexByte(rest, 0)
			if j < 0 {
				return "", nil, false
			}
			rest = rest[j+1:]
		}
		if compressed {
			t, err := inflate(rest)
			return key, t, err == nil
		}
		return key, rest, true
	}
}

func inflate(b []byte) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// Text chunks are small; bound what a hostile one can expand to.
	return io.ReadAll(io.LimitReader(r, 16<<20))
}

func webpOrientation(d []byte) int {
	if len(d) < 12 || string(d[:4]) != "RIFF" || string(d[8:12]) != "WEBP" {
		return 1
	}
	for i := 12; i+8 <= len(d); {
		typ := string(d[i : i+4])
		n := int(binary.LittleEndian.Uint32(d[i+4:]))
		if n < 0 || i+8+n > len(d) {
			return 1
		}
		if typ == "EXIF" {
			return tiffOrientation(bytes.TrimPrefix(d[i+8:i+8+n], []byte("Exif\x00\x00")))
		}
		i += 8 + n + n&1
	}
	return 1
}

// tiffOrientation reads tag 0x0112 from the first IFD of a TIFF structure
// (classic TIFF only; BigTIFF reads as no orientation).
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 1
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 1
	}
	if bo.Uint16(t[2:]) != 42 {
		return 1
	}
	off := int64(bo.Uint32(t[4:]))
	if off < 8 || off+2 > int64(len(t)) {
		return 1
	}
	n := int64(bo.Uint16(t[off:]))
	for e := off + 2; e+12 <= int64(len(t)) && e < off+2+12*n; e += 12 {
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		typ, count := bo.Uint16(t[e+2:]), bo.Uint32(t[e+4:])
		if count != 1 {
			return 1
		}
		v := t[e+8 : e+12]
		switch typ {
		case 1: // BYTE
			return int(v[0])
		case 6: // SBYTE
			return int(int8(v[0]))
		case 3: // SHORT
			return int(bo.Uint16(v))
		case 8: // SSHORT
			return int(int16(bo.Uint16(v)))
		case 4: // LONG
			return int(bo.Uint32(v))
		case 9: // SLONG
			return int(int32(bo.Uint32(v)))
		}
		return 1
	}
	return 1
}
