package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/tokenizer"
	"github.com/gozoo/gozoo/zoo"
)

func init() {
	register(command{
		name:    "quantize",
		summary: "write a Hugging Face checkpoint as a quantized GGUF file (q8_0, q4_k_m, iq4_xs, ...) that llama.cpp loads",
		run:     runQuantize,
	})
}

// ggufPre is the llama.cpp pre-tokenizer of each family's tokenizer, as
// convert_hf_to_gguf.py names it (override with --pre).
var ggufPre = map[string]string{"llama": "smollm", "qwen3": "qwen2", "qwen3_moe": "qwen2", "gpt2": "gpt-2"}

func runQuantize(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "Hugging Face checkpoint folder (config.json, safetensors, tokenizer.json) (required)")
	typ := fs.String("type", "q8_0", "file type, llama.cpp's per-tensor mix without an importance matrix: "+strings.Join(zoo.GGUFFileTypes(), ", "))
	out := fs.String("out", "", "GGUF file to write (required)")
	pre := fs.String("pre", "", "llama.cpp pre-tokenizer name (default: the family's: "+preList()+")")
	adapters := adapterFlag(fs, false)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *model == "" || *out == "" {
		fmt.Fprintln(stderr, "usage: gozoo quantize --model DIR --type "+strings.Join(zoo.GGUFFileTypes(), "|")+" --out FILE.gguf [--pre NAME] [--adapter DIR]")
		return 2
	}
	if err := quantize(*model, *typ, *out, *pre, *adapters, stdout); err != nil {
		fmt.Fprintln(stderr, "gozoo quantize:", err)
		return 1
	}
	return 0
}

func preList() string {
	var out []string
	for k, v := range ggufPre {
		out = append(out, k+" "+v)
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// quantize writes dir's checkpoint as a GGUF of type typ, with the LoRA
// adapters merged into the float weights first (a GGUF has no place for
// an unmerged adapter).
func quantize(dir, typ, out, pre string, adapters []string, stdout io.Writer) error {
	folder, err := loaders.OpenFolder(dir)
	if err != nil {
		return err
	}
	m, err := zoo.LoadConfig(dir, folder.Config, nil)
	if err != nil {
		return err
	}
	if err := applyAdapters(m, adapters, true); err != nil {
		return err
	}
	extra, err := tokenizerKVs(folder, m, pre)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := zoo.WriteGGUF(f, m, folder.Config, typ, filepath.Base(filepath.Clean(dir)), extra); err != nil {
		f.Close()
		os.Remove(out)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	info, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %.1f MB, %d tokenizer keys)\n", out, typ, float64(info.Size())/1e6, len(extra))
	return nil
}

// tokenizerKVs is the tokenizer.* metadata of the folder's tokenizer.json
// and chat template, or none when it has no tokenizer.json.
func tokenizerKVs(folder *loaders.Folder, m zoo.Model, pre string) ([]gguf.KV, error) {
	if folder.TokenizerJSON == nil {
		return nil, nil
	}
	if pre == "" {
		var ok bool
		if pre, ok = ggufPre[folder.ModelType]; !ok {
			return nil, fmt.Errorf("no llama.cpp pre-tokenizer is known for model_type %q: pass --pre", folder.ModelType)
		}
	}
	tok, err := tokenizer.FromFolder(folder)
	if err != nil {
		return nil, err
	}
	meta, err := tokenizer.GGUFMetadata(folder.Dir, tok, m.VocabSize(), pre)
	if err != nil {
		return nil, err
	}
	kvs := []gguf.KV{}
	for _, k := range []string{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"} {
		kvs = append(kvs, gguf.KV{Key: k, Value: meta[k]})
	}
	if eos := m.EOSTokenIDs(); len(eos) > 0 {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.eos_token_id", Value: uint32(eos[0])})
	}
	var cfg struct {
		BOS *int `json:"bos_token_id"`
		Pad *int `json:"pad_token_id"`
	}
	if err := json.Unmarshal(folder.Config, &cfg); err == nil {
		if cfg.BOS != nil && *cfg.BOS >= 0 {
			kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: uint32(*cfg.BOS)})
		}
		if cfg.Pad != nil && *cfg.Pad >= 0 {
			kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.padding_token_id", Value: uint32(*cfg.Pad)})
		}
	}
	c := tok.Config()
	kvs = append(kvs, gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: c.AddBOSToken})
	if t, err := chat.TemplateFromFolder(folder); err == nil {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template", Value: t.Source})
	}
	return kvs, nil
}
