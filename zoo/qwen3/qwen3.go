// Package qwen3 is Qwen3 (dense), after Hugging Face transformers'
// modeling_qwen3.py: a Llama-style decoder whose attention normalises each
// query and key head (RMSNorm over head_dim) before RoPE, and whose head_dim
// is decoupled from hidden_size / num_attention_heads.
package qwen3

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
)

func init() {
	zoo.Register("qwen3", func(data []byte) (zoo.Config, error) { return ParseConfig(data) })
}

// Config is config.json for model_type "qwen3", with HF's defaults
// (configuration_qwen3.py) for absent keys.
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
	InitializerRange_     float64         `json:"initializer_range"`
	RMSNormEps            float64         `json:"rms_norm_eps"`
	TieWordEmbeddings     bool            `json:"tie_word_embeddings"`
	AttentionBias         bool            `json:"attention_bias"`
	UseSlidingWindow      bool            `json:"use_sliding_window"`
	SlidingWindow         *int            `json:"sliding_window"`
	MaxWindowLayers       int             `json:"max_window_layers"`
	LayerTypes            []string        `json:"layer_types"`
	EOSTokenID            loaders.IntList `json:"eos_token_id"`
	loaders.RoPEFields

	// Resolved at parse time.
	rope loaders.RoPE
}

// ParseConfig decodes config.json. Unknown keys are ignored.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{
		VocabSize:             151936,
		HiddenSize:            4096,
		IntermediateSize:      22016,
		NumHiddenLayers:       32,
		NumAttentionHeads:     32,
		HiddenAct:             "silu",
		MaxPositionEmbeddings: 32768,
		InitializerRange_:     0.02,
		RMSNormEps:            1e-6,
		MaxWindowLayers:       28,
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	if c.NumKeyValueHeads == nil {
		c.NumKeyValueHeads = &c.NumAttentionHeads
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
	if err := c.validate(); err != nil {
		return nil, err
	}
	var err error
	c.rope, err = c.RoPEFields.Resolve("full_attention", 10000)
	return c, err
}

func (c *Config) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", *c.NumKeyValueHeads}, {"head_dim", *c.HeadDim},
		{"max_position_embeddings", c.MaxPositionEmbeddings},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be positive, got %d", f.name, f.v)
		}
	}
	if c.NumAttentionHeads%*c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, *c.NumKeyValueHeads)
	}
	if *c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim %d must be even for RoPE", *c.HeadDim)
	}
	if c.HiddenAct != "silu" {
		return fmt.Errorf("hidden_act %q is not supported (supported: silu)", c.HiddenAct)
	}
	if len(c.LayerTypes) != c.NumHiddenLayers {
		return fmt.Errorf("layer_types has %d entries for %d layers", len(c.LayerTypes), c.NumHiddenLayers)
	}
	for i, t := range c.LayerTypes {
		switch t {
		case "full_attention":
		case "sliding_attention":
			if c.SlidingWindow == nil || *c.SlidingWindow <= 0 {
				return fmt.Errorf("layer %d is sliding_attention but sliding_window is not set", i)
			}
		default:
			return fmt.Errorf("layer_types[%d] = %q is not supported (supported: full_attention, sliding_attention)", i, t)
		}
	}
	return nil
}

// InitializerRange is the std of random weights.
func (c *Config) InitializerRange() float64 { return c.InitializerRange_ }

// Tensors lists the checkpoint's tensors by their HF names.
func (c *Config) Tensors() []zoo.TensorSpec {
	D, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	q, kv := c.NumAttentionHeads**c.HeadDim, *c.NumKeyValueHeads**c.HeadDim
	linear := func(name string, out, in int) zoo.TensorSpec {
		return zoo.TensorSpec{Name: name, Shape: []int{out, in}, Linear: true}
	}
	vec := func(name string, n int, init zoo.Init) zoo.TensorSpec {
		return zoo.TensorSpec{Name: name, Shape: []int{n}, Init: init}
	}
	specs := []zoo.TensorSpec{{Name: "model.embed_tokens.weight", Shape: []int{V, D}}}
	for i := 0; i < c.NumHiddenLayers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs,
			vec(p+"input_layernorm.weight", D, zoo.InitOnes),
			linear(p+"self_attn.q_proj.weight", q, D),
			linear(p+"self_attn.k_proj.weight", kv, D),
			linear(p+"self_attn.v_proj.weight", kv, D),
			linear(p+"self_attn.o_proj.weight", D, q),
			vec(p+"self_attn.q_norm.weight", *c.HeadDim, zoo.InitOnes),
			vec(p+"self_attn.k_norm.weight", *c.HeadDim, zoo.InitOnes),
			vec(p+"post_attention_layernorm.weight", D, zoo.InitOnes),
			linear(p+"mlp.gate_proj.weight", F, D),
			linear(p+"mlp.up_proj.weight", F, D),
			linear(p+"mlp.down_proj.weight", D, F),
		)
		if c.AttentionBias {
			specs = append(specs,
				vec(p+"self_attn.q_proj.bias", q, zoo.InitZeros),
				vec(p+"self_attn.k_proj.bias", kv, zoo.InitZeros),
				vec(p+"self_attn.v_proj.bias", kv, zoo.InitZeros),
				vec(p+"self_attn.o_proj.bias", D, zoo.InitZeros),
			)
		}
	}
	specs = append(specs, vec("model.norm.weight", D, zoo.InitOnes))
	if !c.TieWordEmbeddings {
		// Kept [V, D] like the embedding: the head multiplies it as a
		// matrix-vector product.
		specs = append(specs, zoo.TensorSpec{Name: "lm_head.weight", Shape: []int{V, D}})
	}
	return specs
}

// Model is a loaded Qwen3.
type Model struct {
	cfg     *Config
	weights graphs.Weights
	head    string    // tensor the logits are projected with
	invFreq []float32 // RoPE table shared by all layers
}

// Build assembles the model. This is Qwen3's sanitize step: a tied
// checkpoint has no lm_head.weight and projects with the embedding.
func (c *Config) Build(w graphs.Weights) (zoo.Model, error) {
	for _, s := range c.Tensors() {
		if _, ok := w[s.Name]; !ok {
			return nil, fmt.Errorf("missing tensor %q", s.Name)
		}
	}
	m := &Model{cfg: c, weights: w, head: "lm_head.weight"}
	if c.TieWordEmbeddings {
		m.head = "model.embed_tokens.weight"
	}
	if len(c.EOSTokenID) == 0 {
		return nil, errors.New("config.json: eos_token_id is not set")
	}
	m.invFreq = layers.RoPEFrequencies(*c.HeadDim, c.rope.Theta, c.rope.Factor)
	return m, nil
}

func (m *Model) Config() *Config         { return m.cfg }
func (m *Model) ModelType() string       { return "qwen3" }
func (m *Model) EOSTokenIDs() []int      { return m.cfg.EOSTokenID }
func (m *Model) Weights() graphs.Weights { return m.weights }
func (m *Model) VocabSize() int          { return m.cfg.VocabSize }
func (m *Model) MaxPositions() int       { return m.cfg.MaxPositionEmbeddings }
func (m *Model) CacheSpec() graphs.CacheSpec {
	return graphs.CacheSpec{Layers: m.cfg.NumHiddenLayers, KVHeads: *m.cfg.NumKeyValueHeads, HeadDim: *m.cfg.HeadDim}
}

// Forward is the architecture, top to bottom.
func (m *Model) Forward(s *graphs.Step) *G.Node {
	c := m.cfg
	x := layers.Embedding(s.Weight("model.embed_tokens.weight"), s.IDs)
	for i := 0; i < c.NumHiddenLayers; i++ {
		x = m.decoderLayer(s, i, x)
	}
	if !s.AllLogits {
		x = layers.LastRow(x, s.Last)
	}
	x = layers.RMSNorm(x, s.Weight("model.norm.weight"), c.RMSNormEps)
	return layers.LMHead(x, s.Weight(m.head))
}

func (m *Model) decoderLayer(s *graphs.Step, i int, x *G.Node) *G.Node {
	c := m.cfg
	w := func(name string) *G.Node { return s.Weight(fmt.Sprintf("model.layers.%d.%s", i, name)) }

	h := layers.RMSNorm(x, w("input_layernorm.weight"), c.RMSNormEps)
	x = layers.Add(x, m.attention(s, i, h))

	h = layers.RMSNorm(x, w("post_attention_layernorm.weight"), c.RMSNormEps)
	return layers.Add(x, layers.GatedMLP(h, w("mlp.gate_proj.weight"), w("mlp.up_proj.weight"), w("mlp.down_proj.weight"), c.HiddenAct))
}

// attention is Qwen3Attention; Qwen3-MoE reuses it.
func (m *Model) attention(s *graphs.Step, i int, x *G.Node) *G.Node {
	c := m.cfg
	p := fmt.Sprintf("model.layers.%d.self_attn.", i)
	w := func(name string) *G.Node { return s.Weight(p + name) }
	var weights layers.AttentionWeights
	weights.Q, weights.K, weights.V, weights.O = w("q_proj.weight"), w("k_proj.weight"), w("v_proj.weight"), w("o_proj.weight")
	weights.QNorm, weights.KNorm = w("q_norm.weight"), w("k_norm.weight")
	if c.AttentionBias {
		weights.QBias, weights.KBias, weights.VBias, weights.OBias = w("q_proj.bias"), w("k_proj.bias"), w("v_proj.bias"), w("o_proj.bias")
	}
	window := 0
	if c.LayerTypes[i] == "sliding_attention" {
		window = *c.SlidingWindow
	}
	kc, vc := s.Cache(i)
	return layers.SelfAttention(x, s.Meta, kc, vc, weights, layers.AttentionConfig{
		Heads: c.NumAttentionHeads, KVHeads: *c.NumKeyValueHeads, HeadDim: *c.HeadDim,
		NormEps: c.RMSNormEps,
		InvFreq: m.invFreq, RoPEID: fmt.Sprintf("theta=%g,factor=%g", c.rope.Theta, c.rope.Factor),
		Scale:  1 / math.Sqrt(float64(*c.HeadDim)),
		Window: window,
		Name:   fmt.Sprintf("layers.%d", i),
	})
}
