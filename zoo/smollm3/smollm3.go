// Package smollm3 is SmolLM3, after Hugging Face transformers'
// modular_smollm3.py: a Llama decoder in which some layers use no rotary
// embedding at all (NoPE).
package smollm3

import (
	"encoding/json"
	"fmt"

	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func init() { llama.Register("smollm3", ParseConfig) }

// Config is config.json for model_type "smollm3".
type Config struct {
	llama.Config
	// NoRopeLayers has, despite its name, 1 for a layer that USES RoPE and
	// 0 for a NoPE layer.
	NoRopeLayers        []int    `json:"no_rope_layers"`
	NoRopeLayerInterval int      `json:"no_rope_layer_interval"`
	UseSlidingWindow    bool     `json:"use_sliding_window"`
	SlidingWindow       *int     `json:"sliding_window"`
	LayerTypes          []string `json:"layer_types"`
}

// ParseConfig decodes config.json with SmolLM3Config's defaults for absent
// keys. Unknown keys are ignored.
func ParseConfig(data []byte) (*Config, error) {
	kv := 4
	c := &Config{NoRopeLayerInterval: 4}
	c.Config = llama.Config{
		VocabSize:             128256,
		HiddenSize:            2048,
		IntermediateSize:      11008,
		NumHiddenLayers:       36,
		NumAttentionHeads:     16,
		NumKeyValueHeads:      &kv,
		HiddenAct:             "silu",
		MaxPositionEmbeddings: 32768,
		InitRange:             0.02,
		RMSNormEps:            1e-6,
		TieWordEmbeddings:     true,
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	L := c.NumHiddenLayers
	if c.NoRopeLayers == nil {
		if c.NoRopeLayerInterval <= 0 {
			return nil, fmt.Errorf("no_rope_layer_interval must be positive, got %d", c.NoRopeLayerInterval)
		}
		for i := 0; i < L; i++ {
			use := 0
			if (i+1)%c.NoRopeLayerInterval != 0 {
				use = 1
			}
			c.NoRopeLayers = append(c.NoRopeLayers, use)
		}
	}
	if len(c.NoRopeLayers) < L {
		return nil, fmt.Errorf("no_rope_layers has %d entries for %d layers", len(c.NoRopeLayers), L)
	}
	if c.LayerTypes == nil {
		for i := 0; i < L; i++ {
			t := "full_attention"
			if c.UseSlidingWindow && c.SlidingWindow != nil && c.NoRopeLayers[i] == 0 {
				t = "sliding_attention"
			}
			c.LayerTypes = append(c.LayerTypes, t)
		}
	}
	return c, nil
}

// Decoder is SmolLM3's architecture: Llama's without RoPE in the layers
// no_rope_layers marks 0 (ParseConfig checked that it covers them all), and
// with sliding-window layers.
func (c *Config) Decoder() (*llama.Decoder, error) {
	windows, err := zoo.Windows(c.LayerTypes, c.SlidingWindow, c.NumHiddenLayers)
	if err != nil {
		return nil, err
	}
	nope := make([]bool, c.NumHiddenLayers)
	for i := range nope {
		nope[i] = c.NoRopeLayers[i] == 0
	}
	return llama.NewDecoder(&c.Config, llama.Variant{ModelType: "smollm3", Theta: 2e6, NoPE: nope, Window: windows, Interleaved: true})
}
