package zoo_test

import (
	"os"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
)

// TestReadOnlyParams: weights bound in place from a file mapping (the
// matrices of a safetensors or GGUF checkpoint, per-expert tensors bound
// as slices among them) are marked read-only, so backends may prepare
// forms of them; widened vectors and random weights, memory the program
// owns, are not.
func TestReadOnlyParams(t *testing.T) {
	for _, dir := range []string{ggufDir(t, "llama_q4_0"), ggufDir(t, "qwen3_f16"), "../testdata/golden/qwen3_gqa_tied", "../testdata/golden/qwen3_moe_normtopk"} {
		m, err := zoo.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		matrices, readOnly, sliced := 0, 0, 0
		for _, p := range m.Params().All() {
			if p.Role == graphs.Matrix {
				matrices++
			}
			if p.Slices != nil {
				sliced++
			}
			if p.ReadOnly {
				readOnly++
				if p.Role != graphs.Matrix {
					t.Errorf("%s: %s %s is read-only: vectors are widened into the heap", dir, p.Role, p.Name)
				}
			}
		}
		if readOnly == 0 || readOnly != matrices {
			t.Errorf("%s: %d of %d matrices read-only, want all (%d in slices)", dir, readOnly, matrices, sliced)
		}
	}
	data, err := os.ReadFile("../testdata/golden/qwen3_gqa_tied/config.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := zoo.ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := zoo.NewRandom(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params().All() {
		if p.ReadOnly {
			t.Fatalf("random weight %s is read-only", p.Name)
		}
	}
}
