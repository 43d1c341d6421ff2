// Package qwen3moe is Qwen3-MoE, after Hugging Face transformers'
// modular_qwen3_moe.py: Qwen3's attention (QK-norm before RoPE) and
// sliding-window settings, with a mixture of experts in place of the MLP on
// its sparse layers.
package qwen3moe

import (
	"encoding/json"
	"slices"

	"github.com/gozoo/gozoo/zoo/llama"
	"github.com/gozoo/gozoo/zoo/qwen3"
)

func init() { llama.Register("qwen3_moe", ParseConfig) }

// Config is config.json for model_type "qwen3_moe".
type Config struct {
	llama.Config
	qwen3.Sliding
	DecoderSparseStep   int   `json:"decoder_sparse_step"`
	MoEIntermediateSize int   `json:"moe_intermediate_size"`
	NumExpertsPerTok    int   `json:"num_experts_per_tok"`
	NumExperts          int   `json:"num_experts"`
	NormTopKProb        bool  `json:"norm_topk_prob"`
	MLPOnlyLayers       []int `json:"mlp_only_layers"`
}

// ParseConfig decodes config.json with Qwen3MoeConfig's defaults for absent
// keys (head_dim defaults to hidden_size / num_attention_heads here, unlike
// dense Qwen3). Unknown keys are ignored.
func ParseConfig(data []byte) (*Config, error) {
	kv := 4
	c := &Config{Sliding: qwen3.Sliding{MaxWindowLayers: 28}, DecoderSparseStep: 1, MoEIntermediateSize: 768, NumExpertsPerTok: 8, NumExperts: 128}
	c.Config = llama.Config{
		VocabSize:             151936,
		HiddenSize:            2048,
		IntermediateSize:      6144,
		NumHiddenLayers:       24,
		NumAttentionHeads:     32,
		NumKeyValueHeads:      &kv,
		HiddenAct:             "silu",
		MaxPositionEmbeddings: 32768,
		InitRange:             0.02,
		RMSNormEps:            1e-6,
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Decoder is Qwen3-MoE's architecture: Qwen3's, with the mixture of experts
// on its sparse layers.
func (c *Config) Decoder() (*llama.Decoder, error) {
	windows, err := c.Windows(c.NumHiddenLayers)
	if err != nil {
		return nil, err
	}
	return llama.NewDecoder(&c.Config, llama.Variant{ModelType: "qwen3_moe", Theta: 10000, QKNorm: true, Window: windows, MoE: c.moe()})
}

// moe is the mixture of experts, or nil when no layer is sparse. As in HF,
// a layer is sparse when it is not in mlp_only_layers, num_experts > 0 and
// (i+1) % decoder_sparse_step == 0.
func (c *Config) moe() *llama.MoE {
	moe := &llama.MoE{NumExperts: c.NumExperts, TopK: c.NumExpertsPerTok, IntermediateSize: c.MoEIntermediateSize, NormTopK: c.NormTopKProb}
	for i := 0; i < c.NumHiddenLayers; i++ {
		moe.Sparse = append(moe.Sparse, !slices.Contains(c.MLPOnlyLayers, i) && c.NumExperts > 0 &&
			c.DecoderSparseStep > 0 && (i+1)%c.DecoderSparseStep == 0)
	}
	if !slices.Contains(moe.Sparse, true) {
		return nil
	}
	return moe
}
