package main

import (
	"flag"
	"fmt"
	"io"
	"os"

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
	return 0
}
