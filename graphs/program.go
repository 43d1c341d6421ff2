package graphs

import (
	"fmt"
	"runtime"
	"slices"

	"github.com/gozoo/gozoo/cuda"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/ops"
)

// Program is a graph run whole on inputs it is given, with no KV cache
// and no tokens: an encoder such as a vision tower. It is built once for
// one set of input shapes and run many times; like a Session it is not
// safe for concurrent use.
type Program struct {
	rc     *runContext
	step   *Step
	tape   *tape
	out    *G.Node
	arena  *ops.Arena
	inputs map[string]*G.Node
	// dev runs the program on a CUDA device (NewProgramOn).
	dev *devTape
}

// NewProgram builds and compiles a program: build declares the inputs with
// Step.Input, adds the network and returns its output node. capture lists
// the taps (path.Match patterns) whose values Captured returns after each
// run. A panic in build (an impossible shape) comes back as an error.
func NewProgram(name string, build func(s *Step) *G.Node, capture []string) (p *Program, err error) {
	return NewProgramOn(nil, name, build, capture)
}

// NewProgramOn is NewProgram on a CUDA device (nil: the CPU): its weights
// are the device's copies, and each Run sends up the inputs and brings
// down the output and the captures.
func NewProgramOn(dev cuda.Backend, name string, build func(s *Step) *G.Node, capture []string) (p *Program, err error) {
	g := G.NewGraph()
	rc := &runContext{}
	s := &Step{G: g, device: dev != nil, weights: map[*Param]*G.Node{}, capture: capture, taps: map[string]*G.Node{}, sinks: map[string]*Sink{}, inputs: map[string]*G.Node{}, rc: rc}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				e = fmt.Errorf("%v", r)
			}
			p, err = nil, fmt.Errorf("building %s: %w", name, e)
		}
	}()
	out := build(s)
	p = &Program{rc: rc, step: s, out: out, arena: ops.NewArena(), inputs: s.inputs}
	ops.Plan(g, p.arena)
	ops.Pin(out) // read after the run, maybe also by a capture
	if p.tape, err = newTape(g); err != nil {
		return nil, fmt.Errorf("building %s: %w", name, err)
	}
	if dev != nil {
		weights := map[*G.Node]*Param{}
		for prm, n := range s.weights {
			weights[n] = prm
		}
		dev.Lock()
		p.dev, err = newDevTape(dev, p.tape, weights, false, out)
		dev.Unlock()
		if err != nil {
			return nil, fmt.Errorf("planning %s on %s: %w", name, dev, err)
		}
		runtime.AddCleanup(p, func(d *devTape) {
			d.dev.Lock()
			d.release()
			d.dev.Unlock()
		}, p.dev)
	}
	return p, nil
}

// Input declares an input node of a Program: float32 or int data of the
// given shape, fed by name to every Run.
func (s *Step) Input(name string, dt tensor.Dtype, shape ...int) *G.Node {
	if s.inputs == nil {
		panic(fmt.Errorf("input %q: only a Program's graph takes named inputs", name))
	}
	if _, dup := s.inputs[name]; dup {
		panic(fmt.Errorf("input %q declared twice", name))
	}
	n := G.NewTensor(s.G, dt, len(shape), G.WithShape(shape...), G.WithName(name))
	s.inputs[name] = n
	return n
}

// Run feeds each declared input its data ([]float32 or []int of the
// declared size), runs the graph and returns a copy of the output.
func (p *Program) Run(feeds map[string]any) (*tensor.Dense, error) {
	for name, n := range p.inputs {
		data, ok := feeds[name]
		if !ok {
			return nil, fmt.Errorf("input %q is not given", name)
		}
		size := n.Shape().TotalSize()
		var got int
		switch d := data.(type) {
		case []float32:
			got = len(d)
		case []int:
			got = len(d)
		default:
			return nil, fmt.Errorf("input %q: %T data, want []float32 or []int", name, data)
		}
		if got != size {
			return nil, fmt.Errorf("input %q: %d values for a shape %v of %d", name, got, n.Shape(), size)
		}
		v := tensor.New(tensor.WithShape(n.Shape().Clone()...), tensor.WithBacking(data))
		if err := G.Let(n, v); err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
	}
	for name := range feeds {
		if _, ok := p.inputs[name]; !ok {
			return nil, fmt.Errorf("the program has no input %q", name)
		}
	}
	if p.dev != nil {
		return p.runDevice()
	}
	p.arena.Reset()
	if err := p.tape.run(); err != nil {
		if p.rc.stopped != nil { // a Checkpoint, not a failure
			return nil, p.rc.stopped
		}
		return nil, err
	}
	v, ok := p.tape.value(p.out).(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("output node holds %T, want *tensor.Dense", p.tape.value(p.out))
	}
	if v.IsView() {
		v = v.Materialize().(*tensor.Dense)
	}
	return cloneDense(v), nil
}

// runDevice runs the program on its device; a Checkpoint's cancellation
// is checked once before the launches (the device runs them all).
func (p *Program) runDevice() (*tensor.Dense, error) {
	if ctx := p.rc.ctx; ctx != nil {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("stopped before the device ran: %w", err)
		}
	}
	dev := p.dev.dev
	dev.Lock()
	defer dev.Unlock()
	if err := p.dev.run(); err != nil {
		return nil, fmt.Errorf("running on %s: %w", dev, err)
	}
	out := make([]float32, p.out.Shape().TotalSize())
	if err := p.dev.download(p.out, out); err != nil {
		return nil, err
	}
	return tensor.New(tensor.WithShape(p.out.Shape().Clone()...), tensor.WithBacking(out)), nil
}

func cloneDense(v *tensor.Dense) *tensor.Dense {
	return tensor.New(tensor.WithShape(v.Shape().Clone()...), tensor.WithBacking(slices.Clone(v.Data().([]float32))))
}

// Captured returns the value a tap took in the last Run (asked for by the
// capture patterns given to NewProgram).
func (p *Program) Captured(name string) (*tensor.Dense, bool) {
	k, ok := p.step.sinks[name]
	if !ok || k.value == nil {
		return nil, false
	}
	return cloneDense(k.value), true
}

// Graph is the program's Gorgonia graph, for inspection or export.
func (p *Program) Graph() *G.ExprGraph { return p.step.G }

// Close releases the program. Its tape holds nothing outside the Go heap,
// so it cannot fail; it returns an error for the io.Closer contract.
func (p *Program) Close() error { return nil }

// CaptureNames lists the taps the program captures, sorted.
func (p *Program) CaptureNames() []string {
	out := make([]string, 0, len(p.step.sinks))
	for name := range p.step.sinks {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
