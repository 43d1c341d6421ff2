package gemma3

import (
	"fmt"
	"math"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func init() { zoo.RegisterGGUF("gemma3", "gemma3_text", ggufGemma3{}) }

// ggufGemma3 is llama.cpp's gemma3: the Llama decoder's keys and names,
// with Gemma's four norms a layer, its sliding-window keys, and its
// (1 + w) norms stored as 1 + w.
type ggufGemma3 struct{}

var ggufName = llama.GGUFNames(map[string]string{
	"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
	"pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
})

func (ggufGemma3) Config(m zoo.GGUFMeta, c zoo.ConfigMap) error {
	if err := llama.GGUFConfig(m, c); err != nil {
		return err
	}
	window, err := m.Uint("attention.sliding_window")
	if err != nil {
		return err
	}
	local, err := m.FloatOr("rope.freq_base_swa", 10000)
	if err != nil {
		return err
	}
	layers := c.Int("num_hidden_layers", 0)
	types := make([]string, layers)
	key := m.Key("attention.sliding_window_pattern")
	pattern := 6
	var perLayer []bool
	if m.File.Has(key) {
		// Newer files list each layer (true: sliding), older ones give
		// the period of the full-attention layers.
		switch v := m.File.Metadata[key].(type) {
		case []bool:
			if len(v) != layers {
				return fmt.Errorf("%s: %s has %d entries for %d layers", m.File.Path, key, len(v), layers)
			}
			perLayer = v
		default:
			n, err := m.File.Uint(key)
			if err != nil {
				return err
			}
			if n == 0 || n > math.MaxInt32 {
				return fmt.Errorf("%s: %s = %d", m.File.Path, key, n)
			}
			pattern = int(n)
		}
	}
	for i := range types {
		sliding := (i+1)%pattern != 0
		if perLayer != nil {
			sliding = perLayer[i]
		}
		types[i] = "full_attention"
		if sliding {
			types[i] = "sliding_attention"
		}
	}
	c["sliding_window"], c["layer_types"], c["rope_local_base_freq"] = window, types, local
	c["query_pre_attn_scalar"], c["hidden_activation"] = c["head_dim"], "gelu_pytorch_tanh"
	if m.Has("final_logit_softcapping") {
		v, err := m.Float("final_logit_softcapping")
		if err != nil {
			return err
		}
		c["final_logit_softcapping"] = v
	}
	return nil
}

func (ggufGemma3) Tensor(_ zoo.ConfigMap, p *graphs.Param) (zoo.GGUFTensor, bool) {
	name, ok := ggufName(p.Name)
	t := zoo.GGUFTensor{Name: name}
	if p.Role == graphs.OffsetNorm {
		t.Offset = 1 // llama.cpp stores Gemma's norms as 1 + w
	}
	return t, ok
}

func (ggufGemma3) Metadata(cfg zoo.ConfigMap, m zoo.Model) ([]gguf.KV, error) {
	kv, hd, err := llama.GGUFMetadata(cfg, m)
	if err != nil {
		return nil, err
	}
	kv = append(kv, llama.GGUFHeadLengths(hd)...)
	kv = append(kv, gguf.KV{Key: "attention.sliding_window", Value: uint32(cfg.Int("sliding_window", 0))},
		gguf.KV{Key: "rope.freq_base_swa", Value: float32(cfg.Float("rope_local_base_freq", 10000))})
	var sliding []bool
	for _, c := range m.Params().Caches() {
		sliding = append(sliding, c.Window > 0)
	}
	kv = append(kv, gguf.KV{Key: "attention.sliding_window_pattern", Value: sliding})
	if v, ok := cfg["final_logit_softcapping"].(float64); ok {
		kv = append(kv, gguf.KV{Key: "final_logit_softcapping", Value: float32(v)})
	}
	return kv, nil
}
