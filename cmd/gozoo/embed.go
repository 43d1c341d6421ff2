package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/gozoo/gozoo/zoo/generate"
)

func init() {
	register(command{
		name:    "embed",
		summary: "print pooled final hidden states of each line of text as JSON lines",
		run:     runEmbed,
	})
}

func runEmbed(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("embed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder (config.json, safetensors, tokenizer.json), or a .gguf file (required)")
	file := fs.String("file", "", "read the lines of text from `FILE` instead of stdin")
	poolName := fs.String("pool", "mean", "pooling of each line's final hidden states: mean (over its tokens) or last (its last token)")
	normalize := fs.Bool("normalize", false, "scale each embedding to unit L2 norm")
	batch := fs.Int("batch", 8, "lines run at once, as sequences of one batch")
	fast := fs.Bool("fast", false, "fast mode: llama.cpp's arithmetic (8-bit activations against quantized weights), not exact")
	kvF16 := fs.Bool("kv-f16", false, "keep the KV cache in F16 (keys and values rounded, not exact)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: gozoo embed --model DIR|FILE.gguf [--file F] [--pool mean|last] [--normalize] [--batch S] [--fast] [--kv-f16]

Each line of text (from --file, else stdin) is one sequence, tokenized with
the model's tokenizer (special tokens such as BOS added). Prints one JSON line
{"index": i, "embedding": [...]} per input line, i counting from 0: the
final norm's output (transformers' last_hidden_state) pooled over the line.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *model == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "gozoo embed:", err)
		return 1
	}
	how, err := generate.ParsePooling(*poolName)
	if err != nil {
		return fail(fmt.Errorf("--pool: %w", err))
	}
	if *batch < 1 {
		return fail(fmt.Errorf("--batch must be at least 1, got %d", *batch))
	}
	in := stdin
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		in = f
	}
	lines, err := readLines(in)
	if err != nil {
		return fail(err)
	}
	if len(lines) == 0 {
		return fail(errors.New("no lines of text to embed"))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := newProgressBar(stderr, "loading "+*model)
	g, err := generate.LoadContext(ctx, *model, bar.update)
	bar.done()
	if err != nil {
		return fail(err)
	}
	defer g.Close()
	inputs := make([][]int, len(lines))
	for i, line := range lines {
		if inputs[i], err = g.Encode(line); err != nil {
			return fail(fmt.Errorf("line %d: %w", i+1, err))
		}
		if len(inputs[i]) == 0 {
			return fail(fmt.Errorf("line %d (index %d) has no tokens: each line is one input", i+1, i))
		}
	}
	prog := newProgressBar(stderr, "embedding")
	vecs, err := generate.Embed(ctx, g.Model, inputs, generate.EmbedOptions{
		Pool: how, Normalize: *normalize, MaxSeqs: *batch, Fast: *fast, KVCacheF16: *kvF16,
		Progress: func(done, total int) { prog.update(int64(done), int64(total)) },
	})
	prog.done()
	if err != nil {
		return fail(err)
	}
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	for i, v := range vecs {
		if err := enc.Encode(struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}{i, v}); err != nil {
			return fail(fmt.Errorf("index %d: %w", i, err))
		}
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	return 0
}

// readLines reads every line of r, without its line ending; a last line
// without one counts.
func readLines(r io.Reader) ([]string, error) {
	br := bufio.NewReader(r)
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			lines = append(lines, strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"))
		}
		if err == io.EOF {
			return lines, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading line %d: %w", len(lines)+1, err)
		}
	}
}
