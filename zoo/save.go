package zoo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/nlpodyssey/safetensors"

	"github.com/gozoo/gozoo/graphs"
)

// WriteCheckpoint writes a model's weights as an HF-format checkpoint into
// dir: config.json (configJSON as given) and model.safetensors with every
// tensor the config declares, taken from ps by name and stored as F32
// under its checkpoint name and layout (GPT-2's Conv1D weights
// transposed, a MoE's stacked experts as one tensor per expert), so that
// Load and transformers read it back. 16-bit and quantized weights are
// widened to float32. model.safetensors is written to a temporary file
// and renamed into place, so a checkpoint being overwritten (one the
// model was loaded from and still maps) is never seen half written.
func WriteCheckpoint(dir string, configJSON []byte, ps *graphs.Params) error {
	return WriteCheckpointAs(dir, configJSON, ps, safetensors.F32)
}

// WriteCheckpointAs is WriteCheckpoint with the tensors stored as dtype:
// F32, or BF16 (rounded to nearest even, as torch's .to(torch.bfloat16)
// does), which halves the file of a model meant to be shipped rather than
// trained on.
func WriteCheckpointAs(dir string, configJSON []byte, ps *graphs.Params, dtype safetensors.DType) error {
	if dtype != safetensors.F32 && dtype != safetensors.BF16 {
		return fmt.Errorf("writing %s: tensors are stored as F32 or BF16, not %s", dir, dtype)
	}
	cfg, err := ParseConfig(configJSON)
	if err != nil {
		return err
	}
	params, err := Tensors(cfg)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors.index.json")); err == nil {
		return fmt.Errorf("%s holds a sharded checkpoint (model.safetensors.index.json), which a single model.safetensors would not replace", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// Stacked experts are written one tensor per expert (writtenTensors).
	tensors, err := writtenTensors(cfg, params, func(decl *graphs.Param) (*graphs.Param, error) {
		p, ok := ps.Get(decl.Name)
		if !ok || !p.HasData() {
			return nil, fmt.Errorf("writing %s: the model has no tensor %q", dir, decl.Name)
		}
		if !slices.Equal(p.Shape, decl.Shape) {
			return nil, fmt.Errorf("writing %s: tensor %q has shape %v, config.json declares %v", dir, decl.Name, p.Shape, decl.Shape)
		}
		return p, nil
	})
	if err != nil {
		return err
	}
	views := map[string]*valuesView{}
	for _, t := range tensors {
		param := t.param
		views[t.name] = &valuesView{param: param, dtype: dtype, transposed: t.transposed, values: param.Float32s}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), configJSON, 0o644); err != nil {
		return err
	}
	path := filepath.Join(dir, "model.safetensors")
	f, err := os.CreateTemp(dir, ".model.safetensors.*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := safetensors.SerializeToWriter(views, map[string]string{"format": "pt"}, f); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// valuesView writes a parameter's values, made only when the writer asks
// for its bytes (the parameter's own, or random ones), as F32 or BF16 in
// the checkpoint's layout.
type valuesView struct {
	param      *graphs.Param
	dtype      safetensors.DType
	transposed bool // stored [in, out] (see Layout)
	values     func() []float32
}

func (v *valuesView) DType() safetensors.DType { return v.dtype }
func (v *valuesView) Shape() []uint64 {
	s := make([]uint64, len(v.param.Shape))
	for i, d := range v.param.Shape {
		s[i] = uint64(d)
	}
	if v.transposed {
		s[0], s[1] = s[1], s[0]
	}
	return s
}
func (v *valuesView) DataLen() uint64 { return uint64(v.dtype.Size()) * uint64(v.param.Numel()) }
func (v *valuesView) Data() []byte {
	vals := v.values()
	if v.transposed {
		vals = transpose(vals, v.param.Shape[0], v.param.Shape[1])
	}
	if v.dtype == safetensors.BF16 {
		out := make([]byte, 2*len(vals))
		for i, x := range vals {
			binary.LittleEndian.PutUint16(out[2*i:], bf16(x))
		}
		return out
	}
	out := make([]byte, 4*len(vals))
	for i, x := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}
