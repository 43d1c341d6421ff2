package golden

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/loaders"
)

// loraCases are the bundled PEFT LoRA cases (folders with adapter/).
var loraCases = []string{"llama_lora_qv", "qwen3_lora_all"}

// TestLoRAGolden runs the LoRA cases: logits, hidden states and greedy
// ids of the adapted model, and the gradients of the adapter's factors.
func TestLoRAGolden(t *testing.T) {
	for _, c := range loraCases {
		t.Run(c, func(t *testing.T) {
			r := Run(filepath.Join("..", "testdata", "golden", c))
			if !r.Pass || !r.GradsChecked {
				t.Fatalf("%v (gradients checked: %v)", r, r.GradsChecked)
			}
			t.Log(r)
		})
	}
}

// loraCopy links a LoRA case's files into a temporary folder, with its
// adapter copied so that a test may edit it.
func loraCopy(t *testing.T, name string) (dir string, config map[string]any, tensors []loaders.LoRATensor) {
	t.Helper()
	src := filepath.Join("..", "testdata", "golden", name)
	dir = t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == AdapterDir || strings.HasSuffix(e.Name(), ".zst") {
			continue
		}
		abs, err := filepath.Abs(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	a, err := loaders.ReadLoRA(filepath.Join(src, AdapterDir))
	if err != nil {
		t.Fatal(err)
	}
	config = map[string]any{}
	for k, v := range a.Config.Raw {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			t.Fatal(err)
		}
		config[k] = x
	}
	return dir, config, a.Tensors
}

// TestLoRARefused edits a case's adapter so that it no longer fits the
// model, and expects the case to fail naming the tensor or key at fault;
// an adapter that is read but has no effect must fail on the logits.
func TestLoRARefused(t *testing.T) {
	const q0A = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
	for _, c := range []struct {
		name   string
		edit   func(config map[string]any, ts []loaders.LoRATensor) []loaders.LoRATensor
		errHas string
	}{
		{"a module the model lacks", func(_ map[string]any, ts []loaders.LoRATensor) []loaders.LoRATensor {
			return append(ts, loaders.LoRATensor{Name: "base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight", Shape: ts[0].Shape, Data: ts[0].Data})
		}, "layers.7.self_attn.q_proj.lora_A.weight"},
		{"a factor missing", func(_ map[string]any, ts []loaders.LoRATensor) []loaders.LoRATensor {
			return slices.DeleteFunc(ts, func(x loaders.LoRATensor) bool { return x.Name == q0A })
		}, q0A},
		{"a module not targeted", func(c map[string]any, ts []loaders.LoRATensor) []loaders.LoRATensor {
			c["target_modules"] = []string{"q_proj"}
			return ts
		}, "v_proj.lora_"},
		{"another rank", func(c map[string]any, ts []loaders.LoRATensor) []loaders.LoRATensor {
			c["r"] = 2
			return ts
		}, "at r=2"},
		{"a transposed factor", func(_ map[string]any, ts []loaders.LoRATensor) []loaders.LoRATensor {
			i := slices.IndexFunc(ts, func(x loaders.LoRATensor) bool { return x.Name == q0A })
			ts[i].Shape = []int{ts[i].Shape[1], ts[i].Shape[0]}
			return ts
		}, q0A},
		{"dora", func(c map[string]any, ts []loaders.LoRATensor) []loaders.LoRATensor {
			c["use_dora"] = true
			return ts
		}, "use_dora"},
		{"another scaling", func(c map[string]any, ts []loaders.LoRATensor) []loaders.LoRATensor {
			c["use_rslora"] = true
			return ts
		}, "scaling"},
		// Read and attached but without effect: the logits are the base's.
		{"no effect", func(_ map[string]any, ts []loaders.LoRATensor) []loaders.LoRATensor {
			for i := range ts {
				if strings.HasSuffix(ts[i].Name, "lora_B.weight") {
					ts[i].Data = make([]float32, len(ts[i].Data))
				}
			}
			return ts
		}, "the adapter's whole effect"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, config, ts := loraCopy(t, "llama_lora_qv")
			ts = c.edit(config, ts)
			if err := loaders.WriteLoRA(filepath.Join(dir, AdapterDir), config, ts); err != nil {
				t.Fatal(err)
			}
			r := Run(dir)
			if r.Pass || !strings.Contains(r.Reason, c.errHas) {
				t.Errorf("got %v, want a failure naming %q", r, c.errHas)
			}
			t.Log(r)
		})
	}
	// Without its adapter the case fails: golden.json describes one.
	dir, _, _ := loraCopy(t, "llama_lora_qv")
	if r := Run(dir); r.Pass || !strings.Contains(r.Reason, "adapter") {
		t.Errorf("without adapter/: %v", r)
	}
	// An unchanged copy passes, so the failures above are the edits'.
	dir, config, ts := loraCopy(t, "llama_lora_qv")
	if err := loaders.WriteLoRA(filepath.Join(dir, AdapterDir), config, ts); err != nil {
		t.Fatal(err)
	}
	if r := Run(dir); !r.Pass {
		t.Errorf("an unchanged copy: %v", r)
	}
}
