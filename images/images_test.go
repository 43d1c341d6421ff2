package images

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// sample is a small deterministic test picture with varied values.
func sample(w, h int) []uint8 {
	return lcgImage(w, h, 42).Pix
}

func encode(t *testing.T, enc func(*bytes.Buffer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := enc(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecodeFormats decodes images written in-test by the standard library
// and x/image encoders and checks the pixels Pillow's convert("RGB") would
// give (each rule also checked against Pillow 9.4 on files Pillow wrote).
func TestDecodeFormats(t *testing.T) {
	const w, h = 7, 5
	px := sample(w, h)
	rgbOf := func(f func(i int) (r, g, b uint8)) []uint8 {
		out := make([]uint8, 3*w*h)
		for i := 0; i < w*h; i++ {
			out[3*i], out[3*i+1], out[3*i+2] = f(i)
		}
		return out
	}
	gray := image.NewGray(image.Rect(0, 0, w, h))
	copy(gray.Pix, px)
	gray16 := image.NewGray16(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		// Small values (high byte 0) and large ones alternate.
		v := uint16(px[i])
		if i%2 == 1 {
			v |= uint16(px[i+1]) << 8
		}
		binary.BigEndian.PutUint16(gray16.Pix[2*i:], v)
	}
	nrgba := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		copy(nrgba.Pix[4*i:4*i+3], px[3*i:3*i+3])
		nrgba.Pix[4*i+3] = uint8(i * 37) // alpha 0 included: colour still kept
	}
	// Premultiplied RGBA: tiff writes it as associated alpha, Pillow
	// un-premultiplies with integer division.
	rgba := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		a := uint8(i * 53)
		for c := 0; c < 3; c++ {
			rgba.Pix[4*i+c] = uint8(uint32(px[3*i+c]) * uint32(a) / 255)
		}
		rgba.Pix[4*i+3] = a
	}
	pal := color.Palette{color.RGBA{10, 20, 30, 255}, color.RGBA{200, 100, 50, 255}, color.RGBA{1, 2, 3, 255}, color.RGBA{250, 240, 230, 255}}
	paletted := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	for i := range paletted.Pix {
		paletted.Pix[i] = px[i] % 4
	}
	wantGray := rgbOf(func(i int) (uint8, uint8, uint8) { return px[i], px[i], px[i] })
	wantGray16 := rgbOf(func(i int) (uint8, uint8, uint8) {
		v := clip16to8(binary.BigEndian.Uint16(gray16.Pix[2*i:]))
		return v, v, v
	})
	wantNRGBA := rgbOf(func(i int) (uint8, uint8, uint8) { return px[3*i], px[3*i+1], px[3*i+2] })
	wantRGBA := rgbOf(func(i int) (uint8, uint8, uint8) { return unpremultiply(rgba.Pix[4*i : 4*i+4]) })
	wantPal := rgbOf(func(i int) (uint8, uint8, uint8) {
		c := pal[paletted.Pix[i]].(color.RGBA)
		return c.R, c.G, c.B
	})

	cases := []struct {
		name string
		data []byte
		want []uint8
	}{
		{"gray.png", encode(t, func(b *bytes.Buffer) error { return png.Encode(b, gray) }), wantGray},
		{"gray16.png", encode(t, func(b *bytes.Buffer) error { return png.Encode(b, gray16) }), wantGray16},
		{"nrgba.png", encode(t, func(b *bytes.Buffer) error { return png.Encode(b, nrgba) }), wantNRGBA},
		{"paletted.png", encode(t, func(b *bytes.Buffer) error { return png.Encode(b, paletted) }), wantPal},
		{"paletted.gif", encode(t, func(b *bytes.Buffer) error { return gif.Encode(b, paletted, nil) }), wantPal},
		{"gray.bmp", encode(t, func(b *bytes.Buffer) error { return bmp.Encode(b, gray) }), wantGray},
		{"nrgba.bmp", encode(t, func(b *bytes.Buffer) error { return bmp.Encode(b, nrgba) }), wantNRGBA},
		{"paletted.bmp", encode(t, func(b *bytes.Buffer) error { return bmp.Encode(b, paletted) }), wantPal},
		{"gray.tiff", encode(t, func(b *bytes.Buffer) error { return tiff.Encode(b, gray, nil) }), wantGray},
		{"gray16.tiff", encode(t, func(b *bytes.Buffer) error { return tiff.Encode(b, gray16, nil) }), wantGray16},
		{"nrgba.tiff", encode(t, func(b *bytes.Buffer) error { return tiff.Encode(b, nrgba, nil) }), wantNRGBA},
		{"rgba-associated.tiff", encode(t, func(b *bytes.Buffer) error { return tiff.Encode(b, rgba, nil) }), wantRGBA},
		{"deflate.tiff", encode(t, func(b *bytes.Buffer) error {
			return tiff.Encode(b, nrgba, &tiff.Options{Compression: tiff.Deflate, Predictor: true})
		}), wantNRGBA},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode(bytes.NewReader(c.data), c.name, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.W != w || got.H != h {
				t.Fatalf("got %dx%d, want %dx%d", got.W, got.H, w, h)
			}
			if !bytes.Equal(got.Pix, c.want) {
				t.Errorf("pixels differ:\n got %v\nwant %v", got.Pix[:24], c.want[:24])
			}
		})
	}
}

// TestDecodeJPEG: Go's IDCT is not libjpeg-turbo's, so pixels are only
// close; the chroma upsampling and colour conversion follow libjpeg-turbo.
func TestDecodeJPEG(t *testing.T) {
	const w, h = 16, 16
	src := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			src.Set(x, y, color.RGBA{uint8(16 * x), uint8(16 * y), 128, 255})
		}
	}
	data := encode(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, &jpeg.Options{Quality: 100}) })
	got, err := Decode(bytes.NewReader(data), "ramp.jpg", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < w*h; i++ {
		for c := 0; c < 3; c++ {
			// 4:2:0 chroma loses detail in the encoder: a smoke test only
			// (TestDecodePillowFixtures compares with Pillow).
			if d := int(got.Pix[3*i+c]) - int(src.Pix[4*i+c]); d < -16 || d > 16 {
				t.Fatalf("pixel %d channel %d: %d, encoded %d", i, c, got.Pix[3*i+c], src.Pix[4*i+c])
			}
		}
	}
}

// TestDecodePillowFixtures decodes files Pillow 9.4 wrote and compares with
// Pillow's own decode: WebP (lossy, lossy with alpha, lossless with alpha)
// exactly; JPEG within the IDCT's rounding.
//
// The fixtures (fixtures_test.go) come from, in Python with Pillow 9.4:
//
//	im = blend(noise(w//4+1, h//4+1).resize((w, h), BICUBIC), gradient, 0.5)
//	im.save(buf, "WEBP", quality=70)                        # lossyWebP 13x11
//	rgba(12x9).save(buf, "WEBP", quality=70 | lossless=True) # *AlphaWebP
//	im.save(buf, "JPEG", quality=85, subsampling=2)         # jpeg420 13x11
//	im.convert("CMYK").save(buf, "JPEG", quality=95)        # jpegCMYK 9x7
//	ImageOps.exif_transpose(Image.open(buf)).convert("RGB").tobytes()
func TestDecodePillowFixtures(t *testing.T) {
	for name, f := range pillowFixtures {
		t.Run(name, func(t *testing.T) {
			data, _ := hex.DecodeString(f.file)
			want, _ := hex.DecodeString(f.pillowRGB)
			got, err := Decode(bytes.NewReader(data), name, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.W != f.w || got.H != f.h {
				t.Fatalf("got %dx%d, want %dx%d", got.W, got.H, f.w, f.h)
			}
			tol := 0
			if strings.HasPrefix(name, "jpeg") {
				tol = 3
			}
			worst := 0
			for i := range want {
				worst = max(worst, abs(int(got.Pix[i])-int(want[i])))
			}
			if worst > tol {
				t.Errorf("max |ours - Pillow| = %d, allowed %d", worst, tol)
			}
		})
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestGIFTransparencyAndOffset: Pillow fills the logical screen with the
// transparent index and shows that index's stored colour; Go's decoder
// would give transparent black.
func TestGIFTransparencyAndOffset(t *testing.T) {
	pal := color.Palette{color.RGBA{10, 20, 30, 255}, color.RGBA{200, 100, 50, 255}, color.RGBA{1, 2, 3, 255}, color.RGBA{250, 240, 230, 255}}
	frame := image.NewPaletted(image.Rect(3, 4, 6, 6), pal)
	for i := range frame.Pix {
		frame.Pix[i] = uint8(i % 4)
	}
	data := encode(t, func(b *bytes.Buffer) error {
		return gif.EncodeAll(b, &gif.GIF{Image: []*image.Paletted{frame}, Delay: []int{0},
			Config: image.Config{ColorModel: pal, Width: 8, Height: 7}})
	})
	// Insert a graphic control extension with transparent index 1 before
	// the image descriptor (after the 4-entry global table).
	at := 13 + 3*4
	if data[at] != 0x2c {
		t.Fatalf("unexpected GIF layout: byte %d is %#x", at, data[at])
	}
	gce := []byte{0x21, 0xf9, 4, 1, 0, 0, 1, 0}
	data = append(append(append([]byte(nil), data[:at]...), gce...), data[at:]...)
	got, err := Decode(bytes.NewReader(data), "t.gif", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.W != 8 || got.H != 7 {
		t.Fatalf("got %dx%d, want the 8x7 logical screen", got.W, got.H)
	}
	px := func(x, y int) [3]uint8 { o := 3 * (y*got.W + x); return [3]uint8(got.Pix[o : o+3]) }
	if p := px(0, 0); p != [3]uint8{200, 100, 50} {
		t.Errorf("outside the frame: %v, want the transparent index's colour (200,100,50)", p)
	}
	if p := px(4, 4); p != [3]uint8{200, 100, 50} { // frame pixel index 1
		t.Errorf("transparent pixel in the frame: %v, want (200,100,50)", p)
	}
	if p := px(3, 4); p != [3]uint8{10, 20, 30} {
		t.Errorf("frame pixel index 0: %v, want (10,20,30)", p)
	}
}

func TestCMYKToRGB(t *testing.T) {
	// Pillow 9.4: Image.frombytes("CMYK", (1, 1), c).convert("RGB").
	for _, c := range []struct{ cmyk, rgb [4]uint8 }{
		{[4]uint8{0, 0, 0, 0}, [4]uint8{255, 255, 255}},
		{[4]uint8{255, 255, 255, 255}, [4]uint8{0, 0, 0}},
		{[4]uint8{10, 200, 30, 40}, [4]uint8{207, 46, 190}},
		{[4]uint8{128, 64, 32, 16}, [4]uint8{119, 179, 209}},
		{[4]uint8{255, 0, 0, 128}, [4]uint8{0, 127, 127}},
		{[4]uint8{1, 2, 3, 254}, [4]uint8{1, 1, 1}},
		{[4]uint8{77, 77, 77, 77}, [4]uint8{124, 124, 124}},
	} {
		m := &image.CMYK{Pix: c.cmyk[:], Stride: 4, Rect: image.Rect(0, 0, 1, 1)}
		got := FromImage(m)
		if [3]uint8(got.Pix) != [3]uint8(c.rgb[:3]) {
			t.Errorf("CMYK %v -> %v, Pillow gives %v", c.cmyk, got.Pix, c.rgb[:3])
		}
	}
}

// insertAPP1 puts an EXIF segment with the given orientation right after a
// JPEG's SOI marker.
func insertAPP1(jpg []byte, orientation uint16, bigEndian bool) []byte {
	var t []byte
	if bigEndian {
		t = []byte{'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint16(t[18:], orientation)
	} else {
		t = []byte{'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.LittleEndian.PutUint16(t[18:], orientation)
	}
	seg := append([]byte("Exif\x00\x00"), t...)
	app := []byte{0xff, 0xe1, 0, 0}
	binary.BigEndian.PutUint16(app[2:], uint16(len(seg)+2))
	out := append([]byte(nil), jpg[:2]...)
	out = append(append(out, app...), seg...)
	return append(out, jpg[2:]...)
}

func TestEXIFOrientation(t *testing.T) {
	// A 3x2 image whose red channel numbers the pixels; the expected
	// layouts are Pillow 9.4's Image.transpose for each orientation.
	base := NewRGB(3, 2)
	for i := 0; i < 6; i++ {
		base.Pix[3*i] = uint8(i)
	}
	want := map[int]struct {
		w, h int
		red  []uint8
	}{
		2: {3, 2, []uint8{2, 1, 0, 5, 4, 3}},
		3: {3, 2, []uint8{5, 4, 3, 2, 1, 0}},
		4: {3, 2, []uint8{3, 4, 5, 0, 1, 2}},
		5: {2, 3, []uint8{0, 3, 1, 4, 2, 5}},
		6: {2, 3, []uint8{3, 0, 4, 1, 5, 2}},
		7: {2, 3, []uint8{5, 2, 4, 1, 3, 0}},
		8: {2, 3, []uint8{2, 5, 1, 4, 0, 3}},
	}
	for o, wt := range want {
		got := Transpose(base, o)
		red := make([]uint8, 6)
		for i := range red {
			red[i] = got.Pix[3*i]
		}
		if got.W != wt.w || got.H != wt.h || !bytes.Equal(red, wt.red) {
			t.Errorf("orientation %d: %dx%d %v, want %dx%d %v", o, got.W, got.H, red, wt.w, wt.h, wt.red)
		}
	}

	// Through a JPEG file: EXIF in both byte orders, every orientation.
	src := image.NewGray(image.Rect(0, 0, 16, 8))
	for i := range src.Pix {
		src.Pix[i] = uint8(i * 2)
	}
	jpg := encode(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, &jpeg.Options{Quality: 95}) })
	plain, err := Decode(bytes.NewReader(jpg), "plain.jpg", 0)
	if err != nil {
		t.Fatal(err)
	}
	for o := 1; o <= 8; o++ {
		for _, be := range []bool{false, true} {
			data := insertAPP1(jpg, uint16(o), be)
			if got := Orientation(data, "jpeg"); got != o {
				t.Errorf("Orientation = %d, want %d (big-endian %v)", got, o, be)
			}
			got, err := Decode(bytes.NewReader(data), "exif.jpg", 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := Transpose(plain, o); got.W != want.W || !bytes.Equal(got.Pix, want.Pix) {
				t.Errorf("orientation %d: decoded image is not the transposed plain decode", o)
			}
		}
	}
	// Out-of-range values are ignored, as exif_transpose does.
	if got := Orientation(insertAPP1(jpg, 9, false), "jpeg"); got != 1 {
		t.Errorf("orientation 9 read as %d, want 1", got)
	}
	if got := Orientation(jpg, "jpeg"); got != 1 {
		t.Errorf("no EXIF read as %d", got)
	}
}

// pngChunk builds one PNG chunk.
func pngChunk(typ string, body []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	out = append(out, typ...)
	out = append(out, body...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(append([]byte(typ), body...)))
}

func TestDecodeErrors(t *testing.T) {
	good := encode(t, func(b *bytes.Buffer) error { return png.Encode(b, image.NewGray(image.Rect(0, 0, 11, 10))) })
	noisy := image.NewGray(image.Rect(0, 0, 64, 64))
	copy(noisy.Pix, lcgImage(64, 64, 5).Pix)
	goodJPEG := encode(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, noisy, nil) })
	// A PNG header claiming 100000x100000 pixels and nothing else.
	ihdr := binary.BigEndian.AppendUint32(nil, 100000)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 100000)
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	bomb := append([]byte("\x89PNG\r\n\x1a\n"), pngChunk("IHDR", ihdr)...)
	bomb = append(bomb, pngChunk("IDAT", []byte{0x78, 0x9c})...)

	cases := []struct {
		name      string
		data      []byte
		maxPixels int64
		wantIn    []string
	}{
		{"empty.png", nil, 0, []string{"empty.png", "empty"}},
		{"truncated.png", good[:len(good)/2], 0, []string{"truncated.png", "png"}},
		{"header-only.png", good[:30], 0, []string{"header-only.png"}},
		{"truncated.jpg", goodJPEG[:len(goodJPEG)/2], 0, []string{"truncated.jpg", "decoding jpeg"}},
		{"truncated-header.jpg", goodJPEG[:100], 0, []string{"truncated-header.jpg", "reading header"}},
		{"notes.txt", []byte("hello, this is not an image\n"), 0, []string{"notes.txt", "not a PNG"}},
		{"bomb.png", bomb, 0, []string{"bomb.png", "100000x100000", "178956970"}},
		{"small-limit.png", good, 100, []string{"small-limit.png", "110 pixels", "limit of 100"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(c.data), c.name, c.maxPixels)
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range c.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
	// The same image is fine with a limit it fits, or none.
	for _, limit := range []int64{110, -1} {
		if _, err := Decode(bytes.NewReader(good), "ok.png", limit); err != nil {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
}

// TestPixelLimitFailsFast: refusing a decompression bomb must not allocate
// its 30 GB buffer, nor anything near it.
func TestPixelLimitFailsFast(t *testing.T) {
	ihdr := binary.BigEndian.AppendUint32(nil, 100000)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 100000)
	ihdr = append(ihdr, 8, 2, 0, 0, 0)
	bomb := append([]byte("\x89PNG\r\n\x1a\n"), pngChunk("IHDR", ihdr)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := Decode(bytes.NewReader(bomb), "bomb.png", 0); err == nil {
			t.Fatal("no error")
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Errorf("refusing 10 bombs allocated %d bytes", d)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	src := image.NewNRGBA(image.Rect(0, 0, 4, 3))
	for i := range src.Pix {
		src.Pix[i] = uint8(i * 5)
	}
	p := filepath.Join(dir, "x.png")
	if err := os.WriteFile(p, encode(t, func(b *bytes.Buffer) error { return png.Encode(b, src) }), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.W != 4 || m.H != 3 || m.Pix[3] != src.Pix[4] {
		t.Errorf("Open: %dx%d %v", m.W, m.H, m.Pix[:6])
	}
	if _, err := Open(filepath.Join(dir, "missing.png"), 0); err == nil || !strings.Contains(err.Error(), "missing.png") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCrop(t *testing.T) {
	m := lcgImage(5, 4, 3)
	c := m.Crop(1, 2, 3, 5) // clipped to 3x2
	if c.W != 3 || c.H != 2 {
		t.Fatalf("crop is %dx%d, want 3x2", c.W, c.H)
	}
	for y := 0; y < c.H; y++ {
		for x := 0; x < c.W; x++ {
			if !bytes.Equal(c.Pix[3*(y*c.W+x):3*(y*c.W+x)+3], m.Pix[3*((y+2)*m.W+x+1):3*((y+2)*m.W+x+1)+3]) {
				t.Fatalf("pixel (%d,%d) differs", x, y)
			}
		}
	}
}

// TestDecodeCorruptNoPanic truncates and corrupts files of every format
// (and the hand-written EXIF and GIF table parsers' inputs) and requires
// Decode to return, error or not, without panicking.
func TestDecodeCorruptNoPanic(t *testing.T) {
	src := image.NewNRGBA(image.Rect(0, 0, 9, 7))
	copy(src.Pix, lcgImage(9, 7, 11).Pix)
	pal := image.NewPaletted(image.Rect(0, 0, 9, 7), color.Palette{color.Black, color.White, color.RGBA{1, 2, 3, 255}})
	files := map[string][]byte{
		"png":  encode(t, func(b *bytes.Buffer) error { return png.Encode(b, src) }),
		"gif":  encode(t, func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) }),
		"bmp":  encode(t, func(b *bytes.Buffer) error { return bmp.Encode(b, src) }),
		"tiff": encode(t, func(b *bytes.Buffer) error { return tiff.Encode(b, src, nil) }),
		"jpeg": insertAPP1(encode(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, src, nil) }), 6, false),
	}
	for name, f := range pillowFixtures {
		files[name], _ = hex.DecodeString(f.file)
	}
	s := uint64(1)
	for name, data := range files {
		for cut := 0; cut < len(data); cut += 1 + len(data)/64 {
			Decode(bytes.NewReader(data[:cut]), name, 0)
		}
		for range 200 {
			bad := append([]byte(nil), data...)
			for range 3 {
				s = s*6364136223846793005 + 1442695040888963407
				bad[int(s>>33)%len(bad)] = uint8(s >> 56)
			}
			Decode(bytes.NewReader(bad), name, 1<<16)
			for _, format := range []string{"jpeg", "png", "webp", "tiff"} {
				Orientation(bad, format)
			}
			gifFirstFrameTable(bad)
		}
	}
}
