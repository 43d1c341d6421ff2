package zoo_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/golden"
	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
)

// TestWriteGGUFRoPEScaling writes the scaled-rope golden cases as GGUF
// (llama3 as llama's rope_freqs.weight, yarn as rope.scaling.* keys),
// reads them back and runs the cases' golden checks on the result: F32
// passes them (yarn's logits bit for bit, llama3's within 1e-4), Q8_0
// stays within what its blocks allow.
func TestWriteGGUFRoPEScaling(t *testing.T) {
	testfiles.MustExpand()
	ids := []int{3, 17, 5, 99, 42, 7, 250, 11, 60, 33, 21, 4, 8, 140, 2, 90, 77, 45, 19, 300}
	for _, c := range []struct {
		name   string
		keys   map[string]any // metadata the file must hold
		tensor bool           // rope_freqs.weight
	}{
		{"llama_rope_llama3", nil, true},
		{"qwen3_rope_yarn", map[string]any{"qwen3.rope.scaling.type": "yarn", "qwen3.rope.scaling.factor": float32(4),
			"qwen3.rope.scaling.original_context_length": uint32(16), "qwen3.rope.scaling.yarn_beta_fast": float32(32), "qwen3.rope.scaling.yarn_beta_slow": float32(1)}, false},
	} {
		src := filepath.Join("..", "testdata", "golden", c.name)
		cfgJSON, err := os.ReadFile(filepath.Join(src, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := zoo.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, ftype := range []string{"f32", "q8_0"} {
			t.Run(c.name+"/"+ftype, func(t *testing.T) {
				var buf bytes.Buffer
				if err := zoo.WriteGGUF(&buf, m, cfgJSON, ftype, c.name, nil); err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "model.gguf"), buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				f, err := gguf.Open(filepath.Join(dir, "model.gguf"))
				if err != nil {
					t.Fatal(err)
				}
				for k, want := range c.keys {
					if got, ok := f.Metadata[k]; !ok || got != want {
						t.Errorf("%s = %v (%T), want %v", k, got, got, want)
					}
				}
				if _, ok := f.Tensor("rope_freqs.weight"); ok != c.tensor {
					t.Errorf("rope_freqs.weight present: %v, want %v", ok, c.tensor)
				}
				f.Close()
				back, err := zoo.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				got, want := lastLogits(t, back, ids), lastLogits(t, m, ids)
				// F32 weights are lossless; llama3's smoothed frequencies
				// may come back one float32 ulp off (see llama.divisor).
				if d := golden.MaxAbsDiff(got, want); ftype == "f32" && d > 1e-4 {
					t.Errorf("logits moved by %g through f32", d)
				} else {
					t.Logf("logits moved by %g through %s", d, ftype)
				}
				// The case's own checks on the GGUF model.
				for _, name := range []string{"golden.json", "golden.safetensors"} {
					b, err := os.ReadFile(filepath.Join(src, name))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				// Q8_0 moves the vendored cases' logits by 0.2 to 1.7
				// (measured: llama_mha_untied 0.22, qwen3_gqa_tied 0.48,
				// llama_smollm2_gqa_bf16 1.01, llama_rope_llama3 1.68);
				// plain rope instead of the scaled one moves them by 7 to
				// 25 (golden.json's effect_vs_default_rope_max_abs_logits).
				r := golden.RunWith(dir, golden.Options{})
				switch {
				case ftype == "f32" && !r.Pass:
					t.Errorf("golden through f32: %v", r)
				case ftype != "f32" && !(r.LogitsMaxAbs > 0 && r.LogitsMaxAbs < 3):
					t.Errorf("golden through %s: logits differ by %g, want under 3: %v", ftype, r.LogitsMaxAbs, r)
				default:
					t.Logf("golden through %s: %v", ftype, r)
				}
			})
		}
	}
}

// TestWriteGGUFRoPERefuses: scalings a GGUF cannot carry are errors that
// say why.
func TestWriteGGUFRoPERefuses(t *testing.T) {
	testfiles.MustExpand()
	for _, c := range []struct {
		name, src, from, to, errHas string
	}{
		{"llama3 on qwen3", "qwen3_rope_yarn", `"rope_type": "yarn"`, `"rope_type": "llama3", "low_freq_factor": 1, "high_freq_factor": 4`, "rope_freqs.weight"},
		{"yarn without truncation", "qwen3_rope_yarn", `"rope_type": "yarn"`, `"rope_type": "yarn", "truncate": false`, "truncate"},
		{"dynamic", "llama_rope_llama3", `"rope_type": "llama3"`, `"rope_type": "dynamic"`, "dynamic"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join("..", "testdata", "golden", c.src)
			b, err := os.ReadFile(filepath.Join(src, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			edited := strings.Replace(string(b), c.from, c.to, 1)
			if edited == string(b) {
				t.Fatalf("config.json has no %s", c.from)
			}
			m, err := zoo.Load(src)
			if err != nil {
				t.Fatal(err)
			}
			err = zoo.WriteGGUF(&bytes.Buffer{}, m, []byte(edited), "f32", c.name, nil)
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("error %v, want one mentioning %s", err, c.errHas)
			}
		})
	}
}
