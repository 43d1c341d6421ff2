package gpt2

import (
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
)

func init() { zoo.RegisterGGUF("gpt2", "gpt2", ggufGPT2{}) }

// ggufGPT2 is llama.cpp's gpt2. llama.cpp stores the Conv1D weights in
// Linear layout, which is what the model declares (see Stored): nothing
// is transposed, and the fused attn_qkv is c_attn as declared.
type ggufGPT2 struct{}

// ggufTop and ggufLayer are llama.cpp's names of GPT-2's tensors outside
// the blocks and of each block's modules.
var (
	ggufTop = map[string]string{
		"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
		"ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias", "lm_head.weight": "output.weight",
	}
	ggufLayer = map[string]string{
		"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
		"ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down",
	}
)

func (ggufGPT2) Config(m zoo.GGUFMeta, c zoo.ConfigMap) error {
	v, err := m.Uints("block_count", "embedding_length", "feed_forward_length", "attention.head_count", "context_length")
	if err != nil {
		return err
	}
	c["n_layer"], c["n_embd"], c["n_inner"], c["n_head"], c["n_positions"] = v[0], v[1], v[2], v[3], v[4]
	if c["layer_norm_epsilon"], err = m.FloatOr("attention.layer_norm_epsilon", 1e-5); err != nil {
		return err
	}
	if c["vocab_size"], err = m.Rows("token_embd.weight"); err != nil {
		return err
	}
	// GGUF has no key for the activation: llama.cpp's gpt2 uses GELU's tanh form.
	c["tie_word_embeddings"], c["activation_function"] = !m.HasTensor("output.weight"), "gelu_new"
	return nil
}

func (ggufGPT2) Tensor(_ zoo.ConfigMap, p *graphs.Param) (zoo.GGUFTensor, bool) {
	if g, ok := ggufTop[p.Name]; ok {
		return zoo.GGUFTensor{Name: g}, true
	}
	name, ok := zoo.GGUFLayerTensor(p.Name, "h.", ggufLayer)
	return zoo.GGUFTensor{Name: name}, ok
}

func (ggufGPT2) Metadata(cfg zoo.ConfigMap, m zoo.Model) ([]gguf.KV, error) {
	embd := cfg.Int("n_embd", m.HiddenSize())
	u := func(v int) uint32 { return uint32(v) }
	return []gguf.KV{
		{Key: "block_count", Value: u(m.NumLayers())}, {Key: "context_length", Value: u(m.MaxPositions())},
		{Key: "embedding_length", Value: u(embd)}, {Key: "feed_forward_length", Value: u(cfg.Int("n_inner", 4*embd))},
		{Key: "attention.head_count", Value: u(cfg.Int("n_head", 12))},
		{Key: "attention.layer_norm_epsilon", Value: float32(cfg.Float("layer_norm_epsilon", 1e-5))},
	}, nil
}
