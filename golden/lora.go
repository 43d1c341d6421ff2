package golden

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/gozoo/gozoo/zoo"
)

// adapterMeta is golden.json's adapter, the description of a LoRA case's
// adapter/ (../shared/golden/README.md, "LoRA adapter cases"); the
// greedy ids of the base alone and the adapter's effect are informative.
type adapterMeta struct {
	Folder         string   `json:"folder"`
	R              int      `json:"r"`
	Scaling        float64  `json:"scaling"`
	AdaptedModules []string `json:"adapted_modules"`
	NTensors       int      `json:"n_tensors"`
	// Effect is max |logits with the adapter - logits without|.
	Effect float64 `json:"effect_max_abs_logits"`
}

// adapterHint says, for logits off by d, whether that is about the
// adapter's whole effect: the mark of an adapter read but not applied.
func adapterHint(m *adapterMeta, d float64) string {
	if m == nil || m.Effect <= 0 || math.Abs(d-m.Effect) > 0.1*m.Effect {
		return ""
	}
	return fmt.Sprintf(" (about the adapter's whole effect, golden.json effect_max_abs_logits %.3g: is it applied?)", m.Effect)
}

// AdapterDir is the folder of a case's LoRA adapter.
const AdapterDir = "adapter"

// applyAdapter attaches dir/adapter/ (or override) to model when the case
// has one, and
// checks it against golden.json's description, so that an adapter read
// differently (another scaling, other modules) fails here, by name,
// rather than as a logits difference.
func applyAdapter(dir string, model zoo.Model, m *adapterMeta, override string) error {
	path := filepath.Join(dir, AdapterDir)
	if m != nil && m.Folder != "" {
		path = filepath.Join(dir, m.Folder)
	}
	if override != "" {
		path = override
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if m != nil {
			return fmt.Errorf("golden.json describes an adapter, but %s is missing", path)
		}
		return nil
	}
	ad, err := model.Params().LoadLoRA("adapter", path)
	if err != nil {
		return err
	}
	if m == nil {
		return nil
	}
	if s := ad.Config.Scaling(); math.Abs(s-m.Scaling) > 1e-5*m.Scaling {
		return fmt.Errorf("%s: scaling %g, golden.json says %g", path, s, m.Scaling)
	}
	if ad.Config.R != m.R {
		return fmt.Errorf("%s: r = %d, golden.json says %d", path, ad.Config.R, m.R)
	}
	want := slices.Sorted(slices.Values(m.AdaptedModules))
	if !slices.Equal(ad.Modules, want) {
		return fmt.Errorf("%s adapts %v, golden.json says %v", path, ad.Modules, want)
	}
	if n := len(ad.Params.All()); n != m.NTensors {
		return fmt.Errorf("%s holds %d factors, golden.json says %d", path, n, m.NTensors)
	}
	return nil
}
