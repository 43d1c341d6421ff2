package golden

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gozoo/gozoo/internal/cudaemu"
)

// TestGoldenEmulated runs the golden cases through the device runtime on
// the CUDA emulator (internal/cudaemu): each model's graphs on a
// cuda.Backend, every op's kernels and cuBLAS products, the KV pool in
// device memory. The cases' own tolerances apply. Every case runs alone;
// a few run inside a batch of 4 sequences too (-short: two cases alone,
// one batched).
func TestGoldenEmulated(t *testing.T) {
	cases, _ := filepath.Glob(filepath.Join("..", "testdata", "golden", "*"))
	gguf, _ := filepath.Glob(filepath.Join("..", "testdata", "gguf", "*"))
	cases = append(cases, gguf...)
	batched := map[string]bool{"gemma3_sliding_mqa": true, "qwen3_moe_normtopk": true, "llama_q4_0": true}
	if testing.Short() {
		cases = []string{filepath.Join("..", "testdata", "golden", "qwen3_moe_normtopk"), filepath.Join("..", "testdata", "golden", "gemma3_sliding_mqa")}
		batched = map[string]bool{"gemma3_sliding_mqa": true}
	}
	if len(cases) == 0 {
		t.Fatal("no golden cases in ../testdata")
	}
	for _, dir := range cases {
		for _, batch := range []int{1, 4} {
			if batch > 1 && !batched[filepath.Base(dir)] {
				continue
			}
			t.Run(fmt.Sprintf("%s/batch=%d", filepath.Base(dir), batch), func(t *testing.T) {
				dev := cudaemu.New(t)
				r := RunWith(dir, Options{Device: dev, Batch: batch})
				if !r.Pass {
					t.Fatal(r)
				}
				t.Logf("%v (%d launches and products)", r, dev.Calls())
			})
		}
	}
}
