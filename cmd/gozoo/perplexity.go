package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"

	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/generate"
)

func init() {
	register(command{
		name:    "perplexity",
		summary: "measure perplexity over a text or token ids, by llama.cpp's method",
		run:     runPerplexity,
	})
}

// defaultPPLContext is llama-perplexity's default chunk length.
const defaultPPLContext = 512

// pplResult is the figure llama-perplexity prints, and what it is made of.
type pplResult struct {
	PPL          float64 `json:"ppl"`
	NLLMean      float64 `json:"nll_mean"`
	TokensScored int     `json:"tokens_scored"`
	NChunk       int     `json:"n_chunk"`
}

func runPerplexity(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("perplexity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder (config.json + safetensors), or a .gguf file (required)")
	file := fs.String("file", "", "a text `FILE`, tokenized with the model's tokenizer (special tokens such as BOS added)")
	idsPath := fs.String("ids", "", "a JSON `FILE` holding an array of token ids, instead of --file")
	ctxLen := fs.Int("ctx", defaultPPLContext, "tokens per chunk (default: 512, or the model's context if shorter)")
	batch := fs.Int("batch", 1, "chunks evaluated at once, as sequences of one batch")
	asJSON := fs.Bool("json", false, "end stdout with one JSON line: ppl, nll_mean, tokens_scored, n_chunk")
	fast := fs.Bool("fast", false, "fast mode: llama.cpp's arithmetic (8-bit activations against quantized weights), not exact")
	kvF16 := fs.Bool("kv-f16", false, "keep the KV cache in F16, as llama.cpp does by default (keys and values rounded, not exact)")
	kvCache := kvCacheFlag(fs, kvF16, true)
	device := deviceFlag(fs)
	adapters := adapterFlag(fs, false)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: gozoo perplexity --model DIR|FILE.gguf (--file TEXT | --ids IDS.json) [--ctx N] [--batch S] [--json] [--fast] [--kv-f16] `+kvUsage+` [--adapter DIR] [--device cuda[:N]]

Cuts the tokens into len/ctx chunks of ctx tokens (the rest is unused) and
evaluates each chunk alone from an empty cache; the second half of each
chunk is scored: positions ctx/2 .. ctx-2 each predict the next token.
Prints exp of the mean negative log-likelihood, as llama-perplexity does
(which also makes each chunk's first token BOS; this command leaves the
tokens as they are).`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *model == "" || (*file == "") == (*idsPath == "") || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "gozoo perplexity:", err)
		return 1
	}
	dev, err := openDevice(*device)
	if err != nil {
		return fail(err)
	}
	switch {
	case *ctxLen < 3:
		return fail(fmt.Errorf("--ctx %d scores no token: a chunk scores its positions ctx/2 .. ctx-2, so --ctx must be at least 3", *ctxLen))
	case *batch < 1:
		return fail(fmt.Errorf("--batch must be at least 1, got %d", *batch))
	}
	// Bad ids fail before the weights load.
	var ids []int
	if *idsPath != "" {
		var err error
		if ids, err = readIDsFile(*idsPath); err != nil {
			return fail(err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := newProgressBar(stderr, "loading "+*model)
	var m zoo.Model
	if *file != "" {
		text, err := os.ReadFile(*file)
		if err != nil {
			bar.done()
			return fail(err)
		}
		g, err := generate.LoadContext(ctx, *model, bar.update)
		bar.done()
		if err != nil {
			return fail(err)
		}
		defer g.Close()
		if ids, err = g.Encode(string(text)); err != nil {
			return fail(fmt.Errorf("tokenizing %s: %w", *file, err))
		}
		m = g.Model
	} else {
		var err error
		m, err = zoo.LoadContext(ctx, *model, bar.update)
		bar.done()
		if err != nil {
			return fail(err)
		}
	}
	if err := applyAdapters(m, *adapters, false); err != nil {
		return fail(err)
	}
	source := *idsPath
	if *file != "" {
		source = *file
	}
	if err := checkVocab(ids, m.VocabSize()); err != nil {
		return fail(fmt.Errorf("%s: %w", source, err))
	}
	n := *ctxLen
	if !set["ctx"] {
		n = min(n, m.MaxPositions())
	} else if n > m.MaxPositions() {
		return fail(fmt.Errorf("--ctx %d is longer than the model's %d positions (max_position_embeddings)", n, m.MaxPositions()))
	}

	prog := newProgressBar(stderr, "perplexity")
	kvType, err := kvCache.typ(*fast)
	if err != nil {
		fmt.Fprintf(stderr, "gozoo perplexity: %v\n", err)
		return 2
	}
	opts := generate.ScoreOptions{MaxSeqs: *batch, Fast: *fast, KVCache: kvType, Device: dev, Progress: func(done, total int) { prog.update(int64(done), int64(total)) }}
	res, err := perplexity(ctx, m, ids, n, opts)
	prog.done()
	if err != nil {
		return fail(fmt.Errorf("%s: %w", source, err))
	}
	fmt.Fprintf(stdout, "perplexity %.4f (mean NLL %.6f over %d tokens in %d chunks of %d)\n", res.PPL, res.NLLMean, res.TokensScored, res.NChunk, n)
	if *asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintln(stdout, string(b))
	}
	return 0
}

// perplexity evaluates ids in chunks of n tokens as llama-perplexity
// does: each chunk from an empty cache, scoring the tokens after
// position n/2 (a continuation, after the chunk's first half as its
// context), the NLLs summed in float64.
func perplexity(ctx context.Context, m zoo.Model, ids []int, n int, opts generate.ScoreOptions) (pplResult, error) {
	chunks := len(ids) / n
	if chunks == 0 {
		return pplResult{}, fmt.Errorf("%d tokens make no chunk of %d (--ctx): give at least %d tokens, or a smaller --ctx", len(ids), n, n)
	}
	first := n / 2
	pairs := make([]generate.ScorePair, chunks)
	for c := range pairs {
		chunk := ids[c*n : (c+1)*n]
		pairs[c] = generate.ScorePair{Context: chunk[:first+1], Continuation: chunk[first+1:]}
	}
	scores, err := generate.ScorePairs(ctx, m, pairs, opts)
	if err != nil {
		return pplResult{}, err
	}
	var nll float64
	for _, s := range scores {
		nll -= s.LogProb
	}
	res := pplResult{TokensScored: chunks * (n - 1 - first), NChunk: chunks}
	res.NLLMean = nll / float64(res.TokensScored)
	res.PPL = math.Exp(res.NLLMean)
	return res, nil
}

// readIDsFile reads a JSON array of token ids, naming the element at
// fault.
func readIDsFile(path string) ([]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: want a JSON array of token ids: %w", path, err)
	}
	ids := make([]int, len(raw))
	for i, r := range raw {
		d := json.NewDecoder(bytes.NewReader(r))
		if err := d.Decode(&ids[i]); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				err = errors.New("not an integer token id")
			}
			return nil, fmt.Errorf("%s: element %d (%s): %w", path, i, r, err)
		}
	}
	return ids, nil
}

// checkVocab names the first id outside [0, vocab).
func checkVocab(ids []int, vocab int) error {
	for i, id := range ids {
		if id < 0 || id >= vocab {
			return fmt.Errorf("token id %d at index %d is outside the model's vocabulary [0, %d)", id, i, vocab)
		}
	}
	return nil
}
