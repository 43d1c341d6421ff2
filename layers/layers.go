// Package layers holds the modules every zoo model is assembled from:
// Linear, Embedding, RMSNorm, RoPE, causal GQA attention over a KV cache,
// gated MLPs and routed experts; LayerNorm and the plain MLP (GPT-2, the
// vision tower); and the vision encoder's patch embedding, attention and
// pixel shuffle. Their ops are custom Gorgonia ops (package ops) on the
// kernels of internal/simd; the text models' ops carry their gradients
// (grad_*.go) for package train. Each module is declared once through a
// graphs.Scope, which names its tensors by their Hugging Face names and
// records their shapes, and keeps the *graphs.Param it got; its Forward
// adds nodes to the step's Gorgonia graph.
//
// Weights stay in their checkpoint dtype and PyTorch layout ([out, in] for
// Linear): the kernels behind Linear and Embedding pick their loop by the
// stored type (F32, BF16, F16 or a GGUF's quantized blocks), so model
// files never see dtypes. A Linear's weight read from a file may be packed
// for decode when a graph binds it (matmul.go's packForDecode).
//
// Forward methods panic on impossible shapes (graph construction errors
// are programming or config errors); graphs recovers those panics and
// returns them as errors naming the graph being built.
//
// Row layout: hidden states are [T, D] (T rows, one per token); attention
// heads are [T, H, Dh]; KV caches are [Hkv, slots, Dh].
package layers

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// Linear is PyTorch's nn.Linear: y = x·Wᵀ + b with W [out, in].
type Linear struct {
	Weight, Bias *graphs.Param // Bias may be nil
}

// NewLinear declares p.weight [out, in] and, with bias, p.bias [out].
func NewLinear(p graphs.Scope, in, out int, bias bool) Linear {
	l := Linear{Weight: p.Param("weight", graphs.Matrix, out, in)}
	l.Weight.Linear = true
	if bias {
		l.Bias = p.Param("bias", graphs.Bias, out)
	}
	return l
}

// Forward maps x [T, in] to [T, out].
func (l Linear) Forward(s *graphs.Step, x *G.Node) *G.Node { return l.forward(s, x, 0) }

// ForwardHeads maps x [T, in] to [T, heads, out/heads].
func (l Linear) ForwardHeads(s *graphs.Step, x *G.Node, heads int) *G.Node {
	return l.forward(s, x, heads)
}

func (l Linear) forward(s *graphs.Step, x *G.Node, heads int) *G.Node {
	pack := packForDecode(l.Weight, s.Fast)
	in := []*G.Node{x, s.Bind(l.Weight)}
	if l.Bias != nil {
		in = append(in, s.Bind(l.Bias))
	}
	y := ops.Apply(matmulT{dtype: l.Weight.DType, bias: l.Bias != nil, name: l.Weight.Name, heads: heads, fast: s.Fast, pack: pack, frozen: s.Frozen(l.Weight)}, in...)
	if hd := l.Weight.PermutedHeads; hd > 0 {
		// The weight's rows are in llama.cpp's order (a GGUF's Q and K
		// projections): put the output's columns in the declared order.
		if l.Bias != nil {
			panic(fmt.Errorf("%s: a weight with permuted rows and a bias", l.Weight.Name))
		}
		dims := 2
		if heads > 0 {
			dims = 3
		}
		y = ops.Apply(headRows{hd: hd, dims: dims}, y)
	}
	for slot, lo := range l.Weight.LoRA {
		if lo != nil {
			y = addLoRA(s, y, x, lo, slot, heads)
		}
	}
	return y
}

// addLoRA adds an adapter's update Scale·(x·Aᵀ)·Bᵀ to y, in float32 and
// in the order PEFT computes it, from the same kernels as the base (so
// the factors take gradients like any F32 weight). The update is added
// after the base's rows are in declared order.
func addLoRA(s *graphs.Step, y, x *G.Node, lo *graphs.LoRA, slot, heads int) *G.Node {
	h := ops.Apply(matmulT{dtype: graphs.F32, name: lo.A.Name, frozen: s.Frozen(lo.A)}, x, s.Bind(lo.A))
	d := ops.Apply(matmulT{dtype: graphs.F32, name: lo.B.Name, heads: heads, frozen: s.Frozen(lo.B)}, h, s.Bind(lo.B))
	sum := Add(y, Scale(d, lo.Scale))
	if rows := s.AdapterRows(slot); rows != nil {
		// A batch mixing adapters: rows of other adapters (or none) keep
		// y, so each row is what it would be alone.
		return ops.Apply(selectRows{dims: y.Dims(), slot: slot}, y, sum, rows)
	}
	return sum
}

// Embedding is a lookup table [V, D].
type Embedding struct{ Table *graphs.Param }

// NewEmbedding declares p.weight [vocab, dim].
func NewEmbedding(p graphs.Scope, vocab, dim int) Embedding {
	return Embedding{Table: p.Param("weight", graphs.Matrix, vocab, dim)}
}

// Forward looks rows up by ids [T] (Go ints) and returns [T, D], marked
// as the step's input embeddings (a training step differentiates them).
func (e Embedding) Forward(s *graphs.Step, ids *G.Node) *G.Node {
	return s.InputEmbeds(ops.Apply(embeddingLookup{dtype: e.Table.DType, name: e.Table.Name, table: e.Table}, s.Bind(e.Table), ids))
}

// ForwardPositions looks up the rows of the step's positions (a learned
// position table, GPT-2's wpe); padding rows (position -1) come out zero.
func (e Embedding) ForwardPositions(s *graphs.Step) *G.Node {
	return ops.Apply(embeddingLookup{dtype: e.Table.DType, name: e.Table.Name, padding: true, table: e.Table}, s.Bind(e.Table), s.Positions)
}

// NewHead is the head that projects onto e's vocabulary. Tied
// (tie_word_embeddings), it is the embedding table itself, a Linear over
// the same memory, and declares nothing; else it declares p.weight [V, D],
// without bias.
func NewHead(p graphs.Scope, e Embedding, tied bool) Linear {
	if tied {
		return Linear{Weight: e.Table}
	}
	return NewLinear(p, e.Table.Shape[1], e.Table.Shape[0], false)
}

// NormKind says which RMSNorm a model uses.
type NormKind uint8

const (
	NoNorm NormKind = iota
	// PlainNorm scales by w (Llama, Qwen).
	PlainNorm
	// OffsetNorm scales by (1 + w), computed in float32 (Gemma).
	OffsetNorm
)

// RMSNorm normalises the last axis by its root mean square and scales it.
type RMSNorm struct {
	Weight *graphs.Param
	Eps    float64
	Kind   NormKind
}

// NewRMSNorm declares p.weight [dim] as a norm of the given kind.
func NewRMSNorm(p graphs.Scope, kind NormKind, dim int, eps float64) *RMSNorm {
	role := graphs.Norm
	if kind == OffsetNorm {
		role = graphs.OffsetNorm
	}
	return &RMSNorm{Weight: p.Param("weight", role, dim), Eps: eps, Kind: kind}
}

// Forward normalises x [.., D].
func (n *RMSNorm) Forward(s *graphs.Step, x *G.Node) *G.Node {
	var offset float32
	if n.Kind == OffsetNorm {
		offset = 1
	}
	return ops.Apply(rmsNorm{eps: float32(n.Eps), offset: offset, dims: x.Dims()}, x, s.Bind(n.Weight))
}

// Add is the residual connection.
func Add(a, b *G.Node) *G.Node { return ops.Apply(add{dims: a.Dims()}, a, b) }

// Scale multiplies x by a constant (Gemma's sqrt(hidden_size) embedding
// scale).
func Scale(x *G.Node, by float32) *G.Node {
	return ops.Apply(pointwise{kind: "scale", p: by, dims: x.Dims()}, x)
}

// Softcap is Gemma's final-logit cap: c * tanh(x / c).
func Softcap(x *G.Node, c float32) *G.Node {
	return ops.Apply(pointwise{kind: "softcap", p: c, dims: x.Dims()}, x)
}

// FeedForward is the MLP half of a decoder layer: a dense gated MLP or a
// mixture of experts.
type FeedForward interface {
	Forward(s *graphs.Step, x *G.Node) *G.Node
}

// GatedMLP is down(act(gate(x)) * up(x)): SwiGLU with act "silu", GeGLU
// with "gelu_pytorch_tanh".
type GatedMLP struct {
	Gate, Up, Down Linear
	Act            string
}

// NewGatedMLP declares p.gate_proj, p.up_proj and p.down_proj.
func NewGatedMLP(p graphs.Scope, hidden, inter int, act string, bias bool) *GatedMLP {
	if _, err := activation(act); err != nil {
		panic(err)
	}
	return &GatedMLP{
		Gate: NewLinear(p.Sub("gate_proj"), hidden, inter, bias),
		Up:   NewLinear(p.Sub("up_proj"), hidden, inter, bias),
		Down: NewLinear(p.Sub("down_proj"), inter, hidden, bias),
		Act:  act,
	}
}

// Forward maps x [T, D] to [T, D].
func (m *GatedMLP) Forward(s *graphs.Step, x *G.Node) *G.Node {
	h := ops.Apply(gatedAct{act: m.Act, fast: s.Fast}, m.Gate.Forward(s, x), m.Up.Forward(s, x))
	return m.Down.Forward(s, h)
}

// MoE is a routed mixture of gated-MLP experts (Qwen3-MoE's sparse block).
// Each projection of the experts is one stacked tensor, expert e's
// [out, in] matrix being slice e: one input per projection whatever the
// number of experts, as llama.cpp's ffn_{gate,up,down}_exps and
// transformers v5's 3-D expert parameters store them.
type MoE struct {
	Router Linear
	// Gate and Up are [experts, inter, hidden], Down [experts, hidden,
	// inter], each expert's matrix in PyTorch's [out, in] layout.
	Gate, Up, Down *graphs.Param
	Experts        int
	TopK           int
	NormTopK       bool
	Act            string
	name           string
}

// NewMoE declares p.gate (the router, [experts, hidden]) and the stacked
// p.experts.gate_proj, p.experts.up_proj and p.experts.down_proj. A
// checkpoint that stores one tensor per expert
// (p.experts.<e>.gate_proj.weight, ...) is stacked into them when it is
// loaded (see zoo).
func NewMoE(p graphs.Scope, hidden, inter, experts, topK int, normTopK bool, act string) *MoE {
	if topK < 1 || topK > experts {
		panic(fmt.Errorf("%s: top-k %d with %d experts", p.Prefix(), topK, experts))
	}
	if _, err := activation(act); err != nil {
		panic(err)
	}
	ex := p.Sub("experts")
	return &MoE{
		Router:  NewLinear(p.Sub("gate"), hidden, experts, false),
		Gate:    ex.Param("gate_proj", graphs.Matrix, experts, inter, hidden),
		Up:      ex.Param("up_proj", graphs.Matrix, experts, inter, hidden),
		Down:    ex.Param("down_proj", graphs.Matrix, experts, hidden, inter),
		Experts: experts, TopK: topK, NormTopK: normTopK, Act: act, name: p.Prefix(),
	}
}

// Forward maps x [T, D] to [T, D].
func (m *MoE) Forward(s *graphs.Step, x *G.Node) *G.Node {
	k := sparseMoE{
		name: m.name, experts: m.Experts, topK: m.TopK, normTopK: m.NormTopK, act: m.Act,
		routerType:  m.Router.Weight.DType,
		fast:        s.Fast,
		expertTypes: [3]graphs.DType{m.Gate.DType, m.Up.DType, m.Down.DType},
		frozen:      s.Frozen(m.Router.Weight),
	}
	in := []*G.Node{x, s.Bind(m.Router.Weight)}
	if !s.Training() && !s.OnDevice() && (m.Gate.Slices != nil || m.Up.Slices != nil || m.Down.Slices != nil || m.Gate.Data != nil && m.Up.Data != nil && m.Down.Data != nil) {
		// Per-expert tensors (transformers 4.x, v5's fused gate_up_proj)
		// or a stack's shares, read in place (or on their packings),
		// once, as Bind reads a weight once. A device and training take
		// them stacked, as Bind gives them.
		set, err := readExperts([3]*graphs.Param{m.Gate, m.Up, m.Down}, s.Fast)
		if err != nil {
			panic(fmt.Errorf("%s: %w", m.name, err))
		}
		k.sliced = set
		return ops.Apply(k, in...)
	}
	return ops.Apply(k, append(in, s.Bind(m.Gate), s.Bind(m.Up), s.Bind(m.Down))...)
}
