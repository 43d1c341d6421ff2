package zoo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/loaders/gguf"
)

// A GGUF file (llama.cpp's format) is a checkpoint like a safetensors
// folder: its metadata becomes the family's config.json, and each tensor
// the model declares is found under its llama.cpp name. What an
// architecture's metadata and names are, and where llama.cpp's layout
// differs from the declared one (llama's permuted Q/K rows, Gemma's
// stored 1 + w norms), is the family's (its GGUF, registered with
// RegisterGGUF); the reading, binding and undoing are here, the same for
// every family, and the families' model code is the same for both
// formats. Stacked experts are no difference: a MoE declares them
// stacked, as ffn_*_exps store them.

// ggufConfig writes the config.json of a GGUF file's architecture.
func ggufConfig(f *gguf.File) (ggufFormat, []byte, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return ggufFormat{}, nil, err
	}
	a, ok := ggufFormats[arch]
	if !ok {
		return a, nil, fmt.Errorf("%s: general.architecture %q is not supported (supported: %s)", f.Path, arch, strings.Join(SupportedGGUF(), ", "))
	}
	c := ConfigMap{"model_type": a.modelType}
	if err := a.Config(GGUFMeta{f, arch}, c); err != nil {
		return a, nil, err
	}
	for field, key := range map[string]string{"eos_token_id": "tokenizer.ggml.eos_token_id", "bos_token_id": "tokenizer.ggml.bos_token_id"} {
		if f.Has(key) {
			v, err := f.Uint(key)
			if err != nil {
				return a, nil, err
			}
			c[field] = v
		}
	}
	if _, ok := c["eos_token_id"]; !ok {
		return a, nil, fmt.Errorf("%s: no tokenizer.ggml.eos_token_id", f.Path)
	}
	b, err := json.Marshal(c)
	return a, b, err
}

// GGUFConfigJSON is the config.json a GGUF file's metadata gives.
func GGUFConfigJSON(path string) ([]byte, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, b, err := ggufConfig(f)
	return b, err
}

// GGUFPath returns the GGUF file a model path names: the path itself when
// it ends in .gguf, or a folder's model.gguf when the folder has no
// config.json.
func GGUFPath(path string) (string, bool) {
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		return path, true
	}
	if _, err := os.Stat(filepath.Join(path, "config.json")); err == nil {
		return "", false
	}
	p := filepath.Join(path, "model.gguf")
	if _, err := os.Stat(p); err == nil {
		return p, true
	}
	return "", false
}

// LoadGGUF loads a model from a GGUF file: the config from its metadata,
// every declared tensor from its llama.cpp name.
func LoadGGUF(path string, progress func(done, total int64)) (Model, error) {
	return LoadGGUFContext(context.Background(), path, progress)
}

// LoadGGUFContext is LoadGGUF that stops when ctx is done: before each
// tensor, with an error that wraps ctx.Err() and names the file, which is
// closed.
func LoadGGUFContext(ctx context.Context, path string, progress func(done, total int64)) (Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: loading stopped: %w", path, err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	return LoadGGUFFileContext(ctx, f, progress)
}

// LoadGGUFFileContext is LoadGGUFContext on a file already open (whose
// tokenizer metadata a caller read, say): the model keeps f's mapping (not
// its metadata) and unmaps it once its weights are unreachable; on error f
// is closed.
func LoadGGUFFileContext(ctx context.Context, f *gguf.File, progress func(done, total int64)) (Model, error) {
	m, err := loadGGUF(ctx, f, progress)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

func loadGGUF(ctx context.Context, f *gguf.File, progress func(done, total int64)) (Model, error) {
	format, cfgJSON, err := ggufConfig(f)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(cfgJSON)
	if err != nil {
		return nil, fmt.Errorf("%s: the config its metadata gives: %w", f.Path, err)
	}
	m, ps, err := declare(cfg)
	if err != nil {
		return nil, err
	}
	var fields ConfigMap
	if err := json.Unmarshal(cfgJSON, &fields); err != nil {
		return nil, err
	}
	err = loadAll(ctx, f.Path, ps, f.Mapping(), progress, func(p *graphs.Param) error {
		t, ok := format.Tensor(fields, p)
		if !ok {
			return fmt.Errorf("%s: no GGUF name for tensor %q of a %s model", f.Path, p.Name, format.arch)
		}
		return loadGGUFParam(f, p, t)
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// loadGGUFParam sets p from GGUF tensor name, undoing llama.cpp's layout
// where it differs. A stacked expert weight is bound whole, in place in
// the mapping, as any matrix: expert e's rows are slice e.
func loadGGUFParam(f *gguf.File, p *graphs.Param, at GGUFTensor) error {
	name, hd := at.Name, at.PermutedHeads
	t, ok := f.Tensor(name)
	if !ok {
		return fmt.Errorf("%s: missing tensor %q (for %s)", f.Path, name, p.Name)
	}
	shape, data := t.Shape(), f.Data(t)
	if !slices.Equal(shape, p.Shape) {
		return fmt.Errorf("%s: tensor %q has shape %v, the metadata implies %v (for %s)", f.Path, name, shape, p.Shape, p.Name)
	}
	if err := checkPermuted(p, at); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	permuted := hd != 0
	dt, ok := ggufDType(t.Type)
	if p.Role != graphs.Matrix || !ok || at.Offset != 0 {
		// Vectors are widened once, as from safetensors.
		v := make([]float32, p.Numel())
		if err := gguf.Dequantize(t.Type, data, v); err != nil {
			return fmt.Errorf("%s: tensor %q: %w", f.Path, name, err)
		}
		if at.Offset != 0 {
			for i := range v {
				v[i] -= at.Offset
			}
		}
		if permuted {
			v = graphs.UnpermuteHeadRows(v, p.Shape[0], p.Shape[1], hd)
		}
		return p.Set(graphs.F32, tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(v)))
	}
	// Matrices stay in their stored type, in place in the mapping. A
	// permuted one stays permuted too (graphs.Param.PermutedHeads: the
	// Linear reorders its output, a few values per token, instead of the
	// load copying the weight), unless it has a bias, which the Linear
	// adds in the declared order: that one is copied, whole rows (whole
	// blocks) at a time.
	keepPermuted := false
	if permuted {
		if _, biased := f.Tensor(strings.TrimSuffix(name, ".weight") + ".bias"); biased {
			data = graphs.UnpermuteHeadRows(data, p.Shape[0], len(data)/p.Shape[0], hd)
		} else {
			keepPermuted = true
		}
	}
	stored, err := dt.StoredShape(p.Shape)
	if err != nil {
		return fmt.Errorf("%s: tensor %q: %w", f.Path, name, err)
	}
	var backing any
	switch dt.Storage() {
	case tensor.Float32:
		v, ok := loaders.Float32View(data)
		if !ok {
			v = make([]float32, p.Numel())
			if err := gguf.Dequantize(t.Type, data, v); err != nil {
				return err
			}
		}
		backing = v
	case tensor.Uint16:
		v, ok := loaders.Uint16View(data)
		if !ok {
			v = make([]uint16, len(data)/2)
			for i := range v {
				v[i] = uint16(data[2*i]) | uint16(data[2*i+1])<<8
			}
		}
		backing = v
	default:
		backing = data
	}
	if err := p.Set(dt, tensor.New(tensor.WithShape(stored...), tensor.WithBacking(backing))); err != nil {
		return err
	}
	if keepPermuted {
		p.PermutedHeads = hd
	}
	return nil
}

// checkPermuted checks that a tensor stored with permuted heads is a
// matrix of whole heads.
func checkPermuted(p *graphs.Param, t GGUFTensor) error {
	hd := t.PermutedHeads
	if hd != 0 && (hd < 0 || len(p.Shape) != 2 || p.Shape[0]%hd != 0) {
		return fmt.Errorf("tensor %q has shape %v, not whole heads of %d rows", t.Name, p.Shape, hd)
	}
	return nil
}

// ggufDType is the zoo's storage type for a GGUF tensor type.
func ggufDType(t gguf.Type) (graphs.DType, bool) {
	switch t {
	case gguf.TypeF32:
		return graphs.F32, true
	case gguf.TypeF16:
		return graphs.F16, true
	case gguf.TypeBF16:
		return graphs.BF16, true
	}
	if f, ok := t.Format(); ok {
		return graphs.QuantDType(f), true
	}
	return 0, false
}
