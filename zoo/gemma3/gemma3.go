// Package gemma3 is Gemma 3's text decoder (model_type "gemma3_text"),
// after Hugging Face transformers' modular_gemma3.py: embeddings scaled by
// sqrt(hidden_size); four (1+w) RMSNorms per layer (before and after both
// attention and MLP); QK-norm; sliding-window layers with their own RoPE
// base between full-attention layers; a GELU-tanh gated MLP; attention
// scaled by query_pre_attn_scalar^-0.5; optional final logit soft-capping.
package gemma3

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func init() {
	zoo.Register("gemma3_text", func(data []byte) (zoo.Config, error) { return ParseConfig(data) })
}

// Config is config.json for model_type "gemma3_text", with
// Gemma3TextConfig's defaults for absent keys.
type Config struct {
	VocabSize             int             `json:"vocab_size"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      int             `json:"num_key_value_heads"`
	HeadDim               int             `json:"head_dim"`
	HiddenActivation      string          `json:"hidden_activation"`
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	InitializerRange_     float64         `json:"initializer_range"`
	RMSNormEps            float64         `json:"rms_norm_eps"`
	TieWordEmbeddings     bool            `json:"tie_word_embeddings"`
	AttentionBias         bool            `json:"attention_bias"`
	QueryPreAttnScalar    float64         `json:"query_pre_attn_scalar"`
	SlidingWindow         *int            `json:"sliding_window"`
	SlidingWindowPattern  int             `json:"sliding_window_pattern"`
	LayerTypes            []string        `json:"layer_types"`
	RopeLocalBaseFreq     float64         `json:"rope_local_base_freq"`
	FinalLogitSoftcapping *float64        `json:"final_logit_softcapping"`
	BidirectionalAttn     bool            `json:"use_bidirectional_attention"`
	EOSTokenID            loaders.IntList `json:"eos_token_id"`
	loaders.RoPEFields

	rope    []loaders.RoPE // per layer
	windows []int          // per layer, 0 for full attention
}

// ParseConfig decodes config.json. Unknown keys are ignored; the key
// _sliding_window_pattern is informational and, as in HF, not read.
func ParseConfig(data []byte) (*Config, error) {
	window := 4096
	c := &Config{
		VocabSize: 262208, HiddenSize: 2304, IntermediateSize: 9216, NumHiddenLayers: 26,
		NumAttentionHeads: 8, NumKeyValueHeads: 4, HeadDim: 256, HiddenActivation: "gelu_pytorch_tanh",
		MaxPositionEmbeddings: 131072, InitializerRange_: 0.02, RMSNormEps: 1e-6, TieWordEmbeddings: true,
		QueryPreAttnScalar: 256, SlidingWindow: &window, SlidingWindowPattern: 6, RopeLocalBaseFreq: 10000,
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	if c.BidirectionalAttn {
		return nil, errors.New("use_bidirectional_attention is not supported (only causal decoding)")
	}
	if c.QueryPreAttnScalar <= 0 {
		return nil, fmt.Errorf("query_pre_attn_scalar must be positive, got %g", c.QueryPreAttnScalar)
	}
	L := c.NumHiddenLayers
	if c.LayerTypes == nil {
		if c.SlidingWindowPattern <= 0 {
			return nil, fmt.Errorf("sliding_window_pattern must be positive, got %d", c.SlidingWindowPattern)
		}
		for i := 0; i < L; i++ {
			t := "sliding_attention"
			if (i+1)%c.SlidingWindowPattern == 0 {
				t = "full_attention"
			}
			c.LayerTypes = append(c.LayerTypes, t)
		}
	}
	var err error
	if c.windows, err = llama.Windows(c.LayerTypes, c.SlidingWindow, L); err != nil {
		return nil, err
	}
	full, err := c.RoPEFields.Resolve("full_attention", 1e6)
	if err != nil {
		return nil, err
	}
	// Sliding layers use rope_local_base_freq and never rope_scaling; in
	// the v5 form they have their own rope_parameters entry.
	local := loaders.RoPE{Type: "default", Theta: c.RopeLocalBaseFreq, Factor: 1}
	if len(c.RopeParameters) > 0 && string(c.RopeParameters) != "null" {
		if local, err = c.RoPEFields.Resolve("sliding_attention", c.RopeLocalBaseFreq); err != nil {
			return nil, err
		}
	}
	for _, w := range c.windows {
		if w > 0 {
			c.rope = append(c.rope, local)
		} else {
			c.rope = append(c.rope, full)
		}
	}
	return c, c.validate()
}

func (c *Config) dims() zoo.Dims {
	return zoo.Dims{
		VocabSize: c.VocabSize, HiddenSize: c.HiddenSize, IntermediateSize: c.IntermediateSize,
		NumLayers: c.NumHiddenLayers, NumHeads: c.NumAttentionHeads, NumKVHeads: c.NumKeyValueHeads,
		HeadDim: c.HeadDim, MaxPositions: c.MaxPositionEmbeddings,
	}
}

func (c *Config) validate() error {
	if err := c.dims().Validate(); err != nil {
		return err
	}
	if c.HiddenActivation != "gelu_pytorch_tanh" {
		return fmt.Errorf("hidden_activation %q is not supported (supported: gelu_pytorch_tanh)", c.HiddenActivation)
	}
	if len(c.EOSTokenID) == 0 {
		return errors.New("eos_token_id is not set")
	}
	return nil
}

// InitializerRange is the std of random weights.
func (c *Config) InitializerRange() float64 { return c.InitializerRange_ }

// Tensors lists the checkpoint's tensors by their HF names. Gemma's norm
// weights are offsets around zero, hence their zero init.
func (c *Config) Tensors() []zoo.TensorSpec {
	D, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	q, kv := c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim
	linear := func(name string, out, in int) zoo.TensorSpec {
		return zoo.TensorSpec{Name: name, Shape: []int{out, in}, Linear: true}
	}
	norm := func(name string, n int) zoo.TensorSpec {
		return zoo.TensorSpec{Name: name, Shape: []int{n}, Init: zoo.InitZeros}
	}
	bias := func(name string, n int) zoo.TensorSpec {
		return zoo.TensorSpec{Name: name, Shape: []int{n}, Init: zoo.InitZeros}
	}
	specs := []zoo.TensorSpec{{Name: "model.embed_tokens.weight", Shape: []int{V, D}}}
	for i := 0; i < c.NumHiddenLayers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs,
			norm(p+"input_layernorm.weight", D),
			linear(p+"self_attn.q_proj.weight", q, D),
			linear(p+"self_attn.k_proj.weight", kv, D),
			linear(p+"self_attn.v_proj.weight", kv, D),
			linear(p+"self_attn.o_proj.weight", D, q),
			norm(p+"self_attn.q_norm.weight", c.HeadDim),
			norm(p+"self_attn.k_norm.weight", c.HeadDim),
			norm(p+"post_attention_layernorm.weight", D),
			norm(p+"pre_feedforward_layernorm.weight", D),
			linear(p+"mlp.gate_proj.weight", F, D),
			linear(p+"mlp.up_proj.weight", F, D),
			linear(p+"mlp.down_proj.weight", D, F),
			norm(p+"post_feedforward_layernorm.weight", D),
		)
		if c.AttentionBias {
			specs = append(specs, bias(p+"self_attn.q_proj.bias", q), bias(p+"self_attn.k_proj.bias", kv),
				bias(p+"self_attn.v_proj.bias", kv), bias(p+"self_attn.o_proj.bias", D))
		}
	}
	specs = append(specs, norm("model.norm.weight", D))
	if !c.TieWordEmbeddings {
		specs = append(specs, zoo.TensorSpec{Name: "lm_head.weight", Shape: []int{V, D}})
	}
	return specs
}

// Model is a loaded Gemma 3 text decoder.
type Model struct {
	zoo.Base
	cfg     *Config
	head    string
	invFreq [][]float32
}

// Build assembles the model; a tied checkpoint (the default) projects the
// logits with the embedding.
func (c *Config) Build(w graphs.Weights) (zoo.Model, error) {
	if err := zoo.CheckWeights(c.Tensors(), w); err != nil {
		return nil, err
	}
	m := &Model{Base: zoo.Base{Type: "gemma3_text", Dims: c.dims(), EOS: c.EOSTokenID, W: w}, cfg: c, head: "lm_head.weight"}
	if c.TieWordEmbeddings {
		m.head = "model.embed_tokens.weight"
	}
	for _, r := range c.rope {
		m.invFreq = append(m.invFreq, layers.RoPEFrequencies(c.HeadDim, r.Theta, r.Factor))
	}
	return m, nil
}

// Forward is the architecture, top to bottom.
func (m *Model) Forward(s *graphs.Step) *G.Node {
	c := m.cfg
	// HF keeps the scale as a float32 scalar; the golden math is float32.
	x := layers.Scale(layers.Embedding(s.Weight("model.embed_tokens.weight"), s.IDs), float32(math.Sqrt(float64(c.HiddenSize))))
	for i := 0; i < c.NumHiddenLayers; i++ {
		x = m.decoderLayer(s, i, x)
	}
	if !s.AllLogits {
		x = layers.LastRow(x, s.Last)
	}
	x = layers.OffsetRMSNorm(x, s.Weight("model.norm.weight"), c.RMSNormEps)
	logits := layers.LMHead(x, s.Weight(m.head))
	if c.FinalLogitSoftcapping != nil {
		logits = layers.Softcap(logits, float32(*c.FinalLogitSoftcapping))
	}
	return logits
}

func (m *Model) decoderLayer(s *graphs.Step, i int, x *G.Node) *G.Node {
	c := m.cfg
	w := func(name string) *G.Node { return s.Weight(fmt.Sprintf("model.layers.%d.%s", i, name)) }
	norm := func(x *G.Node, name string) *G.Node { return layers.OffsetRMSNorm(x, w(name), c.RMSNormEps) }

	h := m.attention(s, i, norm(x, "input_layernorm.weight"))
	x = layers.Add(x, norm(h, "post_attention_layernorm.weight"))

	h = layers.GatedMLP(norm(x, "pre_feedforward_layernorm.weight"), w("mlp.gate_proj.weight"), w("mlp.up_proj.weight"), w("mlp.down_proj.weight"), c.HiddenActivation)
	return layers.Add(x, norm(h, "post_feedforward_layernorm.weight"))
}

// attention is Gemma3Attention: QK-norm with (1+w), a per-layer RoPE base
// and window, and the query_pre_attn_scalar scale. attn_logit_softcapping
// is not applied, as HF's Gemma3 does not pass it to attention.
func (m *Model) attention(s *graphs.Step, i int, x *G.Node) *G.Node {
	c := m.cfg
	p := fmt.Sprintf("model.layers.%d.self_attn.", i)
	w := func(name string) *G.Node { return s.Weight(p + name) }
	weights := layers.AttentionWeights{
		Q: w("q_proj.weight"), K: w("k_proj.weight"), V: w("v_proj.weight"), O: w("o_proj.weight"),
		QNorm: w("q_norm.weight"), KNorm: w("k_norm.weight"),
	}
	if c.AttentionBias {
		weights.QBias, weights.KBias, weights.VBias, weights.OBias = w("q_proj.bias"), w("k_proj.bias"), w("v_proj.bias"), w("o_proj.bias")
	}
	r := c.rope[i]
	kc, vc := s.Cache(i)
	return layers.SelfAttention(x, s.Meta, kc, vc, weights, layers.AttentionConfig{
		Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim,
		NormEps: c.RMSNormEps, NormOffset: 1,
		InvFreq: m.invFreq[i], RoPEID: fmt.Sprintf("theta=%g,factor=%g", r.Theta, r.Factor),
		Scale:  1 / math.Sqrt(c.QueryPreAttnScalar),
		Window: c.windows[i],
		Name:   fmt.Sprintf("layers.%d", i),
	})
}
