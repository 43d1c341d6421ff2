package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
)

func init() {
	register(command{
		name:    "decode",
		summary: "turn JSON lines of token ids back into text with a tokenizer.json",
		run:     runDecode,
	})
}

func runDecode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("tokenizer", "", "directory holding tokenizer.json (and tokenizer_config.json, if any)")
	skip := fs.Bool("skip-special", false, "drop special tokens, as skip_special_tokens=True does")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: gozoo decode --tokenizer DIR [--skip-special] < in.jsonl > out.jsonl

Reads one JSON object {"ids": [...]} per line (other fields are ignored,
blank lines skipped) and writes one {"text": "..."} line per input, with no
clean-up of tokenization spaces. A line that cannot be read, or holds an id
outside the vocabulary, gets {"error": "line N: ..."} in its place and a
message on stderr; the exit status is then 1.`)
		fs.PrintDefaults()
	}
	tok, status := loadTokenizerFlags("decode", fs, args, dir, stderr)
	if tok == nil {
		return status
	}
	return processLines("decode", stdin, stdout, stderr, func(line []byte) (any, error) {
		var in struct {
			IDs *[]int `json:"ids"`
		}
		if err := json.Unmarshal(line, &in); err != nil {
			return nil, inputError(err, `"ids" must be an array of integers`)
		}
		if in.IDs == nil {
			return nil, errors.New(`want an object with an integer array "ids"`)
		}
		text, err := tok.Decode(*in.IDs, *skip)
		if err != nil {
			return nil, err
		}
		return struct {
			Text string `json:"text"`
		}{text}, nil
	})
}
