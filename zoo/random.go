package zoo

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/nlpodyssey/safetensors"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/procstat"
)

// RandomTensor fills a tensor as HF's _init_weights would, by what the
// tensor is: N(0, std) for matrices, ones for norms, zeros for biases and
// Gemma's (1 + w) norms. The values depend only on seed and the tensor's
// name, so they are the same whichever order tensors are made in, in
// memory or written to a checkpoint.
func RandomTensor(p *graphs.Param, std float64, seed uint64) []float32 {
	out := make([]float32, p.Numel())
	switch p.Role {
	case graphs.Norm:
		for i := range out {
			out[i] = 1
		}
	case graphs.OffsetNorm, graphs.Bias:
	default:
		if len(p.Parts) > 0 {
			// A stacked weight draws each slice as the tensor its part
			// names: the values a per-expert checkpoint gets.
			n := len(out) / len(p.Parts)
			for i, name := range p.Parts {
				copy(out[i*n:(i+1)*n], RandomTensor(p.Part(i, name), std, seed))
			}
			break
		}
		h := fnv.New64a()
		h.Write([]byte(p.Name))
		r := rand.New(rand.NewPCG(seed, h.Sum64()))
		for i := range out {
			out[i] = float32(r.NormFloat64() * std)
		}
	}
	return out
}

// NewRandom builds a model with random float32 weights from a config, in
// memory: for tests and experiments that need a model of a given shape
// but no file.
func NewRandom(cfg Config, seed uint64) (Model, error) {
	m, ps, err := declare(cfg)
	if err != nil {
		return nil, err
	}
	// Every value becomes a float32: refuse up front what cannot fit.
	var n int64
	for _, p := range ps.All() {
		n += p.Numel() // declare bounded the total
	}
	if avail, ok := procstat.AvailableMemory(); ok && 4*n > avail {
		return nil, fmt.Errorf("a random model of %d parameters needs %d MiB as float32, more than the %d MiB of memory available", n, 4*n>>20, avail>>20)
	}
	for _, p := range ps.All() {
		data := RandomTensor(p, cfg.InitializerRange(), seed)
		if err := p.Set(graphs.F32, tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(data))); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// WriteRandomCheckpoint writes an HF-format checkpoint with random weights
// for configJSON into dir: config.json (as given) and model.safetensors in
// F32 or BF16. Tensors are generated one at a time while the file is
// written, so memory stays at about one tensor.
func WriteRandomCheckpoint(configJSON []byte, dir, dtype string, seed uint64) error {
	cfg, err := ParseConfig(configJSON)
	if err != nil {
		return err
	}
	var dt safetensors.DType
	switch dtype {
	case "f32", "F32", "float32":
		dt = safetensors.F32
	case "bf16", "BF16", "bfloat16":
		dt = safetensors.BF16
	default:
		return fmt.Errorf("dtype %q is not supported (supported: f32, bf16)", dtype)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), configJSON, 0o644); err != nil {
		return err
	}
	params, err := Tensors(cfg)
	if err != nil {
		return err
	}
	// Tensors are made one at a time: the largest, as float32 plus its
	// encoding (twice when transposed), must fit.
	var largest int64
	for _, p := range params {
		largest = max(largest, p.Numel())
	}
	if avail, ok := procstat.AvailableMemory(); ok && largest*16 > avail {
		return fmt.Errorf("the largest tensor (%d values) needs %d MiB to write, more than the %d MiB of memory available", largest, largest*16>>20, avail>>20)
	}
	tensors, err := writtenTensors(cfg, params, func(decl *graphs.Param) (*graphs.Param, error) { return decl, nil })
	if err != nil {
		return err
	}
	views := map[string]*valuesView{}
	for _, t := range tensors {
		param, std := t.param, cfg.InitializerRange()
		views[t.name] = &valuesView{param: param, dtype: dt, transposed: t.transposed,
			values: func() []float32 { return RandomTensor(param, std, seed) }}
	}
	path := filepath.Join(dir, "model.safetensors")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := safetensors.SerializeToWriter(views, map[string]string{"format": "pt"}, f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// bf16 rounds a float32 to bfloat16 (round to nearest even, as torch does).
func bf16(x float32) uint16 {
	b := math.Float32bits(x)
	if x != x { // NaN: keep it a NaN
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
