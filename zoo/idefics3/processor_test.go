package idefics3

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/images"
	"github.com/gozoo/gozoo/loaders"
)

// preprocGoldenDir is the bundled SmolVLM preprocessing golden case (format:
// shared/golden/README-vlm.md).
var preprocGoldenDir = filepath.Join("..", "..", "testdata", "golden", "smolvlm-preprocess")

type preprocMeta struct {
	Rows           int    `json:"rows"`
	Cols           int    `json:"cols"`
	NumTiles       int    `json:"num_tiles"`
	ImageSeqLen    int    `json:"image_seq_len"`
	Prompt         string `json:"prompt"`
	ExpandedPrompt string `json:"expanded_prompt"`
	InputIDs       []int  `json:"input_ids"`
	ToyTokenizer   struct {
		SpecialTokens map[string]int `json:"special_tokens"`
		TextPieces    map[string]int `json:"text_pieces"`
	} `json:"toy_tokenizer"`
}

func readPreprocMeta(t *testing.T) preprocMeta {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(preprocGoldenDir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m preprocMeta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func loadPreprocGolden(t *testing.T) (ProcessorConfig, *images.RGB, *loaders.SafetensorsFile) {
	t.Helper()
	cfg, err := LoadProcessorConfig(preprocGoldenDir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := images.Open(filepath.Join(preprocGoldenDir, "image.png"), 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := loaders.OpenSafetensors(filepath.Join(preprocGoldenDir, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return cfg, img, f
}

// The golden case itself (every uint8 stage, pixel_values, the mask, the
// grid, the expanded prompt and its toy ids) runs through golden/ in
// model_test.go's TestGolden, as `gozoo golden` runs it.

// TestImageSeqLenMatchesConfig: the processor's image_seq_len is what the
// model's vision config implies.
func TestImageSeqLenMatchesConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(preprocGoldenDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ScaleFactor  int `json:"scale_factor"`
		VisionConfig struct {
			ImageSize int `json:"image_size"`
			PatchSize int `json:"patch_size"`
		} `json:"vision_config"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	n, err := ImageSeqLen(c.VisionConfig.ImageSize, c.VisionConfig.PatchSize, c.ScaleFactor)
	if err != nil || n != readPreprocMeta(t).ImageSeqLen {
		t.Errorf("ImageSeqLen = %d, %v; golden %d", n, err, readPreprocMeta(t).ImageSeqLen)
	}
	for _, c := range []struct{ size, patch, scale, want int }{{384, 14, 3, 81}, {364, 14, 2, 169}, {512, 16, 4, 64}, {60, 14, 3, 1}} {
		if n, _ := ImageSeqLen(c.size, c.patch, c.scale); n != c.want {
			t.Errorf("ImageSeqLen(%d, %d, %d) = %d, want %d", c.size, c.patch, c.scale, n, c.want)
		}
	}
	if _, err := ImageSeqLen(384, 0, 3); err == nil {
		t.Error("patch size 0: no error")
	}
}

func TestResizeRules(t *testing.T) {
	for _, c := range []struct{ h, w, longest, wantH, wantW int }{
		{61, 97, 252, 158, 252},        // 252/1.5902 = 158.47 -> 158
		{97, 61, 252, 252, 158},        // tall
		{100, 100, 84, 84, 84},         // square
		{300, 1000, 1456, 436, 1456},   // 436.8 -> 436, even
		{333, 1000, 1456, 484, 1456},   // 484.848 -> 484
		{10, 1000, 100, 2, 100},        // 1 -> bumped to 2
		{1, 5000, 100, 1, 100},         // int(100/5000) = 0 is even: no bump, then max(0, 1)
		{5000, 5000, 5000, 4096, 4096}, // capped at MAX_IMAGE_SIZE
		{2000, 5000, 5000, 1638, 4096},
	} {
		h, w := resizeOutputSize(c.h, c.w, c.longest)
		if h != c.wantH || w != c.wantW {
			t.Errorf("resizeOutputSize(%d, %d, %d) = %d, %d; want %d, %d", c.h, c.w, c.longest, h, w, c.wantH, c.wantW)
		}
	}
	for _, c := range []struct{ h, w, m, wantH, wantW int }{
		{158, 252, 84, 168, 252}, // the golden's distortion
		{252, 158, 84, 252, 168},
		{84, 84, 84, 84, 84},
		{54, 84, 84, 84, 84},
		{1456, 1456, 364, 1456, 1456},
		{1092, 1456, 364, 1092, 1456},
	} {
		h, w := encoderSize(c.h, c.w, c.m)
		if h != c.wantH || w != c.wantW {
			t.Errorf("encoderSize(%d, %d, %d) = %d, %d; want %d, %d", c.h, c.w, c.m, h, w, c.wantH, c.wantW)
		}
	}
}

// TestNormalisationBitExact: README item 4, (float32(u8/255 in f64) - 0.5)
// / 0.5 in float32 equals the float32 formula u8/127.5 - 1 for every u8.
func TestNormalisationBitExact(t *testing.T) {
	lut := pixelLUT(DefaultProcessorConfig())
	for v := 0; v < 256; v++ {
		want := float32(v)/float32(127.5) - 1
		for c := 0; c < 3; c++ {
			if lut[c][v] != want {
				t.Fatalf("u8 %d: %v, want %v", v, lut[c][v], want)
			}
		}
	}
	cfg := DefaultProcessorConfig()
	cfg.DoRescale, cfg.DoNormalize = false, false
	if lut := pixelLUT(cfg); lut[1][200] != 200 {
		t.Errorf("no rescale, no normalise: %v", lut[1][200])
	}
}

func TestPreprocessVariants(t *testing.T) {
	cfg, img, _ := loadPreprocGolden(t)

	t.Run("no splitting", func(t *testing.T) {
		c := cfg
		c.DoImageSplitting = false
		b, err := Preprocess(c, []*images.RGB{img})
		if err != nil {
			t.Fatal(err)
		}
		r := b.Images[0]
		if b.NumTiles != 1 || r.Rows != 0 || r.Cols != 0 || r.ResizedForEncoder != nil || b.Height != 84 || b.Width != 84 {
			t.Fatalf("tiles %d grid %dx%d size %dx%d", b.NumTiles, r.Rows, r.Cols, b.Width, b.Height)
		}
		want := images.ResizeLanczos(r.Resized, 84, 84)
		if string(want.Pix) != string(r.Global.Pix) {
			t.Error("global image is not the step-1 image resized to M x M")
		}
	})

	t.Run("not larger than M", func(t *testing.T) {
		c := cfg
		c.Size = Size{LongestEdge: 84}
		b, err := Preprocess(c, []*images.RGB{img})
		if err != nil {
			t.Fatal(err)
		}
		r := b.Images[0]
		if r.Resized.W != 84 || r.Resized.H != 52 || r.Rows != 0 || r.Cols != 0 || b.NumTiles != 1 {
			t.Fatalf("step 1 %dx%d, grid %dx%d, %d tiles", r.Resized.W, r.Resized.H, r.Rows, r.Cols, b.NumTiles)
		}
		if r.Global != r.ResizedForEncoder || r.Global.W != 84 || r.Global.H != 84 {
			t.Error("unsplit image: the one tile should be the step-2 image")
		}
	})

	t.Run("two images in one prompt", func(t *testing.T) {
		small := img.Crop(0, 0, 40, 30) // 252x190 -> 252x252: 3x3 tiles + global
		b1, err := Preprocess(cfg, []*images.RGB{img})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Preprocess(cfg, []*images.RGB{img, small})
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Images) != 2 || b.Images[1].FirstTile != 7 || b.Images[1].NumTiles() != 10 || b.NumTiles != 17 {
			t.Fatalf("images %d, second starts at %d, %d tiles", len(b.Images), b.Images[1].FirstTile, b.NumTiles)
		}
		n := len(b1.PixelValues)
		for i := 0; i < n; i++ {
			if b.PixelValues[i] != b1.PixelValues[i] {
				t.Fatal("the first image's tiles changed when a second image followed")
			}
		}
		s, err := ExpandPrompt("A<image>B<image>C", b.Grids(), 2)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, "A<fake_token_around_image><row_1_col_1><image><image><fake_token_around_image><row_1_col_2>") ||
			!strings.Contains(s, "<fake_token_around_image>B") || !strings.HasSuffix(s, "<fake_token_around_image>C") {
			t.Errorf("two-image expansion: %q", s)
		}
	})

	t.Run("batch padding", func(t *testing.T) {
		wide := img.Crop(0, 0, 97, 20) // 252x52 -> 252x84: 1x3 tiles + global
		pb, err := PreprocessBatch(cfg, [][]*images.RGB{{img}, {wide}, {}})
		if err != nil {
			t.Fatal(err)
		}
		s1 := pb.Samples[1].NumTiles
		if pb.BatchSize != 3 || pb.MaxTiles != 7 || s1 != 4 || pb.Height != 84 || pb.Width != 84 {
			t.Fatalf("batch %d, max tiles %d (sample 1 has %d), %dx%d", pb.BatchSize, pb.MaxTiles, s1, pb.Width, pb.Height)
		}
		plane := 84 * 84
		tile := func(s, n int) ([]float32, []int64) {
			i := s*pb.MaxTiles + n
			return pb.PixelValues[i*3*plane : (i+1)*3*plane], pb.PixelAttentionMask[i*plane : (i+1)*plane]
		}
		for n := 0; n < 7; n++ {
			pv, mask := tile(0, n)
			if string(preprocF32Bytes(pv)) != string(preprocF32Bytes(pb.Samples[0].PixelValues[n*3*plane:(n+1)*3*plane])) || mask[0] != 1 || mask[plane-1] != 1 {
				t.Fatalf("sample 0 tile %d not copied", n)
			}
		}
		for _, st := range []struct{ s, from int }{{1, s1}, {2, 0}} {
			for n := st.from; n < 7; n++ {
				pv, mask := tile(st.s, n)
				for i := range pv {
					if pv[i] != 0 {
						t.Fatalf("sample %d padding tile %d has pixel %v", st.s, n, pv[i])
					}
				}
				for i := range mask {
					if mask[i] != 0 {
						t.Fatalf("sample %d padding tile %d has mask 1", st.s, n)
					}
				}
			}
		}
	})

	t.Run("invalid images", func(t *testing.T) {
		if _, err := Preprocess(cfg, []*images.RGB{img, nil}); err == nil || !strings.Contains(err.Error(), "image 1") {
			t.Errorf("nil image: %v", err)
		}
	})
}

func preprocF32Bytes(v []float32) []byte {
	out := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b := math.Float32bits(x)
		out = append(out, byte(b), byte(b>>8), byte(b>>16), byte(b>>24))
	}
	return out
}

func TestExpandPrompt(t *testing.T) {
	s, err := ExpandPrompt("x<image>y", []ImageGrid{{0, 0}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := "x<fake_token_around_image><global-img><image><image><image><fake_token_around_image>y"; s != want {
		t.Errorf("unsplit:\n got %q\nwant %q", s, want)
	}
	s, err = ExpandPrompt("<image>", []ImageGrid{{1, 2}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := "<fake_token_around_image><row_1_col_1><image><fake_token_around_image><row_1_col_2><image>\n" +
		"\n<fake_token_around_image><global-img><image><fake_token_around_image>"
	if s != want {
		t.Errorf("1x2:\n got %q\nwant %q", s, want)
	}
	_, err = ExpandPrompt("<image> and <image>", []ImageGrid{{0, 0}}, 3)
	if err == nil || !strings.Contains(err.Error(), "2 <image>") || !strings.Contains(err.Error(), "1 images") {
		t.Errorf("count mismatch: %v", err)
	}
	if _, err := ExpandPrompt("no images", nil, 3); err != nil {
		t.Errorf("no images: %v", err)
	}
	if _, err := ExpandPrompt("<image>", []ImageGrid{{2, 0}}, 3); err == nil {
		t.Error("grid 2x0: no error")
	}
}

func writePreprocConfigs(t *testing.T, pre, proc string) string {
	t.Helper()
	dir := t.TempDir()
	if pre != "" {
		if err := os.WriteFile(filepath.Join(dir, "preprocessor_config.json"), []byte(pre), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if proc != "" {
		if err := os.WriteFile(filepath.Join(dir, "processor_config.json"), []byte(proc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadProcessorConfig(t *testing.T) {
	cfg, err := LoadProcessorConfig(writePreprocConfigs(t, "{}", ""))
	if err != nil {
		t.Fatal(err)
	}
	if cfg != DefaultProcessorConfig() {
		t.Errorf("empty config: %+v, want HF defaults %+v", cfg, DefaultProcessorConfig())
	}
	if d := DefaultProcessorConfig(); d.Size.LongestEdge != 1456 || d.MaxImageSize != 364 || d.ImageSeqLen != 169 || d.Resample != images.Lanczos || d.RescaleFactor != 1.0/255 {
		t.Errorf("defaults: %+v", d)
	}

	cfg, err = LoadProcessorConfig(writePreprocConfigs(t,
		`{"image_mean": 0.25, "image_std": [0.1, 0.2, 0.3], "do_image_splitting": false, "resample": 3, "size": {"height": 20, "width": 30}}`,
		`{"image_seq_len": 81}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ImageMean != [3]float64{0.25, 0.25, 0.25} || cfg.ImageStd != [3]float64{0.1, 0.2, 0.3} || cfg.DoImageSplitting ||
		cfg.Resample != images.Bicubic || cfg.Size != (Size{Height: 20, Width: 30}) || cfg.ImageSeqLen != 81 {
		t.Errorf("parsed: %+v", cfg)
	}

	// The single-file layout: settings nested in processor_config.json.
	cfg, err = LoadProcessorConfig(writePreprocConfigs(t, "", `{"image_seq_len": 81, "image_processor": {"max_image_size": {"longest_edge": 384}, "size": {"longest_edge": 1536}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxImageSize != 384 || cfg.Size.LongestEdge != 1536 || cfg.ImageSeqLen != 81 {
		t.Errorf("nested: %+v", cfg)
	}

	for _, c := range []struct{ pre, proc, wantIn string }{
		{`{"image_mean": [1, 2]}`, "", "image_mean"},
		{`{"image_std": "x"}`, "", "image_std"},
		{`{"resample": 0}`, "", "resample"},
		{`{"max_image_size": {"height": 3}}`, "", "max_image_size"},
		{`{"size": {"shortest_edge": 3}}`, "", "size"},
		{`{"image_std": [0.5, 0, 0.5]}`, "", "image_std[1]"},
		{`{not json`, "", "preprocessor_config.json"},
		{`{}`, `{"image_seq_len": "many"}`, "processor_config.json"},
		{"", "", "preprocessor_config.json"},
	} {
		_, err := LoadProcessorConfig(writePreprocConfigs(t, c.pre, c.proc))
		if err == nil || !strings.Contains(err.Error(), c.wantIn) {
			t.Errorf("pre %s proc %s: error %v, want one mentioning %q", c.pre, c.proc, err, c.wantIn)
		}
	}
}
