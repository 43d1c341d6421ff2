package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/gozoo/gozoo/golden"
	"github.com/gozoo/gozoo/graphs"
)

func init() {
	register(command{
		name:    "golden",
		summary: "check models against golden cases (logits and greedy decode)",
		run:     runGolden,
	})
}

func runGolden(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("golden", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fast := fs.Bool("fast", false, "check fast mode (llama.cpp's arithmetic) against llama.cpp's own logits and greedy ids (GGUF cases)")
	device := deviceFlag(fs)
	adapter := fs.String("adapter", "", "apply the PEFT LoRA adapter in `DIR` to every case (instead of a case's own adapter/)")
	kvCache := kvCacheFlag(fs, nil, false)
	batch := fs.Int("batch", 1, "run each case's forward and greedy decode inside a batch of `N` sequences (the case and N-1 companions that join and leave)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: gozoo golden DIR...\n\nEach DIR is a golden case (config.json, model.safetensors, golden.safetensors,\ngolden.json). Prints PASS or FAIL per case; exits 1 if any case fails.\n\nWith --fast, each DIR is a GGUF case (../shared/gguf) checked in fast mode\nagainst llama.cpp's llama_logits and llama_greedy_ids; with --kv-cache q8_0|q4_0,\nagainst llama_logits_kv_<type> and llama_greedy_ids_kv_<type> (the types its\ngolden.json llama_cpp_kv.checks lists; where llama.cpp refused the type, the\ncase passes when gozoo refuses it too).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if *batch < 1 {
		fmt.Fprintf(stderr, "gozoo golden: --batch must be at least 1, got %d\n", *batch)
		return 2
	}
	kvType, err := kvCache.typ(*fast)
	if err != nil {
		fmt.Fprintf(stderr, "gozoo golden: %v\n", err)
		return 2
	}
	if kvType != graphs.KVF32 && (!*fast || !kvType.Quantized()) {
		// Only llama.cpp's references with a q8_0 / q4_0 cache exist; the
		// others (transformers', llama.cpp's F32 cache) are exact.
		fmt.Fprintf(stderr, "gozoo golden: --kv-cache %s has no references: the cases hold llama.cpp's with q8_0 and q4_0 caches, checked with --fast\n", kvType)
		return 2
	}
	dev, err := openDevice(*device)
	if err != nil {
		fmt.Fprintf(stderr, "gozoo golden: %v\n", err)
		return 1
	}
	status := 0
	for _, dir := range fs.Args() {
		run := golden.RunWith
		if *fast {
			run = golden.RunFastWith
		}
		r := run(dir, golden.Options{Batch: *batch, Device: dev, KVCache: kvType, Adapter: *adapter})
		fmt.Fprintln(stdout, r)
		if !r.Pass {
			status = 1
		}
	}
	return status
}
