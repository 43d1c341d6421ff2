package images

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/gozoo/gozoo/loaders"
)

// lcgImage is a deterministic noise image: byte i is the top byte of the
// i-th step of Knuth's MMIX LCG seeded with seed. Noise is the hardest input
// for a resampler (negative lobes, clipping at both ends).
func lcgImage(w, h int, seed uint64) *RGB {
	m := NewRGB(w, h)
	s := seed
	for i := range m.Pix {
		s = s*6364136223846793005 + 1442695040888963407
		m.Pix[i] = uint8(s >> 56)
	}
	return m
}

// gradientImage is a smooth test image: R ramps along x, G along y, B wraps.
func gradientImage(w, h int) *RGB {
	m := NewRGB(w, h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			o := 3 * (y*w + x)
			m.Pix[o] = uint8(x * 255 / max(1, w-1))
			m.Pix[o+1] = uint8(y * 255 / max(1, h-1))
			m.Pix[o+2] = uint8((x + y) * 7)
		}
	}
	return m
}

func shortHash(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// TestResizeMatchesPillow compares against hashes of Pillow 9.4.0's
// Image.resize on the same images (the SmolVLM goldens were made with 9.4.0),
// for every convolution filter: up, down, one axis only (one pass skipped),
// mixed, to and from 1x1, extreme aspect ratios.
func TestResizeMatchesPillow(t *testing.T) {
	cases := []struct {
		kind                       string
		w, h                       int
		seed                       uint64
		ow, oh                     int
		lanczos, bicubic, bilinear string
		box, hamming               string
	}{
		{"noise", 97, 61, 1, 252, 158, "dd1549d464ffafd3", "43967aba2324d717", "396ee07e14809e8b", "e78a653cc056da8a", "9f4f6a775d3cb101"},
		{"noise", 97, 61, 1, 61, 97, "a8d37e6e1cd51860", "6832337043f101de", "b4824547ecf17c35", "ce8d61a3c4be8320", "deb2bc13c1e46bba"},
		{"noise", 300, 200, 2, 37, 23, "e31ac539332f1ce3", "57451875723aaac3", "1886cd8fdc28e4ef", "af08deb35b2d2653", "2ca6425266c54a56"},
		{"noise", 300, 200, 2, 300, 77, "2a29693d938a47f8", "4816939bf4dc81bb", "fba8ceef05751247", "3feb811e485193ad", "afe39698ca3cb45c"},
		{"noise", 300, 200, 2, 91, 200, "1fb101b75138b3ff", "4c4c798d3b33a24d", "9eb10c943429d43e", "391ea56f9bc2ef15", "08356904ec53763f"},
		{"noise", 64, 64, 3, 1, 1, "a1a4a354c9935583", "00ec755019482152", "a1a4a354c9935583", "00ec755019482152", "a1a4a354c9935583"},
		{"noise", 1, 1, 4, 5, 3, "0431e41baa1cabea", "0431e41baa1cabea", "0431e41baa1cabea", "0431e41baa1cabea", "0431e41baa1cabea"},
		{"noise", 1000, 3, 5, 7, 3, "066e550af0a0d599", "a3019373aa1540c8", "d34ad325924ae88d", "22ee18b1c6d433c4", "9dc703f155cf2da3"},
		{"noise", 50, 40, 6, 51, 39, "e634bb74457dc468", "89daa9fbcd3444e3", "d8b9997057e4908e", "63e6a919d8f36686", "3ae0f2cb532ccaef"},
		{"noise", 13, 17, 7, 84, 84, "bdc750aaa21f98d6", "7978b9971c279d52", "776ccbccc6bcf92d", "e6ae694ed1568fcd", "ce95046d8a6133ae"},
		{"grad", 252, 168, 0, 84, 84, "4789c808485f618d", "a9fa06ebc51846c1", "97b18a47c6e11b1b", "0fa3fda62cc6e124", "6d2f2156336b4074"},
		{"grad", 97, 61, 0, 252, 158, "dde13c70be041e49", "3041877e7b6c2932", "3c4479f6706dbcd9", "85b60b77401ac39b", "5b673eeb15a1fd3e"},
		{"noise", 256, 256, 8, 384, 384, "c30ea29b4e8b009b", "eadd538fd4e966eb", "b90fa0ff7917af39", "51973111d66ada84", "74d8372ccdcaa58d"},
		{"noise", 31, 7, 9, 62, 14, "83babdd9eb1f80fd", "1fca915cda5d5a4a", "7f50973d0a763b13", "17a2f077df9a7aa2", "7428bee5934f40f6"},
	}
	for _, c := range cases {
		src := gradientImage(c.w, c.h)
		if c.kind == "noise" {
			src = lcgImage(c.w, c.h, c.seed)
		}
		for _, f := range []struct {
			f    Filter
			want string
		}{{Lanczos, c.lanczos}, {Bicubic, c.bicubic}, {Bilinear, c.bilinear}, {Box, c.box}, {Hamming, c.hamming}} {
			got, err := Resize(src, c.ow, c.oh, f.f)
			if err != nil {
				t.Fatal(err)
			}
			if got.W != c.ow || got.H != c.oh {
				t.Fatalf("%s %dx%d -> %dx%d %v: got %dx%d", c.kind, c.w, c.h, c.ow, c.oh, f.f, got.W, got.H)
			}
			if h := shortHash(got.Pix); h != f.want {
				t.Errorf("%s %dx%d seed %d -> %dx%d %v: sha256 %s, Pillow 9.4 gives %s", c.kind, c.w, c.h, c.seed, c.ow, c.oh, f.f, h, f.want)
			}
		}
	}
}

func TestResizeSameSizeIsCopy(t *testing.T) {
	src := lcgImage(5, 4, 1)
	got := ResizeLanczos(src, 5, 4)
	if shortHash(got.Pix) != shortHash(src.Pix) {
		t.Fatal("same-size resize changed pixels")
	}
	got.Pix[0]++
	if got.Pix[0] == src.Pix[0] {
		t.Fatal("same-size resize returned the source, not a copy")
	}
}

func TestResizeErrors(t *testing.T) {
	src := lcgImage(5, 4, 1)
	for _, c := range []struct {
		w, h int
		f    Filter
	}{{0, 4, Lanczos}, {5, -1, Lanczos}, {3, 3, 0}, {3, 3, 9}} {
		if _, err := Resize(src, c.w, c.h, c.f); err == nil {
			t.Errorf("Resize to %dx%d with %v: no error", c.w, c.h, c.f)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("ResizeLanczos to 0x0 did not panic")
		}
	}()
	ResizeLanczos(src, 0, 0)
}

// goldenDir is the SmolVLM preprocessing golden case, bundled at the
// repository root.
var goldenDir = filepath.Join("..", "testdata", "golden", "smolvlm-preprocess")

// goldenU8 reads an F32 golden tensor holding exact uint8 values.
func goldenU8(t *testing.T, f *loaders.SafetensorsFile, name string) (*RGB, []int) {
	t.Helper()
	v, shape, err := f.Float32s(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(shape) != 3 || shape[2] != 3 {
		t.Fatalf("%s: shape %v, want [H,W,3]", name, shape)
	}
	m := NewRGB(shape[1], shape[0])
	for i, x := range v {
		if x != float32(uint8(x)) {
			t.Fatalf("%s[%d] = %v is not a uint8", name, i, x)
		}
		m.Pix[i] = uint8(x)
	}
	return m, shape
}

// TestResizeGolden runs the three quantised LANCZOS resizes of the SmolVLM
// preprocessing golden (image.png 97x61 -> 252x158 -> 252x168 -> 84x84) and
// requires every uint8 to match.
func TestResizeGolden(t *testing.T) {
	img, err := Open(filepath.Join(goldenDir, "image.png"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if img.W != 97 || img.H != 61 {
		t.Fatalf("image.png is %dx%d, want 97x61", img.W, img.H)
	}
	f, err := loaders.OpenSafetensors(filepath.Join(goldenDir, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	step := img
	for _, name := range []string{"resized", "resized_for_encoder", "global_image"} {
		want, shape := goldenU8(t, f, name)
		step = ResizeLanczos(step, shape[1], shape[0])
		diff := 0
		for i := range want.Pix {
			if want.Pix[i] != step.Pix[i] {
				diff++
			}
		}
		if diff != 0 {
			t.Errorf("%s: %d of %d uint8 values differ from the golden", name, diff, len(want.Pix))
		}
		step = want // each step starts from the golden input, so failures do not cascade
	}
}
