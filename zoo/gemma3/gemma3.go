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
	InitRange             float64         `json:"initializer_range"`
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

	rope    []*layers.RoPE // per layer
	windows []int          // per layer, 0 for full attention
}

// ParseConfig decodes config.json. Unknown keys are ignored; the key
// _sliding_window_pattern is informational and, as in HF, not read.
func ParseConfig(data []byte) (*Config, error) {
	window := 4096
	c := &Config{
		VocabSize: 262208, HiddenSize: 2304, IntermediateSize: 9216, NumHiddenLayers: 26,
		NumAttentionHeads: 8, NumKeyValueHeads: 4, HeadDim: 256, HiddenActivation: "gelu_pytorch_tanh",
		MaxPositionEmbeddings: 131072, InitRange: 0.02, RMSNormEps: 1e-6, TieWordEmbeddings: true,
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
	if c.windows, err = zoo.Windows(c.LayerTypes, c.SlidingWindow, L); err != nil {
		return nil, err
	}
	full, err := c.RoPEFields.Resolve("full_attention", 1e6, c.MaxPositionEmbeddings)
	if err != nil {
		return nil, err
	}
	// Sliding layers use rope_local_base_freq and never rope_scaling; in
	// the v5 form they have their own rope_parameters entry.
	local := loaders.RoPE{Type: "default", Theta: c.RopeLocalBaseFreq, Factor: 1, AttentionFactor: 1}
	if len(c.RopeParameters) > 0 && string(c.RopeParameters) != "null" {
		if local, err = c.RoPEFields.Resolve("sliding_attention", c.RopeLocalBaseFreq, c.MaxPositionEmbeddings); err != nil {
			return nil, err
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	fullRoPE, err := layers.NewScaledRoPE(c.HeadDim, full)
	if err != nil {
		return nil, fmt.Errorf("config.json: full_attention rope, head_dim %d: %w", c.HeadDim, err)
	}
	localRoPE, err := layers.NewScaledRoPE(c.HeadDim, local)
	if err != nil {
		return nil, fmt.Errorf("config.json: sliding_attention rope, head_dim %d: %w", c.HeadDim, err)
	}
	for _, w := range c.windows {
		if w > 0 {
			c.rope = append(c.rope, localRoPE)
		} else {
			c.rope = append(c.rope, fullRoPE)
		}
	}
	return c, nil
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
func (c *Config) InitializerRange() float64 { return c.InitRange }

// Model is a loaded Gemma 3 text decoder.
type Model struct {
	zoo.Base
	embed      layers.Embedding
	embedScale float32
	layers     []block
	norm       *layers.RMSNorm
	head       layers.Linear
	softcap    *float64
}

// block is Gemma3DecoderLayer: four (1+w) norms around attention and MLP.
type block struct {
	inputNorm, postAttentionNorm, preFeedforwardNorm, postFeedforwardNorm *layers.RMSNorm
	attn                                                                  *layers.Attention
	mlp                                                                   *layers.GatedMLP
}

// New declares the tensors under p.model (and p.lm_head when untied; a
// tied checkpoint, the default, projects with the embedding).
func (c *Config) New(p graphs.Scope) (zoo.Model, error) {
	D, body := c.HiddenSize, p.Sub("model")
	norm := func(p graphs.Scope, dim int) *layers.RMSNorm {
		return layers.NewRMSNorm(p, layers.OffsetNorm, dim, c.RMSNormEps)
	}
	m := &Model{
		Base:  zoo.Base{Type: "gemma3_text", Dims: c.dims(), EOS: c.EOSTokenID, Weights: p.Params()},
		embed: layers.NewEmbedding(body.Sub("embed_tokens"), c.VocabSize, D),
		// HF keeps the scale as a float32 scalar; the golden math is float32.
		embedScale: float32(math.Sqrt(float64(D))),
		softcap:    c.FinalLogitSoftcapping,
	}
	for i := 0; i < c.NumHiddenLayers; i++ {
		lp := body.Sub("layers", i)
		r := c.rope[i]
		b := block{
			inputNorm:           norm(lp.Sub("input_layernorm"), D),
			postAttentionNorm:   norm(lp.Sub("post_attention_layernorm"), D),
			preFeedforwardNorm:  norm(lp.Sub("pre_feedforward_layernorm"), D),
			postFeedforwardNorm: norm(lp.Sub("post_feedforward_layernorm"), D),
			// Gemma3Attention: QK-norm with (1+w), a per-layer RoPE base
			// and window, and the query_pre_attn_scalar scale.
			// attn_logit_softcapping is not applied, as HF's Gemma3 does
			// not pass it to attention.
			attn: layers.NewAttention(lp.Sub("self_attn"), D, layers.AttentionConfig{
				Layer: i, Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim,
				Bias: c.AttentionBias, QKNorm: layers.OffsetNorm, NormEps: c.RMSNormEps,
				RoPE:   r,
				Scale:  1 / math.Sqrt(c.QueryPreAttnScalar),
				Window: c.windows[i],
				// llama.cpp scales Q in the graph and attends with scale 1.
				PreScale: true,
			}),
			mlp: layers.NewGatedMLP(lp.Sub("mlp"), D, c.IntermediateSize, c.HiddenActivation, false),
		}
		m.layers = append(m.layers, b)
	}
	m.norm = norm(body.Sub("norm"), D)
	m.head = layers.NewHead(p.Sub("lm_head"), m.embed, c.TieWordEmbeddings)
	return m, nil
}

// Embed looks the ids up and scales them by sqrt(hidden_size).
func (m *Model) Embed(s *graphs.Step, ids *G.Node) *G.Node {
	return layers.Scale(m.embed.Forward(s, ids), m.embedScale)
}

// Layer is one decoder layer: the post norms act on each sub-block's
// output, before the residual add.
func (m *Model) Layer(s *graphs.Step, i int, x *G.Node) *G.Node {
	b := m.layers[i]
	h := b.attn.Forward(s, b.inputNorm.Forward(s, x))
	x = layers.Add(x, b.postAttentionNorm.Forward(s, h))
	h = b.mlp.Forward(s, b.preFeedforwardNorm.Forward(s, x))
	return layers.Add(x, b.postFeedforwardNorm.Forward(s, h))
}

// Norm is the final (1+w) RMSNorm.
func (m *Model) Norm(s *graphs.Step, h *G.Node) *G.Node { return m.norm.Forward(s, h) }

// Head projects onto the vocabulary, soft-capped when the config says so.
func (m *Model) Head(s *graphs.Step, h *G.Node) *G.Node {
	logits := m.head.Forward(s, h)
	if m.softcap != nil {
		logits = layers.Softcap(logits, float32(*m.softcap))
	}
	return logits
}
