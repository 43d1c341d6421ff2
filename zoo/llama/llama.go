// Package llama is the Llama decoder after Hugging Face transformers'
// modeling_llama.py (SmolLM2 is a Llama), and the Decoder that the
// Llama-derived families (qwen3, qwen3moe, smollm3, and idefics3's text
// model) fill from their own configs.
package llama

import (
	"encoding/json"

	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

func init() {
	zoo.Register("llama", func(data []byte) (zoo.Config, error) {
		c, err := ParseConfig(data)
		if err != nil {
			return nil, err
		}
		return c.Decoder("llama", 10000)
	})
}

// Config is config.json for model_type "llama", the fields Llama-derived
// families share.
type Config struct {
	VocabSize             int             `json:"vocab_size"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	HiddenAct             string          `json:"hidden_act"`
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	InitRange             float64         `json:"initializer_range"`
	RMSNormEps            float64         `json:"rms_norm_eps"`
	TieWordEmbeddings     bool            `json:"tie_word_embeddings"`
	AttentionBias         bool            `json:"attention_bias"`
	MLPBias               bool            `json:"mlp_bias"`
	EOSTokenID            loaders.IntList `json:"eos_token_id"`
	loaders.RoPEFields
}

// ParseConfig decodes config.json with LlamaConfig's defaults for absent
// keys. Unknown keys are ignored.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{
		VocabSize:             32000,
		HiddenSize:            4096,
		IntermediateSize:      11008,
		NumHiddenLayers:       32,
		NumAttentionHeads:     32,
		HiddenAct:             "silu",
		MaxPositionEmbeddings: 2048,
		InitRange:             0.02,
		RMSNormEps:            1e-6,
	}
	return c, json.Unmarshal(data, c)
}

// Decoder resolves the config into the architecture: absent
// num_key_value_heads means MHA, absent head_dim means
// hidden_size / num_attention_heads, and every layer uses the same RoPE
// (defaultTheta when the config names no base).
func (c *Config) Decoder(modelType string, defaultTheta float64) (*Decoder, error) {
	d := &Decoder{
		ModelType: modelType,
		Dims: zoo.Dims{
			VocabSize: c.VocabSize, HiddenSize: c.HiddenSize, IntermediateSize: c.IntermediateSize,
			NumLayers: c.NumHiddenLayers, NumHeads: c.NumAttentionHeads, NumKVHeads: c.NumAttentionHeads,
			MaxPositions: c.MaxPositionEmbeddings,
		},
		RMSNormEps: c.RMSNormEps, HiddenAct: c.HiddenAct,
		TieWordEmbeddings: c.TieWordEmbeddings, AttentionBias: c.AttentionBias, MLPBias: c.MLPBias,
		InitRange: c.InitRange, EOS: c.EOSTokenID,
	}
	if c.NumKeyValueHeads != nil {
		d.NumKVHeads = *c.NumKeyValueHeads
	}
	if c.HeadDim != nil {
		d.HeadDim = *c.HeadDim
	} else if c.NumAttentionHeads > 0 {
		d.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	rope, err := c.RoPEFields.Resolve("full_attention", defaultTheta)
	if err != nil {
		return nil, err
	}
	for i := 0; i < c.NumHiddenLayers; i++ {
		d.RoPE = append(d.RoPE, &rope)
		d.Window = append(d.Window, 0)
	}
	return d, d.Validate()
}
