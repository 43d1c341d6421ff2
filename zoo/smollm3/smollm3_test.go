package smollm3_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/smollm3"
)

func TestGolden(t *testing.T) { familytest.Golden(t, "smollm3_nope") }

func config(t *testing.T, edit func(map[string]any)) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(familytest.GoldenDir("smollm3_nope"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	edit(m)
	b, _ = json.Marshal(m)
	return b
}

// TestNoRopeLayers pins the inverted meaning of no_rope_layers (1 = RoPE)
// and its default (every 4th layer NoPE).
func TestNoRopeLayers(t *testing.T) {
	c, err := smollm3.ParseConfig(config(t, func(m map[string]any) {
		delete(m, "no_rope_layers")
		m["num_hidden_layers"] = 8
	}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 1, 1, 0, 1, 1, 1, 0}; !slices.Equal(c.NoRopeLayers, want) {
		t.Errorf("default no_rope_layers %v, want %v", c.NoRopeLayers, want)
	}

	// The golden model's layer 2 is NoPE; giving it RoPE must change the
	// logits, so the field is honoured.
	m, err := zoo.Load(familytest.GoldenDir("smollm3_nope"))
	if err != nil {
		t.Fatal(err)
	}
	allRope, err := zoo.ParseConfig(config(t, func(m map[string]any) { m["no_rope_layers"] = []int{1, 1, 1, 1} }))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := zoo.Rebind(allRope, m.Params())
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{5, 9, 31, 7, 2, 44}
	if d := familytest.MaxDiff(familytest.LastLogits(t, m, ids), familytest.LastLogits(t, m2, ids)); d < 1e-4 {
		t.Errorf("RoPE on the NoPE layer moved the logits by only %g", d)
	}
	if _, err := zoo.ParseConfig(config(t, func(m map[string]any) { m["no_rope_layers"] = []int{1} })); err == nil {
		t.Error("no_rope_layers shorter than the layer count was accepted")
	}
}

func TestEveryWeightMatters(t *testing.T) {
	m, err := zoo.Load(familytest.GoldenDir("smollm3_nope"))
	if err != nil {
		t.Fatal(err)
	}
	familytest.EveryWeightMatters(t, m, []int{5, 17, 3, 99, 250, 7},
		"model.embed_tokens.weight", "model.norm.weight",
		"model.layers.2.self_attn.q_proj.weight", "model.layers.2.self_attn.k_proj.weight",
		"model.layers.2.mlp.down_proj.weight", "model.layers.3.input_layernorm.weight")
}

func TestRuntime(t *testing.T) { familytest.Run(t, familytest.GoldenDir("smollm3_nope")) }
