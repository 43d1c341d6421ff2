package golden

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/testfiles"
	_ "github.com/gozoo/gozoo/zoo/all"
)

// TestFastKVCacheAgainstLlamaCPP runs every GGUF case in fast mode with
// q8_0 and q4_0 KV caches against llama.cpp's logits and greedy ids with
// that cache (llama_logits_kv_<type>), as golden.json's llama_cpp_kv says:
// a type llama.cpp refused (head_dim 16) must be refused; a type in
// checks must pass, alone and in a batch of 4; a type whose references
// are not held (a float32 tie, README) is reported, not judged. Cases
// with head_dim 64, 128 or 256 (gemma3, llama_q5_k_m) rotate Q and K by
// the Hadamard matrix first. The check tells the cache types apart: an
// F16 cache, or the other quantized type, fails against the references.
func TestFastKVCacheAgainstLlamaCPP(t *testing.T) {
	for _, dir := range testfiles.Cases(t, "gguf") {
		name := filepath.Base(dir)
		kv := readKVChecks(t, dir)
		for _, typ := range []graphs.KVCacheType{graphs.KVQ8_0, graphs.KVQ4_0} {
			t.Run(name+"/"+typ.String(), func(t *testing.T) {
				r := RunFastWith(dir, Options{KVCache: typ})
				if !r.Pass {
					t.Fatal(r)
				}
				switch {
				case kv.refused[typ.String()]:
					if !strings.Contains(r.Detail, "refused") {
						t.Fatalf("llama.cpp refused a %s cache here: want a refusal, got %v", typ, r)
					}
					return
				case !kv.checks[typ.String()]:
					if !strings.Contains(r.Detail, "not held") {
						t.Fatalf("%s's %s references are not in checks: %v", name, typ, r)
					}
					return
				}
				if !strings.Contains(r.Detail, "llama_greedy=12/12") {
					t.Errorf("report %q lacks the greedy count", r)
				}
				if b := RunFastWith(dir, Options{KVCache: typ, Batch: 4}); !b.Pass {
					t.Fatalf("batch 4: %v", b)
				}
				for _, other := range []graphs.KVCacheType{graphs.KVF16, graphs.KVQ8_0, graphs.KVQ4_0} {
					if other == typ {
						continue
					}
					wrong := Result{Case: r.Case}
					if err := runFast(dir, &wrong, true, Options{KVCache: typ, cache: &other}); err == nil {
						t.Errorf("a %s cache passes the check against llama.cpp's %s cache (%s)", other, typ, wrong.Detail)
					}
				}
			})
		}
	}
}

// kvChecks is golden.json's llama_cpp_kv: the cache types held to
// llama.cpp's references, and those llama.cpp refused.
type kvChecks struct{ checks, refused map[string]bool }

func readKVChecks(t *testing.T, dir string) kvChecks {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		KV map[string]json.RawMessage `json:"llama_cpp_kv"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s/golden.json: %v", dir, err)
	}
	kv := kvChecks{checks: map[string]bool{}, refused: map[string]bool{}}
	var checks string
	if raw, ok := g.KV["checks"]; ok {
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Fatalf("%s/golden.json: llama_cpp_kv.checks: %v", dir, err)
		}
	}
	for _, typ := range strings.Fields(checks) {
		kv.checks[typ] = true
	}
	for _, typ := range []string{"q8_0", "q4_0"} {
		var per map[string]any
		if raw, ok := g.KV[typ]; ok && json.Unmarshal(raw, &per) == nil {
			_, kv.refused[typ] = per["refused"]
		}
	}
	return kv
}
