package gpt2_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/gpt2"
)

// TestGolden runs both checkpoint styles: the original layout (no prefix,
// mask buffers beside the weights, BF16) and "transformer."-prefixed F32.
func TestGolden(t *testing.T) {
	familytest.Golden(t, "gpt2_original_bf16", "gpt2_prefixed")
}

func TestShared(t *testing.T) {
	for _, name := range []string{"gpt2_original_bf16", "gpt2_prefixed"} {
		t.Run(name, func(t *testing.T) { familytest.Run(t, familytest.GoldenDir(name)) })
	}
}

func TestEveryWeightMatters(t *testing.T) {
	m := familytest.Load(t, familytest.GoldenDir("gpt2_prefixed"))
	familytest.EveryWeightMatters(t, m, []int{5, 17, 3, 99, 250, 7},
		"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias",
		"h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias",
		"h.0.attn.c_proj.weight", "h.0.attn.c_proj.bias", "h.1.ln_2.weight", "h.1.ln_2.bias",
		"h.1.mlp.c_fc.weight", "h.1.mlp.c_fc.bias", "h.2.mlp.c_proj.weight", "h.2.mlp.c_proj.bias")
}

func TestConfig(t *testing.T) {
	c, err := gpt2.ParseConfig([]byte(`{"model_type": "gpt2", "hidden_size": 64, "num_attention_heads": 4, "n_inner": null, "num_hidden_layers": 3, "max_position_embeddings": 32}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.NEmbd != 64 || c.NHead != 4 || c.NLayer != 3 || c.NPositions != 32 || c.Inner() != 256 || c.ActivationFunction != "gelu_new" || !c.TieWordEmbeddings || c.LayerNormEpsilon != 1e-5 {
		t.Errorf("aliases and defaults: %+v", c)
	}
	for _, tc := range []struct{ json, want string }{
		{`{"n_embd": 64, "n_head": 5}`, "n_head 5"},
		{`{"activation_function": "swiglu"}`, `"swiglu"`},
		{`{"scale_attn_weights": false}`, "scale_attn_weights"},
		{`{"n_layer": 0}`, "n_layer"},
	} {
		if _, err := gpt2.ParseConfig([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error naming %s, got %v", tc.json, tc.want, err)
		}
	}
}

// TestRandomCheckpointLayout writes a random GPT-2 with `zoo.WriteRandomCheckpoint`
// (Conv1D weights stored [in, out], as HF saves them) and loads it back:
// the same model NewRandom builds in memory. Not to the last bit: the
// reloaded file is mapped, so its larger F32 matrices are packed for
// decode (simd.PackF32) and summed in another order, which moves a logit
// by an ulp or so, where a matrix stored in the wrong layout moves it by
// its own size.
func TestRandomCheckpointLayout(t *testing.T) {
	cfgJSON := familytest.ReadConfigBytes(t, familytest.GoldenDir("gpt2_prefixed"))
	dir := filepath.Join(t.TempDir(), "gpt2")
	if err := zoo.WriteRandomCheckpoint(cfgJSON, dir, "f32", 7); err != nil {
		t.Fatal(err)
	}
	loaded, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := zoo.ParseConfig(cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := zoo.NewRandom(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{1, 2, 3, 4, 5}
	if d := familytest.MaxDiff(familytest.LastLogits(t, loaded, ids), familytest.LastLogits(t, mem, ids)); d > 1e-5 {
		t.Errorf("written and reloaded random GPT-2 differs from the in-memory one by %g", d)
	}
}
