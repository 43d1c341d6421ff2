package main

import (
	"strings"
	"testing"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/internal/testfiles"
)

// TestDeviceWithoutGPU: every command that runs a model takes --device,
// and on a machine without a GPU asking for one fails with one line
// naming libcuda, not a crash.
func TestDeviceWithoutGPU(t *testing.T) {
	if dev, err := cuda.Open(0); err == nil {
		t.Skipf("a CUDA device is present: %s", dev.Name)
	}
	model := testfiles.Fixture(t, "golden", "gpt2_original_bf16")
	for _, args := range [][]string{
		{"golden", "--device", "cuda", model},
		{"golden", "--device", "cuda", "--batch", "8", model},
		{"run", "--model", model, "--prompt", "hi", "--device", "cuda"},
		{"bench", "--model", model, "--device", "cuda:0", "--prompt-tokens", "4", "--gen-tokens", "2"},
		{"perplexity", "--model", model, "--ids", "x.json", "--device", "cuda"},
		{"run", "--model", model, "--prompt", "hi", "--device", "tpu"},
	} {
		t.Run(strings.Join(args[:1], " ")+" "+args[len(args)-1], func(t *testing.T) {
			out, errb, status := gozoo(t, "", args...)
			want := "libcuda"
			if args[len(args)-1] == "tpu" {
				want = "want cpu, cuda or cuda:N"
			}
			if status != 1 || !strings.Contains(errb, want) || strings.Count(strings.TrimSpace(errb), "\n") > 0 || strings.Contains(errb, "panic") {
				t.Errorf("status %d, stdout %q, stderr %q: want status 1 and one line naming %q", status, out, errb, want)
			}
		})
	}
}
