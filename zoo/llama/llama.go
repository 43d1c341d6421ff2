// Package llama is the Llama decoder after Hugging Face transformers'
// modeling_llama.py (SmolLM2 is a Llama), and the Decoder that the
// Llama-derived families (qwen3, qwen3_moe, smollm3, idefics3's text
// model) make from their own configs with NewDecoder.
package llama

import (
	"encoding/json"

	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

func init() { Register("llama", ParseConfig) }

// Register makes zoo.ParseConfig resolve config.json of modelType to a
// Decoder: parse decodes it with the family's defaults, and the config's
// Decoder method is the one step from there to the architecture.
func Register[C interface{ Decoder() (*Decoder, error) }](modelType string, parse func(data []byte) (C, error)) {
	zoo.Register(modelType, func(data []byte) (zoo.Config, error) {
		c, err := parse(data)
		if err != nil {
			return nil, err
		}
		d, err := c.Decoder()
		if err != nil {
			return nil, err
		}
		return d, nil
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

// Decoder is Llama itself: a rotary embedding (base 10000 by default) and
// full attention in every layer.
func (c *Config) Decoder() (*Decoder, error) {
	return NewDecoder(c, Variant{ModelType: "llama", Theta: 10000, Interleaved: true})
}
