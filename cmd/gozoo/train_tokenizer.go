package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gozoo/gozoo/tokenizer"
)

func init() {
	register(command{
		name:    "train-tokenizer",
		summary: "learn a byte-level BPE tokenizer (GPT-2's recipe) from text files",
		run:     runTrainTokenizer,
	})
}

const trainTokenizerUsage = "usage: gozoo train-tokenizer --data TEXT_FILES... --vocab N --out DIR [--special TOKEN]..."

func runTrainTokenizer(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("train-tokenizer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var data, specials fileList
	fs.Var(&data, "data", "text file to learn from (repeat the flag, or list the files after it)")
	fs.Var(&specials, "special", `special token, given the first ids in order (default "<|endoftext|>", which is also the end of text)`)
	vocab := fs.Int("vocab", 4096, "ids in all: special tokens, 256 bytes and the merges")
	minFreq := fs.Int("min-frequency", 2, "do not merge a pair seen fewer times")
	out := fs.String("out", "", "folder to write tokenizer.json and tokenizer_config.json into (required)")
	if err := parseWithFiles(fs, args, &data); err != nil {
		return 2
	}
	if len(data) == 0 || *out == "" {
		fmt.Fprintln(stderr, trainTokenizerUsage)
		return 2
	}
	if len(specials) == 0 {
		specials = fileList{"<|endoftext|>"}
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "gozoo train-tokenizer:", err)
		return 1
	}
	texts := make([]string, len(data))
	for i, path := range data {
		b, err := os.ReadFile(path)
		if err != nil {
			return fail(err)
		}
		texts[i] = string(b)
	}
	tj, err := tokenizer.TrainBPE(texts, tokenizer.BPETrainOptions{VocabSize: *vocab, MinFrequency: *minFreq, SpecialTokens: specials})
	if err != nil {
		return fail(err)
	}
	tok, err := tokenizer.FromJSON(tj)
	if err != nil {
		return fail(fmt.Errorf("the trained tokenizer does not load: %w", err))
	}
	// The first special token ends a text: it is the EOS of generation
	// and the separator gozoo train puts between files.
	cfg, err := json.MarshalIndent(map[string]any{
		"tokenizer_class":  "PreTrainedTokenizerFast",
		"eos_token":        specials[0],
		"bos_token":        nil,
		"add_bos_token":    false,
		"model_max_length": 1 << 20,
	}, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "tokenizer.json"), tj, 0o644); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "tokenizer_config.json"), append(cfg, '\n'), 0o644); err != nil {
		return fail(err)
	}
	var bytes, ids int
	for _, t := range texts {
		enc, err := tok.Encode(t, false)
		if err != nil {
			return fail(err)
		}
		bytes, ids = bytes+len(t), ids+len(enc)
	}
	fmt.Fprintf(stdout, "wrote %s/tokenizer.json: %d ids; %d bytes of text are %d tokens (%.2f bytes per token)\n",
		*out, tok.VocabSize(), bytes, ids, float64(bytes)/float64(max(ids, 1)))
	return 0
}
