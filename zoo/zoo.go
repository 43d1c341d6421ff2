// Package zoo loads Hugging Face checkpoints into runnable Gorgonia models,
// by the model_type their config.json names.
//
// Each model family lives in its own package (zoo/qwen3, ...) and registers
// itself from init(); import github.com/gozoo/gozoo/zoo/all to get them all.
// A family provides a config type decoded from config.json that lists the
// tensors the checkpoint must hold (TensorSpec) and builds the model from
// them (Config.Build: the one place for checkpoint quirks such as tied
// heads). Loading, random initialisation and writing checkpoints are shared
// here and work the same for every family.
package zoo

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
)

// Model is a loaded model, ready to run through graphs.NewSession.
type Model interface {
	graphs.Model
	// ModelType is config.json's model_type.
	ModelType() string
	// EOSTokenIDs are the ids config.json names as end of sequence.
	EOSTokenIDs() []int
}

// Init says how NewRandom fills a tensor.
type Init int

const (
	InitNormal Init = iota // N(0, initializer_range), as HF's _init_weights
	InitOnes               // RMSNorm weights
	InitZeros              // biases, Gemma's (1+w) norms
)

// TensorSpec is one tensor a checkpoint must hold.
type TensorSpec struct {
	Name string
	// Shape in the checkpoint's (PyTorch) layout.
	Shape []int
	// Linear marks [out, in] weights the loader transposes to [in, out].
	Linear bool
	Init   Init
}

// Config is a model family's decoded config.json.
type Config interface {
	// Tensors lists every tensor the checkpoint must hold.
	Tensors() []TensorSpec
	// Build assembles the model from loaded (or random) weights.
	Build(w graphs.Weights) (Model, error)
	// InitializerRange is the std of random weights (config's initializer_range).
	InitializerRange() float64
}

// ParseFunc decodes a family's config.json.
type ParseFunc func(data []byte) (Config, error)

var families = map[string]ParseFunc{}

// Register makes a model_type loadable. Families call it from init().
func Register(modelType string, parse ParseFunc) {
	if _, dup := families[modelType]; dup {
		panic("zoo: model_type registered twice: " + modelType)
	}
	families[modelType] = parse
}

// Supported lists the registered model types, sorted.
func Supported() []string {
	out := make([]string, 0, len(families))
	for t := range families {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// ErrUnsupported is returned (wrapped) for a model_type no family handles.
type ErrUnsupported struct{ ModelType string }

func (e *ErrUnsupported) Error() string {
	return fmt.Sprintf("model_type %q is not supported (supported: %s)", e.ModelType, strings.Join(Supported(), ", "))
}

// ParseConfig decodes a config.json of any registered model_type.
func ParseConfig(data []byte) (Config, error) {
	mt, err := loaders.ModelType(data)
	if err != nil {
		return nil, err
	}
	parse, ok := families[mt]
	if !ok {
		return nil, &ErrUnsupported{mt}
	}
	cfg, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("config.json (%s): %w", mt, err)
	}
	return cfg, nil
}

// Load reads dir/config.json and the checkpoint's safetensors, checks every
// tensor against the shapes the config implies, and builds the model.
func Load(dir string) (Model, error) { return LoadWithProgress(dir, nil) }

// LoadWithProgress is Load reporting, after each tensor, how many of the
// weights' values are loaded so far out of the total.
func LoadWithProgress(dir string, progress func(done, total int64)) (Model, error) {
	_, data, err := loaders.ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return LoadWeights(dir, cfg, progress)
}

// LoadWeights loads cfg's tensors from the safetensors in dir. progress may
// be nil.
func LoadWeights(dir string, cfg Config, progress func(done, total int64)) (Model, error) {
	ckpt, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer ckpt.Close()
	specs := cfg.Tensors()
	var total, done int64
	for _, s := range specs {
		total += numel(s.Shape)
	}
	w := graphs.Weights{}
	for _, spec := range specs {
		t, err := ckpt.Load(spec.Name, spec.Shape, spec.Linear)
		if err != nil {
			return nil, err
		}
		w[spec.Name] = t
		if done += numel(spec.Shape); progress != nil {
			progress(done, total)
		}
	}
	return cfg.Build(w)
}

func numel(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// SpecByName finds a tensor spec, for tests and tools.
func SpecByName(specs []TensorSpec, name string) (TensorSpec, bool) {
	i := slices.IndexFunc(specs, func(s TensorSpec) bool { return s.Name == name })
	if i < 0 {
		return TensorSpec{}, false
	}
	return specs[i], true
}
