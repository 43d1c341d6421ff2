package train

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/nlpodyssey/safetensors"

	"github.com/gozoo/gozoo/loaders"
)

// OptimizerFile is the file beside a checkpoint that holds AdamW's state,
// so that training continued from the checkpoint goes on with warm
// moments instead of restarting them from zero.
const OptimizerFile = "optimizer.safetensors"

// SaveState writes the optimizer's state to path as safetensors: for each
// weight, exp_avg.<name> and exp_avg_sq.<name> (torch's names for the two
// moments, float32, shaped as the weight) and "step", the number of
// updates made (int64 [1]), which the bias corrections depend on. The
// file is written beside path and renamed into place.
func (o *AdamW) SaveState(path string) error {
	views := map[string]safetensors.View{}
	for _, p := range o.params {
		shape := make([]uint64, len(p.Shape))
		for i, d := range p.Shape {
			shape[i] = uint64(d)
		}
		views["exp_avg."+p.Name] = f32View{o.m[p.Name], shape}
		views["exp_avg_sq."+p.Name] = f32View{o.v[p.Name], shape}
	}
	views["step"] = i64View{int64(o.t)}
	f, err := os.CreateTemp(filepath.Dir(path), ".optimizer.*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	err = safetensors.SerializeToWriter(views, map[string]string{"format": "pt", "optimizer": "AdamW"}, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// LoadState restores what SaveState wrote. Every weight the optimizer
// holds must have both moments in the file, in its size; an error names
// the file and the tensor at fault, and leaves the optimizer as it was.
func (o *AdamW) LoadState(path string) error {
	f, err := loaders.OpenSafetensors(path)
	if err != nil {
		return err
	}
	defer f.Close()
	steps, _, err := f.ReadInt64("step")
	if err != nil {
		return err
	}
	if len(steps) != 1 || steps[0] < 0 || steps[0] > math.MaxInt32 {
		return fmt.Errorf("%s: tensor \"step\" holds %v, want one step count", path, steps)
	}
	m, v := map[string][]float32{}, map[string][]float32{}
	for _, p := range o.params {
		for _, k := range []struct {
			name string
			into map[string][]float32
		}{{"exp_avg." + p.Name, m}, {"exp_avg_sq." + p.Name, v}} {
			if !f.Has(k.name) {
				return fmt.Errorf("%s: no tensor %q for weight %q", path, k.name, p.Name)
			}
			dst := make([]float32, p.Numel())
			if err := f.ReadFloat32(k.name, dst); err != nil {
				return err
			}
			k.into[p.Name] = dst
		}
	}
	o.m, o.v, o.t = m, v, int(steps[0])
	return nil
}

// f32View and i64View hand the safetensors writer their bytes.
type f32View struct {
	data  []float32
	shape []uint64
}

func (v f32View) DType() safetensors.DType { return safetensors.F32 }
func (v f32View) Shape() []uint64          { return v.shape }
func (v f32View) DataLen() uint64          { return 4 * uint64(len(v.data)) }
func (v f32View) Data() []byte {
	out := make([]byte, 4*len(v.data))
	for i, x := range v.data {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

type i64View struct{ x int64 }

func (v i64View) DType() safetensors.DType { return safetensors.I64 }
func (v i64View) Shape() []uint64          { return []uint64{1} }
func (v i64View) DataLen() uint64          { return 8 }
func (v i64View) Data() []byte             { return binary.LittleEndian.AppendUint64(nil, uint64(v.x)) }
