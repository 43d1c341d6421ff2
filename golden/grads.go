package golden

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
)

// gradsMeta is what the gradient check reads from grads.json (format:
// ../shared/golden/README.md, "Gradients").
type gradsMeta struct {
	Loss struct {
		F32 float64 `json:"f32"`
	} `json:"loss"`
	Tolerance struct {
		Rtol     float64 `json:"rtol"`
		Floor    float64 `json:"floor"`
		LossAtol float64 `json:"loss_atol"`
	} `json:"tolerance"`
}

// gradsFile is the reference gradients' file in a case folder.
const gradsFile = "grads.safetensors"

// checkGrads compares the loss of ids and its gradients with the case's
// grads.safetensors, when the folder has one: for every tensor X,
// max|g - ref| <= rtol · max(max|ref|, floor), and |loss - loss.f32| <=
// loss_atol. r.GradsMaxRel gets the largest max|g - ref| / max(max|ref|,
// floor), the figure rtol bounds.
func checkGrads(dir string, model zoo.Model, ids []int, r *Result) error {
	path := filepath.Join(dir, gradsFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "grads.json"))
	if err != nil {
		return fmt.Errorf("%s has no grads.json: %w", gradsFile, err)
	}
	var m gradsMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("grads.json: %w", err)
	}
	tol := m.Tolerance
	if tol.Rtol <= 0 || tol.Floor <= 0 || tol.LossAtol <= 0 {
		return fmt.Errorf("grads.json: tolerance rtol %g, floor %g and loss_atol %g must be positive", tol.Rtol, tol.Floor, tol.LossAtol)
	}
	ref, err := loaders.OpenSafetensors(path)
	if err != nil {
		return err
	}
	defer ref.Close()

	got, err := train.LossAndGradients(model, ids)
	if err != nil {
		return fmt.Errorf("gradients: %w", err)
	}
	r.GradsChecked = true
	if d := math.Abs(got.Loss - m.Loss.F32); !(d <= tol.LossAtol) {
		return fmt.Errorf("loss %.9g differs from grads.json's %.9g by %.3g > %g", got.Loss, m.Loss.F32, d, tol.LossAtol)
	}
	names := ref.Names()
	for name := range got.Weights {
		if !slices.Contains(names, name) {
			return fmt.Errorf("%s has no gradient for weight %q", gradsFile, name)
		}
	}
	worst, failed := "", 0
	for _, name := range names {
		want, shape, err := ref.Float32s(name)
		if err != nil {
			return err
		}
		g := got.InputsEmbeds
		if name != "inputs_embeds_grad" {
			g = got.Weights[name]
		}
		if g == nil {
			return fmt.Errorf("no gradient computed for %q", name)
		}
		if !slices.Equal([]int(g.Shape()), shape) {
			return fmt.Errorf("gradient of %q has shape %v, %s has %v", name, g.Shape(), gradsFile, shape)
		}
		var refMax float64
		for _, v := range want {
			refMax = max(refMax, math.Abs(float64(v)))
		}
		scale := max(refMax, tol.Floor)
		rel := MaxAbsDiff(g.Data().([]float32), want) / scale
		if rel > r.GradsMaxRel || math.IsInf(rel, 1) || worst == "" {
			r.GradsMaxRel, worst = rel, name
		}
		if !(rel <= tol.Rtol) {
			failed++
		}
	}
	// Name the worst tensor and count the others: a mismatch confined to
	// one kind of tensor localises the bug.
	if failed > 0 {
		return fmt.Errorf("gradients of %d of %d tensors differ by more than rtol %g; worst %q by %.3g x max(max|ref|, floor %g)", failed, len(names), tol.Rtol, worst, r.GradsMaxRel, tol.Floor)
	}
	return nil
}
