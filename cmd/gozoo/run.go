package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo/generate"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

func init() {
	register(command{
		name:    "run",
		summary: "generate text from a prompt, streaming it as it is produced",
		run:     runRun,
	})
}

// bundledModel is the small Llama that gozoo train made from the King
// James Bible (testdata/models/kjv-tiny/README.md), used when --model is
// not given, so the command prints English on a fresh clone.
const bundledModel = "testdata/models/kjv-tiny"

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runRun(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder: config.json, safetensors, tokenizer.json (default: the bundled KJV-trained model in "+bundledModel+")")
	prompt := fs.String("prompt", "", "the prompt (required)")
	useChat := fs.Bool("chat", false, "wrap the prompt in the checkpoint's chat template")
	system := fs.String("system", "", "system message (with --chat)")
	maxTokens := fs.Int("max-tokens", 0, "tokens to generate at most (default: generation_config.json's max_new_tokens, else 256)")
	temperature := fs.Float64("temperature", 0, "sampling temperature; 0 is greedy (default: generation_config.json)")
	topK := fs.Int("top-k", 0, "keep the k most likely tokens (default: generation_config.json)")
	topP := fs.Float64("top-p", 0, "nucleus sampling mass (default: generation_config.json)")
	minP := fs.Float64("min-p", 0, "drop tokens below min-p times the best one's probability")
	repPenalty := fs.Float64("repetition-penalty", 0, "penalty for tokens already in the context (1: off)")
	seed := fs.Uint64("seed", 0, "sampling seed (default: random)")
	fast := fs.Bool("fast", false, "fast mode: llama.cpp's arithmetic (8-bit activations against quantized weights), faster on GGUF files, not exact")
	kvF16 := fs.Bool("kv-f16", false, "keep the KV cache in F16, as llama.cpp does by default: half its memory, keys and values rounded, not exact")
	kvCache := kvCacheFlag(fs, kvF16, true)
	ctxShift := fs.Int("context-shift", -1, "when the context is full, keep its first `N` positions, drop half of the rest and go on (llama.cpp's context shift; -1: stop at a full context)")
	device := deviceFlag(fs)
	promptsFile := fs.String("prompts", "", "generate for every line of `FILE` (- for stdin) at once, in one batch; prints a JSON line per sample")
	samples := fs.Int("n", 1, "samples per prompt, sharing the prompt's prefill (batched; sample i uses seed+i)")
	logprobs := fs.Int("logprobs", -1, "with --prompts or --n: give each token's log-probability and the `K` most likely alternatives")
	jsonSchema := fs.String("json-schema", "", "constrain the output to JSON valid against the JSON Schema in `FILE` (constrained decoding; ends at EOS once the JSON is complete)")
	adapters := adapterFlag(fs, false)
	merge := fs.Bool("merge-adapter", false, "add the --adapter into the base weights once (an F32 base), instead of computing it beside them at every step")
	var stops, imagePaths stringList
	fs.Var(&stops, "stop", "stop when the text contains this string (repeatable)")
	fs.Var(&imagePaths, "image", "an image for a vision-language model (repeatable; the prompt's <image> tokens, or one per image in front)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	dev, err := openDevice(*device)
	if err != nil {
		fmt.Fprintf(stderr, "gozoo run: %v\n", err)
		return 1
	}
	if (*prompt == "") == (*promptsFile == "") || *samples < 1 {
		fmt.Fprintln(stderr, "usage: gozoo run [--model DIR] (--prompt TEXT | --prompts FILE) [--n K] [--logprobs K] [--json-schema FILE] [--image FILE]... [--chat] [--system S] [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--fast] [--kv-f16] "+kvUsage+" [--context-shift N] [--adapter DIR [--merge-adapter]] [--device cuda[:N]]")
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *model == "" {
		*model = bundledModel
		if _, err := os.Stat(filepath.Join(*model, "config.json")); err != nil {
			fmt.Fprintf(stderr, "gozoo run: no --model given and the bundled model %s is not here (run from the repository root, or pass --model DIR)\n", bundledModel)
			return 1
		}
	}

	// Ctrl-C stops loading, prefill and generation alike.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := newProgressBar(stderr, "loading "+*model)
	g, err := generate.LoadContext(ctx, *model, bar.update)
	bar.done()
	if err != nil {
		fmt.Fprintln(stderr, "gozoo run:", err)
		return 1
	}
	defer g.Close()
	if err := applyAdapters(g.Model, *adapters, *merge); err != nil {
		fmt.Fprintln(stderr, "gozoo run:", err)
		return 1
	}

	opts := g.Defaults
	if opts.MaxTokens == 0 {
		opts.MaxTokens = 256
	}
	s := &opts.Sampling
	if set["max-tokens"] {
		opts.MaxTokens = *maxTokens
	}
	if set["temperature"] {
		s.Temperature, s.DoSample = *temperature, *temperature > 0
	}
	if set["top-k"] {
		s.TopK = *topK
	}
	if set["top-p"] {
		s.TopP = *topP
	}
	if set["min-p"] {
		s.MinP = *minP
	}
	if set["repetition-penalty"] {
		s.RepetitionPenalty = *repPenalty
	}
	if set["seed"] {
		s.Seed = *seed
	} else {
		s.Seed = uint64(time.Now().UnixNano())
	}
	opts.Stop = stops
	if *ctxShift >= 0 {
		opts.ContextShift = &generate.ContextShift{Keep: *ctxShift}
	} else if *ctxShift != -1 {
		fmt.Fprintf(stderr, "gozoo run: --context-shift %d: want a number of positions to keep, or -1\n", *ctxShift)
		return 2
	}
	g.SessionOptions.Fast = *fast
	kvType, err := kvCache.typ(*fast)
	if err != nil {
		fmt.Fprintln(stderr, "gozoo run:", err)
		return 2
	}
	g.SessionOptions.KVCache = kvType
	g.SessionOptions.Device = dev
	if vlm, ok := g.Model.(*idefics3.Model); ok {
		vlm.SetDevice(dev)
	}
	if *jsonSchema != "" {
		data, err := os.ReadFile(*jsonSchema)
		if err != nil {
			fmt.Fprintln(stderr, "gozoo run:", err)
			return 1
		}
		c, err := g.JSONSchema(data, nil)
		if err != nil {
			fmt.Fprintf(stderr, "gozoo run: %s: %v\n", *jsonSchema, err)
			return 1
		}
		s.Extra = append(s.Extra, generate.Grammar(c))
	}

	if *promptsFile != "" || *samples > 1 {
		if len(imagePaths) > 0 {
			fmt.Fprintln(stderr, "gozoo run: --image takes one --prompt, without --n")
			return 2
		}
		texts := []string{*prompt}
		if *promptsFile != "" {
			if texts, err = readPromptLines(*promptsFile, stdin); err != nil {
				fmt.Fprintln(stderr, "gozoo run:", err)
				return 1
			}
		}
		opts.N = *samples
		if *logprobs >= 0 {
			opts.Logprobs, opts.TopLogprobs = true, *logprobs
		}
		return runBatch(ctx, g, texts, opts, *useChat, *system, stdout, stderr)
	}
	var input graphs.Input
	if len(imagePaths) > 0 {
		input, err = imagePrompt(g, *model, imagePaths, *useChat, *system, *prompt)
	} else {
		var ids []int
		if *useChat {
			ids, err = chatPrompt(g, *system, *prompt)
		} else {
			ids, err = g.Encode(*prompt)
		}
		input = graphs.IDs(ids...)
	}
	if err != nil {
		fmt.Fprintln(stderr, "gozoo run:", err)
		return 1
	}

	// A long prompt shows its prefill the way loading shows: a bar once it
	// takes more than a moment.
	prefill := newProgressBar(stderr, "prefill")
	opts.Progress = func(done, total int) {
		prefill.update(int64(done), int64(total))
		if done == total {
			prefill.done()
		}
	}
	st := g.StreamInput(ctx, input, opts)
	for tok := range st.Tokens() {
		if _, err := io.WriteString(stdout, tok.Text); err != nil {
			break
		}
		if f, ok := stdout.(*os.File); ok {
			f.Sync()
		}
	}
	res, err := st.Result()
	fmt.Fprintln(stdout)
	if err != nil {
		fmt.Fprintln(stderr, "gozoo run:", err)
		return 1
	}
	shifts := ""
	if res.Shifts > 0 {
		shifts = fmt.Sprintf("; %d context shifts dropped %d positions", res.Shifts, res.Discarded)
	}
	fmt.Fprintf(stderr, "[%d prompt tokens, %d generated; prefill %.1f tok/s, decode %.1f tok/s; graphs built in %.2f s%s; stop: %s]\n",
		res.PromptLen, len(res.Tokens), res.PrefillTokS(), res.DecodeTokS(), res.SetupTime.Seconds(), shifts, res.StopReason)
	if res.StopReason == generate.StopCancelled {
		return 130
	}
	return 0
}

// progressBar draws a bar on stderr while weights load or a prompt is
// prefilled, but only once that has taken more than a moment.
type progressBar struct {
	w     io.Writer
	label string
	start time.Time
	last  time.Time
	drawn bool
}

func newProgressBar(w io.Writer, label string) *progressBar {
	return &progressBar{w: w, label: label, start: time.Now()}
}

func (p *progressBar) update(done, total int64) {
	now := time.Now()
	if now.Sub(p.start) < 500*time.Millisecond || (now.Sub(p.last) < 100*time.Millisecond && done < total) || total == 0 {
		return
	}
	p.last, p.drawn = now, true
	const width = 30
	n := int(width * done / total)
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%%", p.label, strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*done/total)
}

func (p *progressBar) done() {
	if p.drawn {
		fmt.Fprintf(p.w, "\r%s done in %.1f s%s\n", p.label, time.Since(p.start).Seconds(), strings.Repeat(" ", 30))
	}
}

// readPromptLines reads one prompt per non-empty line of path ("-":
// stdin).
func readPromptLines(path string, stdin io.Reader) ([]string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading prompts: %w", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimRight(line, "\r"); strings.TrimSpace(line) != "" {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no prompt (one per line)", path)
	}
	return out, nil
}

// batchLine is one sample of `gozoo run --prompts` / `--n`, as a JSON
// line.
type batchLine struct {
	Prompt   int            `json:"prompt"`
	Sample   int            `json:"sample"`
	Text     string         `json:"text"`
	Tokens   []int          `json:"tokens"`
	Stop     string         `json:"stop"`
	Logprobs []tokenLogprob `json:"logprobs,omitempty"`
	Error    string         `json:"error,omitempty"`
}

type tokenLogprob struct {
	ID      int                     `json:"id"`
	Logprob float64                 `json:"logprob"`
	Top     []generate.TokenLogprob `json:"top,omitempty"`
}

// runBatch generates for every prompt at once on an Engine and prints
// each sample as a JSON line, in prompt order.
func runBatch(ctx context.Context, g *generate.Generator, texts []string, opts generate.Options, useChat bool, system string, stdout, stderr io.Writer) int {
	e, err := g.NewEngine(generate.EngineOptions{Batch: graphs.BatchOptions{Options: g.SessionOptions, PrefixCache: true}})
	if err != nil {
		fmt.Fprintln(stderr, "gozoo run:", err)
		return 1
	}
	defer e.Close()
	all := make([][]*generate.Sample, len(texts))
	for i, text := range texts {
		var ids []int
		if useChat {
			ids, err = chatPrompt(g, system, text)
		} else {
			ids, err = g.Encode(text)
		}
		if err == nil {
			all[i], err = e.Submit(ctx, graphs.IDs(ids...), opts)
		}
		if err != nil {
			fmt.Fprintf(stderr, "gozoo run: prompt %d: %v\n", i+1, err)
			return 1
		}
	}
	t0, tokens, status := time.Now(), 0, 0
	enc := json.NewEncoder(stdout)
	for i, samples := range all {
		for k, s := range samples {
			line := batchLine{Prompt: i, Sample: k}
			for tok := range s.Tokens() {
				if tok.ID >= 0 && opts.Logprobs {
					line.Logprobs = append(line.Logprobs, tokenLogprob{ID: tok.ID, Logprob: tok.Logprob, Top: tok.TopLogprobs})
				}
			}
			res, err := s.Result()
			line.Text, line.Tokens, line.Stop = res.Text, res.Tokens, string(res.StopReason)
			if err != nil {
				line.Error, status = err.Error(), 1
			}
			tokens += len(res.Tokens)
			if err := enc.Encode(line); err != nil {
				return 1
			}
		}
	}
	fmt.Fprintf(stderr, "[%d prompts, %d samples each, %d tokens generated in %.2f s: %.1f tok/s together]\n",
		len(texts), max(opts.N, 1), tokens, time.Since(t0).Seconds(), float64(tokens)/time.Since(t0).Seconds())
	if ctx.Err() != nil {
		return 130
	}
	return status
}
