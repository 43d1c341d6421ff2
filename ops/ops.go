// Package ops is the one skeleton every custom Gorgonia op of the zoo is
// built on. Gorgonia's Op interface asks ten methods of bookkeeping (arity,
// type, shape inference, hashing, printing, ...) besides the computation;
// here they are written once, and an op supplies only a Kernel: its
// parameters, its shapes and a CPU computation. A device kernel (CUDA) and
// a gradient are optional interfaces; an op without one fails loudly, by
// name, when a CUDA machine or a gradient asks for it ("attention has no
// CUDA kernel"), as candle's custom ops do.
//
// The ops take their outputs from a session's Arena (arena.go), which
// recycles a buffer as soon as every op that reads it has run, so a run
// past the first allocates no activations.
package ops

import (
	"errors"
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
)

// Kernel is the part of an op that differs from op to op.
type Kernel interface {
	// Name is the op's kind, as errors name it ("attention").
	Name() string
	// String spells out every parameter: Gorgonia hash-conses nodes by op
	// hash and children, so two ops that differ only in a parameter must
	// print apart.
	String() string
	// Signature is the op's type: one TensorType per input, then the
	// output's.
	Signature() []hm.Type
	// Shape infers the output shape from the input shapes.
	Shape(in []tensor.Shape) (tensor.Shape, error)
	// CPU computes the output from the input values, in memory from out.
	CPU(out *Out, in []G.Value) (G.Value, error)
}

// CUDAKernel is a kernel that can run on an NVIDIA GPU. CUDA returns the
// launches that compute out from in, for the device runtime to issue: in
// are the inputs in device memory (weights in their stored type and
// shape, integer inputs as int32), out the float32 output buffer of the
// shape Shape gave, ws scratch memory. The launches may be captured into
// a CUDA graph and replayed: every value a launch reads that changes from
// step to step must come from device memory, not from a parameter.
type CUDAKernel interface {
	CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error)
}

// GradKernel is a kernel that can be differentiated: Grad returns one
// gradient node per input (nil for inputs that take none, such as
// positions), given the output's gradient.
type GradKernel interface {
	Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error)
}

// ErrNoCUDA and ErrNoGrad are wrapped by the errors of ops that lack a
// CUDA kernel or a gradient.
var (
	ErrNoCUDA = errors.New("no CUDA kernel")
	ErrNoGrad = errors.New("no gradient")
)

// Op adapts a Kernel to Gorgonia.
type Op struct {
	K  Kernel
	st *Out
}

// New wraps a kernel as a Gorgonia op.
func New(k Kernel) Op {
	return Op{K: k, st: &Out{arity: len(k.Signature()) - 1}}
}

// Apply adds the op to the graph of its inputs. Shape and type errors
// panic: building a graph with impossible shapes is a bug in the model,
// and graphs.Build turns the panic into an error naming the graph.
func Apply(k Kernel, in ...*G.Node) *G.Node {
	n, err := G.ApplyOp(New(k), in...)
	if err != nil {
		panic(fmt.Errorf("%s: %w", k.Name(), err))
	}
	return n
}

func (o Op) Arity() int    { return o.st.arity }
func (o Op) Type() hm.Type { return hm.NewFnType(o.K.Signature()...) }
func (o Op) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	shapes := make([]tensor.Shape, len(in))
	for i, ds := range in {
		s, ok := ds.(tensor.Shape)
		if !ok {
			return nil, fmt.Errorf("%s: input %d has no shape (%T)", o.K.Name(), i, ds)
		}
		shapes[i] = s
	}
	s, err := o.K.Shape(shapes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.K.Name(), err)
	}
	return s, nil
}
func (o Op) Do(in ...G.Value) (G.Value, error) {
	v, err := o.K.CPU(o.st, in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.K.Name(), err)
	}
	if o.st != nil && o.st.arena != nil {
		for _, x := range in {
			o.st.arena.release(x)
		}
	}
	return v, nil
}
func (o Op) ReturnsPtr() bool      { return false }
func (o Op) CallsExtern() bool     { return false }
func (o Op) OverwritesInput() int  { return -1 }
func (o Op) String() string        { return o.K.String() }
func (o Op) WriteHash(h hash.Hash) { fmt.Fprint(h, o.K.String()) }
func (o Op) Hashcode() uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}

// CUDA runs the kernel's CUDA implementation, or says by name that there
// is none.
func (o Op) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	k, ok := o.K.(CUDAKernel)
	if !ok {
		return nil, fmt.Errorf("%s has %w", o.K.Name(), ErrNoCUDA)
	}
	calls, err := k.CUDA(ws, out, in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.K.Name(), err)
	}
	return calls, nil
}

// DiffWRT says which inputs take a gradient: all but those of integer or
// byte elements (ids, positions, quantized weight blocks), whose gradient
// Grad leaves nil. Gorgonia dereferences the gradient of every input
// marked here, so the two must agree.
func (o Op) DiffWRT(inputs int) []bool {
	sig := o.K.Signature()
	c, _ := o.K.(ConstantInputs)
	out := make([]bool, inputs)
	for i := range out {
		out[i] = i >= len(sig)-1 || Differentiable(sig[i]) && (c == nil || !c.Constant(i))
	}
	return out
}

// ConstantInputs is implemented by a kernel some of whose float inputs
// take no gradient in this graph (a weight frozen under a LoRA adapter):
// Constant(i) says input i is one, and its Grad leaves it nil.
type ConstantInputs interface {
	Constant(i int) bool
}

// Differentiable reports whether an input of type t can take a gradient:
// float tensors (or 16-bit float storage, differentiated as float32) and
// scalars do, integer and byte tensors do not.
func Differentiable(t hm.Type) bool {
	if tt, ok := t.(G.TensorType); ok {
		t = tt.Of
	}
	switch t {
	case tensor.Int, tensor.Int64, tensor.Int32, tensor.Uint8, tensor.Bool:
		return false
	}
	return true
}

// SymDiff returns the kernel's gradient, or says by name that there is
// none.
func (o Op) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if k, ok := o.K.(GradKernel); ok {
		return k.Grad(in, out, grad)
	}
	return nil, fmt.Errorf("%s has %w", o.K.Name(), ErrNoGrad)
}

// T is the type of a tensor of the given rank and element type; a nil
// element type is the type variable 'a' (float32 in practice).
func T(dims int, of hm.Type) hm.Type {
	if of == nil {
		of = hm.TypeVariable('a')
	}
	return G.TensorType{Dims: dims, Of: of}
}

// Dense returns a value as a contiguous *tensor.Dense.
func Dense(v G.Value) (*tensor.Dense, error) {
	d, ok := v.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("expected *tensor.Dense, got %T", v)
	}
	if d.IsView() {
		d = d.Materialize().(*tensor.Dense)
	}
	return d, nil
}

// Float32s returns a value's float32 data. It reads the storage directly:
// Dense.Data goes through reflection and allocates on every call.
func Float32s(v G.Value) ([]float32, error) {
	d, err := Dense(v)
	if err != nil {
		return nil, err
	}
	if d.Dtype() != tensor.Float32 {
		return nil, fmt.Errorf("expected float32 data, got %v", d.Dtype())
	}
	return d.Float32s(), nil
}

// Float32Pair returns the float32 data of the first two inputs, the
// common case of a binary kernel.
func Float32Pair(in []G.Value) (a, b []float32, err error) {
	if a, err = Float32s(in[0]); err != nil {
		return nil, nil, fmt.Errorf("input 0: %w", err)
	}
	if b, err = Float32s(in[1]); err != nil {
		return nil, nil, fmt.Errorf("input 1: %w", err)
	}
	return a, b, nil
}

// Uint16s returns a value's uint16 data (16-bit float storage).
func Uint16s(v G.Value) ([]uint16, error) {
	d, err := Dense(v)
	if err != nil {
		return nil, err
	}
	if d.Dtype() != tensor.Uint16 {
		return nil, fmt.Errorf("expected uint16 (16-bit float) data, got %v", d.Dtype())
	}
	return d.Uint16s(), nil
}

// Bytes returns a value's uint8 data (block-quantized weights).
func Bytes(v G.Value) ([]byte, error) {
	d, err := Dense(v)
	if err != nil {
		return nil, err
	}
	if d.Dtype() != tensor.Uint8 {
		return nil, fmt.Errorf("expected uint8 (quantized block) data, got %v", d.Dtype())
	}
	return d.Uint8s(), nil
}

// Ints returns a value's int data.
func Ints(v G.Value) ([]int, error) {
	d, err := Dense(v)
	if err != nil {
		return nil, err
	}
	if d.Dtype() != tensor.Int {
		return nil, fmt.Errorf("expected int data, got %v", d.Dtype())
	}
	return d.Ints(), nil
}

// NewF32 wraps data as a float32 tensor of the given shape.
func NewF32(data []float32, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// Rows returns the number of real rows of a positions vector: the rows
// before the first negative entry. Real rows must hold contiguous
// ascending positions (one sequence); per-row positions of several
// sequences are not supported yet.
func Rows(positions []int) (start, n int, err error) {
	if len(positions) == 0 || positions[0] < 0 {
		return 0, 0, nil
	}
	start = positions[0]
	for n < len(positions) && positions[n] >= 0 {
		if positions[n] != start+n {
			return 0, 0, fmt.Errorf("row %d is at position %d, want %d: rows must hold contiguous positions", n, positions[n], start+n)
		}
		n++
	}
	for _, p := range positions[n:] {
		if p >= 0 {
			return 0, 0, fmt.Errorf("a real row (position %d) follows padding", p)
		}
	}
	return start, n, nil
}
