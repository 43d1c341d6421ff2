// Package qwen3moe is Qwen3-MoE, after Hugging Face transformers'
// modular_qwen3_moe.py: Qwen3's attention (QK-norm before RoPE) and
// sliding-window settings, with a mixture of experts in place of the MLP on
// its sparse layers.
package qwen3moe

import (
	"encoding/json"
	"slices"

	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
	"github.com/gozoo/gozoo/zoo/qwen3"
)

func init() {
	zoo.Register("qwen3_moe", func(data []byte) (zoo.Config, error) { return ParseConfig(data) })
}

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

	llama.Arch // the resolved architecture
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
	L := c.NumHiddenLayers
	d, err := c.Config.Decoder("qwen3_moe", 10000)
	if err != nil {
		return nil, err
	}
	d.QKNorm = true
	if d.Window, err = c.Windows(L); err != nil {
		return nil, err
	}
	moe := &llama.MoE{NumExperts: c.NumExperts, TopK: c.NumExpertsPerTok, IntermediateSize: c.MoEIntermediateSize, NormTopK: c.NormTopKProb}
	for i := 0; i < L; i++ {
		// HF: sparse iff not in mlp_only_layers, num_experts > 0 and
		// (i+1) % decoder_sparse_step == 0.
		moe.Sparse = append(moe.Sparse, !slices.Contains(c.MLPOnlyLayers, i) && c.NumExperts > 0 &&
			c.DecoderSparseStep > 0 && (i+1)%c.DecoderSparseStep == 0)
	}
	if slices.Contains(moe.Sparse, true) {
		d.MoE = moe
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	c.D = d
	return c, nil
}
