// Package qwen3 is Qwen3 (dense), after Hugging Face transformers'
// modular_qwen3.py: a Llama decoder whose attention normalises each query
// and key head (RMSNorm over head_dim) before RoPE, and whose head_dim is
// decoupled from hidden_size / num_attention_heads.
package qwen3

import (
	"encoding/json"

	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func init() { llama.Register("qwen3", ParseConfig) }

// Config is config.json for model_type "qwen3".
type Config struct {
	llama.Config
	Sliding
}

// Sliding are the sliding-window keys of Qwen's configs (qwen3, qwen3_moe).
type Sliding struct {
	UseSlidingWindow bool     `json:"use_sliding_window"`
	SlidingWindow    *int     `json:"sliding_window"`
	MaxWindowLayers  int      `json:"max_window_layers"`
	LayerTypes       []string `json:"layer_types"`
}

// Windows returns each layer's sliding window (0: full attention). Absent
// layer_types are derived as HF does: layers from max_window_layers on
// slide when use_sliding_window and sliding_window are set.
func (s *Sliding) Windows(layers int) ([]int, error) {
	if s.LayerTypes == nil {
		for i := 0; i < layers; i++ {
			t := "full_attention"
			if s.UseSlidingWindow && s.SlidingWindow != nil && i >= s.MaxWindowLayers {
				t = "sliding_attention"
			}
			s.LayerTypes = append(s.LayerTypes, t)
		}
	}
	return zoo.Windows(s.LayerTypes, s.SlidingWindow, layers)
}

// ParseConfig decodes config.json with Qwen3Config's defaults for absent
// keys (configuration_qwen3.py). Unknown keys are ignored.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{Sliding: Sliding{MaxWindowLayers: 28}}
	c.Config = llama.Config{
		VocabSize:             151936,
		HiddenSize:            4096,
		IntermediateSize:      22016,
		NumHiddenLayers:       32,
		NumAttentionHeads:     32,
		HiddenAct:             "silu",
		MaxPositionEmbeddings: 32768,
		InitRange:             0.02,
		RMSNormEps:            1e-6,
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	if c.HeadDim == nil {
		hd := 128 // Qwen3's default, NOT hidden_size / num_attention_heads
		c.HeadDim = &hd
	}
	return c, nil
}

// Decoder is Qwen3's architecture: Llama's with QK-norm, and Qwen's
// sliding-window layers.
func (c *Config) Decoder() (*llama.Decoder, error) {
	windows, err := c.Windows(c.NumHiddenLayers)
	if err != nil {
		return nil, err
	}
	return llama.NewDecoder(&c.Config, llama.Variant{ModelType: "qwen3", Theta: 10000, QKNorm: true, Window: windows})
}
