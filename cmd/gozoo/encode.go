package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gozoo/gozoo/tokenizer"
)

func init() {
	register(command{
		name:    "encode",
		summary: "turn JSON lines of text into token ids with a tokenizer.json or a GGUF file",
		run:     runEncode,
	})
}

func runEncode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("encode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("tokenizer", "", "directory holding tokenizer.json (and tokenizer_config.json, if any), or a .gguf file")
	special := fs.Bool("special", false, "apply the post-processor, as add_special_tokens=True does (e.g. a leading <bos>)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: gozoo encode --tokenizer DIR|FILE.gguf [--special] < in.jsonl > out.jsonl

Reads one JSON object {"text": "..."} per line (other fields are ignored,
blank lines skipped) and writes one {"ids": [...]} line per input. A line
that cannot be read gets {"error": "line N: ..."} in its place and a message
on stderr; the exit status is then 1.

With a .gguf file the tokenizer is built from its tokenizer.ggml.* metadata
and encodes as llama.cpp does (special tokens in the text matched, no
normalizer); --special adds BOS/EOS per add_bos_token/add_eos_token.`)
		fs.PrintDefaults()
	}
	tok, status := loadTokenizerFlags("encode", fs, args, dir, stderr)
	if tok == nil {
		return status
	}
	return processLines("encode", stdin, stdout, stderr, func(line []byte) (any, error) {
		var in struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(line, &in); err != nil {
			return nil, inputError(err, `"text" must be a string`)
		}
		if in.Text == nil {
			return nil, errors.New(`want an object with a string "text"`)
		}
		ids, err := tok.Encode(*in.Text, *special)
		if err != nil {
			return nil, err
		}
		if ids == nil {
			ids = []int{}
		}
		return struct {
			IDs []int `json:"ids"`
		}{ids}, nil
	})
}

// inputError describes why an input line could not be decoded.
func inputError(err error, typeMsg string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return errors.New(typeMsg)
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// loadTokenizerFlags parses a tokenizer subcommand's flags and loads the
// tokenizer. On failure it returns nil and the exit status.
func loadTokenizerFlags(name string, fs *flag.FlagSet, args []string, dir *string, stderr io.Writer) (*tokenizer.Tokenizer, int) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, 0
		}
		return nil, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gozoo %s: unexpected argument %q (input comes on stdin)\n", name, fs.Arg(0))
		return nil, 2
	}
	if *dir == "" {
		fmt.Fprintf(stderr, "gozoo %s: --tokenizer DIR is required\n", name)
		fs.Usage()
		return nil, 2
	}
	tok, err := loadTokenizer(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "gozoo %s: %v\n", name, err)
		return nil, 1
	}
	return tok, 0
}

// loadTokenizer loads a tokenizer.json directory, or the tokenizer in the
// metadata of a .gguf file.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if !isGGUFPath(path) {
		return tokenizer.Load(path)
	}
	meta, err := ggufMetadata(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tokenizer.FromGGUFMetadata(path, meta)
}

// processLines answers each non-blank input line with one JSON line. A line
// whose handling fails is answered with {"error": "line N: ..."}, reported on
// stderr, and makes the exit status 1; the other lines are still answered.
// Output is flushed whenever no more input is waiting, so the commands work
// interactively too.
func processLines(name string, stdin io.Reader, stdout, stderr io.Writer, handle func(line []byte) (any, error)) int {
	r := bufio.NewReaderSize(stdin, 1<<16)
	w := bufio.NewWriterSize(stdout, 1<<16)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	status := 0
	for lineNo := 1; ; lineNo++ {
		line, readErr := r.ReadBytes('\n')
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			out, err := handle(trimmed)
			if err != nil {
				msg := fmt.Sprintf("line %d: %v", lineNo, err)
				fmt.Fprintf(stderr, "gozoo %s: %s\n", name, msg)
				out = struct {
					Error string `json:"error"`
				}{msg}
				status = 1
			}
			if err := enc.Encode(out); err != nil {
				fmt.Fprintf(stderr, "gozoo %s: writing output: %v\n", name, err)
				return 1
			}
		}
		if readErr != nil {
			if readErr != io.EOF {
				fmt.Fprintf(stderr, "gozoo %s: reading input: %v\n", name, readErr)
				status = 1
			}
			break
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				fmt.Fprintf(stderr, "gozoo %s: writing output: %v\n", name, err)
				return 1
			}
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "gozoo %s: writing output: %v\n", name, err)
		return 1
	}
	return status
}
