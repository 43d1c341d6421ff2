// Package qwen3moe is Qwen3-MoE, after Hugging Face transformers'
// modular_qwen3_moe.py: Qwen3's attention (QK-norm before RoPE) with a
// mixture of experts in place of the MLP on its sparse layers.
package qwen3moe

import (
	"encoding/json"
	"slices"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func init() {
	zoo.Register("qwen3_moe", func(data []byte) (zoo.Config, error) { return ParseConfig(data) })
}

// Config is config.json for model_type "qwen3_moe".
type Config struct {
	llama.Config
	UseSlidingWindow    bool     `json:"use_sliding_window"`
	SlidingWindow       *int     `json:"sliding_window"`
	MaxWindowLayers     int      `json:"max_window_layers"`
	LayerTypes          []string `json:"layer_types"`
	DecoderSparseStep   int      `json:"decoder_sparse_step"`
	MoEIntermediateSize int      `json:"moe_intermediate_size"`
	NumExpertsPerTok    int      `json:"num_experts_per_tok"`
	NumExperts          int      `json:"num_experts"`
	NormTopKProb        bool     `json:"norm_topk_prob"`
	MLPOnlyLayers       []int    `json:"mlp_only_layers"`

	arch *llama.Decoder
}

// ParseConfig decodes config.json with Qwen3MoeConfig's defaults for absent
// keys (head_dim defaults to hidden_size / num_attention_heads here, unlike
// dense Qwen3). Unknown keys are ignored.
func ParseConfig(data []byte) (*Config, error) {
	kv := 4
	c := &Config{MaxWindowLayers: 28, DecoderSparseStep: 1, MoEIntermediateSize: 768, NumExpertsPerTok: 8, NumExperts: 128}
	c.Config = llama.Config{
		VocabSize:             151936,
		HiddenSize:            2048,
		IntermediateSize:      6144,
		NumHiddenLayers:       24,
		NumAttentionHeads:     32,
		NumKeyValueHeads:      &kv,
		HiddenAct:             "silu",
		MaxPositionEmbeddings: 32768,
		InitializerRange:      0.02,
		RMSNormEps:            1e-6,
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	L := c.NumHiddenLayers
	if c.LayerTypes == nil {
		for i := 0; i < L; i++ {
			t := "full_attention"
			if c.UseSlidingWindow && c.SlidingWindow != nil && i >= c.MaxWindowLayers {
				t = "sliding_attention"
			}
			c.LayerTypes = append(c.LayerTypes, t)
		}
	}
	d, err := c.Config.Decoder("qwen3_moe", 10000)
	if err != nil {
		return nil, err
	}
	d.QKNorm = true
	if d.Window, err = llama.Windows(c.LayerTypes, c.SlidingWindow, L); err != nil {
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
	c.arch = d
	return c, nil
}

// Tensors lists the checkpoint's tensors by their HF names.
func (c *Config) Tensors() []zoo.TensorSpec { return c.arch.Tensors() }

// Build assembles the model from loaded or random weights.
func (c *Config) Build(w graphs.Weights) (zoo.Model, error) { return c.arch.Build(w) }

// InitializerRange is the std of random weights.
func (c *Config) InitializerRange() float64 { return c.arch.InitRange }
