package train

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nlpodyssey/safetensors"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

// Options configure a Trainer. Zero values take the defaults named.
type Options struct {
	// SeqLen is T, the tokens predicted per sequence: each sequence is a
	// window of T+1 consecutive tokens of the data (default 128, at most
	// the model's positions less one).
	SeqLen int
	// Batch is the number of sequences per micro-batch (default 1) and
	// Accum the micro-batches whose gradients are summed into one
	// optimizer step (default 1). A step's gradient is the mean over its
	// Batch*Accum sequences, so Batch 2 and Batch 1 with Accum 2 make the
	// same step.
	Batch, Accum int
	// Steps is the number of optimizer steps Run makes (and the length of
	// the learning rate schedule).
	Steps int
	// LR is the peak learning rate (default 1e-3), reached after Warmup
	// steps of linear warmup and decayed along a cosine to MinLR at step
	// Steps (see Schedule). Warmup < 0 means none.
	LR, MinLR float64
	Warmup    int
	// AdamW are the optimizer's hyperparameters.
	AdamW AdamWConfig
	// ClipNorm clips the global gradient norm before each update; 0 does
	// not clip.
	ClipNorm float64
	// Seed makes the order of the data: the same seed, data, model and
	// options give the same losses and weights, bit for bit.
	Seed uint64
	// Progress, when set, is called after every optimizer step.
	Progress func(Progress)
	// SaveOptimizer makes Save also write AdamW's state beside the
	// weights (optimizer.safetensors, twice the F32 weights' size), for
	// training to be continued later (LoadOptimizer).
	SaveOptimizer bool
}

// Progress reports one optimizer step.
type Progress struct {
	Step, Steps int
	// Loss is the mean next-token loss of the step's sequences (before
	// the update).
	Loss float64
	// LR is the learning rate the update used.
	LR float64
	// GradNorm is the global L2 norm of the gradient before clipping.
	GradNorm float64
	// Tokens counts the tokens run through the model so far (T+1 per
	// sequence), TokensPerSec their rate over this step.
	Tokens       int64
	TokensPerSec float64
	Elapsed      time.Duration
}

// Trainer trains a model in place on a stream of token ids: it samples
// windows of T+1 tokens at offsets drawn from Options.Seed, runs them
// through one compiled training graph, accumulates their gradients and
// updates the weights with AdamW. A Trainer is not safe for concurrent use.
type Trainer struct {
	model  graphs.Model
	tokens []int
	opt    Options
	sched  Schedule
	graph  *Graph
	adam   *AdamW
	rng    *rand.Rand
	acc    map[string]*tensor.Dense
	names  []string
	step   int
	seen   int64
	start  time.Time
	losses []float64
}

// NewTrainer prepares m for training on tokens (ids below the model's
// vocabulary, at least T+1 of them): its weights become writable float32
// copies (Trainable), and the training graph for windows of T+1 tokens is
// compiled. A model with a LoRA adapter attached (graphs.Params.NewLoRA
// or ApplyLoRA) trains the adapter only: the base stays as stored, in
// its own type, with no optimizer state and no gradient.
func NewTrainer(m graphs.Model, tokens []int, opt Options) (*Trainer, error) {
	if opt.SeqLen == 0 {
		opt.SeqLen = min(128, m.MaxPositions()-1)
	}
	opt.Batch = max(opt.Batch, 1)
	opt.Accum = max(opt.Accum, 1)
	if opt.LR == 0 {
		opt.LR = 1e-3
	}
	switch {
	case opt.SeqLen < 1:
		return nil, fmt.Errorf("train: sequence length %d, want at least 1", opt.SeqLen)
	case opt.SeqLen+1 > m.MaxPositions():
		return nil, fmt.Errorf("train: windows of %d+1 tokens exceed the model's %d positions", opt.SeqLen, m.MaxPositions())
	case opt.Steps < 1:
		return nil, fmt.Errorf("train: %d steps, want at least 1", opt.Steps)
	case opt.LR < 0 || opt.MinLR < 0 || opt.MinLR > opt.LR:
		return nil, fmt.Errorf("train: learning rates %g (peak) and %g (min) must satisfy 0 <= min <= peak", opt.LR, opt.MinLR)
	case len(tokens) < opt.SeqLen+1:
		return nil, fmt.Errorf("train: %d tokens of data, fewer than one window of %d", len(tokens), opt.SeqLen+1)
	}
	for i, id := range tokens {
		if id < 0 || id >= m.VocabSize() {
			return nil, fmt.Errorf("train: token %d of the data is id %d, outside the model's vocabulary of %d", i, id, m.VocabSize())
		}
	}
	if opt.Warmup == 0 {
		opt.Warmup = min(100, opt.Steps/10)
	}
	if !m.Params().HasLoRA() {
		if err := Trainable(m); err != nil {
			return nil, err
		}
	}
	adam, err := NewAdamW(m.Params().Trainable(), opt.AdamW)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	gr, err := NewGraph(m, opt.SeqLen+1)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	tr := &Trainer{
		model: m, tokens: tokens, opt: opt, graph: gr, adam: adam,
		sched: Schedule{Peak: opt.LR, Min: opt.MinLR, Warmup: max(opt.Warmup, 0), Total: opt.Steps},
		rng:   rand.New(rand.NewPCG(opt.Seed, 0x676f7a6f6f)),
		acc:   map[string]*tensor.Dense{},
	}
	for _, name := range gr.names {
		tr.names = append(tr.names, name)
		tr.acc[name] = tensor.New(tensor.WithShape(gr.shapes[name]...), tensor.Of(tensor.Float32))
	}
	return tr, nil
}

// Trainable replaces every weight of m by a writable float32 copy of its
// values: loaded weights are views of a read-only file mapping, 16-bit
// ones cannot take float32 updates, and block-quantized ones take no
// gradient. The model then needs about 4 bytes per parameter, and
// saves as F32.
func Trainable(m graphs.Model) error {
	for _, p := range m.Params().All() {
		if !p.HasData() {
			return fmt.Errorf("train: weight %q has no data", p.Name)
		}
		v := slices.Clone(p.Float32s())
		if err := p.Set(graphs.F32, tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(v))); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	return nil
}

// window draws the next training window.
func (tr *Trainer) window() []int {
	T := tr.opt.SeqLen + 1
	start := tr.rng.IntN(len(tr.tokens) - T + 1)
	return tr.tokens[start : start+T]
}

// Step makes one optimizer step: Batch*Accum windows, their mean
// gradient, clipping, one AdamW update with the schedule's learning rate.
// It may go on past Options.Steps at the schedule's minimum rate.
func (tr *Trainer) Step() (Progress, error) {
	t0 := time.Now()
	if tr.start.IsZero() {
		tr.start = t0
	}
	for _, a := range tr.acc {
		clear(a.Data().([]float32))
	}
	n := tr.opt.Batch * tr.opt.Accum
	var loss float64
	for i := 0; i < n; i++ {
		g, err := tr.graph.run(tr.window())
		if err != nil {
			return Progress{}, fmt.Errorf("train step %d, sequence %d: %w", tr.step+1, i+1, err)
		}
		loss += g.Loss
		for _, name := range tr.names {
			dst := tr.acc[name].Data().([]float32)
			for j, x := range g.Weights[name].Data().([]float32) {
				dst[j] += x
			}
		}
	}
	scale := 1 / float32(n)
	for _, a := range tr.acc {
		d := a.Data().([]float32)
		for j := range d {
			d[j] *= scale
		}
	}
	loss /= float64(n)
	norm := ClipGradNorm(tr.acc, tr.opt.ClipNorm)
	lr := tr.sched.LR(tr.step + 1)
	if err := tr.adam.Step(tr.acc, lr); err != nil {
		return Progress{}, fmt.Errorf("train step %d: %w", tr.step+1, err)
	}
	tr.step++
	tokens := int64(n * (tr.opt.SeqLen + 1))
	tr.seen += tokens
	tr.losses = append(tr.losses, loss)
	dt := time.Since(t0)
	p := Progress{
		Step: tr.step, Steps: tr.opt.Steps, Loss: loss, LR: lr, GradNorm: norm,
		Tokens: tr.seen, TokensPerSec: float64(tokens) / dt.Seconds(), Elapsed: time.Since(tr.start),
	}
	if tr.opt.Progress != nil {
		tr.opt.Progress(p)
	}
	return p, nil
}

// Run makes the steps left of Options.Steps, stopping early, with an
// error wrapping ctx.Err(), when ctx is done.
func (tr *Trainer) Run(ctx context.Context) error {
	for tr.step < tr.opt.Steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("training stopped after step %d of %d: %w", tr.step, tr.opt.Steps, err)
		}
		if _, err := tr.Step(); err != nil {
			return err
		}
	}
	return nil
}

// Losses are the losses of the steps made so far.
func (tr *Trainer) Losses() []float64 { return slices.Clone(tr.losses) }

// Steps is the number of optimizer steps made so far.
func (tr *Trainer) Steps() int { return tr.step }

// Model is the model being trained; its weights are the trained ones.
func (tr *Trainer) Model() graphs.Model { return tr.model }

// Save writes the model's current weights into dir as an HF-format
// checkpoint that zoo.Load and transformers load: configJSON (the
// config.json the model was built from) and model.safetensors in F32.
func (tr *Trainer) Save(dir string, configJSON []byte) error {
	return tr.SaveAs(dir, configJSON, safetensors.F32)
}

// SaveAs is Save with the weights stored as dtype (F32 or BF16; see
// zoo.WriteCheckpointAs). With Options.SaveOptimizer it also writes
// AdamW's state into dir/optimizer.safetensors (see LoadOptimizer).
func (tr *Trainer) SaveAs(dir string, configJSON []byte, dtype safetensors.DType) error {
	if len(configJSON) == 0 {
		return errors.New("train: saving a checkpoint needs the model's config.json")
	}
	if err := zoo.WriteCheckpointAs(dir, configJSON, tr.model.Params(), dtype); err != nil {
		return fmt.Errorf("train: saving the checkpoint after step %d: %w", tr.step, err)
	}
	if tr.opt.SaveOptimizer {
		if err := tr.adam.SaveState(filepath.Join(dir, OptimizerFile)); err != nil {
			return fmt.Errorf("train: saving the optimizer after step %d: %w", tr.step, err)
		}
	}
	return nil
}

// LoadOptimizer restores AdamW's moments and update count from
// dir/optimizer.safetensors, as a checkpoint saved with
// Options.SaveOptimizer holds them, so that continued training does not
// restart Adam cold. It reports whether the file was there; the learning
// rate schedule is this Trainer's own.
func (tr *Trainer) LoadOptimizer(dir string) (bool, error) {
	path := filepath.Join(dir, OptimizerFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err := tr.adam.LoadState(path); err != nil {
		return false, fmt.Errorf("train: %w", err)
	}
	return true, nil
}

// OptimizerBytes is the memory of AdamW's state: its two moments, float32,
// for every weight it trains.
func (tr *Trainer) OptimizerBytes() int64 { return tr.adam.StateBytes() }

// SaveLoRA writes the trained adapter (the model's only attached one) as
// a PEFT folder: adapter_config.json with LoraConfig's keys and
// adapter_model.safetensors, which PEFT's from_pretrained and gozoo's
// --adapter load. base names the base model (base_model_name_or_path).
func (tr *Trainer) SaveLoRA(dir, base string) error {
	var live []*graphs.Adapter
	for _, a := range tr.model.Params().Adapters() {
		if !a.Merged {
			live = append(live, a)
		}
	}
	if len(live) != 1 {
		return fmt.Errorf("train: saving a LoRA adapter needs exactly one attached, the model has %d", len(live))
	}
	a := live[0]
	if err := loaders.WriteLoRA(dir, a.Config.JSON(base), a.Tensors()); err != nil {
		return fmt.Errorf("train: saving the LoRA adapter after step %d: %w", tr.step, err)
	}
	return nil
}

// OptimizerSteps is the number of AdamW updates its state has seen,
// restored ones included.
func (tr *Trainer) OptimizerSteps() int { return tr.adam.Steps() }

// Close releases the training graph.
func (tr *Trainer) Close() error { return tr.graph.Close() }
