package qwen3moe

import (
	"fmt"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func init() { zoo.RegisterGGUF("qwen3moe", "qwen3_moe", ggufQwen3MoE{}) }

// ggufQwen3MoE is llama.cpp's qwen3moe: qwen3 with every layer's MLP a
// mixture of experts (ffn_{gate,up,down}_exps, routed by ffn_gate_inp).
type ggufQwen3MoE struct{}

var ggufName = llama.GGUFNames(nil)

// ggufExpertKeys are the experts' keys and the config.json fields they
// give, in the order they are read and written.
var ggufExpertKeys = [...]struct{ key, field string }{
	{"expert_count", "num_experts"}, {"expert_used_count", "num_experts_per_tok"}, {"expert_feed_forward_length", "moe_intermediate_size"},
}

func (ggufQwen3MoE) Config(m zoo.GGUFMeta, c zoo.ConfigMap) error {
	if err := llama.GGUFConfig(m, c); err != nil {
		return err
	}
	for _, k := range ggufExpertKeys {
		v, err := m.Uint(k.key)
		if err != nil {
			return err
		}
		c[k.field] = v
	}
	// llama.cpp always renormalises the chosen experts' weights.
	c["norm_topk_prob"], c["decoder_sparse_step"], c["mlp_only_layers"] = true, 1, []int{}
	return nil
}

func (ggufQwen3MoE) Tensor(_ zoo.ConfigMap, p *graphs.Param) (zoo.GGUFTensor, bool) {
	name, ok := ggufName(p.Name)
	return zoo.GGUFTensor{Name: name}, ok
}

func (ggufQwen3MoE) Metadata(cfg zoo.ConfigMap, m zoo.Model) ([]gguf.KV, error) {
	kv, hd, err := llama.GGUFMetadata(cfg, m)
	if err != nil {
		return nil, err
	}
	kv = append(kv, llama.GGUFHeadLengths(hd)...)
	if only, _ := cfg["mlp_only_layers"].([]any); len(only) > 0 || cfg.Int("decoder_sparse_step", 1) != 1 {
		return nil, fmt.Errorf("config.json: a qwen3_moe model with dense layers (mlp_only_layers %v, decoder_sparse_step %v) has no llama.cpp form: every qwen3moe layer is sparse there", cfg["mlp_only_layers"], cfg["decoder_sparse_step"])
	}
	for _, k := range ggufExpertKeys {
		kv = append(kv, gguf.KV{Key: k.key, Value: uint32(cfg.Int(k.field, 0))})
	}
	return kv, nil
}
