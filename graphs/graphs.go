// Package graphs builds model graphs with Gorgonia and runs them on its
// own tape (exec.go): each op in Gorgonia's execution order, without
// Gorgonia's machine, which costs a goroutine and a locked OS thread a
// run. Training (package train) runs on Gorgonia's TapeMachine, for its
// gradients.
//
// A model describes its network once, in four parts (Model): the embedding
// of token ids, one decoder layer, the final norm and the head. graphs owns
// everything around them: the inputs of a step (ids, embeddings, or ids with
// some rows replaced by embeddings), the position of each row, the choice of
// rows whose logits are wanted, the per-layer KV caches and the capture of
// named nodes. It builds that network as a prefill graph per length bucket
// and a one-row decode graph, compiles each once and runs them many times.
//
// Weights are declared by the model through a Scope and bound by pointer
// into every graph (never copied); every Session owns its graphs, their
// tapes and KV cache, so several sessions run at once on one loaded model.
// A Program runs a graph with no KV cache and no tokens, such as a vision
// tower, on the same tape. Slow calls have a Context variant that stops
// between prompt chunks and between decoder layers (cancel.go).
package graphs

import (
	"fmt"
	"path"
	"sort"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/ops"
)

// Model is what a zoo model provides to be run by graphs. Row layout:
// hidden states are [T, D], one row per token.
type Model interface {
	// Embed maps token ids [T] to hidden states [T, D].
	Embed(s *Step, ids *G.Node) *G.Node
	// NumLayers is the number of decoder layers.
	NumLayers() int
	// Layer applies decoder layer i to h [T, D].
	Layer(s *Step, i int, h *G.Node) *G.Node
	// Norm is the final norm, applied to the last layer's output.
	Norm(s *Step, h *G.Node) *G.Node
	// Head projects normed rows [R, D] onto the vocabulary: [R, V].
	Head(s *Step, h *G.Node) *G.Node
	// Params are the weights and the KV caches the model declared (the
	// session allocates the caches from Params().Caches()).
	Params() *Params
	HiddenSize() int
	VocabSize() int
	// MaxPositions is the longest context the model supports.
	MaxPositions() int
}

// CacheKind is what a layer keeps of past positions from one step to the
// next.
type CacheKind uint8

const (
	// NoCache keeps nothing: the kind of a layer that declared no cache.
	NoCache CacheKind = iota
	// FullCache keeps every position, up to the session's capacity.
	FullCache
	// SlidingCache keeps the last Window positions, in a ring.
	SlidingCache
)

func (k CacheKind) String() string {
	if k > SlidingCache {
		return fmt.Sprintf("CacheKind(%d)", uint8(k))
	}
	return [...]string{"none", "full", "sliding"}[k]
}

// LayerCache is one layer's KV cache as its attention declared it
// (Scope.Cache): KVHeads heads of KeyDim (keys) and ValueDim (values), and
// for a SlidingCache the Window of positions its ring holds.
type LayerCache struct {
	Kind                      CacheKind
	KVHeads, KeyDim, ValueDim int
	Window                    int
	// Shift moves the layer's cached keys to other positions (a context
	// shift, Batch.Shift); nil when they cannot move (positions that are
	// not a rotation of the keys, such as GPT-2's learned embeddings).
	Shift KeyShifter
}

// KeyShifter re-positions cached keys: RoPE keys are rotated by the
// position delta, keys of a layer without positions stay as they are.
type KeyShifter interface {
	// ShiftKeys moves rows (whole rows of KeyDim, as a pool of type typ
	// holds them, widened to float32) by delta positions, in place.
	ShiftKeys(rows []float32, typ KVCacheType, delta int)
}

// slots is the number of positions the cache holds in a session of
// capacity positions.
func (l LayerCache) slots(capacity int) int {
	if l.Kind == SlidingCache && l.Window < capacity {
		return l.Window
	}
	return capacity
}

// Tap names of the standard captures. hidden_states.0 is the embedding
// output, hidden_states.i (0 < i < L) the output of layer i-1, and
// hidden_states.L the final norm's output (Hugging Face's
// output_hidden_states). attentions.i are layer i's attention
// probabilities, [T, heads, keys] (see layers.Attention).
const (
	HiddenStates = "hidden_states"
	Attentions   = "attentions"
)

// Step is one graph under construction: its Gorgonia graph, its input
// nodes, and the bindings of weights and caches into it.
type Step struct {
	G *G.ExprGraph
	// T is the number of rows (tokens) the graph processes per run.
	T int
	// Positions [T] holds each row's position in the sequence; padding rows
	// past the real ones hold -1. Real rows are contiguous positions today
	// (one sequence); the ops read the vector so that per-row positions
	// have a place to go.
	Positions *G.Node
	// Fast asks the layers for llama.cpp's arithmetic (Options.Fast).
	Fast bool
	// device: the graph runs on a device (Options.Device), which reads
	// every weight through the graph.
	device bool

	weights map[*Param]*G.Node
	kv      *KVPool   // nil: no KV cache (training steps, Programs)
	plan    *stepPlan // the forward the pool serves (see Batch)
	capture []string
	taps    map[string]*G.Node
	sinks   map[string]*Sink
	inputs  map[string]*G.Node // a Program's named inputs
	rc      *runContext        // a Program's run context (see Checkpoint)
	train   *trainState        // a training step's (see NewTrainingStep)
}

// OnDevice says whether the graph runs on a device (Options.Device): its
// ops read every weight from their inputs, none from host memory.
func (s *Step) OnDevice() bool { return s.device }

// Training says whether s is a training step (NewTrainingStep), whose
// weights take gradients.
func (s *Step) Training() bool { return s.train != nil }

// Bind returns the input node bound to a declared parameter. The node is
// named after the tensor, so graph dumps read like the checkpoint, and
// carries the parameter's storage type.
func (s *Step) Bind(p *Param) *G.Node {
	if n, ok := s.weights[p]; ok {
		return n
	}
	p.Stack() // a training step binds stacked experts whole
	if p.Data == nil {
		panic(fmt.Errorf("tensor %q was declared but has no data (not loaded)", p.Name))
	}
	// A shallow clone shares the data but not the header: Gorgonia may
	// flip a tensor's access pattern while it multiplies, and sessions
	// running at once must not see each other's flips.
	v := p.Data.ShallowClone()
	n := G.NewTensor(s.G, p.DType.Storage(), v.Dims(), G.WithShape(v.Shape().Clone()...), G.WithName(p.Name), G.WithValue(v))
	s.weights[p] = n
	return n
}

// Tap names a node so that it can be captured after a run. Models tap what
// a researcher looks at; graphs taps the hidden states itself. When the
// capture is wanted, a copy op stores the value as the run computes it:
// Gorgonia's machine may later overwrite an intermediate node's memory in
// place, so reading the node after the run would be wrong.
func (s *Step) Tap(name string, n *G.Node) *G.Node {
	s.taps[name] = n
	if sink := s.Sink(name); sink != nil {
		ops.Apply(captureCopy{name: name, sink: sink}, n)
	}
	return n
}

// Wants reports whether a capture of name was asked for: ops that compute
// something only on demand (attention probabilities) ask before building.
func (s *Step) Wants(name string) bool { return matchAny(s.capture, name) }

// Sink returns a side buffer for a value an op writes only when it is
// captured (nil when name is not wanted). The op fills it during the run.
func (s *Step) Sink(name string) *Sink {
	if !s.Wants(name) {
		return nil
	}
	k := &Sink{}
	s.sinks[name] = k
	return k
}

// Sink is a side output of an op: the op stores its value there on every
// run. Gorgonia ops have one output, so values such as attention
// probabilities leave the graph this way.
type Sink struct {
	value *tensor.Dense
	keyed bool
}

// Store keeps v as the sink's value.
func (k *Sink) Store(v *tensor.Dense) { k.value = v }

// StoreKeyed keeps v, [T, ..., keys], whose last axis is the key
// positions of each row's own sequence: a sequence's rows are cut to its
// length when they are captured.
func (k *Sink) StoreKeyed(v *tensor.Dense) { k.value, k.keyed = v, true }

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// inputKind says what feeds a graph's first layer.
type inputKind uint8

const (
	fromIDs    inputKind = iota // token ids, embedded by the model
	fromEmbeds                  // embeddings given for every row
	fromMerge                   // ids, with some rows replaced by given embeddings
)

func (k inputKind) String() string { return [...]string{"ids", "embeds", "merge"}[k] }

// graph is one built graph and its input and output nodes.
type graph struct {
	step   *Step
	ids    *G.Node // [T] int (fromIDs, fromMerge)
	embeds *G.Node // [T, D] (fromEmbeds, fromMerge)
	mask   *G.Node // [T] int, 1 where embeds replace the embedded id (fromMerge)
	rows   *G.Node // [R] int, rows whose logits are wanted (-1: none)
	logits *G.Node // [R, V]
}

// build builds model's graph for T rows on a fresh ExprGraph. Panics raised
// by layer fragments (impossible shapes, missing weights) come back as
// errors.
func build(m Model, key programKey, pool *KVPool, plan *stepPlan, capture []string, rc *runContext, fast, device bool) (gr *graph, err error) {
	T, R, kind := key.T, key.R, key.kind
	g := G.NewGraph()
	s := &Step{G: g, T: T, Fast: fast, device: device, weights: map[*Param]*G.Node{}, kv: pool, plan: plan, capture: capture, taps: map[string]*G.Node{}, sinks: map[string]*Sink{}}
	gr = &graph{step: s}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				e = fmt.Errorf("%v", r)
			}
			gr, err = nil, fmt.Errorf("building the %d-row graph from %s: %w", T, kind, e)
		}
	}()
	s.Positions = G.NewVector(g, tensor.Int, G.WithShape(T), G.WithName("positions"))
	D := m.HiddenSize()
	var h *G.Node
	switch kind {
	case fromIDs, fromMerge:
		gr.ids = G.NewVector(g, tensor.Int, G.WithShape(T), G.WithName("input_ids"))
		h = m.Embed(s, gr.ids)
		if kind == fromMerge {
			gr.embeds = G.NewMatrix(g, tensor.Float32, G.WithShape(T, D), G.WithName("inputs_embeds"))
			gr.mask = G.NewVector(g, tensor.Int, G.WithShape(T), G.WithName("embeds_mask"))
			h = mustNode(G.ApplyOp(ops.New(replaceRows{}), h, gr.embeds, gr.mask))
		}
	case fromEmbeds:
		gr.embeds = G.NewMatrix(g, tensor.Float32, G.WithShape(T, D), G.WithName("inputs_embeds"))
		h = gr.embeds
	}
	L := m.NumLayers()
	s.Tap(fmt.Sprintf("%s.0", HiddenStates), h)
	positions := s.Positions
	for i := 0; i < L; i++ {
		// Each layer reads its positions through a cancellation check
		// that waits for the previous layer (see cancelCheck).
		s.Positions = positionsAfter(rc, positions, i, h)
		h = m.Layer(s, i, h)
		if i+1 < L {
			s.Tap(fmt.Sprintf("%s.%d", HiddenStates, i+1), h)
		}
	}
	s.Positions = positions
	h = s.Tap(fmt.Sprintf("%s.%d", HiddenStates, L), m.Norm(s, h))
	gr.rows = G.NewVector(g, tensor.Int, G.WithShape(R), G.WithName("logit_rows"))
	h = ops.Apply(pickRows{}, h, gr.rows)
	gr.logits = m.Head(s, h)
	if got := gr.logits.Shape(); len(got) != 2 || got[0] != R || got[1] != m.VocabSize() {
		return nil, fmt.Errorf("the model's head returned %v, want [%d, %d]", got, R, m.VocabSize())
	}
	return gr, nil
}

// captureCopy copies a tapped value into its sink during the run.
type captureCopy struct {
	name string
	sink *Sink
}

func (k captureCopy) Name() string   { return "capture " + k.name }
func (k captureCopy) String() string { return "Capture{" + k.name + "}" }
func (k captureCopy) Signature() []hm.Type {
	return []hm.Type{hm.TypeVariable('a'), hm.TypeVariable('a')}
}
func (k captureCopy) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k captureCopy) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	d, err := ops.Dense(in[0])
	if err != nil {
		return nil, err
	}
	// The copy is the node's output: nothing reads it, so it keeps a
	// buffer of its own, which the session copies out after the run.
	out := o.Float32s(d.Shape().TotalSize())
	copy(out, d.Data().([]float32))
	c := o.Tensor(out, d.Shape()...)
	k.sink.Store(c)
	return c, nil
}

func mustNode(n *G.Node, err error) *G.Node {
	if err != nil {
		panic(err)
	}
	return n
}

// captureNames lists what a graph can capture: its taps, its sinks and
// every named node, sorted.
func (gr *graph) captureNames() []string {
	seen := map[string]bool{}
	for name := range gr.step.taps {
		seen[name] = true
	}
	for name := range gr.step.sinks {
		seen[name] = true
	}
	for _, n := range gr.step.G.AllNodes() {
		seen[n.Name()] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SinkValue is what an op stored in a sink (nil before a run).
func SinkValue(k *Sink) *tensor.Dense { return k.value }
