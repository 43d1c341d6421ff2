package idefics3

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/gozoo/gozoo/images"
)

// FuzzDecodePreprocess feeds arbitrary bytes through image decoding (with
// a small pixel limit) and, when they decode, the whole processor and the
// prompt expansion: an error or a batch, never a panic, and a batch whose
// sizes agree with the grid. Seeds: the golden image and a small image in
// every format the decoder takes.
func FuzzDecodePreprocess(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "golden", "smolvlm-preprocess", "image.png")); err == nil {
		f.Add(b)
	}
	m := image.NewNRGBA(image.Rect(0, 0, 7, 5))
	for i := range m.Pix {
		m.Pix[i] = byte(i * 37)
	}
	for _, enc := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return png.Encode(b, m) },
		func(b *bytes.Buffer) error { return jpeg.Encode(b, m, nil) },
		func(b *bytes.Buffer) error {
			p := image.NewPaletted(m.Bounds(), color.Palette{color.Black, color.White, color.Transparent})
			return gif.Encode(b, p, nil)
		},
		func(b *bytes.Buffer) error { return bmp.Encode(b, m) },
		func(b *bytes.Buffer) error { return tiff.Encode(b, m, nil) },
	} {
		var b bytes.Buffer
		if err := enc(&b); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	cfg := DefaultProcessorConfig()
	cfg.Size.LongestEdge, cfg.MaxImageSize, cfg.ImageSeqLen = 64, 32, 4
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := images.Decode(bytes.NewReader(data), "fuzz.img", 1<<16)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.img") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		b, err := Preprocess(cfg, []*images.RGB{img})
		if err != nil {
			return
		}
		tiles := b.Images[0].NumTiles()
		if b.NumTiles != tiles || len(b.PixelValues) != tiles*3*b.Height*b.Width {
			t.Fatalf("%d tiles and %d pixel values for a %dx%d grid", b.NumTiles, len(b.PixelValues), b.Images[0].Rows, b.Images[0].Cols)
		}
		text, err := ExpandPrompt(ImageToken, b.Grids(), cfg.ImageSeqLen)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(text, ImageToken); n != tiles*cfg.ImageSeqLen {
			t.Fatalf("%d image tokens for %d tiles", n, tiles)
		}
	})
}
