package graphs

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/internal/quant"
)

// DType is the type a weight is stored in. Gorgonia's tensor package has no
// 16-bit float, so BF16 and F16 weights travel as raw uint16 storage into
// the ops that read them (layers' matmul and embedding kernels widen them in
// registers); they are never widened as a whole. Block-quantized weights
// (llama.cpp's formats of internal/quant) travel as their bytes, a uint8
// tensor [rows, bytes per row], and are dequantized a block at a time by
// the same kernels.
type DType uint8

const (
	F32 DType = iota
	BF16
	F16
	Q8_0
	Q4_0
	Q4_K
	Q6_K
	Q5_0
	Q4_1
	Q5_1
	Q2_K
	Q3_K
	Q5_K
	IQ4_NL
	IQ4_XS
)

// quantDTypes pairs each quantized dtype with its block format.
var quantDTypes = map[DType]quant.Format{
	Q8_0: quant.Q8_0, Q4_0: quant.Q4_0, Q4_K: quant.Q4_K, Q6_K: quant.Q6_K, Q5_0: quant.Q5_0,
	Q4_1: quant.Q4_1, Q5_1: quant.Q5_1, Q2_K: quant.Q2_K, Q3_K: quant.Q3_K, Q5_K: quant.Q5_K,
	IQ4_NL: quant.IQ4_NL, IQ4_XS: quant.IQ4_XS,
}

func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	}
	if f, ok := d.Quant(); ok {
		return f.String()
	}
	return "DType(" + strconv.Itoa(int(d)) + ")"
}

// Quant is the block format of a quantized dtype.
func (d DType) Quant() (quant.Format, bool) {
	f, ok := quantDTypes[d]
	return f, ok
}

// QuantDType is the dtype of a block format.
func QuantDType(f quant.Format) DType {
	for d, g := range quantDTypes {
		if g == f {
			return d
		}
	}
	panic("graphs: no dtype for " + f.String())
}

// Size is the number of bytes of one element (of a whole row, for a
// quantized type: see Bytes).
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case BF16, F16:
		return 2
	}
	return 1
}

// Bytes is the storage of n values, rows of cols values each.
func (d DType) Bytes(n int64, cols int) int64 {
	if f, ok := d.Quant(); ok && cols > 0 {
		return n / int64(f.BlockSize()) * int64(f.BlockBytes())
	}
	return n * int64(d.Size())
}

// Storage is the Gorgonia element type that carries d.
func (d DType) Storage() tensor.Dtype {
	switch d {
	case F32:
		return tensor.Float32
	case BF16, F16:
		return tensor.Uint16
	}
	return tensor.Uint8
}

// StoredShape is the shape of the tensor that carries a weight of logical
// shape: the same, or the shape with its last axis in bytes per row for a
// quantized type ([rows, bytes per row]; [experts, rows, bytes per row]
// for stacked experts, which are whole rows back to back).
func (d DType) StoredShape(shape []int) ([]int, error) {
	f, ok := d.Quant()
	if !ok {
		return shape, nil
	}
	if len(shape) < 2 {
		return nil, fmt.Errorf("a %s weight must be rows of blocks (2-D or more), not %v", d, shape)
	}
	rb, err := f.RowBytes(shape[len(shape)-1])
	if err != nil {
		return nil, err
	}
	out := slices.Clone(shape)
	out[len(out)-1] = rb
	return out, nil
}

// Role says what a parameter is in the network. It decides how a loader may
// store it (matrices keep their checkpoint dtype; vectors are widened once
// to float32, since every op reads them as float32 and they are a
// negligible share of the bytes) and how a random model initialises it.
type Role uint8

const (
	// Matrix is a weight read by a matrix product or lookup: Linear
	// [out, in], embeddings and heads [V, D], experts.
	Matrix Role = iota
	// Norm is a norm scale applied as w (initialised to ones).
	Norm
	// OffsetNorm is a norm scale applied as 1 + w (Gemma; initialised to zeros).
	OffsetNorm
	// Bias is an additive vector (initialised to zeros).
	Bias
)

func (r Role) String() string {
	return [...]string{"matrix", "norm", "offset-norm", "bias"}[r]
}

// Param is one tensor of a checkpoint, declared by a model through a Scope:
// its Hugging Face name, its shape in the checkpoint's (PyTorch) layout and
// its role. Data is set when the weights are loaded (or made at random):
// F32 data has float32 backing, BF16 and F16 data uint16 backing, always in
// the declared shape.
type Param struct {
	Name  string
	Shape []int
	Role  Role
	DType DType
	Data  *tensor.Dense
	// Parts, when set, names the slices along the first axis as the
	// checkpoint stores them, one tensor each: a stacked expert weight
	// [E, out, in] that transformers 4.x keeps as E tensors [out, in].
	// What names weights for users (gradients, saved checkpoints) uses
	// these names and shapes; nil means the tensor is stored whole.
	Parts []string
	// Slices, when set, hold slice i along the first axis as the
	// checkpoint stores it, a tensor of its own (Parts), in place in its
	// mapping, and Data is nil: transformers 4.x's per-expert tensors are
	// not copied into one stack. A MoE's inference reads the slices;
	// what needs the stack whole (a training step binding it) makes Data
	// with Stack.
	Slices []*tensor.Dense
	// Transposed says the checkpoint stores this 2-D weight [in, out], the
	// transpose of its declared layout (GPT-2's Conv1D). What hands
	// weights to users in the checkpoint's layout (gradients) transposes
	// it; model code always sees the declared layout.
	Transposed bool
	// PermutedHeads, when not 0, is the head size hd of a 2-D weight whose
	// rows Data holds in llama.cpp's order for a llama checkpoint's Q and
	// K projections (convert_hf_to_gguf.py's permute): within each head,
	// stored row 2i is declared row i and stored row 2i+1 is declared row
	// hd/2+i. Keeping them so spares a copy of the weight (layers.Linear
	// puts its output columns back in order); Float32s returns the
	// declared order, and Set, given data in the declared order, clears it.
	PermutedHeads int
	// ReadOnly says Data lies in a read-only file mapping that the set
	// keeps (the loaders set it): nothing writes those bytes, so a backend
	// may keep a prepared form of them (Prepare) and give the file's pages
	// back.
	ReadOnly bool
	// Linear says a Linear declared this weight [out, in]
	// (layers.NewLinear): a module a LoRA adapter may adapt.
	Linear bool
	// LoRA holds, by adapter slot (Params.Adapters), each attached
	// adapter's update of this Linear weight; a nil entry, or none past
	// the end, leaves the weight alone for that adapter.
	LoRA []*LoRA

	// forms are the prepared forms by key (Prepare), guarded by the
	// owner's formsMu.
	forms map[string]Form

	// owner keeps the declaring set, and through it what the data points
	// into (a memory mapping unmapped once the set is unreachable), alive
	// as long as any of its parameters is.
	owner *Params
}

// Numel is the number of elements.
func (p *Param) Numel() int64 {
	n := int64(1)
	for _, d := range p.Shape {
		n *= int64(d)
	}
	return n
}

// Set gives the parameter its data, checking dtype and shape against the
// declaration. The data is used in place, not copied: data taken from
// another model's parameters lives in that model's file mapping, which is
// released once those parameters are unreachable, so tie them to these
// (Params.Keep).
func (p *Param) Set(dtype DType, data *tensor.Dense) error {
	want, err := dtype.StoredShape(p.Shape)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", p.Name, err)
	}
	if !slices.Equal([]int(data.Shape()), want) {
		return fmt.Errorf("tensor %q: %s data of shape %v for a parameter of shape %v", p.Name, dtype, data.Shape(), p.Shape)
	}
	if data.Dtype() != dtype.Storage() {
		return fmt.Errorf("tensor %q: %s data carried as %s, want %s", p.Name, dtype, data.Dtype(), dtype.Storage())
	}
	p.releaseForms()
	p.DType, p.Data, p.Slices, p.PermutedHeads, p.ReadOnly = dtype, data, nil, 0, false
	return nil
}

// HasData says whether the parameter holds values: Data, or Slices.
func (p *Param) HasData() bool { return p.Data != nil || p.Slices != nil }

// SetSlices gives a stacked parameter its slices along the first axis,
// each used in place (see Slices), checking dtype and shapes.
func (p *Param) SetSlices(dtype DType, parts []*tensor.Dense) error {
	if len(p.Shape) < 2 || len(parts) != p.Shape[0] {
		return fmt.Errorf("tensor %q of shape %v: %d slices", p.Name, p.Shape, len(parts))
	}
	want, err := dtype.StoredShape(p.Shape[1:])
	if err != nil {
		return fmt.Errorf("tensor %q: %w", p.Name, err)
	}
	for i, d := range parts {
		if !slices.Equal([]int(d.Shape()), want) || d.Dtype() != dtype.Storage() {
			return fmt.Errorf("tensor %q: slice %d is %s %v, want %s %v", p.Name, i, d.Dtype(), d.Shape(), dtype.Storage(), want)
		}
	}
	p.releaseForms()
	p.DType, p.Data, p.Slices, p.PermutedHeads, p.ReadOnly = dtype, nil, parts, 0, false
	return nil
}

// Stack makes Data, the stacked tensor, from Slices (a copy), once.
func (p *Param) Stack() {
	mu := p.formsMu()
	mu.Lock()
	defer mu.Unlock()
	if p.Data == nil && p.Slices != nil {
		// The copy is the Go heap's, and training may write it: the
		// forms made of the mapped slices go with them.
		p.Data, p.Slices, p.ReadOnly = p.stacked(), nil, false
		for _, f := range p.forms {
			if f != nil {
				f.Release()
			}
		}
		p.forms = nil
	}
}

// stacked is a copy of Slices as one tensor.
func (p *Param) stacked() *tensor.Dense {
	shape := append([]int{len(p.Slices)}, p.Slices[0].Shape()...)
	var backing any
	switch p.Slices[0].Data().(type) {
	case []float32:
		backing = concat[float32](p.Slices)
	case []uint16:
		backing = concat[uint16](p.Slices)
	default:
		backing = concat[byte](p.Slices)
	}
	runtime.KeepAlive(p) // the slices may be a mapping p's set keeps
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))
}

func concat[T any](parts []*tensor.Dense) []T {
	var out []T
	for _, d := range parts {
		out = append(out, d.Data().([]T)...)
	}
	return out
}

// A Form is a prepared form of a weight that a backend keeps beside the
// stored data and computes from instead: the CPU's packings for decode
// (internal/simd), a copy on a device. It is made from the data once and
// stays valid while the data does not change.
type Form interface {
	// Release frees what the form holds; it is not used afterwards.
	Release()
}

// Prepare returns p's form for key, made by build the first time (when
// a graph first binds the weight). build may return nil: a weight that
// takes no such form, which is kept too, so build runs once. Forms are
// released with the data (Set), by Params.Release, or, for forms that
// hold memory outside the Go heap, by their own cleanup once nothing
// reaches them.
func (p *Param) Prepare(key string, build func() Form) Form {
	mu := p.formsMu()
	mu.Lock()
	defer mu.Unlock()
	if f, ok := p.forms[key]; ok {
		return f
	}
	f := build()
	if p.forms == nil {
		p.forms = map[string]Form{}
	}
	p.forms[key] = f
	return f
}

// releaseForm releases and forgets p's form for key.
func (p *Param) releaseForm(key string) {
	mu := p.formsMu()
	mu.Lock()
	defer mu.Unlock()
	if f := p.forms[key]; f != nil {
		f.Release()
	}
	delete(p.forms, key)
}

// Prepared returns p's form for key if Prepare made one, else nil.
func (p *Param) Prepared(key string) Form {
	mu := p.formsMu()
	mu.Lock()
	defer mu.Unlock()
	return p.forms[key]
}

// Forms lists p's prepared forms (a refusal, a nil form, is left out).
func (p *Param) Forms() []Form {
	mu := p.formsMu()
	mu.Lock()
	defer mu.Unlock()
	var out []Form
	for _, f := range p.forms {
		if f != nil {
			out = append(out, f)
		}
	}
	return out
}

// formsMu is the lock of p's forms: its set's, or one of its own for a
// parameter declared outside a set.
func (p *Param) formsMu() *sync.Mutex {
	if p.owner != nil {
		return &p.owner.formsMu
	}
	return &orphanForms
}

var orphanForms sync.Mutex

func (p *Param) releaseForms() {
	mu := p.formsMu()
	mu.Lock()
	defer mu.Unlock()
	for _, f := range p.forms {
		if f != nil {
			f.Release()
		}
	}
	p.forms = nil
}

// Part is a view of slice i along the first axis, named name (see
// Parts): its shape is Shape[1:] and its data, when p has data, shares
// p's backing, in p's storage type.
func (p *Param) Part(i int, name string) *Param {
	if len(p.Shape) < 2 || i < 0 || i >= p.Shape[0] {
		panic(fmt.Sprintf("tensor %q of shape %v has no slice %d", p.Name, p.Shape, i))
	}
	q := &Param{Name: name, Shape: slices.Clone(p.Shape[1:]), Role: p.Role, DType: p.DType, owner: p.owner}
	if p.Slices != nil {
		q.Data = p.Slices[i]
		return q
	}
	if p.Data == nil {
		return q
	}
	// Every slice is the same number of whole rows, so slice i is the
	// i-th equal share of the backing, whatever the storage.
	stored := p.Data.Shape()[1:].Clone()
	n := stored.TotalSize()
	var backing any
	switch v := p.Data.Data().(type) {
	case []float32:
		backing = v[i*n : (i+1)*n]
	case []uint16:
		backing = v[i*n : (i+1)*n]
	case []byte:
		backing = v[i*n : (i+1)*n]
	default:
		panic(fmt.Sprintf("tensor %q: %T data", p.Name, v))
	}
	q.Data = tensor.New(tensor.WithShape(stored...), tensor.WithBacking(backing))
	return q
}

// Float32s returns the parameter's values widened to float32 (a copy for
// 16-bit storage; the backing itself for F32). For tests and tools, not for
// the hot path.
func (p *Param) Float32s() []float32 {
	if !p.HasData() {
		return nil
	}
	v := p.storedFloat32s()
	if hd := p.PermutedHeads; hd > 0 {
		v = UnpermuteHeadRows(v, p.Shape[0], p.Shape[1], hd)
	}
	return v
}

// UnpermuteHeadRows puts rows (of width values each, any element type)
// that are in llama.cpp's order within each head of hd rows back in
// Hugging Face's (see Param.PermutedHeads), into a new slice.
func UnpermuteHeadRows[T any](v []T, rows, width, hd int) []T {
	out := make([]T, len(v))
	for h := 0; h < rows/hd; h++ {
		for i := 0; i < hd/2; i++ {
			copy(out[(h*hd+i)*width:][:width], v[(h*hd+2*i)*width:][:width])
			copy(out[(h*hd+hd/2+i)*width:][:width], v[(h*hd+2*i+1)*width:][:width])
		}
	}
	return out
}

// storedFloat32s is Float32s in the order Data holds.
func (p *Param) storedFloat32s() []float32 {
	data := p.Data
	if data == nil {
		data = p.stacked()
	}
	switch p.DType {
	case F32:
		return data.Data().([]float32)
	case BF16, F16:
		src := data.Data().([]uint16)
		out := make([]float32, len(src))
		Widen(out, src, p.DType)
		runtime.KeepAlive(p)
		return out
	}
	f, _ := p.DType.Quant()
	out := make([]float32, p.Numel())
	quant.DequantizeRow(f, data.Data().([]byte), out)
	runtime.KeepAlive(p) // the bytes may be a mapping p's set keeps
	return out
}

// Params is what a model declared: its parameters, in declaration order,
// and its layers' KV caches.
type Params struct {
	list   []*Param
	byName map[string]*Param
	caches []LayerCache // by layer
	// keep holds what the data points into (a memory-mapped checkpoint),
	// so it lives as long as the parameters.
	keep []any
	// formsMu guards the parameters' prepared forms (Param.Prepare).
	formsMu sync.Mutex
	// adapters are the LoRA adapters attached (ApplyLoRA), by slot.
	adapters []*Adapter
}

// NewParams makes an empty parameter set; Root declares into it.
func NewParams() *Params { return &Params{byName: map[string]*Param{}} }

// Root is the scope with no prefix.
func (ps *Params) Root() Scope { return Scope{params: ps} }

// All lists the parameters in declaration order.
func (ps *Params) All() []*Param { return ps.list }

// Get finds a parameter by its full name.
func (ps *Params) Get(name string) (*Param, bool) {
	p, ok := ps.byName[name]
	return p, ok
}

// Release frees the prepared forms of every parameter now (a model's
// packings for decode, its device copies), rather than when nothing
// reaches them any more. No graph of the model may be running; graphs
// built before compute from the stored data afterwards.
func (ps *Params) Release() {
	for _, p := range ps.list {
		p.releaseForms()
	}
}

// Caches lists the KV cache each layer declared (Scope.Cache), by layer
// index, up to the last layer that declared one; a layer that declared
// none has a NoCache entry.
func (ps *Params) Caches() []LayerCache { return ps.caches }

// Keep ties the life of v (for example a memory mapping the data lives in)
// to the parameters.
func (ps *Params) Keep(v any) { ps.keep = append(ps.keep, v) }

// Bytes is the storage the loaded parameters take.
func (ps *Params) Bytes() int64 {
	var n int64
	for _, p := range ps.list {
		n += p.DType.Bytes(p.Numel(), p.Shape[len(p.Shape)-1])
	}
	return n
}

// Scope is a name prefix in a parameter set, as candle's VarBuilder.pp: a
// model declares each tensor once, by its Hugging Face name relative to the
// scope of the module that owns it, and keeps the *Param it gets back. The
// list of a checkpoint's tensors is then what the model declared, and the
// forward can only use declared tensors.
type Scope struct {
	prefix string
	params *Params
}

// Sub returns the scope prefix.part1.part2...; parts may be strings or ints
// (layer indices).
func (s Scope) Sub(parts ...any) Scope {
	p := s.prefix
	for _, part := range parts {
		var name string
		switch v := part.(type) {
		case string:
			name = v
		case int:
			name = strconv.Itoa(v)
		default:
			panic(fmt.Sprintf("scope part %v (%T) is neither a string nor an int", part, part))
		}
		if name == "" {
			continue
		}
		if p != "" {
			p += "."
		}
		p += name
	}
	return Scope{prefix: p, params: s.params}
}

// Prefix is the scope's full name.
func (s Scope) Prefix() string { return s.prefix }

// Params is the set this scope declares into.
func (s Scope) Params() *Params { return s.params }

// Param declares the tensor prefix.name of the given role and shape.
// Declaring one name twice with different shapes or roles panics: it is a
// bug in the model, not bad input. Declaring it again identically returns
// the same *Param (a tied weight used twice).
func (s Scope) Param(name string, role Role, shape ...int) *Param {
	full := s.Sub(name).prefix
	if p, ok := s.params.byName[full]; ok {
		if p.Role != role || !slices.Equal(p.Shape, shape) {
			panic(fmt.Sprintf("tensor %q declared twice: %v %v and %v %v", full, p.Role, p.Shape, role, shape))
		}
		return p
	}
	for _, d := range shape {
		if d <= 0 {
			panic(fmt.Sprintf("tensor %q declared with shape %v", full, shape))
		}
	}
	p := &Param{Name: full, Shape: slices.Clone(shape), Role: role, owner: s.params}
	s.params.list = append(s.params.list, p)
	s.params.byName[full] = p
	return p
}

// Cache declares the KV cache of decoder layer i, as the layer's attention
// is declared: the session allocates it, and the layer's steps read and
// extend it (Step.Cache). Declaring a layer's cache twice, or a sliding
// cache without a window, panics: it is a bug in the model.
func (s Scope) Cache(layer int, c LayerCache) {
	if layer < 0 || c.Kind > SlidingCache || (c.Kind == SlidingCache) != (c.Window > 0) {
		panic(fmt.Sprintf("%s: layer %d declares a %v KV cache with window %d", s.prefix, layer, c.Kind, c.Window))
	}
	ps := s.params
	if layer < len(ps.caches) && ps.caches[layer].Kind != NoCache {
		panic(fmt.Sprintf("%s: layer %d declares a second KV cache", s.prefix, layer))
	}
	for len(ps.caches) <= layer {
		ps.caches = append(ps.caches, LayerCache{})
	}
	ps.caches[layer] = c
}

// Widen converts 16-bit floats to float32. Both conversions are exact:
// BF16 is the upper half of a float32, and every F16 is a float32.
func Widen(dst []float32, src []uint16, dtype DType) {
	switch dtype {
	case BF16:
		widenBF16(dst, src)
	case F16:
		for i, h := range src[:len(dst)] {
			dst[i] = f16ToF32(h)
		}
	default:
		panic("Widen: " + dtype.String() + " is not a 16-bit type")
	}
}
