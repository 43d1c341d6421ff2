// Package train differentiates and trains the zoo's models: the
// next-token loss of a sequence and its gradient with respect to every
// weight and to the input embeddings (LossAndGradients, Graph), by
// Gorgonia's symbolic differentiation (G.Grad) through the gradients of
// the layers' ops, run on Gorgonia's TapeMachine; and a training loop
// (Trainable, NewTrainer: AdamW with warmup, cosine decay, clipping and
// gradient accumulation over windows of a token stream) that saves
// checkpoints zoo.Load and transformers read. gozoo train is its command.
//
// The training forward runs the whole sequence at once without a KV
// cache, with the causal and sliding-window masks inference applies, and
// computes the logits inference computes. Weights are read in place, in
// their stored type: F32, BF16 and F16 weights are differentiated as their
// float32 values (the gradient is float32); block-quantized weights pass
// gradients through to the activations but take none themselves.
package train

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/ops"
)

// Gradients are the loss of one sequence and its gradients.
type Gradients struct {
	// Loss is the mean over positions t = 0..T-2 of
	// -log softmax(logits[t])[ids[t+1]] (natural log): Hugging Face's
	// model(input_ids, labels=input_ids).loss.
	Loss float64
	// Weights maps the name of each weight the model declared (its
	// Hugging Face name) to dLoss/dW, float32, in the weight's declared
	// (PyTorch) shape. A weight used twice (an embedding tied to the
	// head) gets the sum of both uses. Block-quantized weights take no
	// gradient and are absent. A model with LoRA adapters attached
	// (graphs.Params.ApplyLoRA) has its base frozen: Weights holds the
	// adapters' factors only, under PEFT's names. A stacked weight whose checkpoint stores
	// it in parts (graphs.Param.Parts: a MoE's experts, one tensor each)
	// has one gradient per part, under the part's name and shape, as the
	// checkpoint names them. A weight the checkpoint stores transposed
	// (graphs.Param.Transposed: GPT-2's Conv1D, [in, out]) has its
	// gradient in that layout, as torch gives it.
	Weights map[string]*tensor.Dense
	// Names lists the keys of Weights in declaration order.
	Names []string
	// InputsEmbeds [T, hidden] is dLoss/de_t for the raw embedding rows
	// e_t = embed_tokens[ids[t]] (before any scaling the model applies,
	// such as Gemma's sqrt(hidden_size)). Index-adding its row t into row
	// ids[t] gives the lookup part of the embedding table's gradient.
	InputsEmbeds *tensor.Dense
}

// Graph is a model's compiled training graph for sequences of T tokens:
// forward, loss and backward, built and compiled once and run on many
// sequences. It reads the model's weights in place at every run, so an
// optimizer that updates them in place is seen by the next Run. A Graph
// is not safe for concurrent use.
type Graph struct {
	// T is the number of tokens of the sequences the graph takes.
	T int
	// model keeps the weights alive, and with them the file mapping they
	// may be views of: the graph's nodes hold only those views.
	model          graphs.Model
	vm             G.VM
	ids, targets   *G.Node
	idsV, targetsV *tensor.Dense
	loss           *float64
	// params are the weights differentiated, in declaration order, and
	// grads their gradients as the run computes them, by weight name.
	params []*graphs.Param
	grads  map[string]*[]float32
	// names and shapes are the gradients as Run returns them: a stacked
	// weight's split into its parts.
	names  []string
	shapes map[string][]int
	embeds *[]float32
	hidden int
}

// NewGraph builds and compiles m's training graph for T tokens (T >= 2:
// the loss predicts tokens 1..T-1).
func NewGraph(m graphs.Model, T int) (gr *Graph, err error) {
	if T < 2 {
		return nil, fmt.Errorf("a training sequence needs at least 2 tokens, got %d", T)
	}
	if T > m.MaxPositions() {
		return nil, fmt.Errorf("a training sequence of %d tokens exceeds the model's %d positions", T, m.MaxPositions())
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				e = fmt.Errorf("%v", r)
			}
			gr, err = nil, fmt.Errorf("building the %d-token training graph: %w", T, e)
		}
	}()
	s := graphs.NewTrainingStep(T)
	trainable := m.Params().Trainable()
	if m.Params().HasLoRA() {
		// LoRA: only the adapters' factors take gradients.
		s.TrainOnly(trainable)
	}
	gr = &Graph{T: T, model: m, hidden: m.HiddenSize(), shapes: map[string][]int{}, grads: map[string]*[]float32{}}
	gr.idsV = tensor.New(tensor.WithShape(T), tensor.Of(tensor.Int))
	gr.targetsV = tensor.New(tensor.WithShape(T), tensor.Of(tensor.Int))
	gr.ids = G.NewVector(s.G, tensor.Int, G.WithShape(T), G.WithName("input_ids"), G.WithValue(gr.idsV))
	gr.targets = G.NewVector(s.G, tensor.Int, G.WithShape(T), G.WithName("targets"), G.WithValue(gr.targetsV))

	h := m.Embed(s, gr.ids)
	for i := 0; i < m.NumLayers(); i++ {
		h = m.Layer(s, i, h)
	}
	logits := m.Head(s, m.Norm(s, h))
	if got := logits.Shape(); len(got) != 2 || got[0] != T || got[1] != m.VocabSize() {
		return nil, fmt.Errorf("the model's head returned %v, want [%d, %d]", got, T, m.VocabSize())
	}
	loss := layers.CrossEntropy(logits, gr.targets)

	// Differentiate with respect to every bound trainable weight that can
	// take a gradient, in declaration order, and to the embeddings' zero
	// shift.
	bound := s.Bound()
	var wrt []*G.Node
	for _, p := range trainable {
		n, ok := bound[p]
		if !ok || !ops.Differentiable(G.TensorType{Dims: len(p.Shape), Of: p.DType.Storage()}) {
			continue
		}
		wrt = append(wrt, n)
		gr.params = append(gr.params, p)
		if len(p.Parts) == 0 {
			gr.names = append(gr.names, p.Name)
			gr.shapes[p.Name] = slices.Clone(p.Shape)
			continue
		}
		for _, part := range p.Parts {
			gr.names = append(gr.names, part)
			gr.shapes[part] = slices.Clone(p.Shape[1:])
		}
	}
	shift := s.EmbedsShift()
	if shift == nil {
		return nil, errors.New("the model's Embed marks no input embeddings (graphs.Step.InputEmbeds)")
	}
	wrt = append(wrt, shift)
	grads, err := G.Grad(loss, wrt...)
	if err != nil {
		return nil, fmt.Errorf("differentiating the loss: %w", err)
	}
	// Copy each result out as the run computes it: the machine may later
	// reuse a node's memory for another value.
	gr.loss = new(float64)
	ops.Apply(keep{name: "loss", scalar: gr.loss}, loss)
	for i, p := range gr.params {
		buf := new([]float32)
		gr.grads[p.Name] = buf
		ops.Apply(keep{name: p.Name, dims: grads[i].Dims(), into: buf}, grads[i])
	}
	gr.embeds = new([]float32)
	ops.Apply(keep{name: "inputs_embeds", dims: 2, into: gr.embeds}, grads[len(grads)-1])
	gr.vm = G.NewTapeMachine(s.G)
	return gr, nil
}

// Run computes the loss of ids (T token ids) and its gradients, in the
// checkpoint's layout (see Gradients.Weights).
func (gr *Graph) Run(ids []int) (*Gradients, error) {
	g, err := gr.run(ids)
	if err != nil {
		return nil, err
	}
	for _, p := range gr.params {
		if !p.Transposed || len(p.Parts) > 0 || len(p.Shape) != 2 {
			continue
		}
		out, in := p.Shape[0], p.Shape[1]
		src := g.Weights[p.Name].Data().([]float32)
		dst := make([]float32, len(src))
		for i := range out {
			for j := range in {
				dst[j*out+i] = src[i*in+j]
			}
		}
		g.Weights[p.Name] = tensor.New(tensor.WithShape(in, out), tensor.WithBacking(dst))
	}
	return g, nil
}

// run is Run in the declared layout, the one the optimizer updates.
func (gr *Graph) run(ids []int) (*Gradients, error) {
	if len(ids) != gr.T {
		return nil, fmt.Errorf("%d token ids for a training graph of %d", len(ids), gr.T)
	}
	copy(gr.idsV.Ints(), ids)
	targets := gr.targetsV.Ints()
	copy(targets, ids[1:])
	targets[gr.T-1] = -1 // the last position predicts nothing in the sequence
	defer gr.vm.Reset()
	if err := gr.vm.RunAll(); err != nil {
		return nil, fmt.Errorf("training graph: %w", err)
	}
	runtime.KeepAlive(gr.model)
	out := &Gradients{Loss: *gr.loss, Weights: make(map[string]*tensor.Dense, len(gr.names)), Names: slices.Clone(gr.names)}
	for _, p := range gr.params {
		v := *gr.grads[p.Name]
		if len(p.Parts) == 0 {
			out.Weights[p.Name] = tensor.New(tensor.WithShape(gr.shapes[p.Name]...), tensor.WithBacking(slices.Clone(v)))
			continue
		}
		// A stacked gradient [E, ...] splits into E equal slices.
		n := len(v) / len(p.Parts)
		for i, part := range p.Parts {
			out.Weights[part] = tensor.New(tensor.WithShape(gr.shapes[part]...), tensor.WithBacking(slices.Clone(v[i*n:(i+1)*n])))
		}
	}
	out.InputsEmbeds = tensor.New(tensor.WithShape(gr.T, gr.hidden), tensor.WithBacking(slices.Clone(*gr.embeds)))
	return out, nil
}

// Close releases the graph's machine.
func (gr *Graph) Close() error { return gr.vm.Close() }

// LossAndGradients computes the next-token loss of ids under m and its
// gradients with respect to every weight and to the input embeddings. It
// builds and compiles a graph for len(ids) tokens on every call; a loop
// over sequences of one length should keep a Graph instead.
func LossAndGradients(m graphs.Model, ids []int) (*Gradients, error) {
	gr, err := NewGraph(m, len(ids))
	if err != nil {
		return nil, err
	}
	defer gr.Close()
	return gr.Run(ids)
}

// keep copies a value out of the graph as the run computes it: a tensor
// into *into, a scalar into *scalar. Its own output is a dummy scalar.
type keep struct {
	name   string
	dims   int
	into   *[]float32
	scalar *float64
}

func (k keep) Name() string   { return "keep " + k.name }
func (k keep) String() string { return fmt.Sprintf("Keep{%s,%p,%p}", k.name, k.into, k.scalar) }
func (k keep) Signature() []hm.Type {
	if k.scalar != nil {
		return []hm.Type{hm.TypeVariable('a'), hm.TypeVariable('a')}
	}
	return []hm.Type{ops.T(k.dims, nil), hm.TypeVariable('a')}
}
func (k keep) Shape(in []tensor.Shape) (tensor.Shape, error) { return tensor.ScalarShape(), nil }
func (k keep) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	if k.scalar != nil {
		s, ok := in[0].(*G.F32)
		if !ok {
			return nil, fmt.Errorf("%s: expected a float32 scalar, got %T", k.name, in[0])
		}
		*k.scalar = float64(*s)
		return G.NewF32(0), nil
	}
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.name, err)
	}
	*k.into = append((*k.into)[:0], x...)
	return G.NewF32(0), nil
}
