package llama_test

import (
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func TestGolden(t *testing.T) {
	familytest.Golden(t, "llama_mha_untied", "llama_smollm2_gqa_bf16", "llama_rope_llama3")
}

func TestConfigDefaults(t *testing.T) {
	c, err := llama.ParseConfig([]byte(`{"model_type": "llama", "hidden_size": 576, "num_attention_heads": 9, "eos_token_id": 2, "unknown": [1]}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Decoder()
	if err != nil {
		t.Fatal(err)
	}
	if d.HeadDim != 64 || d.NumKVHeads != 9 || d.RoPE.Theta != 10000 || d.TieWordEmbeddings || d.ModelType != "llama" {
		t.Errorf("defaults: head_dim %d (want hidden/heads 64), kv heads %d (want heads), theta %g, tied %v, model_type %q",
			d.HeadDim, d.NumKVHeads, d.RoPE.Theta, d.TieWordEmbeddings, d.ModelType)
	}
	if _, err := zoo.ParseConfig([]byte(`{"model_type": "llama", "hidden_act": "gelu", "eos_token_id": 2}`)); err == nil || !strings.Contains(err.Error(), `"gelu"`) {
		t.Errorf("unsupported activation: %v", err)
	}
}

func TestEveryWeightMatters(t *testing.T) {
	m, err := zoo.Load(familytest.GoldenDir("llama_mha_untied"))
	if err != nil {
		t.Fatal(err)
	}
	familytest.EveryWeightMatters(t, m, []int{5, 17, 3, 99, 250, 7},
		"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
		"model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
		"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
		"model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
		"model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight")
}

// TestBiases covers attention_bias and mlp_bias, which no golden case has:
// the bias tensors are required and each one moves the logits.
func TestBiases(t *testing.T) {
	cfg, err := zoo.ParseConfig([]byte(`{"model_type": "llama", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
		"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "eos_token_id": 2,
		"attention_bias": true, "mlp_bias": true, "initializer_range": 0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := zoo.NewRandom(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	// Random biases start at zero; give them values first.
	for _, p := range m.Params().All() {
		if strings.HasSuffix(p.Name, ".bias") {
			for i, d := 0, p.Float32s(); i < len(d); i++ {
				d[i] = 0.5 * float32(i%5-2)
			}
		}
	}
	ids := []int{1, 2, 3, 9, 40, 7}
	familytest.EveryWeightMatters(t, m, ids,
		"model.layers.0.self_attn.q_proj.bias",
		"model.layers.0.self_attn.v_proj.bias", "model.layers.0.self_attn.o_proj.bias",
		"model.layers.0.mlp.gate_proj.bias", "model.layers.0.mlp.up_proj.bias", "model.layers.0.mlp.down_proj.bias")

	// The key bias adds the same vector to every key, so it shifts each
	// query's scores almost uniformly (softmax ignores that); only RoPE
	// makes the shift position-dependent. Its effect is small but not zero.
	base := familytest.LastLogits(t, m, ids)
	kp, _ := m.Params().Get("model.layers.0.self_attn.k_proj.bias")
	kb := kp.Float32s()
	for i := range kb {
		kb[i] += 1
	}
	if d := familytest.MaxDiff(base, familytest.LastLogits(t, m, ids)); d == 0 {
		t.Error("k_proj.bias does not reach the logits")
	}
}

func TestRuntime(t *testing.T) { familytest.Run(t, familytest.GoldenDir("llama_smollm2_gqa_bf16")) }

// TestDecoderUnderAPrefix runs the Llama decoder where a vision-language
// checkpoint keeps it (model.text_model.*, lm_head at the top): the same
// weights under the other names give the same logits.
func TestDecoderUnderAPrefix(t *testing.T) {
	dir := familytest.GoldenDir("llama_mha_untied")
	base := familytest.Load(t, dir)
	c, err := llama.ParseConfig(familytest.ReadConfigBytes(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := llama.NewDecoder(c, llama.Variant{ModelType: "llama", Theta: 10000, Prefix: "model.text_model"})
	if err != nil {
		t.Fatal(err)
	}
	params, err := zoo.Tensors(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(params) != len(base.Params().All()) {
		t.Fatalf("%d tensors under the prefix, %d without", len(params), len(base.Params().All()))
	}
	m, err := zoo.NewRandom(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params().All() {
		if !strings.HasPrefix(p.Name, "model.text_model.") && p.Name != "lm_head.weight" {
			t.Fatalf("tensor %q is outside the prefix", p.Name)
		}
		src, ok := base.Params().Get(strings.Replace(p.Name, "model.text_model.", "model.", 1))
		if !ok {
			t.Fatalf("no counterpart of %q", p.Name)
		}
		if err := p.Set(src.DType, src.Data); err != nil {
			t.Fatal(err)
		}
	}
	// The data lives in base's file mapping: without this, base is
	// collected after its own run and the mapping released under m's (a CI
	// run faulted there).
	m.Params().Keep(base.Params())
	// m's weights are set in memory, base's read from its file: the same
	// values, summed in another order (familytest.StorageTol).
	ids := []int{3, 1, 4, 1, 5, 9, 2, 6}
	want := familytest.LastLogits(t, base, ids)
	if d := familytest.MaxDiff(want, familytest.LastLogits(t, m, ids)); d > familytest.StorageTol(want) {
		t.Errorf("the prefixed decoder differs by %g", d)
	}
}
