// Package zoo loads checkpoints into runnable Gorgonia models: Hugging Face
// folders by the model_type their config.json names, and llama.cpp's GGUF
// files (gguf.go), whose metadata becomes the family's config and whose
// tensors are found under their llama.cpp names.
//
// Each model family lives in its own package (zoo/qwen3, ...) and registers
// itself from init(); import github.com/gozoo/gozoo/zoo/all to get them all.
// A family provides a config type decoded from config.json whose New
// declares the model's tensors through a graphs.Scope, by their Hugging
// Face names, and returns the model holding them: the checkpoint's tensor
// list is what the model declared, so the two cannot disagree. Loading
// (Load, LoadContext), random initialisation (NewRandom) and writing
// checkpoints (WriteCheckpoint, and WriteGGUF for gozoo quantize) are
// shared here and work the same for every family.
package zoo

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/procstat"
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

// Config is a model family's decoded config.json, validated once by the
// family's ParseFunc: New relies on it.
type Config interface {
	// New declares the model's tensors in p, by their Hugging Face names
	// relative to p, and returns the model that uses them. It is the one
	// place for checkpoint quirks (a tied head uses the embedding's
	// tensor; nothing is declared twice). The tensors have no data yet:
	// Load, NewRandom or Rebind give it.
	New(p graphs.Scope) (Model, error)
	// InitializerRange is the std of random weights (config's initializer_range).
	InitializerRange() float64
}

// Layout is implemented by a family whose checkpoints store tensors under
// other names or in another layout than its model declares: GPT-2's
// Conv1D weights are stored [in, out], the transpose of a Linear, and
// under a "transformer." prefix or none. It is the family's one place for
// such checkpoint quirks; model code sees only the declared layout. A
// family's GGUF files (llama.cpp's names and layout) are its GGUF's.
type Layout interface {
	// Stored gives a declared tensor's name in the checkpoint and whether
	// it is stored transposed (a 2-D tensor, [in, out]). has tells which
	// names the checkpoint holds, so a family can tell naming styles
	// apart; a checkpoint being written has none.
	Stored(declared string, has func(name string) bool) (name string, transposed bool)
}

// stored is the checkpoint name and layout of a declared tensor.
func stored(cfg Config, declared string, has func(string) bool) (string, bool) {
	if l, ok := cfg.(Layout); ok {
		return l.Stored(declared, has)
	}
	return declared, false
}

// Tensors lists every tensor a config's checkpoint must hold, in
// declaration order: what its model declares. A stacked expert weight
// may be held as one tensor per expert instead, the names its Parts
// list (see zoo/experts.go).
func Tensors(cfg Config) ([]*graphs.Param, error) {
	_, ps, err := declare(cfg)
	if err != nil {
		return nil, err
	}
	return ps.All(), nil
}

// declare runs a config's declaration on a fresh parameter set, turning a
// panic in model construction (an impossible config) into an error. The
// declaration allocates no weights, only their names and shapes (whose
// counts loaders.CheckConfigSizes bounds); it is refused when a tensor's
// size overflows or the parameters total more than
// loaders.MaxParameters, so that no caller ever sizes an allocation by an
// overflowed count.
func declare(cfg Config) (m Model, ps *graphs.Params, err error) {
	ps = graphs.NewParams()
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("declaring the model's tensors: %v", r)
		}
	}()
	if m, err = cfg.New(ps.Root()); err != nil {
		return nil, ps, err
	}
	if err := checkDeclared(ps.All()); err != nil {
		return nil, ps, err
	}
	nameExpertParts(ps.All())
	none := func(string) bool { return false }
	for _, p := range ps.All() {
		_, p.Transposed = stored(cfg, p.Name, none)
	}
	return m, ps, nil
}

// checkDeclared sums the declared tensors' sizes with overflow checks.
func checkDeclared(params []*graphs.Param) error {
	var total int64
	var largest *graphs.Param
	var largestN int64
	for _, p := range params {
		n := int64(1)
		for _, d := range p.Shape {
			if d <= 0 || n > math.MaxInt64/int64(d) {
				return fmt.Errorf("config.json's sizes give tensor %q the shape %v, whose size overflows", p.Name, p.Shape)
			}
			n *= int64(d)
		}
		if n > largestN {
			largest, largestN = p, n
		}
		if total > loaders.MaxParameters-n {
			return fmt.Errorf("config.json's sizes imply more than %d parameters (tensor %q alone has shape %v), the most a model may have", int64(loaders.MaxParameters), largest.Name, largest.Shape)
		}
		total += n
	}
	return nil
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
// tensor against the shapes the config implies, and builds the model. A
// path ending in .gguf, or a folder holding model.gguf and no config.json,
// loads the GGUF file instead (see LoadGGUF).
func Load(dir string) (Model, error) { return LoadWithProgress(dir, nil) }

// LoadWithProgress is Load reporting, after each tensor, how many of the
// weights' values are loaded so far out of the total.
func LoadWithProgress(dir string, progress func(done, total int64)) (Model, error) {
	return LoadContext(context.Background(), dir, progress)
}

// LoadContext is LoadWithProgress that stops when ctx is done: between
// the steps of the load and between tensors, with an error that wraps
// ctx.Err() and names the checkpoint. Nothing it opened stays open.
func LoadContext(ctx context.Context, dir string, progress func(done, total int64)) (Model, error) {
	if path, ok := GGUFPath(dir); ok {
		return LoadGGUFContext(ctx, path, progress)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: loading stopped: %w", dir, err)
	}
	_, data, err := loaders.ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	return LoadConfigContext(ctx, dir, data, progress)
}

// LoadConfig is LoadWithProgress with config.json's bytes already read.
func LoadConfig(dir string, configJSON []byte, progress func(done, total int64)) (Model, error) {
	return LoadConfigContext(context.Background(), dir, configJSON, progress)
}

// LoadConfigContext is LoadConfig that stops when ctx is done, as
// LoadContext does.
func LoadConfigContext(ctx context.Context, dir string, configJSON []byte, progress func(done, total int64)) (Model, error) {
	cfg, err := ParseConfig(configJSON)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return LoadWeightsContext(ctx, dir, cfg, progress)
}

// LoadWeights loads cfg's tensors from the safetensors in dir. Matrices
// keep their stored type (F32, BF16, F16) and are used in place in the
// file's memory mapping (copied once only where the file misaligns them,
// or where a MoE's experts, stored one tensor each, are stacked into one);
// norm and bias vectors are widened to float32. The mapping lives as long
// as the model's parameters. progress may be nil.
//
// Every declared tensor is checked against the checkpoint (present, of
// the shape config.json implies, of a supported dtype) before any is
// read, and the memory the load itself allocates (widened vectors,
// transposed or misaligned copies) against procstat.AvailableMemory: a
// config.json whose sizes disagree with the tensors present allocates
// nothing by those sizes.
func LoadWeights(dir string, cfg Config, progress func(done, total int64)) (Model, error) {
	return LoadWeightsContext(context.Background(), dir, cfg, progress)
}

// LoadWeightsContext is LoadWeights that stops when ctx is done: before
// each tensor, with an error that wraps ctx.Err(), naming the checkpoint
// and how far the load got; the checkpoint's files are closed.
func LoadWeightsContext(ctx context.Context, dir string, cfg Config, progress func(done, total int64)) (Model, error) {
	m, ps, err := declare(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: loading stopped: %w", dir, err)
	}
	ckpt, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	if err := checkCheckpoint(ckpt, cfg, m, ps.All()); err != nil {
		ckpt.Close()
		return nil, err
	}
	err = loadAll(ctx, dir, ps, ckpt, progress, func(p *graphs.Param) error {
		if len(p.Parts) > 0 {
			return loadExperts(ckpt, cfg, p)
		}
		name, transposed := stored(cfg, p.Name, ckpt.Has)
		return loadParam(ckpt, p, name, transposed)
	})
	if err != nil {
		ckpt.Close()
		return nil, err
	}
	return m, nil
}

// loadAll binds every declared tensor through load, in declaration
// order, reporting progress after each and stopping when ctx is done
// with an error that wraps ctx.Err() and names where (the checkpoint) and
// how far the load got. On success the parameters keep src, the
// checkpoint whose memory they use, and close it once nothing reaches
// them any more; on error src is left to the caller.
func loadAll[S mappedFile](ctx context.Context, where string, ps *graphs.Params, src S, progress func(done, total int64), load func(*graphs.Param) error) error {
	params := ps.All()
	var total, done int64
	for _, p := range params {
		total += p.Numel()
	}
	for i, p := range params {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: loading stopped after %d of %d tensors: %w", where, i, len(params), err)
		}
		if err := load(p); err != nil {
			return err
		}
		p.ReadOnly = heldBy(src, p)
		if done += p.Numel(); progress != nil {
			progress(done, total)
		}
	}
	ps.Keep(src)
	// Unmap the files once nothing reaches the parameters any more.
	runtime.AddCleanup(ps, func(s S) { s.Close() }, src)
	return nil
}

// mappedFile is a checkpoint held in read-only file mappings.
type mappedFile interface {
	io.Closer
	Holds(b []byte) bool
}

// heldBy says p's data, stacked or in slices, lies in src's mapping.
func heldBy[S mappedFile](src S, p *graphs.Param) bool {
	if p.Data != nil {
		return src.Holds(storedBytes(p.Data))
	}
	for _, s := range p.Slices {
		if !src.Holds(storedBytes(s)) {
			return false
		}
	}
	return len(p.Slices) > 0
}

// storedBytes is d's data as bytes, in place.
func storedBytes(d *tensor.Dense) []byte {
	switch v := d.Data().(type) {
	case []float32:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	case []uint16:
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 2*len(v))
	case []byte:
		return v
	}
	return nil
}

// checkCheckpoint checks every declared tensor against the checkpoint,
// and the heap the load will allocate against the memory available.
func checkCheckpoint(ckpt *loaders.Checkpoint, cfg Config, m Model, params []*graphs.Param) error {
	var heap int64
	for _, p := range params {
		if len(p.Parts) > 0 {
			// A stacked expert weight: stored whole, it is checked below
			// as any tensor; else its experts are, and stacked at load.
			src, err := findExperts(ckpt, cfg, p)
			if err != nil {
				return err
			}
			if src.whole == "" {
				size, err := checkExperts(ckpt, p, src)
				if err != nil {
					return err
				}
				heap += size
				continue
			}
		}
		name, transposed := stored(cfg, p.Name, ckpt.Has)
		want := p.Shape
		if transposed {
			if len(p.Shape) != 2 {
				return fmt.Errorf("tensor %q: only 2-D tensors are stored transposed, it has shape %v", p.Name, p.Shape)
			}
			want = []int{p.Shape[1], p.Shape[0]}
		}
		if !ckpt.Has(name) {
			return fmt.Errorf("%s: missing tensor %q: config.json's sizes (num_hidden_layers %d) imply %d tensors, the checkpoint holds %d",
				ckpt.FileOf(name), name, m.NumLayers(), len(params), ckpt.Len())
		}
		dtype, data, err := ckpt.Tensor(name, want)
		if err != nil {
			if _, got, ierr := ckpt.Info(name); ierr == nil {
				return fmt.Errorf("%w%s", err, sizeHint(m, name, got, want))
			}
			return err
		}
		n := p.Numel() // the shape matched the file's, so this is in range
		var size int64
		switch dtype {
		case "F32":
			size = 4
			if _, ok := loaders.Float32View(data); ok && !transposed {
				size = 0
			}
		case "BF16", "F16":
			size = 2
			if _, ok := loaders.Uint16View(data); ok && !transposed {
				size = 0
			}
		default:
			return fmt.Errorf("%s: tensor %q has dtype %s; only F32, BF16 and F16 weights are supported", ckpt.FileOf(name), name, dtype)
		}
		if transposed {
			size *= 2 // read, then transposed into a new slice
		}
		if p.Role != graphs.Matrix {
			size = 4 // widened to float32
		}
		heap += size * n
	}
	if avail, ok := procstat.AvailableMemory(); ok && heap > avail {
		return fmt.Errorf("%s: loading needs %d MiB for widened and transposed tensors, more than the %d MiB of memory available", ckpt.Dir, heap>>20, avail>>20)
	}
	return nil
}

// sizeHint names the config.json field a mismatched dimension comes
// from, where the model reports it: vocab_size, hidden_size, or
// max_position_embeddings for a table of learned positions.
func sizeHint(m Model, name string, got, want []int) string {
	if len(got) != len(want) {
		return ""
	}
	positions := strings.Contains(name, "position") || strings.Contains(name, "wpe")
	for i := range want {
		switch {
		case got[i] == want[i]:
		case want[i] == m.VocabSize():
			return fmt.Sprintf(" (%d is config.json's vocab_size)", want[i])
		case want[i] == m.HiddenSize():
			return fmt.Sprintf(" (%d is config.json's hidden_size)", want[i])
		case want[i] == m.MaxPositions() && positions:
			return fmt.Sprintf(" (%d is config.json's max_position_embeddings)", want[i])
		}
	}
	return ""
}

func loadParam(ckpt *loaders.Checkpoint, p *graphs.Param, name string, transposed bool) error {
	want := p.Shape
	if transposed {
		if len(p.Shape) != 2 {
			return fmt.Errorf("tensor %q: only 2-D tensors are stored transposed, it has shape %v", p.Name, p.Shape)
		}
		want = []int{p.Shape[1], p.Shape[0]}
	}
	dtype, data, err := ckpt.Tensor(name, want)
	if err != nil {
		return err
	}
	shape := tensor.WithShape(p.Shape...)
	if p.Role != graphs.Matrix {
		// Vectors are read by every op as float32 and are a negligible
		// share of the bytes: widen them once.
		v := make([]float32, p.Numel())
		if err := ckpt.ReadFloat32(name, v); err != nil {
			return err
		}
		return p.Set(graphs.F32, tensor.New(shape, tensor.WithBacking(v)))
	}
	switch dtype {
	case "F32":
		v, ok := loaders.Float32View(data)
		if !ok || transposed {
			v = make([]float32, p.Numel())
			if err := ckpt.ReadFloat32(name, v); err != nil {
				return err
			}
		}
		if transposed {
			v = transpose(v, want[0], want[1])
		}
		return p.Set(graphs.F32, tensor.New(shape, tensor.WithBacking(v)))
	case "BF16", "F16":
		dt := graphs.BF16
		if dtype == "F16" {
			dt = graphs.F16
		}
		v, ok := loaders.Uint16View(data)
		if !ok || transposed {
			v = make([]uint16, len(data)/2)
			for i := range v {
				v[i] = binary.LittleEndian.Uint16(data[2*i:])
			}
		}
		if transposed {
			v = transpose(v, want[0], want[1])
		}
		return p.Set(dt, tensor.New(shape, tensor.WithBacking(v)))
	}
	return fmt.Errorf("%s: tensor %q has dtype %s; only F32, BF16 and F16 weights are supported", ckpt.FileOf(name), name, dtype)
}

// transpose returns the [cols, rows] transpose of a row-major [rows, cols]
// matrix, in a new slice (a transposed checkpoint tensor cannot be used in
// place).
func transpose[T any](v []T, rows, cols int) []T {
	out := make([]T, len(v))
	for r := 0; r < rows; r++ {
		for c, x := range v[r*cols : (r+1)*cols] {
			out[c*rows+r] = x
		}
	}
	return out
}

// Rebind builds cfg's model over the weights of another loaded model with
// the same tensors (for example a config edited to slide some layers):
// nothing is copied.
func Rebind(cfg Config, from *graphs.Params) (Model, error) {
	m, ps, err := declare(cfg)
	if err != nil {
		return nil, err
	}
	for _, p := range ps.All() {
		src, ok := from.Get(p.Name)
		if !ok || !src.HasData() {
			return nil, fmt.Errorf("missing tensor %q", p.Name)
		}
		var err error
		if src.Data != nil {
			err = p.Set(src.DType, src.Data)
		} else {
			err = p.SetSlices(src.DType, src.Slices)
		}
		if err != nil {
			return nil, err
		}
		p.Parts = src.Parts // named as the checkpoint it came from names it
	}
	ps.Keep(from)
	return m, nil
}
