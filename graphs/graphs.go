// Package graphs builds, compiles and runs model graphs on Gorgonia's
// TapeMachine.
//
// A model describes its network once, as a Forward function over a Step;
// graphs builds that network as a prefill graph for each length bucket and
// a one-token decode graph, compiles each once, and runs them many times.
// Weights are bound by pointer into every graph (never copied), and every
// Session owns its graphs, machines and KV cache, so several sessions run at
// once on one loaded model.
package graphs

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Weights maps Hugging Face tensor names to loaded float32 tensors. Linear
// weights are stored [in, out]; everything else keeps its checkpoint shape.
type Weights map[string]*tensor.Dense

// CacheSpec is the KV cache a model needs: one [KVHeads, capacity, HeadDim]
// pair of tensors per attention layer.
type CacheSpec struct {
	Layers, KVHeads, HeadDim int
}

// Model is what a zoo model provides to be run by graphs.
type Model interface {
	// Forward adds the network to s.G and returns the logits node: [V] for
	// the row s.Last, or [T, V] for every row when s.AllLogits.
	Forward(s *Step) *G.Node
	Weights() Weights
	CacheSpec() CacheSpec
	VocabSize() int
	// MaxPositions is the longest context the model supports.
	MaxPositions() int
}

// Step is the graph under construction and its per-run inputs.
type Step struct {
	G *G.ExprGraph
	// T is the number of rows (tokens) the graph processes per run.
	T int
	// AllLogits asks for logits of every row instead of only row Last.
	AllLogits bool
	// IDs [T] holds the token ids (padding past the real rows).
	IDs *G.Node
	// Meta [2] holds {position of row 0, number of real rows}.
	Meta *G.Node
	// Last [1] is the row whose logits are wanted.
	Last *G.Node

	weights Weights
	bound   map[string]*G.Node
	cache   *KVCache
}

// Weight returns the input node bound to the named weight. The node is named
// after the tensor, so graph dumps read like the checkpoint.
func (s *Step) Weight(name string) *G.Node {
	if n, ok := s.bound[name]; ok {
		return n
	}
	w, ok := s.weights[name]
	if !ok {
		panic(fmt.Errorf("model asks for weight %q, which was not loaded", name))
	}
	// A shallow clone shares the data but not the header: Gorgonia may
	// flip a tensor's access pattern while it multiplies, and sessions
	// running at once must not see each other's flips.
	v := w.ShallowClone()
	n := G.NewTensor(s.G, tensor.Float32, v.Dims(), G.WithShape(v.Shape().Clone()...), G.WithName(name), G.WithValue(v))
	s.bound[name] = n
	return n
}

// Cache returns the input nodes bound to layer i's key and value caches.
func (s *Step) Cache(layer int) (k, v *G.Node) {
	if s.cache == nil || layer < 0 || layer >= len(s.cache.K) {
		n := 0
		if s.cache != nil {
			n = len(s.cache.K)
		}
		panic(fmt.Errorf("layer %d has no KV cache (the model's CacheSpec has %d layers)", layer, n))
	}
	name := fmt.Sprintf("kvcache.%d.", layer)
	if n, ok := s.bound[name+"k"]; ok {
		return n, s.bound[name+"v"]
	}
	kt, vt := s.cache.K[layer], s.cache.V[layer]
	k = G.NewTensor(s.G, tensor.Float32, 3, G.WithShape(kt.Shape().Clone()...), G.WithName(name+"k"), G.WithValue(kt))
	v = G.NewTensor(s.G, tensor.Float32, 3, G.WithShape(vt.Shape().Clone()...), G.WithName(name+"v"), G.WithValue(vt))
	s.bound[name+"k"], s.bound[name+"v"] = k, v
	return k, v
}

// KVCache holds a session's keys and values, [Hkv, capacity, Dh] per layer.
// Go leaves untouched pages of a large allocation to the kernel, so a big
// capacity costs memory only as it fills.
type KVCache struct {
	K, V     []*tensor.Dense
	Capacity int
}

// NewKVCache allocates a cache for spec with room for capacity positions.
func NewKVCache(spec CacheSpec, capacity int) *KVCache {
	c := &KVCache{Capacity: capacity}
	for i := 0; i < spec.Layers; i++ {
		for _, dst := range []*[]*tensor.Dense{&c.K, &c.V} {
			*dst = append(*dst, tensor.New(tensor.WithShape(spec.KVHeads, capacity, spec.HeadDim), tensor.Of(tensor.Float32)))
		}
	}
	return c
}

// Build builds model's graph for T rows on a fresh ExprGraph. Panics raised
// by layer fragments (impossible shapes, missing weights) come back as
// errors.
func Build(m Model, T int, allLogits bool, cache *KVCache) (s *Step, logits *G.Node, err error) {
	g := G.NewGraph()
	s = &Step{G: g, T: T, AllLogits: allLogits, weights: m.Weights(), bound: map[string]*G.Node{}, cache: cache}
	s.IDs = G.NewVector(g, tensor.Int, G.WithShape(T), G.WithName("input_ids"))
	s.Meta = G.NewVector(g, tensor.Int, G.WithShape(2), G.WithName("meta"))
	s.Last = G.NewVector(g, tensor.Int, G.WithShape(1), G.WithName("last_row"))
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				e = fmt.Errorf("%v", r)
			}
			s, logits, err = nil, nil, fmt.Errorf("building the %d-row graph: %w", T, e)
		}
	}()
	logits = m.Forward(s)
	return s, logits, nil
}
