package zoo_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/golden"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/testfiles"
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
// Every architecture goes through F32 and the first types (the choices
// differ by architecture); the types added later, whose blocks do not,
// go through SmolLM2's shape (256-wide rows, so the K types are written
// as themselves) and the MoE's experts.
// writtenAs is a block type each file type writes some of SmolLM2's
// tensors in. Its only 256-wide rows are ffn_down's, which Q2_K raises to
// Q3_K and Q3_K_M (three layers) to Q4_K, as llama.cpp does.
var writtenAs = map[string]gguf.Type{
	"q8_0": gguf.TypeQ8_0, "q4_0": gguf.TypeQ4_0, "q4_k_m": gguf.TypeQ4_K, "q4_1": gguf.TypeQ4_1,
	"q5_1": gguf.TypeQ5_1, "q2_k": gguf.TypeQ3_K, "q3_k_m": gguf.TypeQ4_K, "q5_k_s": gguf.TypeQ5_K,
	"q5_k_m": gguf.TypeQ5_K, "iq4_nl": gguf.TypeIQ4_NL, "iq4_xs": gguf.TypeIQ4_XS,
}

func TestWriteGGUF(t *testing.T) {
	ids := []int{3, 17, 5, 99, 42, 7, 250}
	laterTypesOn := map[string]bool{"llama_smollm2_gqa_bf16": true, "qwen3moe_q8_0": true}
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
			later bool
		}{{"f32", 1e-6, false}, {"q8_0", 0.005, false}, {"q4_0", 0.13, false}, {"q4_k_m", 0.13, false},
			// The later types' worst round-trip errors per block (quant's
			// TestQuantizeRoundTrip) bound them relative to a tensor's
			// largest value too; Q2_K's 2 bits the loosest.
			{"q4_1", 0.07, true}, {"q5_1", 0.036, true}, {"q2_k", 0.45, true}, {"q3_k_m", 0.23, true}, {"q5_k_s", 0.07, true}, {"q5_k_m", 0.07, true},
			{"iq4_nl", 0.13, true}, {"iq4_xs", 0.14, true}} {
			if tc.later && !laterTypesOn[name] {
				continue
			}
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
					// fused and regrouped kernels (MoE experts among them),
					// whose sums round differently: 1.0e-5 on qwen3moe_q8_0.
					if d := golden.MaxAbsDiff(got, want); d > 3e-5 {
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
				// The type itself is written where the rows allow it.
				if want, ok := writtenAs[tc.ftype]; ok && name == "llama_smollm2_gqa_bf16" {
					found := false
					for _, ti := range f.Tensors {
						found = found || ti.Type == want
					}
					if !found {
						for _, ti := range f.Tensors {
							t.Logf("%s %s %v", ti.Name, ti.Type, ti.Dims)
						}
						t.Errorf("no tensor is %s in a %s file", want, tc.ftype)
					}
				}
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

// TestGGUFTypeChoicesMatchLlamaCPP: for every llama.cpp case (not pure,
// not F16) the types WriteGGUF picks for its file type are the ones
// llama.cpp's quantizer picked (golden.json tensor_types): Q4_K_M's and
// Q5_K_M's use_more_bits layers, Q3_K_M's attn_v/attn_output/ffn_down
// mix, IQ4_NL's n_gqa rule, Q4_1's output fallback to Q8_0, 8-expert
// rules on qwen3moe.
func TestGGUFTypeChoicesMatchLlamaCPP(t *testing.T) {
	checked := map[string]bool{}
	for _, dir := range testfiles.Cases(t, "gguf") {
		var g struct {
			Quantize struct {
				Ftype string `json:"llama_ftype"`
				Pure  bool   `json:"pure"`
			} `json:"quantize"`
			TensorTypes map[string]string `json:"tensor_types"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatal(err)
		}
		if g.Quantize.Pure || g.Quantize.Ftype == "f16" {
			continue
		}
		path := filepath.Join(dir, "model.gguf")
		m, err := zoo.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := zoo.GGUFConfigJSON(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := zoo.GGUFTensorTypes(m, cfg, g.Quantize.Ftype)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if len(got) != len(g.TensorTypes) {
			t.Errorf("%s: %d tensors, llama.cpp wrote %d", filepath.Base(dir), len(got), len(g.TensorTypes))
		}
		for name, want := range g.TensorTypes {
			if got[name].String() != want {
				t.Errorf("%s %s: %s picks %s, llama.cpp %s", filepath.Base(dir), name, g.Quantize.Ftype, got[name], want)
			}
		}
		checked[g.Quantize.Ftype] = true
	}
	t.Logf("file types checked: %v", checked)
	for _, ft := range []string{"q4_1", "q3_k_m", "q4_k_m"} { // the vendored cases
		if !checked[ft] {
			t.Errorf("no case checked %s", ft)
		}
	}
}
