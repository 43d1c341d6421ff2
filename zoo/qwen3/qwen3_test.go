package qwen3_test

import (
	"encoding/json"
	"errors"
	"github.com/gozoo/gozoo/internal/familytest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
	"github.com/gozoo/gozoo/zoo/qwen3"
)

func caseDir(name string) string { return familytest.GoldenDir(name) }

func TestGolden(t *testing.T) {
	familytest.Golden(t, "qwen3_gqa_tied", "qwen3_untied_v5rope", "qwen3_rope_yarn")
}

func TestRuntime(t *testing.T) { familytest.Run(t, caseDir("qwen3_untied_v5rope")) }

func readConfig(t *testing.T, name string) map[string]any {
	return familytest.ReadConfig(t, caseDir(name))
}

// parse decodes m and resolves it to the decoder.
func parse(t *testing.T, m map[string]any) (*llama.Decoder, error) {
	t.Helper()
	b, _ := json.Marshal(m)
	c, err := qwen3.ParseConfig(b)
	if err != nil {
		return nil, err
	}
	return c.Decoder()
}

func TestConfigDefaultsAndForms(t *testing.T) {
	m := readConfig(t, "qwen3_gqa_tied")
	delete(m, "head_dim")
	m["some_future_key"] = map[string]any{"x": 1}
	c, err := parse(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.HeadDim != 128 || c.ModelType != "qwen3" || !c.QKNorm {
		t.Errorf("head_dim defaults to %d, want 128 (Qwen3's default, not hidden/heads); model_type %q, QK-norm %v", c.HeadDim, c.ModelType, c.QKNorm)
	}

	// The legacy and v5 rope forms give the same model.
	legacy := readConfig(t, "qwen3_gqa_tied")
	v5 := readConfig(t, "qwen3_gqa_tied")
	delete(v5, "rope_theta")
	delete(v5, "rope_scaling")
	v5["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 1e6}
	logitsOf := func(m map[string]any) []float32 {
		c, err := parse(t, m)
		if err != nil {
			t.Fatal(err)
		}
		model, err := zoo.NewRandom(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		return lastLogits(t, model, []int{1, 2, 3, 4, 5})
	}
	if d := maxDiff(logitsOf(legacy), logitsOf(v5)); d != 0 {
		t.Errorf("legacy and v5 rope configs differ by %g", d)
	}

	bad := []struct {
		edit   func(m map[string]any)
		errHas string
	}{
		{func(m map[string]any) { m["num_key_value_heads"] = 3 }, "num_key_value_heads"},
		{func(m map[string]any) { m["hidden_act"] = "relu" }, `"relu"`},
		{func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "longrope", "factor": 2} }, `rope type "longrope" is not supported`},
		{func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "yarn"} }, `rope type "yarn" needs factor`},
		{func(m map[string]any) { m["hidden_size"] = 0 }, "hidden_size"},
		{func(m map[string]any) { m["layer_types"] = []string{"full_attention"} }, "layer_types"},
	}
	for _, b := range bad {
		m := readConfig(t, "qwen3_gqa_tied")
		b.edit(m)
		if _, err := parse(t, m); err == nil || !strings.Contains(err.Error(), b.errHas) {
			t.Errorf("want an error mentioning %s, got %v", b.errHas, err)
		}
	}
}

func TestUnknownModelTypeIsRefused(t *testing.T) {
	_, err := zoo.ParseConfig([]byte(`{"model_type": "gpt_neox"}`))
	var u *zoo.ErrUnsupported
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "qwen3") || !strings.Contains(err.Error(), "gpt_neox") {
		t.Fatalf("got %v, want an error naming gpt_neox and the supported types", err)
	}
}

func lastLogits(t *testing.T, m zoo.Model, ids []int) []float32 {
	return familytest.LastLogits(t, m, ids)
}

func maxDiff(a, b []float32) float64 { return familytest.MaxDiff(a, b) }

// TestEveryWeightMatters perturbs each kind of tensor in turn.
func TestEveryWeightMatters(t *testing.T) {
	model, err := zoo.Load(caseDir("qwen3_untied_v5rope"))
	if err != nil {
		t.Fatal(err)
	}
	familytest.EveryWeightMatters(t, model, []int{5, 17, 3, 99, 250, 7},
		"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
		"model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
		"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
		"model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
		"model.layers.0.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight",
		"model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight")
}

// writeCase copies a golden case's config and weights so a test can break them.
func writeCase(t *testing.T, name string, edit func(cfg map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	cfg := readConfig(t, name)
	if edit != nil {
		edit(cfg)
	}
	b, _ := json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	w, err := os.ReadFile(filepath.Join(caseDir(name), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors"), w, 0o644)
	return dir
}

func TestLoadFailsLoudly(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(cfg map[string]any)
		errHas []string
	}{
		// Untied config over a tied checkpoint: lm_head.weight is missing.
		{"missing tensor", func(c map[string]any) { c["tie_word_embeddings"] = false }, []string{`"lm_head.weight"`, "missing", "model.safetensors"}},
		// A config whose sizes disagree with the tensors.
		{"shape mismatch", func(c map[string]any) { c["intermediate_size"] = 96 }, []string{"gate_proj.weight", "config.json implies"}},
		{"more layers than stored", func(c map[string]any) { c["num_hidden_layers"] = 4 }, []string{`"model.layers.3.`}},
		{"unsupported model type", func(c map[string]any) { c["model_type"] = "mamba" }, []string{`"mamba"`, "supported: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := zoo.Load(writeCase(t, "qwen3_gqa_tied", c.edit))
			if err == nil {
				t.Fatal("loaded without error")
			}
			for _, want := range c.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
		})
	}
}

func TestSlidingWindowLayers(t *testing.T) {
	w := 4
	s := qwen3.Sliding{UseSlidingWindow: true, SlidingWindow: &w, MaxWindowLayers: 1}
	got, err := s.Windows(3)
	if err != nil || !slices.Equal(got, []int{0, 4, 4}) {
		t.Fatalf("windows %v %v, want [0 4 4]", got, err)
	}
	off := qwen3.Sliding{SlidingWindow: &w, MaxWindowLayers: 1}
	if got, _ := off.Windows(3); !slices.Equal(got, []int{0, 0, 0}) {
		t.Errorf("use_sliding_window false: %v", got)
	}
	// A sliding layer changes what a long prompt's last token sees.
	m := readConfig(t, "qwen3_gqa_tied")
	base, err := zoo.Load(caseDir("qwen3_gqa_tied"))
	if err != nil {
		t.Fatal(err)
	}
	m["use_sliding_window"], m["sliding_window"], m["max_window_layers"] = true, 3, 0
	c, err := parse(t, m)
	if err != nil {
		t.Fatal(err)
	}
	slid, err := zoo.Rebind(c, base.Params())
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{1, 2, 3, 4, 5, 6, 7, 8}
	if d := maxDiff(lastLogits(t, base, ids), lastLogits(t, slid, ids)); d < 1e-4 {
		t.Errorf("a 3-key window moved the logits by only %g", d)
	}
}
