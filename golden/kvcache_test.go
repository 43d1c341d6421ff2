package golden

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/testfiles"
	_ "github.com/gozoo/gozoo/zoo/all"
)

// TestFastKVCacheAgainstLlamaCPP runs the GGUF cases in fast mode with
// q8_0 and q4_0 KV caches against llama.cpp's logits and greedy ids with
// that cache (llama_logits_kv_<type>): gemma3_q4_k_m (head_dim 256: Q and
// K rotated by the 256-point Hadamard matrix, V by the 64-point one) is
// held to q8_0, and the head_dim-16 cases must refuse both types, as
// llama.cpp does. The check tells the cache types apart: an F16 cache
// (0.36 max from llama.cpp's q8_0 logits, golden.json) and the q4_0 cache
// fail against the q8_0 references.
func TestFastKVCacheAgainstLlamaCPP(t *testing.T) {
	for _, dir := range testfiles.Cases(t, "gguf") {
		name := filepath.Base(dir)
		for _, typ := range []graphs.KVCacheType{graphs.KVQ8_0, graphs.KVQ4_0} {
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				r := RunFastWith(dir, Options{KVCache: typ})
				if !r.Pass {
					t.Fatal(r)
				}
				if name != "gemma3_q4_k_m" {
					if !strings.Contains(r.Detail, "refused") {
						t.Fatalf("head_dim 16: want a refusal, got %v", r)
					}
					return
				}
				if typ == graphs.KVQ4_0 {
					if !strings.Contains(r.Detail, "not held") {
						t.Fatalf("gemma3's q4_0 references are not in checks: %v", r)
					}
					return
				}
				if !strings.Contains(r.Detail, "llama_greedy=12/12") {
					t.Errorf("report %q lacks the greedy count", r)
				}
				if b := RunFastWith(dir, Options{KVCache: typ, Batch: 4}); !b.Pass {
					t.Fatalf("batch 4: %v", b)
				}
				for _, other := range []graphs.KVCacheType{graphs.KVF16, graphs.KVQ4_0} {
					wrong := Result{Case: r.Case}
					if err := runFast(dir, &wrong, true, Options{KVCache: typ, cache: &other}); err == nil {
						t.Errorf("a %s cache passes the check against llama.cpp's %s cache (%s)", other, typ, wrong.Detail)
					}
				}
			})
		}
	}
}
