package golden

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
	_ "github.com/gozoo/gozoo/zoo/all"
)

// TestFastAgainstLlamaCPP runs every GGUF case in fast mode against
// llama.cpp's own logits and greedy ids, and checks that the rule tells
// exact mode apart: exact mode computes transformers' float32 forward,
// which differs from llama.cpp's by more than the fast tolerance on every
// quantized case.
func TestFastAgainstLlamaCPP(t *testing.T) {
	for _, dir := range testfiles.Cases(t, "gguf") {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			r := RunFast(dir)
			if !r.Pass {
				t.Fatal(r)
			}
			if b := RunFastWith(dir, Options{Batch: 8}); !b.Pass {
				t.Fatalf("batch 8: %v", b)
			}
			if !strings.Contains(r.String(), "llama_greedy=") {
				t.Errorf("report %q lacks the greedy count", r)
			}
			if strings.Contains(dir, "f16") {
				return // exact and fast differ only by F16 rounding there
			}
			exact := Result{Case: r.Case}
			if err := runFast(dir, &exact, false, Options{}); err == nil {
				t.Errorf("exact mode passes the fast-mode check against llama.cpp (%s): the tolerance tells nothing", exact.Detail)
			}
		})
	}
}
