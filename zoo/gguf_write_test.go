package zoo_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/golden"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
)

func lastLogits(t *testing.T, m zoo.Model, ids []int) []float32 {
	t.Helper()
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Append(ids)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestWriteGGUF writes safetensors checkpoints of every architecture as
// GGUF and reads them back: F32 is lossless (the same logits), and the
// quantized types load with llama.cpp's type choices and stay close.
func TestWriteGGUF(t *testing.T) {
	ids := []int{3, 17, 5, 99, 42, 7, 250}
	for _, name := range []string{"llama_smollm2_gqa_bf16", "llama_mha_untied", "qwen3_gqa_tied", "gemma3_sliding_mqa", "gpt2_prefixed", "qwen3moe_q8_0"} {
		dir := filepath.Join("..", "testdata", "golden", name)
		var cfgJSON []byte
		var err error
		if name == "qwen3moe_q8_0" {
			// A MoE model as llama.cpp has them (every layer sparse): the
			// config its GGUF metadata gives.
			dir = ggufDir(t, name)
			cfgJSON, err = zoo.GGUFConfigJSON(filepath.Join(dir, "model.gguf"))
		} else {
			cfgJSON, err = os.ReadFile(filepath.Join(dir, "config.json"))
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := zoo.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := lastLogits(t, m, ids)
		// F32 is lossless; the quantized types move each weight by at most
		// what their format allows, relative to the tensor's largest value
		// (Q8_0 0.0045, Q6_K 0.017, Q4_0 and Q4_K about 0.12 of a block's).
		for _, tc := range []struct {
			ftype string
			tol   float64
		}{{"f32", 1e-6}, {"q8_0", 0.005}, {"q4_0", 0.13}, {"q4_k_m", 0.13}} {
			t.Run(name+"/"+tc.ftype, func(t *testing.T) {
				var buf bytes.Buffer
				if err := zoo.WriteGGUF(&buf, m, cfgJSON, tc.ftype, name, nil); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "model.gguf")
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				back, err := zoo.Load(path)
				if err != nil {
					t.Fatal(err)
				}
				got := lastLogits(t, back, ids)
				if tc.ftype == "f32" {
					// Lossless weights; a model read from Q8_0 blocks ran the
					// fused kernel, whose sums round differently.
					if d := golden.MaxAbsDiff(got, want); d > 1e-5 {
						t.Errorf("logits moved by %g through f32", d)
					}
				} else if math.IsInf(golden.MaxAbsDiff(got, got), 1) {
					t.Errorf("non-finite logits through %s", tc.ftype)
				}
				for _, p := range m.Params().All() {
					q, ok := back.Params().Get(p.Name)
					if !ok {
						t.Fatalf("tensor %s is missing", p.Name)
					}
					a, b := p.Float32s(), q.Float32s()
					var amax float64
					for _, v := range a {
						amax = math.Max(amax, math.Abs(float64(v)))
					}
					if d := golden.MaxAbsDiff(a, b); d > tc.tol*amax+1e-7 {
						t.Errorf("%s moved by %g, %.3g of its largest value", p.Name, d, d/amax)
					}
				}
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if tc.ftype == "q8_0" {
					for _, ti := range f.Tensors {
						if len(ti.Dims) >= 2 && ti.Type != gguf.TypeQ8_0 && ti.Name != "position_embd.weight" && !strings.Contains(ti.Name, "ffn_gate_inp") && ti.Dims[0]%32 == 0 {
							t.Errorf("%s is %s in a q8_0 file", ti.Name, ti.Type)
						}
					}
				}
			})
		}
	}
}

// TestWriteGGUFRefusesDenseMoE: llama.cpp's qwen3moe has no dense layers.
func TestWriteGGUFRefusesDenseMoE(t *testing.T) {
	dir := filepath.Join("..", "testdata", "golden", "qwen3_moe_normtopk")
	cfgJSON, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := zoo.WriteGGUF(&bytes.Buffer{}, m, cfgJSON, "q8_0", "x", nil); err == nil || !strings.Contains(err.Error(), "mlp_only_layers") {
		t.Errorf("want an error naming mlp_only_layers, got %v", err)
	}
}
