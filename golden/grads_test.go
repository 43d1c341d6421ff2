package golden

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/gozoo/gozoo/zoo/all"
)

// gradCases are the bundled text cases, each with grads.safetensors.
var gradCases = []string{
	"qwen3_gqa_tied", "qwen3_untied_v5rope", "qwen3_moe_normtopk", "qwen3_moe_step2_nonorm",
	"llama_smollm2_gqa_bf16", "llama_mha_untied", "smollm3_nope", "gemma3_sliding_mqa", "gemma3_pattern_softcap",
}

// TestGradsBundled checks that every text case carries its reference
// gradients, so that the families' TestGolden cannot lose the gradient
// check by losing a file.
func TestGradsBundled(t *testing.T) {
	for _, c := range gradCases {
		for _, f := range []string{gradsFile, "grads.json"} {
			if _, err := os.Stat(filepath.Join("..", "testdata", "golden", c, f)); err != nil {
				t.Errorf("case %s: %v", c, err)
			}
		}
	}
}

// TestGradsCheckFails edits a copy of a case's grads.json (the loss, the
// tolerance) and expects the check to fail, naming what differs.
func TestGradsCheckFails(t *testing.T) {
	src := filepath.Join("..", "testdata", "golden", "qwen3_moe_step2_nonorm")
	for _, c := range []struct {
		name   string
		edit   func(m map[string]any)
		errHas string
	}{
		{"loss", func(m map[string]any) {
			m["loss"].(map[string]any)["f32"] = m["loss"].(map[string]any)["f32"].(float64) + 1e-3
		}, "loss"},
		{"rtol", func(m map[string]any) { m["tolerance"].(map[string]any)["rtol"] = 1e-9 }, "gradients of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			entries, err := os.ReadDir(src)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Name() == "grads.json" {
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
			b, err := os.ReadFile(filepath.Join(src, "grads.json"))
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			c.edit(m)
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "grads.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			r := Run(dir)
			if r.Pass || !strings.Contains(r.Reason, c.errHas) {
				t.Errorf("edited %s: got %v, want a failure mentioning %q", c.name, r, c.errHas)
			}
		})
	}
	// The untouched case passes and reports the figure.
	if r := Run(src); !r.Pass || !r.GradsChecked || !strings.Contains(r.String(), "grads_max_rel=") {
		t.Errorf("the bundled case: %v", r)
	}
}
