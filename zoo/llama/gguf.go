package llama

import (
	"fmt"
	"maps"
	"strings"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
)

// The GGUF side of the Llama decoder. llama.cpp gives the architectures
// built like it (llama, qwen3, qwen3moe, gemma3) the same metadata keys
// and tensor names; GGUFConfig, GGUFMetadata and GGUFName are those, for
// those families' GGUFs to build on.

func init() { zoo.RegisterGGUF("llama", "llama", ggufLlama{}) }

var ggufName = GGUFNames(nil)

// ggufLlama is llama.cpp's llama: the shared decoder, with Q and K rows
// permuted as convert_hf_to_gguf.py stores them.
type ggufLlama struct{}

func (ggufLlama) Config(m zoo.GGUFMeta, c zoo.ConfigMap) error { return GGUFConfig(m, c) }

func (ggufLlama) Tensor(cfg zoo.ConfigMap, p *graphs.Param) (zoo.GGUFTensor, bool) {
	name, ok := ggufName(p.Name)
	t := zoo.GGUFTensor{Name: name}
	if strings.HasSuffix(name, ".attn_q.weight") || strings.HasSuffix(name, ".attn_k.weight") {
		// Each head's two rotary halves interleaved, for llama.cpp's
		// rotation of adjacent pairs.
		t.PermutedHeads = cfg.Int("head_dim", 0)
		if heads := cfg.Int("num_attention_heads", 0); t.PermutedHeads == 0 && heads > 0 {
			t.PermutedHeads = cfg.Int("hidden_size", 0) / heads
		}
	}
	return t, ok
}

func (ggufLlama) Metadata(cfg zoo.ConfigMap, m zoo.Model) ([]gguf.KV, error) {
	kv, hd, err := ggufMetadata(cfg, m, true)
	if err != nil {
		return nil, err
	}
	kv = append(kv, gguf.KV{Key: "rope.dimension_count", Value: uint32(hd)}, gguf.KV{Key: "vocab_size", Value: uint32(m.VocabSize())})
	if heads := cfg.Int("num_attention_heads", 0); hd != m.HiddenSize()/heads {
		// An explicit head_dim (Llama 3.2's layout) GGUFConfig reads back.
		kv = append(kv, GGUFHeadLengths(hd)...)
	}
	return kv, nil
}

// GGUFConfig fills the config.json fields every Llama-style decoder
// shares from the metadata llama.cpp gives them all.
func GGUFConfig(m zoo.GGUFMeta, c zoo.ConfigMap) error {
	v, err := m.Uints("block_count", "embedding_length", "feed_forward_length", "attention.head_count", "context_length")
	if err != nil {
		return err
	}
	layers, hidden, ffn, heads, ctx := v[0], v[1], v[2], v[3], v[4]
	if heads == 0 {
		return fmt.Errorf("%s: %s is 0", m.File.Path, m.Key("attention.head_count"))
	}
	kv, err := m.UintOr("attention.head_count_kv", heads)
	if err != nil {
		return err
	}
	headDim, err := m.UintOr("attention.key_length", hidden/heads)
	if err != nil {
		return err
	}
	theta, err := m.FloatOr("rope.freq_base", 10000)
	if err != nil {
		return err
	}
	eps, err := m.FloatOr("attention.layer_norm_rms_epsilon", 1e-6)
	if err != nil {
		return err
	}
	vocab, err := m.Rows("token_embd.weight")
	if err != nil {
		return err
	}
	c["vocab_size"], c["hidden_size"], c["intermediate_size"] = vocab, hidden, ffn
	c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"] = layers, heads, kv
	c["head_dim"], c["max_position_embeddings"], c["rope_theta"] = headDim, ctx, theta
	c["rms_norm_eps"], c["tie_word_embeddings"] = eps, !m.HasTensor("output.weight")
	return ggufRoPEConfig(m, c)
}

// GGUFMetadata is the inverse of GGUFConfig: the keys every Llama-style
// decoder shares, for m and its config.json cfg, and its head size.
func GGUFMetadata(cfg zoo.ConfigMap, m zoo.Model) (kv []gguf.KV, headDim int, err error) {
	return ggufMetadata(cfg, m, false)
}

// ggufMetadata is GGUFMetadata for an architecture that stores llama3
// scaling as rope_freqs.weight (withFreqs) or not.
func ggufMetadata(cfg zoo.ConfigMap, m zoo.Model, withFreqs bool) (kv []gguf.KV, headDim int, err error) {
	heads := cfg.Int("num_attention_heads", 0)
	if heads == 0 {
		return nil, 0, fmt.Errorf("config.json has no num_attention_heads")
	}
	rope, err := ggufRoPEMetadata(cfg, withFreqs)
	if err != nil {
		return nil, 0, err
	}
	u := func(v int) uint32 { return uint32(v) }
	return append([]gguf.KV{
		{Key: "block_count", Value: u(m.NumLayers())}, {Key: "context_length", Value: u(m.MaxPositions())},
		{Key: "embedding_length", Value: u(m.HiddenSize())}, {Key: "feed_forward_length", Value: u(cfg.Int("intermediate_size", 0))},
		{Key: "attention.head_count", Value: u(heads)}, {Key: "attention.head_count_kv", Value: u(cfg.Int("num_key_value_heads", heads))},
		{Key: "rope.freq_base", Value: float32(cfg.Float("rope_theta", 10000))},
		{Key: "attention.layer_norm_rms_epsilon", Value: float32(cfg.Float("rms_norm_eps", 1e-6))},
	}, rope...), cfg.Int("head_dim", m.HiddenSize()/heads), nil
}

// GGUFHeadLengths are the attention.key_length and
// attention.value_length keys of head size hd, which the architectures
// whose head size is not hidden_size / heads write (qwen3, qwen3moe,
// gemma3).
func GGUFHeadLengths(hd int) []gguf.KV {
	return []gguf.KV{{Key: "attention.key_length", Value: uint32(hd)}, {Key: "attention.value_length", Value: uint32(hd)}}
}

// ggufLayer is llama.cpp's name of each module of a decoder layer.
var ggufLayer = map[string]string{
	"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
	"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
	"self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
	"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "mlp.gate": "ffn_gate_inp",
}

// ggufExperts is llama.cpp's name of each stacked expert projection.
var ggufExperts = map[string]string{"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}

// GGUFNames maps the decoder's declared names (model.embed_tokens,
// model.layers.<i>.self_attn.q_proj, ...) to llama.cpp's (token_embd,
// blk.<i>.attn_q, ...); norms renames a family's layer norms (a module
// under model.layers.<i> to llama.cpp's name). A MoE's stacked experts
// (mlp.experts.gate_proj, ...) are llama.cpp's ffn_{gate,up,down}_exps,
// [experts, out, in] in PyTorch order.
func GGUFNames(norms map[string]string) func(declared string) (string, bool) {
	layer := maps.Clone(ggufLayer)
	maps.Copy(layer, norms)
	return func(declared string) (string, bool) {
		switch declared {
		case "model.embed_tokens.weight":
			return "token_embd.weight", true
		case "model.norm.weight":
			return "output_norm.weight", true
		case "lm_head.weight":
			return "output.weight", true
		}
		i, rest, ok := zoo.LayerIndex(declared, "model.layers.")
		if !ok {
			return "", false
		}
		if proj, ok := strings.CutPrefix(rest, "mlp.experts."); ok {
			if g, ok := ggufExperts[proj]; ok {
				return fmt.Sprintf("blk.%d.%s.weight", i, g), true
			}
			return "", false
		}
		return zoo.GGUFLayerTensor(declared, "model.layers.", layer)
	}
}
