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
// Decoder it resolved to.
type Arch struct{ D *Decoder }

// Tensors lists the checkpoint's tensors by their HF names.
func (a Arch) Tensors() []zoo.TensorSpec { return a.D.Tensors() }

// Build assembles the model from loaded or random weights.
func (a Arch) Build(w graphs.Weights) (zoo.Model, error) { return a.D.Build(w) }

// InitializerRange is the std of random weights.
func (a Arch) InitializerRange() float64 { return a.D.InitRange }

// Tensors lists the checkpoint's tensors by their HF names.
func (d *Decoder) Tensors() []zoo.TensorSpec {
	D, F, V := d.HiddenSize, d.IntermediateSize, d.VocabSize
	q, kv := d.NumHeads*d.HeadDim, d.NumKVHeads*d.HeadDim
	linear := func(name string, out, in int) zoo.TensorSpec {
		return zoo.TensorSpec{Name: name, Shape: []int{out, in}, Linear: true}
	}
	vec := func(name string, n int, init zoo.Init) zoo.TensorSpec {
		return zoo.TensorSpec{Name: name, Shape: []int{n}, Init: init}
	}
	specs := []zoo.TensorSpec{{Name: "model.embed_tokens.weight", Shape: []int{V, D}}}
	for i := 0; i < d.NumLayers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs,
			vec(p+"input_layernorm.weight", D, zoo.InitOnes),
			linear(p+"self_attn.q_proj.weight", q, D),
			linear(p+"self_attn.k_proj.weight", kv, D),
			linear(p+"self_attn.v_proj.weight", kv, D),
			linear(p+"self_attn.o_proj.weight", D, q),
			vec(p+"post_attention_layernorm.weight", D, zoo.InitOnes),
		)
		if d.sparse(i) {
			// Checkpoints keep one tensor per expert; so does the graph,
			// binding each by its own name (nothing is stacked).
			specs = append(specs, linear(p+"mlp.gate.weight", d.MoE.NumExperts, D))
			for e := 0; e < d.MoE.NumExperts; e++ {
				pe, Fm := fmt.Sprintf("%smlp.experts.%d.", p, e), d.MoE.IntermediateSize
				specs = append(specs, linear(pe+"gate_proj.weight", Fm, D), linear(pe+"up_proj.weight", Fm, D), linear(pe+"down_proj.weight", D, Fm))
			}
		} else {
			specs = append(specs,
				linear(p+"mlp.gate_proj.weight", F, D),
				linear(p+"mlp.up_proj.weight", F, D),
				linear(p+"mlp.down_proj.weight", D, F))
		}
		if d.QKNorm {
			specs = append(specs,
				vec(p+"self_attn.q_norm.weight", d.HeadDim, zoo.InitOnes),
				vec(p+"self_attn.k_norm.weight", d.HeadDim, zoo.InitOnes))
		}
		if d.AttentionBias {
			specs = append(specs,
				vec(p+"self_attn.q_proj.bias", q, zoo.InitZeros),
				vec(p+"self_attn.k_proj.bias", kv, zoo.InitZeros),
				vec(p+"self_attn.v_proj.bias", kv, zoo.InitZeros),
				vec(p+"self_attn.o_proj.bias", D, zoo.InitZeros))
		}
		if d.MLPBias && !d.sparse(i) {
			specs = append(specs,
				vec(p+"mlp.gate_proj.bias", F, zoo.InitZeros),
				vec(p+"mlp.up_proj.bias", F, zoo.InitZeros),
				vec(p+"mlp.down_proj.bias", D, zoo.InitZeros))
		}
	}
	specs = append(specs, vec("model.norm.weight", D, zoo.InitOnes))
	if !d.TieWordEmbeddings {
		// Kept [V, D] like the embedding: the head multiplies it as a
		// matrix-vector product.
		specs = append(specs, zoo.TensorSpec{Name: "lm_head.weight", Shape: []int{V, D}})
	}
	return specs
}

// Model is a loaded Llama-style decoder.
type Model struct {
	zoo.Base
	d       *Decoder
	head    string      // tensor the logits are projected with
	invFreq [][]float32 // per layer; nil for NoPE layers
	ropeID  []string
}

// Build assembles the model. The sanitize step of every Llama-style
// family: a tied checkpoint has no lm_head.weight and projects with the
// embedding.
func (d *Decoder) Build(w graphs.Weights) (zoo.Model, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if err := zoo.CheckWeights(d.Tensors(), w); err != nil {
		return nil, err
	}
	m := &Model{Base: zoo.Base{Type: d.ModelType, Dims: d.Dims, EOS: d.EOS, W: w}, d: d, head: "lm_head.weight"}
	if d.TieWordEmbeddings {
		m.head = "model.embed_tokens.weight"
	}
	for _, r := range d.RoPE {
		var f []float32
		id := "none"
		if r != nil {
			f = layers.RoPEFrequencies(d.HeadDim, r.Theta, r.Factor)
			id = fmt.Sprintf("theta=%g,factor=%g", r.Theta, r.Factor)
		}
		m.invFreq, m.ropeID = append(m.invFreq, f), append(m.ropeID, id)
	}
	return m, nil
}

// Decoder is the architecture the model was built from.
func (m *Model) Decoder() *Decoder { return m.d }

// Forward is the architecture, top to bottom.
func (m *Model) Forward(s *graphs.Step) *G.Node {
	d := m.d
	x := layers.Embedding(s.Weight("model.embed_tokens.weight"), s.IDs)
	for i := 0; i < d.NumLayers; i++ {
		x = m.decoderLayer(s, i, x)
	}
	if !s.AllLogits {
		x = layers.LastRow(x, s.Last)
	}
	x = layers.RMSNorm(x, s.Weight("model.norm.weight"), d.RMSNormEps)
	return layers.LMHead(x, s.Weight(m.head))
}

func (m *Model) decoderLayer(s *graphs.Step, i int, x *G.Node) *G.Node {
	d := m.d
	w := func(name string) *G.Node { return s.Weight(fmt.Sprintf("model.layers.%d.%s", i, name)) }

	h := layers.RMSNorm(x, w("input_layernorm.weight"), d.RMSNormEps)
	x = layers.Add(x, m.attention(s, i, h))

	h = layers.RMSNorm(x, w("post_attention_layernorm.weight"), d.RMSNormEps)
	return layers.Add(x, m.mlp(s, i, h))
}

func (m *Model) mlp(s *graphs.Step, i int, x *G.Node) *G.Node {
	p := fmt.Sprintf("model.layers.%d.mlp.", i)
	w := func(name string) *G.Node { return s.Weight(p + name) }
	if m.d.sparse(i) {
		moe := m.d.MoE
		experts := make([]layers.ExpertWeights, moe.NumExperts)
		for e := range experts {
			pe := fmt.Sprintf("experts.%d.", e)
			experts[e] = layers.ExpertWeights{Gate: w(pe + "gate_proj.weight"), Up: w(pe + "up_proj.weight"), Down: w(pe + "down_proj.weight")}
		}
		return layers.SparseMoE(x, w("gate.weight"), experts, moe.TopK, moe.NormTopK, m.d.HiddenAct, fmt.Sprintf("layers.%d.mlp", i))
	}
	var gb, ub, db *G.Node
	if m.d.MLPBias {
		gb, ub, db = w("gate_proj.bias"), w("up_proj.bias"), w("down_proj.bias")
	}
	return layers.GatedMLPBias(x, w("gate_proj.weight"), w("up_proj.weight"), w("down_proj.weight"), gb, ub, db, m.d.HiddenAct)
}

// attention is LlamaAttention, with Qwen3's QK-norm when the family asks.
func (m *Model) attention(s *graphs.Step, i int, x *G.Node) *G.Node {
	d := m.d
	p := fmt.Sprintf("model.layers.%d.self_attn.", i)
	w := func(name string) *G.Node { return s.Weight(p + name) }
	var weights layers.AttentionWeights
	weights.Q, weights.K, weights.V, weights.O = w("q_proj.weight"), w("k_proj.weight"), w("v_proj.weight"), w("o_proj.weight")
	if d.QKNorm {
		weights.QNorm, weights.KNorm = w("q_norm.weight"), w("k_norm.weight")
	}
	if d.AttentionBias {
		weights.QBias, weights.KBias, weights.VBias, weights.OBias = w("q_proj.bias"), w("k_proj.bias"), w("v_proj.bias"), w("o_proj.bias")
	}
	kc, vc := s.Cache(i)
	return layers.SelfAttention(x, s.Meta, kc, vc, weights, layers.AttentionConfig{
		Heads: d.NumHeads, KVHeads: d.NumKVHeads, HeadDim: d.HeadDim,
		NormEps: d.RMSNormEps,
		InvFreq: m.invFreq[i], RoPEID: m.ropeID[i],
		Scale:  1 / math.Sqrt(float64(d.HeadDim)),
		Window: d.Window[i],
		Name:   fmt.Sprintf("layers.%d", i),
	})
}
