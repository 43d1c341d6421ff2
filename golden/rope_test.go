package golden

import (
	"path/filepath"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
	_ "github.com/gozoo/gozoo/zoo/all"
)

// TestRoPEScalingCases runs the scaled-rope cases on the CPU, alone and
// inside a batch of 8: llama3 (whose table keeps, smooths and divides
// frequencies) and yarn (whose factor multiplies cos and sin), positions
// past their original context.
func TestRoPEScalingCases(t *testing.T) {
	testfiles.MustExpand()
	for _, name := range []string{"llama_rope_llama3", "qwen3_rope_yarn"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", "golden", name)
			for _, batch := range []int{1, 8} {
				r := RunWith(dir, Options{Batch: batch})
				if !r.Pass || r.GreedyMatched != r.GreedyTotal || r.GreedyTotal == 0 {
					t.Fatalf("batch %d: %v", batch, r)
				}
				t.Logf("batch %d: %v", batch, r)
			}
		})
	}
}
