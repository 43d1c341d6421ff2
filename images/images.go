// Package images loads pictures for vision models the way Hugging Face
// transformers does before its image processors see them, and resizes them
// exactly as Pillow does.
//
// # Loading
//
// transformers' image_utils.load_image (what processors call for URLs,
// paths and base64 strings, and what model cards use for local files) is
//
//	image = PIL.Image.open(...)
//	image = PIL.ImageOps.exif_transpose(image)
//	image = image.convert("RGB")
//
// [Decode] and [Open] do the same: the EXIF orientation tag is applied (see
// [Orientation] for where it is read from) and every mode is converted to
// 8-bit RGB with Pillow's convert("RGB") rules (libImaging/Convert.c):
//
//   - alpha is dropped, not composited (rgba2rgb, la2rgb copy the colour
//     bytes; a fully transparent pixel keeps whatever colour it stores);
//   - 8-bit gray is replicated; 16-bit gray is clipped to 0..255, not scaled
//     (Pillow opens it as mode I or I;16 and i2rgb / I16_RGB clip), so a
//     16-bit gray PNG comes out mostly white, as in Pillow;
//   - 16-bit colour keeps the high byte (Pillow's RGB;16B unpackers);
//   - palette images look each index up in the file's own palette, also for
//     the transparent index (Go's GIF decoder replaces that entry by
//     transparent black; the raw GIF colour table is read back here);
//   - CMYK uses cmyk2rgb: nk = 255-K, R = nk - MULDIV255(C, nk), rounded;
//   - premultiplied RGBA (TIFF associated alpha) is un-premultiplied first
//     with Pillow's unpackRGBa: v*255/a, integer division, clipped.
//
// Images handed to a processor as PIL objects skip load_image: no EXIF
// transpose, and their mode reaches the processor. The slow
// Idefics3ImageProcessor (transformers
// src/transformers/models/idefics3/image_processing_idefics3.py,
// convert_to_rgb) then composites RGBA over white after resizing. That path
// is not modelled here: as after load_image, processors only ever see RGB.
// [FromImage] converts an already decoded image without the EXIF step.
//
// Exactness, checked against Pillow 9.4.0 (the version the goldens were
// made with) on files Pillow wrote: PNG (all bit depths and colour types,
// tRNS, palettes), GIF (transparency, frame offsets), BMP, TIFF (8/16-bit,
// associated and unassociated alpha) and WebP (lossless and lossy, with and
// without alpha) decode to identical bytes. Lossy WebP is decoded by
// x/image/vp8 (VP8 decoding is bit-exact by specification) and converted
// with libwebp's fancy upsampler and BT.601 limited-range YUV->RGB. JPEG is
// close but not exact: Go's IDCT rounds differently from libjpeg-turbo's
// islow IDCT, so pixels differ by up to about 3 levels; the chroma
// upsampling and YCbCr->RGB arithmetic do follow libjpeg-turbo (fancy
// upsampling, jdcolor.c tables).
//
// # Limits
//
// Dimensions are read with image.DecodeConfig before anything is decoded;
// an image with more pixels than the limit is refused without allocating
// its buffer. The default, [DefaultMaxPixels], is Pillow's
// Image.MAX_IMAGE_PIXELS (Pillow itself only warns above it and refuses
// above twice it). Empty, truncated and non-image files are errors naming
// the file.
package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"os"

	// Registered decoders: the formats Decode accepts.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"
)

// DefaultMaxPixels is Pillow's Image.MAX_IMAGE_PIXELS, int(1024*1024*1024 //
// 4 // 3): the largest image, in pixels, Decode accepts when maxPixels is 0.
const DefaultMaxPixels int64 = 178956970

// RGB is an 8-bit RGB image, rows top to bottom, pixels packed as R, G, B
// (HWC): pixel (x, y) starts at Pix[3*(y*W+x)].
type RGB struct {
	// W and H are the width and height in pixels.
	W, H int
	// Pix holds 3*W*H bytes, row-major, R G B per pixel.
	Pix []uint8
}

// NewRGB returns a black w x h image.
func NewRGB(w, h int) *RGB {
	return &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
}

// Clone returns a deep copy of m.
func (m *RGB) Clone() *RGB {
	return &RGB{W: m.W, H: m.H, Pix: append([]uint8(nil), m.Pix...)}
}

// Crop returns a copy of the w x h region of m whose top-left corner is
// (x, y), clipped to m's bounds as numpy slicing does.
func (m *RGB) Crop(x, y, w, h int) *RGB {
	x0, y0 := max(0, min(x, m.W)), max(0, min(y, m.H))
	x1, y1 := max(x0, min(x+w, m.W)), max(y0, min(y+h, m.H))
	out := NewRGB(x1-x0, y1-y0)
	for yy := y0; yy < y1; yy++ {
		copy(out.Pix[3*(yy-y0)*out.W:3*(yy-y0+1)*out.W], m.Pix[3*(yy*m.W+x0):3*(yy*m.W+x1)])
	}
	return out
}

// Image returns m as an *image.RGBA (opaque), for encoding or display.
func (m *RGB) Image() *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, m.W, m.H))
	for i, j := 0, 0; i < len(m.Pix); i, j = i+3, j+4 {
		out.Pix[j], out.Pix[j+1], out.Pix[j+2], out.Pix[j+3] = m.Pix[i], m.Pix[i+1], m.Pix[i+2], 0xff
	}
	return out
}

// Open reads the image file at path with [Decode].
func Open(path string, maxPixels int64) (*RGB, error) {
	return OpenContext(context.Background(), path, maxPixels)
}

// OpenContext is [Open] that stops when ctx is done, as [DecodeContext]
// does.
func OpenContext(ctx context.Context, path string, maxPixels int64) (*RGB, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("image %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", path, err)
	}
	defer f.Close()
	return DecodeContext(ctx, f, path, maxPixels)
}

// Decode reads an image (PNG, JPEG, GIF, BMP, WebP or TIFF; the first frame
// of an animation) from r, applies its EXIF orientation and converts it to
// RGB as transformers' load_image does (see the package doc). name is used
// in error messages. maxPixels bounds width*height: 0 means
// [DefaultMaxPixels], a negative value means no limit.
func Decode(r io.Reader, name string, maxPixels int64) (*RGB, error) {
	return DecodeContext(context.Background(), r, name, maxPixels)
}

// DecodeContext is [Decode] that stops when ctx is done: while reading r,
// inside the format's decoder (its reads of the file's bytes fail), and
// between decoding, conversion and orientation. The error wraps ctx.Err()
// and names the image.
func DecodeContext(ctx context.Context, r io.Reader, name string, maxPixels int64) (*RGB, error) {
	data, err := io.ReadAll(contextReader(ctx, r))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("image %s: reading stopped: %w", name, cerr)
		}
		return nil, fmt.Errorf("image %s: reading: %w", name, err)
	}
	return decodeBytes(ctx, data, name, maxPixels)
}

// ctxReader fails its reads once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// contextReader is r, failing its reads once ctx is done; r itself when
// ctx can never be (the decoders then see the reader they always saw).
func contextReader(ctx context.Context, r io.Reader) io.Reader {
	if ctx.Done() == nil {
		return r
	}
	return ctxReader{ctx, r}
}

func decodeBytes(ctx context.Context, data []byte, name string, maxPixels int64) (*RGB, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("image %s: empty file (0 bytes)", name)
	}
	if maxPixels == 0 {
		maxPixels = DefaultMaxPixels
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		if errors.Is(err, image.ErrFormat) {
			return nil, fmt.Errorf("image %s: not a PNG, JPEG, GIF, BMP, WebP or TIFF image (%d bytes starting %q)", name, len(data), head(data))
		}
		return nil, fmt.Errorf("image %s: reading header: %w", name, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("image %s: %s header gives an empty image (%dx%d)", name, format, cfg.Width, cfg.Height)
	}
	if maxPixels > 0 && (int64(cfg.Width) > maxPixels || int64(cfg.Height) > maxPixels/int64(cfg.Width)) {
		return nil, fmt.Errorf("image %s: %dx%d = %d pixels exceeds the limit of %d pixels (a decompression bomb? raise maxPixels to read it)",
			name, cfg.Width, cfg.Height, int64(cfg.Width)*int64(cfg.Height), maxPixels)
	}
	m, format2, err := image.Decode(contextReader(ctx, bytes.NewReader(data)))
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("image %s: decoding %s stopped: %w", name, format, cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: decoding %s: %w", name, format, err)
	}
	if format2 != format {
		return nil, fmt.Errorf("image %s: header says %s but the decoder chose %s", name, format, format2)
	}
	var out *RGB
	switch format {
	case "gif":
		out, err = gifToRGB(m, data, cfg)
	case "webp":
		out, err = webpToRGB(m)
	case "jpeg":
		out, err = jpegToRGB(m)
	case "png":
		out, err = pngToRGB(m, cfg)
	default:
		out = FromImage(m)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: converting %s to RGB: %w", name, format, err)
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, fmt.Errorf("image %s: stopped after converting %s to RGB: %w", name, format, cerr)
	}
	if o := Orientation(data, format); o > 1 {
		out = Transpose(out, o)
	}
	return out, nil
}

func head(data []byte) string {
	if len(data) > 8 {
		data = data[:8]
	}
	return string(data)
}

// pngToRGB handles the one PNG case FromImage cannot tell apart: Go decodes
// 16-bit gray with a tRNS chunk to NRGBA64, where Pillow keeps mode I and
// clips instead of taking the high byte.
func pngToRGB(m image.Image, cfg image.Config) (*RGB, error) {
	if n, ok := m.(*image.NRGBA64); ok && cfg.ColorModel == color.Gray16Model {
		b := n.Bounds()
		out := NewRGB(b.Dx(), b.Dy())
		for y := 0; y < out.H; y++ {
			row := n.Pix[(y)*n.Stride:]
			for x := 0; x < out.W; x++ {
				v := clip16to8(uint16(row[8*x])<<8 | uint16(row[8*x+1]))
				o := 3 * (y*out.W + x)
				out.Pix[o], out.Pix[o+1], out.Pix[o+2] = v, v, v
			}
		}
		return out, nil
	}
	return FromImage(m), nil
}

// clip16to8 is Pillow's I16_RGB / i2rgb: values above 255 saturate.
func clip16to8(v uint16) uint8 {
	if v > 255 {
		return 255
	}
	return uint8(v)
}
