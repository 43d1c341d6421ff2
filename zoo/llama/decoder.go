package llama

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

// Decoder is the Llama architecture as the families built on it share it
// (transformers derives Qwen3 and SmolLM3 from Llama the same way):
// pre-norm decoder layers of GQA self-attention and a SwiGLU MLP. A family
// fills a Decoder from its own config.json; the options below are the
// differences between them.
type Decoder struct {
	ModelType string
	// Prefix is where the body's tensors live ("model" when empty;
	// "model.text_model" inside a vision-language checkpoint).
	Prefix string

	zoo.Dims
	RMSNormEps             float64
	HiddenAct              string
	TieWordEmbeddings      bool
	AttentionBias, MLPBias bool
	InitRange              float64
	EOS                    []int

	// QKNorm adds Qwen3's per-head RMSNorm of queries and keys (q_norm,
	// k_norm over head_dim) before RoPE.
	QKNorm bool
	// RoPE is each layer's rotary embedding; a nil entry is a layer
	// without one (SmolLM3's NoPE layers).
	RoPE []*loaders.RoPE
	// Window is each layer's sliding window in keys (0: full attention).
	Window []int
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

// Validate checks the sizes, naming the config.json field at fault.
func (d *Decoder) Validate() error {
	if err := d.Dims.Validate(); err != nil {
		return err
	}
	if d.HiddenAct != "silu" {
		return fmt.Errorf("hidden_act %q is not supported (supported: silu)", d.HiddenAct)
	}
	if len(d.RoPE) != d.NumLayers || len(d.Window) != d.NumLayers {
		return fmt.Errorf("per-layer settings cover %d and %d layers, the model has %d", len(d.RoPE), len(d.Window), d.NumLayers)
	}
	if len(d.EOS) == 0 {
		return fmt.Errorf("eos_token_id is not set")
	}
	if m := d.MoE; m != nil {
		if len(m.Sparse) != d.NumLayers {
			return fmt.Errorf("MoE layer plan covers %d layers, the model has %d", len(m.Sparse), d.NumLayers)
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

// Arch gives a Llama-derived family's Config the zoo.Config methods of the
// Decoder it resolved to, while the family's JSON fields stay its own.
type Arch struct{ D *Decoder }

// New declares the decoder's tensors and returns the model.
func (a Arch) New(p graphs.Scope) (zoo.Model, error) { return a.D.New(p) }

// InitializerRange is the std of random weights.
func (a Arch) InitializerRange() float64 { return a.D.InitRange }

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
	if err := d.Validate(); err != nil {
		return nil, err
	}
	prefix := d.Prefix
	if prefix == "" {
		prefix = "model"
	}
	body := p.Sub(prefix)
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
		Scale:  1 / math.Sqrt(float64(d.HeadDim)),
		Window: d.Window[i],
	}
	if d.QKNorm {
		c.QKNorm = layers.PlainNorm
	}
	if r := d.RoPE[i]; r != nil {
		c.RoPE = layers.NewRoPE(d.HeadDim, r.Theta, r.Factor)
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
