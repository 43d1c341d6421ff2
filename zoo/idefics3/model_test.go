package idefics3_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/golden"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

// TestGolden runs the bundled SmolVLM cases: the vision tower with every
// layer's residual stream, the connector, and the whole model with its
// KV-cached greedy decode.
func TestGolden(t *testing.T) {
	for _, name := range []string{"smolvlm-vision", "smolvlm-connector", "smolvlm-full", "smolvlm-preprocess"} {
		t.Run(name, func(t *testing.T) {
			for _, batch := range []int{1, 8} {
				r := golden.RunWith(familytest.GoldenDir(name), golden.Options{Batch: batch})
				if !r.Pass {
					t.Fatalf("batch %d: %v", batch, r)
				}
				if name == "smolvlm-full" && (r.GreedyTotal != 10 || r.GreedyMatched != 10) {
					t.Fatalf("batch %d: greedy %d/%d, want 10/10", batch, r.GreedyMatched, r.GreedyTotal)
				}
				t.Logf("batch %d: %v", batch, r)
			}
		})
	}
}

// TestRealConfig parses SmolVLM-Instruct's config and counts its
// parameters from the tensors the model declares: 2,246,272,880, the
// "2.2B" (2.25B) of the model card. By part:
//   - vision 412,987,248: 27 layers × (4·(1152²+1152) attention + 1152·4304+4304 +
//     4304·1152+1152 MLP + 4·1152 LayerNorms) + patch 1152·3·14²+1152 +
//     positions 27²·1152 + post-LayerNorm 2·1152;
//   - connector 21,233,664: 1152·3²·2048;
//   - text 1,812,051,968: 24 layers × (4·2048² + 3·2048·8192 + 2·2048) +
//     embeddings and the untied head 2·49155·2048 + the final norm 2048.
func TestRealConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "configs", "smolvlm-instruct.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := zoo.ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.(*idefics3.Config)
	if c.ImageSeqLen() != 81 || c.PatchesPerSide() != 27 || c.ImageTokenID != 49153 {
		t.Errorf("image_seq_len %d (want 81), patches per side %d (want 27), image token %d (want 49153)", c.ImageSeqLen(), c.PatchesPerSide(), c.ImageTokenID)
	}
	ps, err := zoo.Tensors(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var total, vision, connector int64
	for _, p := range ps {
		total += p.Numel()
		switch {
		case strings.HasPrefix(p.Name, "model.vision_model."):
			vision += p.Numel()
		case strings.HasPrefix(p.Name, "model.connector."):
			connector += p.Numel()
		}
	}
	if total != 2_246_272_880 || vision != 412_987_248 || connector != 21_233_664 {
		t.Errorf("parameters: total %d, vision %d, connector %d; want 2,246,272,880, 412,987,248 and 21,233,664", total, vision, connector)
	}
}

// TestConfigErrors: a config whose sizes cannot work is refused naming
// the field, and one whose vision sizes disagree with the weights fails to
// load naming the tensor.
func TestConfigErrors(t *testing.T) {
	dir := familytest.GoldenDir("smolvlm-vision")
	for _, tc := range []struct {
		edit func(m map[string]any)
		want string
	}{
		{func(m map[string]any) { m["vision_config"].(map[string]any)["model_type"] = "siglip" }, "vision_config.model_type"},
		{func(m map[string]any) { m["scale_factor"] = 3 }, "scale_factor 3"},
		{func(m map[string]any) { m["vision_config"].(map[string]any)["num_attention_heads"] = 5 }, "num_attention_heads 5"},
		{func(m map[string]any) { m["image_token_id"] = 400 }, "image_token_id 400"},
		{func(m map[string]any) { m["text_config"].(map[string]any)["model_type"] = "mistral" }, "text_config.model_type"},
	} {
		if _, err := familytest.EditConfig(t, dir, tc.edit); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error naming %q, got %v", tc.want, err)
		}
	}
	cfg, err := familytest.EditConfig(t, dir, func(m map[string]any) { m["vision_config"].(map[string]any)["intermediate_size"] = 80 })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zoo.LoadWeights(dir, cfg, nil); err == nil || !strings.Contains(err.Error(), "model.vision_model.encoder.layers.0.mlp.fc1.weight") {
		t.Errorf("a vision size that disagrees with the weights: %v", err)
	}
}

// TestVisionWeightsMatter changes each kind of vision and connector
// tensor and checks that the image features move.
func TestVisionWeightsMatter(t *testing.T) {
	m := familytest.Load(t, familytest.GoldenDir("smolvlm-full")).(*idefics3.Model)
	v := m.Config.VisionConfig
	tiles := 2
	pixels := make([]float32, tiles*v.NumChannels*v.ImageSize*v.ImageSize)
	for i := range pixels {
		pixels[i] = float32(i%97)/48.5 - 1
	}
	// Capturing builds a fresh program, which binds the current data.
	encode := func() []float32 {
		f, err := m.EncodeImages(pixels, tiles, idefics3.LastHiddenState)
		if err != nil {
			t.Fatal(err)
		}
		return f.Rows
	}
	base := encode()
	if len(base) != tiles*m.Config.ImageSeqLen()*m.Config.Text.HiddenSize {
		t.Fatalf("%d feature values for %d tiles", len(base), tiles)
	}
	var names []string
	for _, p := range m.Params().All() {
		// A key bias adds q·b to every score of a query alike, which the
		// softmax cancels: it is the one tensor that cannot matter.
		if strings.HasSuffix(p.Name, "k_proj.bias") {
			continue
		}
		if strings.HasPrefix(p.Name, "model.vision_model.") && !strings.Contains(p.Name, "layers.1.") || strings.HasPrefix(p.Name, "model.connector.") {
			names = append(names, p.Name)
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d vision tensors: %v", len(names), names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			familytest.Perturb(t, m, name, func() {
				if d := familytest.MaxDiff(base, encode()); d < 1e-5 {
					t.Fatalf("changing %s moved the features by %g", name, d)
				}
			})
		})
	}
}

// TestImageTokenCount: the prompt's <image> tokens must match the feature
// rows the images give, and an all-zero tile is padding.
func TestImageTokenCount(t *testing.T) {
	m := familytest.Load(t, familytest.GoldenDir("smolvlm-full")).(*idefics3.Model)
	v := m.Config.VisionConfig
	per := v.NumChannels * v.ImageSize * v.ImageSize
	pixels := make([]float32, 2*per)
	for i := 0; i < per; i++ {
		pixels[i] = 0.5
	}
	f, err := m.EncodeImages(pixels, 2)
	if err != nil {
		t.Fatal(err)
	}
	if f.Tiles != 1 {
		t.Fatalf("an all-zero tile was kept: %d tiles", f.Tiles)
	}
	img := m.Config.ImageTokenID
	ids := []int{1, img, img, img, img, 5}
	if _, err := m.Input(ids, f); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]int{{1, img, img, img, 5}, {1, img, img, img, img, img}} {
		if _, err := m.Input(bad, f); err == nil || !strings.Contains(err.Error(), "<image> tokens") {
			t.Errorf("%v: want an error about the <image> count, got %v", bad, err)
		}
	}
	if _, err := m.EncodeImages(pixels[:per-1], 1); err == nil {
		t.Error("a short pixel buffer was accepted")
	}
	// The text model runs the merged prompt like any input.
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, _ := m.Input(ids, f)
	if _, err := s.AppendInput(in); err != nil {
		t.Fatal(err)
	}
}

// TestShared runs the checks every family runs on the text model.
func TestShared(t *testing.T) {
	familytest.Run(t, familytest.GoldenDir("smolvlm-full"))
}
