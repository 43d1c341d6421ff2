package llama

import (
	"cmp"
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

// Variant is what a Llama-derived family changes in the Llama decoder
// beyond the config.json fields they share (Config): transformers derives
// Qwen3 and SmolLM3 from Llama the same way.
type Variant struct {
	ModelType string
	// Theta is the RoPE base when config.json names none.
	Theta float64
	// Prefix is where the body's tensors live ("model" when empty;
	// "model.text_model" inside a vision-language checkpoint).
	Prefix string
	// QKNorm adds Qwen3's per-head RMSNorm of queries and keys (q_norm,
	// k_norm over head_dim) before RoPE.
	QKNorm bool
	// NoPE marks the layers without a rotary embedding (SmolLM3's); nil
	// when every layer has one.
	NoPE []bool
	// Window is each layer's sliding window in keys (0: full attention);
	// nil when every layer attends to the whole context.
	Window []int
	// Interleaved says llama.cpp's GGUF holds the Q and K rows permuted
	// into rope's interleaved order (its llama architecture, which
	// SmolLM3 and SmolVLM's text model use): a quantized KV cache follows
	// that order (layers.AttentionConfig.Interleaved).
	Interleaved bool
	// MoE, when set, replaces the MLP of its sparse layers with routed
	// experts (Qwen3-MoE).
	MoE *MoE
}

// MoE describes the mixture-of-experts MLPs of a decoder.
type MoE struct {
	NumExperts, TopK, IntermediateSize int
	// NormTopK divides the chosen experts' probabilities by their sum.
	NormTopK bool
	// Sparse marks the layers whose MLP is the mixture.
	Sparse []bool
}

// Decoder is the Llama architecture as the families built on it share it:
// pre-norm decoder layers of GQA self-attention and a SwiGLU MLP, as a
// family's Variant changes them. NewDecoder makes it from config.json and
// validates it; it is the family's zoo.Config, and no field changes after.
type Decoder struct {
	Variant
	zoo.Dims
	RMSNormEps             float64
	HiddenAct              string
	TieWordEmbeddings      bool
	AttentionBias, MLPBias bool
	InitRange              float64
	EOS                    []int
	// RoPE is the rotary embedding of every layer but the NoPE ones.
	RoPE loaders.RoPE
	rope *layers.RoPE // its table, shared by the layers
}

// NewDecoder is the one step from a Llama-derived family's config.json to
// its architecture: c's shared fields resolved as LlamaConfig resolves them
// (absent num_key_value_heads means MHA, absent head_dim means
// hidden_size / num_attention_heads, the RoPE base defaults to v.Theta),
// changed by v, then validated once, naming the config.json field at fault.
func NewDecoder(c *Config, v Variant) (*Decoder, error) {
	d := &Decoder{
		Variant: v,
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
	var err error
	if d.RoPE, err = c.RoPEFields.Resolve("full_attention", v.Theta, c.MaxPositionEmbeddings); err != nil {
		return nil, err
	}
	if d.rope, err = layers.NewScaledRoPE(d.HeadDim, d.RoPE); err != nil {
		return nil, fmt.Errorf("config.json: head_dim %d: %w", d.HeadDim, err)
	}
	if err := d.validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// validate checks the sizes and the per-layer settings.
func (d *Decoder) validate() error {
	if err := d.Dims.Validate(); err != nil {
		return err
	}
	if d.HiddenAct != "silu" {
		return fmt.Errorf("hidden_act %q is not supported (supported: silu)", d.HiddenAct)
	}
	if len(d.EOS) == 0 {
		return fmt.Errorf("eos_token_id is not set")
	}
	L := d.NumLayers
	if (d.NoPE != nil && len(d.NoPE) != L) || (d.Window != nil && len(d.Window) != L) {
		return fmt.Errorf("per-layer RoPE and window settings cover %d and %d layers, the model has %d", len(d.NoPE), len(d.Window), L)
	}
	for i, w := range d.Window {
		if w < 0 {
			return fmt.Errorf("layer %d's sliding window is %d", i, w)
		}
	}
	if m := d.MoE; m != nil {
		if len(m.Sparse) != L {
			return fmt.Errorf("MoE layer plan covers %d layers, the model has %d", len(m.Sparse), L)
		}
		if m.NumExperts <= 0 || m.TopK <= 0 || m.TopK > m.NumExperts || m.IntermediateSize <= 0 {
			return fmt.Errorf("num_experts %d, num_experts_per_tok %d and moe_intermediate_size %d must be positive, with num_experts_per_tok <= num_experts", m.NumExperts, m.TopK, m.IntermediateSize)
		}
	}
	return nil
}

func (d *Decoder) sparse(layer int) bool { return d.MoE != nil && d.MoE.Sparse[layer] }

// InitializerRange is the std of random weights.
func (d *Decoder) InitializerRange() float64 { return d.InitRange }

// Model is a Llama-style decoder: embed, pre-norm layers of attention and
// MLP, final norm, head.
type Model struct {
	zoo.Base
	embed  layers.Embedding
	layers []block
	norm   *layers.RMSNorm
	head   layers.Linear
}

type block struct {
	inputNorm, postAttentionNorm *layers.RMSNorm
	attn                         *layers.Attention
	mlp                          layers.FeedForward
}

// New declares the decoder's tensors under p: the body under
// p.<Prefix> (embed_tokens, layers.N, norm), the head as p.lm_head. A
// tied checkpoint has no lm_head.weight and projects with the embedding.
func (d *Decoder) New(p graphs.Scope) (zoo.Model, error) {
	body := p.Sub(cmp.Or(d.Prefix, "model"))
	m := &Model{
		Base:  zoo.Base{Type: d.ModelType, Dims: d.Dims, EOS: d.EOS, Weights: p.Params()},
		embed: layers.NewEmbedding(body.Sub("embed_tokens"), d.VocabSize, d.HiddenSize),
	}
	for i := 0; i < d.NumLayers; i++ {
		lp := body.Sub("layers", i)
		b := block{
			inputNorm:         layers.NewRMSNorm(lp.Sub("input_layernorm"), layers.PlainNorm, d.HiddenSize, d.RMSNormEps),
			postAttentionNorm: layers.NewRMSNorm(lp.Sub("post_attention_layernorm"), layers.PlainNorm, d.HiddenSize, d.RMSNormEps),
			attn:              layers.NewAttention(lp.Sub("self_attn"), d.HiddenSize, d.attention(i)),
		}
		if d.sparse(i) {
			moe := d.MoE
			b.mlp = layers.NewMoE(lp.Sub("mlp"), d.HiddenSize, moe.IntermediateSize, moe.NumExperts, moe.TopK, moe.NormTopK, d.HiddenAct)
		} else {
			b.mlp = layers.NewGatedMLP(lp.Sub("mlp"), d.HiddenSize, d.IntermediateSize, d.HiddenAct, d.MLPBias)
		}
		m.layers = append(m.layers, b)
	}
	m.norm = layers.NewRMSNorm(body.Sub("norm"), layers.PlainNorm, d.HiddenSize, d.RMSNormEps)
	m.head = layers.NewHead(p.Sub("lm_head"), m.embed, d.TieWordEmbeddings)
	return m, nil
}

// attention is layer i's LlamaAttention, with Qwen3's QK-norm when the
// family asks.
func (d *Decoder) attention(i int) layers.AttentionConfig {
	c := layers.AttentionConfig{
		Layer: i, Heads: d.NumHeads, KVHeads: d.NumKVHeads, HeadDim: d.HeadDim,
		Bias: d.AttentionBias, NormEps: d.RMSNormEps,
		Scale:       1 / math.Sqrt(float64(d.HeadDim)),
		Interleaved: d.Interleaved,
	}
	if d.Window != nil {
		c.Window = d.Window[i]
	}
	if d.QKNorm {
		c.QKNorm = layers.PlainNorm
	}
	if d.NoPE == nil || !d.NoPE[i] {
		c.RoPE = d.rope
	} else {
		c.NoPE = true
	}
	return c
}

// Embed looks the token ids up.
func (m *Model) Embed(s *graphs.Step, ids *G.Node) *G.Node { return m.embed.Forward(s, ids) }

// Layer is one pre-norm decoder layer.
func (m *Model) Layer(s *graphs.Step, i int, x *G.Node) *G.Node {
	b := m.layers[i]
	x = layers.Add(x, b.attn.Forward(s, b.inputNorm.Forward(s, x)))
	return layers.Add(x, b.mlp.Forward(s, b.postAttentionNorm.Forward(s, x)))
}

// Norm is the final RMSNorm.
func (m *Model) Norm(s *graphs.Step, h *G.Node) *G.Node { return m.norm.Forward(s, h) }

// Head projects onto the vocabulary.
func (m *Model) Head(s *graphs.Step, h *G.Node) *G.Node { return m.head.Forward(s, h) }
