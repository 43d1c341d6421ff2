// Package gpt2 is GPT-2 after Hugging Face transformers' modeling_gpt2.py:
// token and learned position embeddings, pre-LayerNorm blocks of causal
// multi-head attention from one fused projection and a GELU MLP, a final
// LayerNorm and a head tied to the token embeddings.
package gpt2

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

func init() {
	zoo.Register("gpt2", func(data []byte) (zoo.Config, error) { return ParseConfig(data) })
}

// Config is config.json for model_type "gpt2", with GPT2Config's defaults
// for absent keys. hidden_size, num_hidden_layers, num_attention_heads and
// max_position_embeddings are accepted as aliases of GPT-2's own names.
type Config struct {
	VocabSize              int             `json:"vocab_size"`
	NPositions             int             `json:"n_positions"`
	NEmbd                  int             `json:"n_embd"`
	NLayer                 int             `json:"n_layer"`
	NHead                  int             `json:"n_head"`
	NInner                 *int            `json:"n_inner"`
	ActivationFunction     string          `json:"activation_function"`
	LayerNormEpsilon       float64         `json:"layer_norm_epsilon"`
	InitRange              float64         `json:"initializer_range"`
	ScaleAttnWeights       bool            `json:"scale_attn_weights"`
	ScaleAttnByInverseIdx  bool            `json:"scale_attn_by_inverse_layer_idx"`
	TieWordEmbeddings      bool            `json:"tie_word_embeddings"`
	EOSTokenID             loaders.IntList `json:"eos_token_id"`
	HiddenSizeAlias        *int            `json:"hidden_size"`
	NumHiddenLayersAlias   *int            `json:"num_hidden_layers"`
	NumAttentionHeadsAlias *int            `json:"num_attention_heads"`
	MaxPositionsAlias      *int            `json:"max_position_embeddings"`
}

// ParseConfig decodes config.json with GPT2Config's defaults and checks
// the sizes, naming the field at fault.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{
		VocabSize: 50257, NPositions: 1024, NEmbd: 768, NLayer: 12, NHead: 12,
		ActivationFunction: "gelu_new", LayerNormEpsilon: 1e-5, InitRange: 0.02,
		ScaleAttnWeights: true, TieWordEmbeddings: true, EOSTokenID: loaders.IntList{50256},
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	for _, a := range []struct {
		alias *int
		field *int
	}{{c.HiddenSizeAlias, &c.NEmbd}, {c.NumHiddenLayersAlias, &c.NLayer}, {c.NumAttentionHeadsAlias, &c.NHead}, {c.MaxPositionsAlias, &c.NPositions}} {
		if a.alias != nil {
			*a.field = *a.alias
		}
	}
	return c, c.Validate()
}

// Inner is the MLP width: n_inner, or 4 * n_embd when null or absent.
func (c *Config) Inner() int {
	if c.NInner != nil {
		return *c.NInner
	}
	return 4 * c.NEmbd
}

// Validate checks the sizes and options, naming the config.json field.
func (c *Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab_size", c.VocabSize}, {"n_positions", c.NPositions}, {"n_embd", c.NEmbd}, {"n_layer", c.NLayer}, {"n_head", c.NHead}, {"n_inner", c.Inner()}} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be positive, got %d", f.name, f.v)
		}
	}
	if c.NEmbd%c.NHead != 0 {
		return fmt.Errorf("n_embd %d does not split into n_head %d heads", c.NEmbd, c.NHead)
	}
	if !c.ScaleAttnWeights {
		return fmt.Errorf("scale_attn_weights false is not supported")
	}
	switch c.ActivationFunction {
	case "gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "silu":
	default:
		return fmt.Errorf("activation_function %q is not supported (supported: gelu_new, gelu_pytorch_tanh, gelu, relu, silu)", c.ActivationFunction)
	}
	if len(c.EOSTokenID) == 0 {
		return fmt.Errorf("eos_token_id is not set")
	}
	return nil
}

// InitializerRange is the std of random weights.
func (c *Config) InitializerRange() float64 { return c.InitRange }

// conv1D lists the tensors GPT-2 stores as Conv1D weights, [in, out].
var conv1D = []string{".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}

// Stored maps the model's tensors (declared without prefix, Linear
// layout) to the checkpoint's: newer saves prefix the body with
// "transformer." (never lm_head), the original files do not; the Conv1D
// weights are stored transposed. Mask buffers the original files carry
// (attn.bias, attn.masked_bias) are never declared, so never read.
func (c *Config) Stored(declared string, has func(string) bool) (string, bool) {
	name := declared
	if declared != "lm_head.weight" && has("transformer.wte.weight") {
		name = "transformer." + declared
	}
	for _, suffix := range conv1D {
		if strings.HasSuffix(declared, suffix) {
			return name, true
		}
	}
	return name, false
}

// New declares GPT-2's tensors: wte, wpe, h.<i>.{ln_1, attn.c_attn,
// attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_f, and lm_head when untied.
func (c *Config) New(p graphs.Scope) (zoo.Model, error) {
	D, H := c.NEmbd, c.NHead
	m := &Model{
		Base: zoo.Base{Type: "gpt2", EOS: c.EOSTokenID, Weights: p.Params(), Dims: zoo.Dims{
			VocabSize: c.VocabSize, HiddenSize: D, IntermediateSize: c.Inner(), NumLayers: c.NLayer,
			NumHeads: H, NumKVHeads: H, HeadDim: D / H, MaxPositions: c.NPositions,
		}},
		wte: layers.NewEmbedding(p.Sub("wte"), c.VocabSize, D),
		wpe: layers.NewEmbedding(p.Sub("wpe"), c.NPositions, D),
		lnF: layers.NewLayerNorm(p.Sub("ln_f"), D, c.LayerNormEpsilon),
	}
	for i := 0; i < c.NLayer; i++ {
		hp := p.Sub("h", i)
		scale := 1 / math.Sqrt(float64(D/H))
		if c.ScaleAttnByInverseIdx {
			scale /= float64(i + 1)
		}
		attn := layers.NewFusedAttention(hp.Sub("attn"), "c_attn", "c_proj", D, layers.AttentionConfig{
			Layer: i, Heads: H, KVHeads: H, HeadDim: D / H, Bias: true, Scale: scale,
		})
		m.blocks = append(m.blocks, block{
			ln1:  layers.NewLayerNorm(hp.Sub("ln_1"), D, c.LayerNormEpsilon),
			attn: attn,
			ln2:  layers.NewLayerNorm(hp.Sub("ln_2"), D, c.LayerNormEpsilon),
			mlp:  layers.NewMLPNamed(hp.Sub("mlp"), "c_fc", "c_proj", D, c.Inner(), c.ActivationFunction),
		})
	}
	m.head = layers.NewHead(p.Sub("lm_head"), m.wte, c.TieWordEmbeddings)
	return m, nil
}

// Model is GPT2LMHeadModel.
type Model struct {
	zoo.Base
	wte, wpe layers.Embedding
	blocks   []block
	lnF      *layers.LayerNorm
	head     layers.Linear
}

type block struct {
	ln1, ln2 *layers.LayerNorm
	attn     *layers.Attention
	mlp      *layers.MLP
}

// Embed adds the learned position of each row to its token embedding.
func (m *Model) Embed(s *graphs.Step, ids *G.Node) *G.Node {
	return layers.Add(m.wte.Forward(s, ids), m.wpe.ForwardPositions(s))
}

// Layer is one GPT-2 block.
func (m *Model) Layer(s *graphs.Step, i int, x *G.Node) *G.Node {
	b := m.blocks[i]
	x = layers.Add(x, b.attn.Forward(s, b.ln1.Forward(s, x)))
	return layers.Add(x, b.mlp.Forward(s, b.ln2.Forward(s, x)))
}

// Norm is ln_f.
func (m *Model) Norm(s *graphs.Step, h *G.Node) *G.Node { return m.lnF.Forward(s, h) }

// Head projects onto the vocabulary (tied to wte unless lm_head exists).
func (m *Model) Head(s *graphs.Step, h *G.Node) *G.Node { return m.head.Forward(s, h) }
