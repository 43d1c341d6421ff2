package qwen3moe_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/qwen3moe"
)

func TestGolden(t *testing.T) {
	familytest.Golden(t, "qwen3_moe_normtopk", "qwen3_moe_step2_nonorm")
}

// TestSparseLayers pins which layers get experts: not in mlp_only_layers,
// and every decoder_sparse_step-th layer.
func TestSparseLayers(t *testing.T) {
	cases := []struct {
		json string
		want []bool
	}{
		{`{"num_hidden_layers": 4, "mlp_only_layers": [1]}`, []bool{true, false, true, true}},
		{`{"num_hidden_layers": 4, "decoder_sparse_step": 2}`, []bool{false, true, false, true}},
		{`{"num_hidden_layers": 3, "decoder_sparse_step": 1, "mlp_only_layers": [0, 2]}`, []bool{false, true, false}},
	}
	for _, c := range cases {
		cfg, err := qwen3moe.ParseConfig([]byte(`{"model_type": "qwen3_moe", "eos_token_id": 2, "hidden_size": 64, "num_attention_heads": 4,` + c.json[1:]))
		if err != nil {
			t.Fatal(err)
		}
		d, err := cfg.Decoder()
		if err != nil {
			t.Fatal(err)
		}
		params, err := zoo.Tensors(d)
		if err != nil {
			t.Fatal(err)
		}
		var got []bool
		for i := 0; i < d.NumLayers; i++ {
			got = append(got, slices.ContainsFunc(params, func(p *graphs.Param) bool {
				return p.Name == fmt.Sprintf("model.layers.%d.mlp.gate.weight", i)
			}))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: sparse layers %v, want %v", c.json, got, c.want)
		}
	}
	if _, err := zoo.ParseConfig([]byte(`{"model_type": "qwen3_moe", "eos_token_id": 2, "num_experts": 4, "num_experts_per_tok": 5}`)); err == nil {
		t.Error("top-k above the expert count was accepted")
	}
}

func TestEveryWeightMatters(t *testing.T) {
	m, err := zoo.Load(familytest.GoldenDir("qwen3_moe_normtopk"))
	if err != nil {
		t.Fatal(err)
	}
	familytest.EveryWeightMatters(t, m, []int{5, 17, 3, 99, 250, 7, 64, 300},
		"model.layers.0.mlp.gate.weight",
		"model.layers.0.mlp.experts.gate_proj", "model.layers.0.mlp.experts.up_proj",
		"model.layers.0.mlp.experts.down_proj",
		"model.layers.1.mlp.down_proj.weight", "model.layers.2.self_attn.q_norm.weight")
}

func TestRuntime(t *testing.T) { familytest.Run(t, familytest.GoldenDir("qwen3_moe_step2_nonorm")) }
