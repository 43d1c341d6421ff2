package zoo

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
)

// Stacked experts. A mixture of experts declares each projection of its
// experts as one stacked tensor, <prefix>.experts.{gate,up,down}_proj
// [E, out, in] (layers.NewMoE), the form llama.cpp's ffn_*_exps and
// transformers v5 store, so that its op binds three inputs however many
// experts there are. transformers 4.x checkpoints hold one tensor per
// expert instead, <prefix>.experts.<e>.<proj>.weight [out, in]. This file
// is the one place that goes between the two: declare names each stacked
// weight's parts (graphs.Param.Parts), a safetensors load binds a stacked
// tensor in place or stacks the per-expert ones (or splits v5's fused
// gate_up_proj), and the checkpoint writers store the parts. The GGUF
// loader needs none of it: ffn_*_exps are the stacked tensors.

// stackedProjs are the projections a MoE stacks, in declaration order.
var stackedProjs = []string{"gate_proj", "up_proj", "down_proj"}

// expertStack splits a stacked expert weight's name into its MoE's
// prefix and its projection.
func expertStack(p *graphs.Param) (prefix, proj string, ok bool) {
	i := strings.LastIndex(p.Name, ".experts.")
	if len(p.Shape) != 3 || i < 0 {
		return "", "", false
	}
	proj = p.Name[i+len(".experts."):]
	if !slices.Contains(stackedProjs, proj) {
		return "", "", false
	}
	return p.Name[:i], proj, true
}

// nameExpertParts gives every stacked expert weight the names of its
// experts in a per-expert checkpoint, the form the golden cases and
// transformers 4.x use: gradients and written checkpoints name the
// experts so unless a load finds the stacked tensor itself.
func nameExpertParts(params []*graphs.Param) {
	for _, p := range params {
		prefix, proj, ok := expertStack(p)
		if !ok {
			continue
		}
		p.Parts = make([]string, p.Shape[0])
		for e := range p.Parts {
			p.Parts[e] = fmt.Sprintf("%s.experts.%d.%s.weight", prefix, e, proj)
		}
	}
}

// expertSource is where a safetensors checkpoint keeps a stacked expert
// weight: the stacked tensor itself (whole), transformers v5's fused
// gate_up_proj [E, 2·inter, hidden] whose rows per expert are the gate's
// then the up projection's (fused, second for up), or one tensor per
// expert (parts).
type expertSource struct {
	whole      string
	transposed bool
	fused      string
	second     bool
	parts      []string
}

// findExperts looks a stacked expert weight up in ckpt, in the order
// above; with none of them there, the error names the first missing
// expert tensor.
func findExperts(ckpt *loaders.Checkpoint, cfg Config, p *graphs.Param) (expertSource, error) {
	if name, transposed := stored(cfg, p.Name, ckpt.Has); ckpt.Has(name) {
		return expertSource{whole: name, transposed: transposed}, nil
	}
	prefix, proj, _ := expertStack(p)
	if proj == "gate_proj" || proj == "up_proj" {
		if name, _ := stored(cfg, prefix+".experts.gate_up_proj", ckpt.Has); ckpt.Has(name) {
			return expertSource{fused: name, second: proj == "up_proj"}, nil
		}
	}
	src := expertSource{parts: make([]string, len(p.Parts))}
	for e, part := range p.Parts {
		name, transposed := stored(cfg, part, ckpt.Has)
		if transposed {
			return src, fmt.Errorf("tensor %q: an expert's slice is never stored transposed", part)
		}
		if !ckpt.Has(name) {
			whole, _ := stored(cfg, p.Name, ckpt.Has)
			return src, fmt.Errorf("%s: missing tensor %q, expert %d of the %d stacked into %s (nor does the checkpoint hold the stacked %q)",
				ckpt.FileOf(name), name, e, len(p.Parts), p.Name, whole)
		}
		src.parts[e] = name
	}
	return src, nil
}

// expertTensors returns each expert's bytes, in place in the checkpoint's
// mapping, and their common dtype, checking every expert tensor's shape
// (p.Shape[1:]; [E, 2·inter, hidden] for a fused one) and dtype.
func expertTensors(ckpt *loaders.Checkpoint, p *graphs.Param, src expertSource) (string, [][]byte, error) {
	E, rows, cols := p.Shape[0], p.Shape[1], p.Shape[2]
	raw := make([][]byte, E)
	if src.fused != "" {
		dtype, data, err := ckpt.Tensor(src.fused, []int{E, 2 * rows, cols})
		if err != nil {
			return "", nil, fmt.Errorf("loading %s from the fused %s: %w", p.Name, src.fused, err)
		}
		per := len(data) / (2 * E) // one expert's gate, or its up projection
		for e := range raw {
			half := 2 * e
			if src.second {
				half++
			}
			raw[e] = data[half*per : (half+1)*per]
		}
		return dtype, raw, nil
	}
	var dtype string
	for e, name := range src.parts {
		dt, data, err := ckpt.Tensor(name, []int{rows, cols})
		if err != nil {
			return "", nil, fmt.Errorf("stacking expert %d into %s: %w", e, p.Name, err)
		}
		if e == 0 {
			dtype = dt
		} else if dt != dtype {
			return "", nil, fmt.Errorf("%s: tensor %q has dtype %s and %q has %s: the experts stacked into %s must share one dtype",
				ckpt.FileOf(name), name, dt, src.parts[0], dtype, p.Name)
		}
		raw[e] = data
	}
	return dtype, raw, nil
}

// expertViews are the experts' tensors [rows, cols] in place in the
// mapping, when their dtype and alignment allow (else ok is false and the
// load copies them).
func expertViews(dtype string, raw [][]byte, rows, cols int) (views []*tensor.Dense, ok bool) {
	shape := tensor.WithShape(rows, cols)
	for _, b := range raw {
		var backing any
		switch dtype {
		case "F32":
			v, ok := loaders.Float32View(b)
			if !ok {
				return nil, false
			}
			backing = v
		case "BF16", "F16":
			v, ok := loaders.Uint16View(b)
			if !ok {
				return nil, false
			}
			backing = v
		default:
			return nil, false
		}
		views = append(views, tensor.New(shape, tensor.WithBacking(backing)))
	}
	return views, true
}

// checkExperts checks a stacked expert weight that the load will bind in
// place (or stack, or split) against the checkpoint, and returns the heap
// bytes that takes.
func checkExperts(ckpt *loaders.Checkpoint, p *graphs.Param, src expertSource) (int64, error) {
	dtype, raw, err := expertTensors(ckpt, p, src)
	if err != nil {
		return 0, err
	}
	if _, ok := expertViews(dtype, raw, p.Shape[1], p.Shape[2]); ok {
		return 0, nil
	}
	switch dtype {
	case "F32":
		return 4 * p.Numel(), nil
	case "BF16", "F16":
		return 2 * p.Numel(), nil
	}
	name := src.fused
	if name == "" {
		name = src.parts[0]
	}
	return 0, fmt.Errorf("%s: tensor %q has dtype %s; only F32, BF16 and F16 weights are supported", ckpt.FileOf(name), name, dtype)
}

// loadExperts sets a stacked expert weight from ckpt: the stacked tensor
// in place, under its own name (p.Parts is cleared: the checkpoint names
// it whole); else each expert's tensor in place as a slice of the stack
// (graphs.Param.Slices: nothing is copied), or, where the file's layout
// does not allow views, the experts copied into one buffer in their
// stored dtype.
func loadExperts(ckpt *loaders.Checkpoint, cfg Config, p *graphs.Param) error {
	src, err := findExperts(ckpt, cfg, p)
	if err != nil {
		return err
	}
	if src.whole != "" {
		p.Parts = nil
		return loadParam(ckpt, p, src.whole, src.transposed)
	}
	if src.fused != "" {
		// Split out of gate_up_proj, p is named by the declared stack:
		// the checkpoint has no tensor of its own for it.
		p.Parts = nil
	}
	dtype, raw, err := expertTensors(ckpt, p, src)
	if err != nil {
		return err
	}
	if views, ok := expertViews(dtype, raw, p.Shape[1], p.Shape[2]); ok {
		dt := map[string]graphs.DType{"F32": graphs.F32, "BF16": graphs.BF16, "F16": graphs.F16}[dtype]
		return p.SetSlices(dt, views)
	}
	shape := tensor.WithShape(p.Shape...)
	per := int(p.Numel()) / p.Shape[0]
	switch dtype {
	case "F32":
		v := make([]float32, p.Numel())
		for e, b := range raw {
			dst := v[e*per : (e+1)*per]
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		}
		return p.Set(graphs.F32, tensor.New(shape, tensor.WithBacking(v)))
	case "BF16", "F16":
		dt := graphs.BF16
		if dtype == "F16" {
			dt = graphs.F16
		}
		v := make([]uint16, p.Numel())
		for e, b := range raw {
			dst := v[e*per : (e+1)*per]
			for i := range dst {
				dst[i] = binary.LittleEndian.Uint16(b[2*i:])
			}
		}
		return p.Set(dt, tensor.New(shape, tensor.WithBacking(v)))
	}
	return fmt.Errorf("loading %s: the experts have dtype %s; only F32, BF16 and F16 weights are supported", p.Name, dtype)
}

// writtenTensor is one tensor of a checkpoint being written: its stored
// name, its values (a parameter, or one expert's slice of a stacked one)
// and whether it is stored transposed.
type writtenTensor struct {
	name       string
	param      *graphs.Param
	transposed bool
}

// writtenTensors lists what a checkpoint written for cfg holds, in
// declaration order: every declared tensor under its stored name, and a
// stacked expert weight as one tensor per expert, the form transformers
// 4.x loads. value gives a declared tensor's values: the model's
// parameter of that name, or the declaration itself for random weights.
func writtenTensors(cfg Config, params []*graphs.Param, value func(decl *graphs.Param) (*graphs.Param, error)) ([]writtenTensor, error) {
	none := func(string) bool { return false }
	var out []writtenTensor
	for _, decl := range params {
		p, err := value(decl)
		if err != nil {
			return nil, err
		}
		if len(decl.Parts) == 0 {
			name, transposed := stored(cfg, decl.Name, none)
			out = append(out, writtenTensor{name, p, transposed})
			continue
		}
		for i, part := range decl.Parts {
			name, transposed := stored(cfg, part, none)
			out = append(out, writtenTensor{name, p.Part(i, part), transposed})
		}
	}
	return out, nil
}
