// Package qwen3 is Qwen3 (dense), after Hugging Face transformers'
// modular_qwen3.py: a Llama decoder whose attention normalises each query
// and key head (RMSNorm over head_dim) before RoPE, and whose head_dim is
// decoupled from hidden_size / num_attention_heads.
package qwen3

import (
	"encoding/json"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func init() {
	zoo.Register("qwen3", func(data []byte) (zoo.Config, error) { return ParseConfig(data) })
}

// Config is config.json for model_type "qwen3".
type Config struct {
	llama.Config
	UseSlidingWindow bool     `json:"use_sliding_window"`
	SlidingWindow    *int     `json:"sliding_window"`
	MaxWindowLayers  int      `json:"max_window_layers"`
	LayerTypes       []string `json:"layer_types"`

	arch *llama.Decoder // the resolved architecture
}

// Tensors lists the checkpoint's tensors by their HF names.
func (c *Config) Tensors() []zoo.TensorSpec { return c.arch.Tensors() }

// Build assembles the model from loaded or random weights.
func (c *Config) Build(w graphs.Weights) (zoo.Model, error) { return c.arch.Build(w) }

// InitializerRange is the std of random weights.
func (c *Config) InitializerRange() float64 { return c.arch.InitRange }

// ParseConfig decodes config.json with Qwen3Config's defaults for absent
// keys (configuration_qwen3.py). Unknown keys are ignored.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{MaxWindowLayers: 28}
	c.Config = llama.Config{
		VocabSize:             151936,
		HiddenSize:            4096,
		IntermediateSize:      22016,
		NumHiddenLayers:       32,
		NumAttentionHeads:     32,
		HiddenAct:             "silu",
		MaxPositionEmbeddings: 32768,
		InitializerRange:      0.02,
		RMSNormEps:            1e-6,
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	if c.HeadDim == nil {
		hd := 128 // Qwen3's default, NOT hidden_size / num_attention_heads
		c.HeadDim = &hd
	}
	if c.LayerTypes == nil {
		for i := 0; i < c.NumHiddenLayers; i++ {
			t := "full_attention"
			if c.UseSlidingWindow && c.SlidingWindow != nil && i >= c.MaxWindowLayers {
				t = "sliding_attention"
			}
			c.LayerTypes = append(c.LayerTypes, t)
		}
	}
	d, err := c.Config.Decoder("qwen3", 10000)
	if err != nil {
		return nil, err
	}
	d.QKNorm = true
	if d.Window, err = llama.Windows(c.LayerTypes, c.SlidingWindow, c.NumHiddenLayers); err != nil {
		return nil, err
	}
	c.arch = d
	return c, nil
}
