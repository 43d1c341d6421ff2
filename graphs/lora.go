package graphs

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/loaders"
)

// LoRA is one adapter's low-rank update of a Linear weight W [out, in]:
// the Linear computes x·Wᵀ + Scale·(x·Aᵀ)·Bᵀ (PEFT's lora.Linear,
// unmerged), with A [r, in] and B [out, r] in float32 whatever W's type.
type LoRA struct {
	A, B  *Param
	Scale float32
}

// Adapter is a LoRA adapter attached to a model's parameters
// (Params.ApplyLoRA): its factors, in a set of their own under PEFT's
// tensor names, and the slot that names it in a batch (Step.AdapterRows).
type Adapter struct {
	Name   string
	Slot   int
	Config *loaders.LoRAConfig
	// Params holds every A and B, named as adapter_model.safetensors
	// names them (base_model.model.<module>.lora_A.weight).
	Params *Params
	// Modules lists the adapted modules' HF paths, sorted, as PEFT names
	// them: Prefix and the declared name.
	Modules []string
	// Prefix is what PEFT's module paths hold before the declared names:
	// "" mostly, "transformer." for GPT2LMHeadModel, whose checkpoint
	// gozoo reads with or without it (found from the file).
	Prefix string
	// Merged says Merge added the adapter into the base: it keeps its
	// slot but changes nothing and trains nothing.
	Merged bool
}

// Adapters lists the adapters attached to the set, by slot.
func (ps *Params) Adapters() []*Adapter { return ps.adapters }

// Trainable lists what a training step differentiates: the attached
// adapters' factors when there are any (the base is frozen, as PEFT
// trains it), else every parameter.
func (ps *Params) Trainable() []*Param {
	if !ps.HasLoRA() {
		return ps.list
	}
	var out []*Param
	for _, a := range ps.adapters {
		if !a.Merged {
			out = append(out, a.Params.All()...)
		}
	}
	return out
}

// HasLoRA says whether an adapter is attached and not merged: the base
// is then frozen in training.
func (ps *Params) HasLoRA() bool {
	for _, a := range ps.adapters {
		if !a.Merged {
			return true
		}
	}
	return false
}

// ApplyLoRA attaches an adapter read from a PEFT folder to the Linear
// weights it targets, unmerged: the base weights stay as they are, in
// their stored type, and every graph built afterwards adds the update.
// The adapter must fit the model exactly: every tensor of its file is a
// factor of a targeted Linear of matching shape, and every targeted
// Linear has both factors; otherwise the error names the tensor.
func (ps *Params) ApplyLoRA(name string, a *loaders.LoRA) (*Adapter, error) {
	c := a.Config
	where := a.Dir
	if where == "" {
		where = "LoRA adapter " + name
	}
	ad := &Adapter{Name: name, Slot: len(ps.adapters), Config: c, Params: NewParams(), Prefix: ps.peftPrefix(a.Tensors)}
	scale := float32(c.Scaling())
	factors := map[string]*LoRA{}
	for _, t := range a.Tensors {
		declared, ok := strings.CutPrefix(t.Module, ad.Prefix)
		w, found := ps.byName[declared+".weight"]
		if !ok || !found || !w.Linear {
			return nil, fmt.Errorf("%s: tensor %q adapts %q, which is not a Linear module of this model", where, t.Name, t.Module)
		}
		if !c.Adapts(t.Module) {
			return nil, fmt.Errorf("%s: tensor %q adapts %q, which target_modules does not select", where, t.Name, t.Module)
		}
		want := []int{c.R, w.Shape[1]}
		if t.Factor == 'B' {
			want = []int{w.Shape[0], c.R}
		}
		if !slices.Equal(t.Shape, want) {
			return nil, fmt.Errorf("%s: tensor %q has shape %v, want %v for %q %v at r=%d", where, t.Name, t.Shape, want, w.Name, w.Shape, c.R)
		}
		p := ad.Params.Root().Param(t.Name, Matrix, t.Shape...)
		if err := p.Set(F32, tensor.New(tensor.WithShape(t.Shape...), tensor.WithBacking(t.Data))); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		l := factors[declared]
		if l == nil {
			l = &LoRA{Scale: scale}
			factors[declared] = l
		}
		if t.Factor == 'A' {
			l.A = p
		} else {
			l.B = p
		}
	}
	for _, w := range ps.list {
		declared, _ := strings.CutSuffix(w.Name, ".weight")
		module := ad.Prefix + declared
		if !w.Linear || !c.Adapts(module) {
			continue
		}
		l := factors[declared]
		switch {
		case l == nil || l.A == nil:
			return nil, fmt.Errorf("%s: no tensor %q for the targeted module %q", where, loaders.LoRAPrefix+module+".lora_A.weight", module)
		case l.B == nil:
			return nil, fmt.Errorf("%s: no tensor %q for the targeted module %q", where, loaders.LoRAPrefix+module+".lora_B.weight", module)
		}
		ad.Modules = append(ad.Modules, module)
	}
	if len(ad.Modules) == 0 {
		return nil, fmt.Errorf("%s: target_modules selects no Linear module of this model", where)
	}
	slices.Sort(ad.Modules)
	for _, m := range ad.Modules {
		w := ps.byName[strings.TrimPrefix(m, ad.Prefix)+".weight"]
		for len(w.LoRA) < ad.Slot {
			w.LoRA = append(w.LoRA, nil)
		}
		w.LoRA = append(w.LoRA, factors[strings.TrimPrefix(m, ad.Prefix)])
	}
	ps.adapters = append(ps.adapters, ad)
	return ad, nil
}

// peftPrefix finds what the file's module paths hold before the declared
// names: nothing when its first tensor names a declared Linear, else the
// part before the one declared Linear name its path ends with.
func (ps *Params) peftPrefix(ts []loaders.LoRATensor) string {
	if len(ts) == 0 {
		return ""
	}
	m := ts[0].Module
	if w, ok := ps.byName[m+".weight"]; ok && w.Linear {
		return ""
	}
	for _, w := range ps.list {
		declared := strings.TrimSuffix(w.Name, ".weight")
		if w.Linear && strings.HasSuffix(m, "."+declared) {
			return m[:len(m)-len(declared)]
		}
	}
	return ""
}

// LoadLoRA reads the PEFT folder dir and attaches it (ApplyLoRA).
func (ps *Params) LoadLoRA(name, dir string) (*Adapter, error) {
	a, err := loaders.ReadLoRA(dir)
	if err != nil {
		return nil, err
	}
	return ps.ApplyLoRA(name, a)
}

// Merge adds the adapter into its base weights, W' = W + Scale·B·A, and
// detaches it: afterwards the model computes the adapted outputs with no
// extra work (up to float32 rounding). A float base (F32, BF16, F16)
// takes it, and each adapted weight becomes F32 (rounding the sum back to
// 16 bits would lose most of a small update); a quantized base is refused
// by name. Graphs built before still add the update: build new ones.
func (a *Adapter) Merge(base *Params) error {
	if a.Slot >= len(base.adapters) || base.adapters[a.Slot] != a || a.Merged {
		return fmt.Errorf("adapter %q is not attached to these parameters, or merged already", a.Name)
	}
	for _, m := range a.Modules {
		w := base.byName[strings.TrimPrefix(m, a.Prefix)+".weight"]
		if _, q := w.DType.Quant(); q || !w.HasData() {
			return fmt.Errorf("adapter %q: merging into %q needs a float weight, it is %s", a.Name, w.Name, w.DType)
		}
	}
	for _, m := range a.Modules {
		w := base.byName[strings.TrimPrefix(m, a.Prefix)+".weight"]
		l := w.LoRA[a.Slot]
		out, in := w.Shape[0], w.Shape[1]
		r := l.A.Shape[0]
		// Float32s is in declared order; for F32 it is the stored data,
		// which may be a read-only mapping: the sum goes to a new slice.
		src := w.Float32s()
		dst := make([]float32, len(src))
		A, B := l.A.Data.Data().([]float32), l.B.Data.Data().([]float32)
		for i := range out {
			for j := range in {
				var d float64
				for k := range r {
					d += float64(B[i*r+k]) * float64(A[k*in+j])
				}
				dst[i*in+j] = src[i*in+j] + float32(float64(l.Scale)*d)
			}
		}
		if err := w.Set(F32, tensor.New(tensor.WithShape(out, in), tensor.WithBacking(dst))); err != nil {
			return err
		}
		w.LoRA[a.Slot] = nil
	}
	a.Merged = true
	return nil
}

// AdapterRows, in a step of a Batch (a Session is one), is the input
// that marks the rows of the sequences running with adapter slot: a [T]
// int vector of ones and zeros the batch fills at every forward (see
// Batch.SetAdapter). Nil in steps without sequences (training steps,
// Programs): there every attached adapter applies to every row.
func (s *Step) AdapterRows(slot int) *G.Node {
	if s.kv == nil {
		return nil
	}
	if n, ok := s.adapterRows[slot]; ok {
		return n
	}
	if s.adapterRows == nil {
		s.adapterRows = map[int]*G.Node{}
	}
	n := G.NewVector(s.G, tensor.Int, G.WithShape(s.T), G.WithName(fmt.Sprintf("adapter_rows.%d", slot)))
	s.adapterRows[slot] = n
	return n
}

// NewLoRA attaches a fresh adapter of cfg's rank and targets, initialised
// as PEFT's LoraLayer.reset_lora_parameters does by default: A from
// nn.init.kaiming_uniform_(a=√5), uniform in ±1/√in, and B zero, so the
// adapted model starts as the base. bScale > 0 draws B uniform in
// ±bScale instead (tests: an adapter that matters). rng draws the values.
func (ps *Params) NewLoRA(name string, cfg *loaders.LoRAConfig, rng *rand.Rand, bScale float64) (*Adapter, error) {
	a := &loaders.LoRA{Config: cfg}
	uniform := func(n int, bound float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((2*rng.Float64() - 1) * bound)
		}
		return v
	}
	for _, w := range ps.list {
		module, _ := strings.CutSuffix(w.Name, ".weight")
		if !w.Linear || !cfg.Adapts(module) {
			continue
		}
		out, in := w.Shape[0], w.Shape[1]
		// kaiming_uniform_ with a = √5: gain √(2/(1+a²)) = √(1/3), bound
		// gain·√(3/fan_in) = 1/√fan_in, fan_in = in (A is [r, in]).
		A := uniform(cfg.R*in, 1/math.Sqrt(float64(in)))
		B := make([]float32, out*cfg.R)
		if bScale > 0 {
			B = uniform(out*cfg.R, bScale)
		}
		a.Tensors = append(a.Tensors,
			loaders.LoRATensor{Name: loaders.LoRAPrefix + module + ".lora_A.weight", Module: module, Factor: 'A', Shape: []int{cfg.R, in}, Data: A},
			loaders.LoRATensor{Name: loaders.LoRAPrefix + module + ".lora_B.weight", Module: module, Factor: 'B', Shape: []int{out, cfg.R}, Data: B})
	}
	return ps.ApplyLoRA(name, a)
}

// Tensors returns the adapter's factors as a PEFT folder holds them
// (loaders.WriteLoRA): by name, in PyTorch's layout, float32. Their data
// is the adapter's own, not a copy.
func (a *Adapter) Tensors() []loaders.LoRATensor {
	var out []loaders.LoRATensor
	for _, p := range a.Params.All() {
		rest, _ := strings.CutPrefix(p.Name, loaders.LoRAPrefix)
		module, factor := strings.TrimSuffix(rest, ".lora_A.weight"), byte('A')
		if strings.HasSuffix(rest, ".lora_B.weight") {
			module, factor = strings.TrimSuffix(rest, ".lora_B.weight"), 'B'
		}
		out = append(out, loaders.LoRATensor{Name: p.Name, Module: module, Factor: factor, Shape: slices.Clone(p.Shape), Data: p.Data.Data().([]float32)})
	}
	return out
}
