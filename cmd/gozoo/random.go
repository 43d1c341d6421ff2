package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gozoo/gozoo/zoo"
)

func init() {
	register(command{
		name:    "random",
		summary: "write an HF-format checkpoint with random weights for a config.json",
		run:     runRandom,
	})
}

func runRandom(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("random", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "config.json to build the model from (required)")
	out := fs.String("out", "", "folder to write config.json and model.safetensors into (required)")
	dtype := fs.String("dtype", "f32", "weight dtype: f32 or bf16")
	seed := fs.Uint64("seed", 0, "random seed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *config == "" || *out == "" {
		fmt.Fprintln(stderr, "usage: gozoo random --config config.json --out DIR [--dtype f32|bf16] [--seed N]")
		return 2
	}
	data, err := os.ReadFile(*config)
	if err != nil {
		fmt.Fprintln(stderr, "gozoo random:", err)
		return 1
	}
	if err := zoo.WriteRandomCheckpoint(data, *out, *dtype, *seed); err != nil {
		fmt.Fprintf(stderr, "gozoo random: %s: %v\n", *config, err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s/config.json and %s/model.safetensors (%s, seed %d)\n", *out, *out, *dtype, *seed)
	copied, err := copyProcessorConfigs(*config, *out)
	if err != nil {
		fmt.Fprintln(stderr, "gozoo random:", err)
		return 1
	}
	for _, name := range copied {
		fmt.Fprintf(stdout, "copied %s\n", name)
	}
	return 0
}

// copyProcessorConfigs copies an image processor's configs that sit
// beside config: preprocessor_config.json and processor_config.json next
// to a config.json, or NAME.preprocessor_config.json and
// NAME.processor_config.json next to NAME.json (the layout of
// ../shared/configs). A vision-language checkpoint needs them to run.
func copyProcessorConfigs(config, out string) ([]string, error) {
	dir, base := filepath.Split(config)
	stem := strings.TrimSuffix(base, ".json")
	var copied []string
	for _, name := range []string{"preprocessor_config.json", "processor_config.json"} {
		src := filepath.Join(dir, name)
		if base != "config.json" {
			src = filepath.Join(dir, stem+"."+name)
		}
		data, err := os.ReadFile(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return copied, err
		}
		dst := filepath.Join(out, name)
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return copied, err
		}
		copied = append(copied, dst)
	}
	return copied, nil
}
