package gemma3_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/gemma3"
)

func TestGolden(t *testing.T) {
	familytest.Golden(t, "gemma3_sliding_mqa", "gemma3_pattern_softcap")
}

func config(t *testing.T, name string, edit func(map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(familytest.GoldenDir(name), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	edit(m)
	b, _ = json.Marshal(m)
	return b
}

// withConfig builds the golden case's weights under an edited config.
func withConfig(t *testing.T, name string, edit func(map[string]any)) zoo.Model {
	t.Helper()
	base, err := zoo.Load(familytest.GoldenDir(name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := gemma3.ParseConfig(config(t, name, edit))
	if err != nil {
		t.Fatal(err)
	}
	m, err := zoo.Rebind(c, base.Params())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var ids = []int{5, 17, 3, 99, 250, 7, 64, 300, 11, 12, 13}

func TestLayerTypesAndRoPE(t *testing.T) {
	// The pattern gives [S, F, S, F]; _sliding_window_pattern is not read.
	c, err := gemma3.ParseConfig([]byte(`{"eos_token_id": 1, "num_hidden_layers": 4, "sliding_window_pattern": 2, "_sliding_window_pattern": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sliding_attention", "full_attention", "sliding_attention", "full_attention"}
	for i := range want {
		if c.LayerTypes[i] != want[i] {
			t.Fatalf("layer types %v, want %v", c.LayerTypes, want)
		}
	}
	// The sliding window, the local RoPE base and the linear scaling of
	// full layers each reach the logits.
	base := familytest.LastLogits(t, withConfig(t, "gemma3_pattern_softcap", func(map[string]any) {}), ids)
	for what, edit := range map[string]func(map[string]any){
		"sliding_window":       func(m map[string]any) { m["sliding_window"] = 9 },
		"rope_local_base_freq": func(m map[string]any) { m["rope_local_base_freq"] = 500.0 },
		"rope_scaling":         func(m map[string]any) { m["rope_scaling"] = nil },
		"query_pre_attn_scalar": func(m map[string]any) {
			m["query_pre_attn_scalar"] = 40.0
		},
	} {
		if d := familytest.MaxDiff(base, familytest.LastLogits(t, withConfig(t, "gemma3_pattern_softcap", edit), ids)); d < 1e-4 {
			t.Errorf("changing %s moved the logits by only %g", what, d)
		}
	}
	// attn_logit_softcapping is ignored, as in HF.
	if d := familytest.MaxDiff(base, familytest.LastLogits(t, withConfig(t, "gemma3_pattern_softcap", func(m map[string]any) { m["attn_logit_softcapping"] = 1.0 }), ids)); d != 0 {
		t.Errorf("attn_logit_softcapping changed the logits by %g", d)
	}
}

func TestFinalSoftcap(t *testing.T) {
	m := withConfig(t, "gemma3_pattern_softcap", func(m map[string]any) { m["final_logit_softcapping"] = 0.5 })
	for _, l := range familytest.LastLogits(t, m, ids) {
		if math.Abs(float64(l)) > 0.5 {
			t.Fatalf("logit %g exceeds the cap 0.5", l)
		}
	}
}

func TestEveryWeightMatters(t *testing.T) {
	m, err := zoo.Load(familytest.GoldenDir("gemma3_sliding_mqa"))
	if err != nil {
		t.Fatal(err)
	}
	familytest.EveryWeightMatters(t, m, ids,
		"model.embed_tokens.weight", "model.norm.weight",
		"model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
		"model.layers.0.pre_feedforward_layernorm.weight", "model.layers.0.post_feedforward_layernorm.weight",
		"model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight",
		"model.layers.2.self_attn.q_proj.weight", "model.layers.2.self_attn.v_proj.weight",
		"model.layers.5.mlp.gate_proj.weight", "model.layers.5.mlp.down_proj.weight")
}

func TestRefusesBidirectional(t *testing.T) {
	if _, err := zoo.ParseConfig([]byte(`{"model_type": "gemma3_text", "eos_token_id": 1, "use_bidirectional_attention": true}`)); err == nil {
		t.Error("bidirectional attention was accepted")
	}
}

// TestRuntime runs the shared checks on the sliding-window case: its
// window of 6 is shorter than the prompts, so chunked prefill crosses the
// ring's boundary.
func TestRuntime(t *testing.T) { familytest.Run(t, familytest.GoldenDir("gemma3_sliding_mqa")) }

// TestScaledRoPEForms: yarn on the full layers reads the same from
// legacy rope_scaling and from v5's per-layer-type rope_parameters, and
// reaches the logits.
func TestScaledRoPEForms(t *testing.T) {
	const name = "gemma3_pattern_softcap"
	var theta, local float64
	config(t, name, func(m map[string]any) { theta, local = m["rope_theta"].(float64), m["rope_local_base_freq"].(float64) })
	yarn := map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}
	legacy := familytest.LastLogits(t, withConfig(t, name, func(m map[string]any) { m["rope_scaling"] = yarn }), ids)
	v5 := familytest.LastLogits(t, withConfig(t, name, func(m map[string]any) {
		delete(m, "rope_scaling")
		delete(m, "rope_theta")
		full := map[string]any{"rope_theta": theta}
		for k, v := range yarn {
			full[k] = v
		}
		m["rope_parameters"] = map[string]any{"full_attention": full, "sliding_attention": map[string]any{"rope_type": "default", "rope_theta": local}}
	}), ids)
	if d := familytest.MaxDiff(legacy, v5); d != 0 {
		t.Errorf("legacy and v5 yarn differ by %g", d)
	}
	linear := familytest.LastLogits(t, withConfig(t, name, func(map[string]any) {}), ids)
	if d := familytest.MaxDiff(legacy, linear); d < 1e-4 {
		t.Errorf("yarn instead of linear scaling moved the logits by only %g", d)
	}
}
