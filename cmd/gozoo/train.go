package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/nlpodyssey/safetensors"

	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/tokenizer"
	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
)

func init() {
	register(command{
		name:    "train",
		summary: "train a model from scratch or continue one on text files, and save it as a checkpoint",
		run:     runTrain,
	})
}

// parseWithFiles parses args, taking the arguments that are not flags
// into files: the flag package stops at the first of them, so
// "--data a.txt b.txt --steps 9" would otherwise lose --steps.
func parseWithFiles(fs *flag.FlagSet, args []string, files *fileList) error {
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		i := 0
		for i < len(rest) && !strings.HasPrefix(rest[i], "-") {
			i++
		}
		*files = append(*files, rest[:i]...)
		if args = rest[i:]; len(args) == 0 {
			return nil
		}
	}
}

// fileList is a flag that may be repeated.
type fileList []string

func (l *fileList) String() string     { return strings.Join(*l, ",") }
func (l *fileList) Set(s string) error { *l = append(*l, s); return nil }

const trainUsage = "usage: gozoo train --config CONFIG --data TEXT_FILES... --tokenizer DIR --steps N --out DIR [--model DIR] [--seq-len T] [--batch B] [--accum A] [--lr LR] [--seed S] [--lora-r R [--lora-alpha A] [--lora-targets q_proj,v_proj] [--rslora]]"

func runTrain(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var data fileList
	config := fs.String("config", "", "config.json of the model (a new model with random weights, or with --model the config its weights are loaded under)")
	fs.Var(&data, "data", "text file to train on (repeat the flag, or list the files after it)")
	tokDir := fs.String("tokenizer", "", "folder with tokenizer.json (default: --model's)")
	model := fs.String("model", "", "checkpoint to continue training from (HF folder or .gguf)")
	out := fs.String("out", "", "folder to write the trained checkpoint into (required)")
	steps := fs.Int("steps", 0, "optimizer steps (required)")
	seqLen := fs.Int("seq-len", 128, "tokens predicted per sequence (windows of seq-len+1 tokens)")
	batch := fs.Int("batch", 1, "sequences per micro-batch")
	accum := fs.Int("accum", 1, "micro-batches accumulated per step")
	lr := fs.Float64("lr", 1e-3, "peak learning rate")
	minLR := fs.Float64("min-lr", -1, "learning rate at the last step (default lr/10)")
	warmup := fs.Int("warmup", 0, "linear warmup steps (default min(100, steps/10); -1 for none)")
	wd := fs.Float64("weight-decay", 0.1, "AdamW's decoupled weight decay (matrices only)")
	clip := fs.Float64("clip", 1, "clip the gradient's global norm to this (0: off)")
	seed := fs.Uint64("seed", 0, "seed of the initial weights and of the data order")
	logEvery := fs.Int("log-every", 10, "print a loss line every this many steps")
	saveEvery := fs.Int("save-every", 0, "also save the checkpoint every this many steps (0: only at the end)")
	stopAt := fs.Int("stop-at", 0, "stop and save after this step, with the schedule still spanning --steps (0: run all the steps); a shorter run that follows the full run's curve")
	saveOptimizer := fs.Bool("save-optimizer", true, "also save AdamW's state (optimizer.safetensors, twice the F32 weights) so that --model DIR continues with it")
	saveDType := fs.String("save-dtype", "f32", "dtype of the saved weights: f32, or bf16 for a model to ship (half the file; training goes on in float32)")
	loraR := fs.Int("lora-r", 0, "train a LoRA adapter of rank `R` on the frozen base instead of every weight, saved to --out as a PEFT folder")
	loraAlpha := fs.Float64("lora-alpha", 0, "the adapter's lora_alpha (default: 2 × --lora-r); its update is scaled by alpha/r (alpha/√r with --rslora)")
	loraTargets := fs.String("lora-targets", "q_proj,v_proj", "comma-separated module names the adapter adapts (PEFT's target_modules)")
	rslora := fs.Bool("rslora", false, "scale the adapter by lora_alpha/√r (rsLoRA)")
	if err := parseWithFiles(fs, args, &data); err != nil {
		return 2
	}
	if (*config == "" && *model == "") || len(data) == 0 || *out == "" || *steps <= 0 {
		fmt.Fprintln(stderr, trainUsage)
		return 2
	}
	if *tokDir == "" {
		*tokDir = *model
	}
	if *tokDir == "" {
		fmt.Fprintln(stderr, "gozoo train: --tokenizer DIR is needed to train a new model")
		return 2
	}
	var dtype safetensors.DType
	switch strings.ToLower(*saveDType) {
	case "f32", "float32":
		dtype = safetensors.F32
	case "bf16", "bfloat16":
		dtype = safetensors.BF16
	default:
		fmt.Fprintf(stderr, "gozoo train: --save-dtype %q: want f32 or bf16\n", *saveDType)
		return 2
	}
	if *minLR < 0 {
		*minLR = *lr / 10
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "gozoo train:", err)
		return 1
	}

	m, configJSON, err := trainModel(*config, *model, *seed)
	if err != nil {
		return fail(err)
	}
	if *loraR > 0 {
		if *loraAlpha == 0 {
			*loraAlpha = 2 * float64(*loraR)
		}
		b, _ := json.Marshal(loaders.LoRAConfigJSON(*loraR, *loraAlpha, *rslora, strings.Split(*loraTargets, ","), *model))
		cfg, err := loaders.ParseLoRAConfig(b)
		if err != nil {
			return fail(fmt.Errorf("--lora-*: %w", err))
		}
		if _, err := m.Params().NewLoRA("lora", cfg, rand.New(rand.NewPCG(*seed, 0x6c6f7261)), 0); err != nil {
			return fail(err)
		}
		*saveOptimizer = false
	}
	tok, err := loadTokenizer(*tokDir)
	if err != nil {
		return fail(err)
	}
	ids, err := tokenizeFiles(tok, data, m.EOSTokenIDs())
	if err != nil {
		return fail(err)
	}
	var nparams, trained int64
	for _, p := range m.Params().All() {
		nparams += p.Numel()
	}
	for _, p := range m.Params().Trainable() {
		trained += p.Numel()
	}
	fmt.Fprintf(stdout, "%s model, %d parameters; %d tokens from %d files; %d steps of %d×%d sequences of %d tokens\n",
		m.ModelType(), nparams, len(ids), len(data), *steps, *batch, *accum, *seqLen+1)

	tr, err := train.NewTrainer(m, ids, train.Options{
		SeqLen: *seqLen, Batch: *batch, Accum: *accum, Steps: *steps,
		LR: *lr, MinLR: *minLR, Warmup: *warmup, ClipNorm: *clip, Seed: *seed,
		AdamW: train.AdamWConfig{WeightDecay: *wd}, SaveOptimizer: *saveOptimizer,
	})
	if err != nil {
		return fail(err)
	}
	defer tr.Close()
	if *loraR > 0 {
		fmt.Fprintf(stdout, "LoRA r=%d alpha=%g on %s: %d trained parameters, AdamW state %d bytes (full fine-tuning: %d)\n",
			*loraR, *loraAlpha, *loraTargets, trained, tr.OptimizerBytes(), 8*nparams)
	}
	if *model != "" && *loraR == 0 {
		ok, err := tr.LoadOptimizer(*model)
		if err != nil {
			return fail(err)
		}
		if ok {
			fmt.Fprintf(stdout, "continuing AdamW from %s/%s (%d updates)\n", *model, train.OptimizerFile, tr.OptimizerSteps())
		}
	}
	// save writes the checkpoint, or the adapter alone when training one.
	save := func() error {
		if *loraR > 0 {
			return tr.SaveLoRA(*out, *model)
		}
		return tr.SaveAs(*out, configJSON, dtype)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var avg float64 // mean loss since the last line
	var n int
	last := *steps
	if *stopAt > 0 && *stopAt < last {
		last = *stopAt
	}
	for tr.Steps() < last {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "gozoo train: interrupted after step %d; saving\n", tr.Steps())
			break
		}
		p, err := tr.Step()
		if err != nil {
			return fail(err)
		}
		avg, n = avg+p.Loss, n+1
		if p.Step%max(*logEvery, 1) == 0 || p.Step == last || p.Step == 1 {
			fmt.Fprintf(stdout, "step %d/%d loss %.4f lr %.3g grad_norm %.3g tok/s %.0f elapsed %s\n",
				p.Step, p.Steps, avg/float64(n), p.LR, p.GradNorm, p.TokensPerSec, p.Elapsed.Round(1e8))
			avg, n = 0, 0
		}
		if *saveEvery > 0 && p.Step%*saveEvery == 0 && p.Step < last {
			if err := save(); err != nil {
				return fail(err)
			}
		}
	}
	if *loraR > 0 {
		if err := save(); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "wrote %s/%s and %s/%s (step %d)\n", *out, loaders.LoRAConfigFile, *out, loaders.LoRAWeightsFile, tr.Steps())
		if ctx.Err() != nil {
			return 1
		}
		return 0
	}
	if err := save(); err != nil {
		return fail(err)
	}
	copied, err := copyTokenizer(*tokDir, *out)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "wrote %s/config.json and %s/model.safetensors (%s, step %d)%s\n", *out, *out, dtype, tr.Steps(), copied)
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

// trainModel is the model to train and its config.json: a new random one
// from config, the checkpoint model, or the checkpoint's weights under
// config.
func trainModel(config, model string, seed uint64) (zoo.Model, []byte, error) {
	var configJSON []byte
	if config != "" {
		b, err := os.ReadFile(config)
		if err != nil {
			return nil, nil, err
		}
		configJSON = b
	}
	switch {
	case model == "":
		cfg, err := zoo.ParseConfig(configJSON)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", config, err)
		}
		m, err := zoo.NewRandom(cfg, seed)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", config, err)
		}
		return m, configJSON, nil
	case configJSON != nil:
		if _, ok := zoo.GGUFPath(model); ok {
			return nil, nil, fmt.Errorf("%s: --config applies to an HF folder's weights, not a GGUF file's", model)
		}
		m, err := zoo.LoadConfig(model, configJSON, nil)
		return m, configJSON, err
	}
	if path, ok := zoo.GGUFPath(model); ok {
		b, err := zoo.GGUFConfigJSON(path)
		if err != nil {
			return nil, nil, err
		}
		m, err := zoo.LoadGGUF(path, nil)
		return m, b, err
	}
	_, b, err := loaders.ReadConfig(model)
	if err != nil {
		return nil, nil, err
	}
	m, err := zoo.LoadConfig(model, b, nil)
	return m, b, err
}

// tokenizeFiles encodes the text files into one stream of ids, with the
// model's first end-of-sequence id between files. A file is encoded in
// pieces of about 64 KiB cut after a newline, which changes the tokens at
// most at those cuts.
func tokenizeFiles(tok *tokenizer.Tokenizer, files []string, eos []int) ([]int, error) {
	var ids []int
	for i, path := range files {
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if i > 0 && len(eos) > 0 {
			ids = append(ids, eos[0])
		}
		for len(text) > 0 {
			n := len(text)
			if n > 64<<10 {
				n = 64 << 10
				if j := strings.LastIndexByte(string(text[:n]), '\n'); j > 0 {
					n = j + 1
				}
			}
			piece, err := tok.Encode(string(text[:n]), false)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			ids = append(ids, piece...)
			text = text[n:]
		}
	}
	return ids, nil
}

// copyTokenizer copies tokenizer.json and tokenizer_config.json from a
// tokenizer folder into the checkpoint, so that it runs as it is.
func copyTokenizer(from, to string) (string, error) {
	if isGGUFPath(from) {
		return "", nil
	}
	a, _ := filepath.Abs(from)
	b, _ := filepath.Abs(to)
	if a == b {
		return "", nil
	}
	var copied []string
	for _, name := range []string{loaders.TokenizerFile, loaders.TokenizerConfigFile} {
		data, err := os.ReadFile(filepath.Join(from, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(to, name), data, 0o644); err != nil {
			return "", err
		}
		copied = append(copied, name)
	}
	if len(copied) == 0 {
		return "", nil
	}
	return " and copied " + strings.Join(copied, ", "), nil
}
