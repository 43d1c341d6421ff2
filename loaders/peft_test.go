package loaders

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// loraConfig is a saved LoraConfig with edits applied.
func loraConfig(t *testing.T, edit map[string]any) []byte {
	t.Helper()
	m := LoRAConfigJSON(4, 8, false, []string{"q_proj", "v_proj"}, "..")
	for k, v := range edit {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseLoRAConfig reads configs PEFT writes and refuses, by key,
// those whose forward gozoo does not implement.
func TestParseLoRAConfig(t *testing.T) {
	for _, c := range []struct {
		name    string
		edit    map[string]any
		errHas  string
		scaling float64
	}{
		{"defaults", nil, "", 2},
		{"rslora", map[string]any{"r": 8, "lora_alpha": 16, "use_rslora": true}, "", 16 / math.Sqrt(8)},
		{"regex targets", map[string]any{"target_modules": `.*\.(q|v)_proj`}, "", 2},
		{"unknown key at its default", map[string]any{"some_new_key": nil}, "", 2},
		{"dropout is ignored", map[string]any{"lora_dropout": 0.1}, "", 2},
		{"dora", map[string]any{"use_dora": true}, "use_dora", 0},
		{"bias", map[string]any{"bias": "lora_only"}, "bias", 0},
		{"lora bias", map[string]any{"lora_bias": true}, "lora_bias", 0},
		{"rank pattern", map[string]any{"rank_pattern": map[string]any{"q_proj": 2}}, "rank_pattern", 0},
		{"alpha pattern", map[string]any{"alpha_pattern": map[string]any{"q_proj": 2}}, "alpha_pattern", 0},
		{"layer subset", map[string]any{"layers_to_transform": []int{0}}, "layers_to_transform", 0},
		{"modules to save", map[string]any{"modules_to_save": []string{"lm_head"}}, "modules_to_save", 0},
		{"unknown key set", map[string]any{"some_new_key": 3}, "some_new_key", 0},
		{"other method", map[string]any{"peft_type": "IA3"}, "peft_type", 0},
		{"no rank", map[string]any{"r": 0}, "r = 0", 0},
		{"no targets", map[string]any{"target_modules": nil}, "target_modules", 0},
		{"bad regex", map[string]any{"target_modules": "(q"}, "target_modules", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseLoRAConfig(loraConfig(t, c.edit))
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("got %v, want an error naming %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := got.Scaling(); math.Abs(s-c.scaling) > 1e-12 {
				t.Errorf("scaling %g, want %g", s, c.scaling)
			}
		})
	}
}

// TestLoRAAdapts follows PEFT's check_target_module_exists: a list entry
// matches the whole name or a suffix after a dot, a string is a regular
// expression the whole name must match; exclude_modules wins.
func TestLoRAAdapts(t *testing.T) {
	const q = "model.layers.0.self_attn.q_proj"
	for _, c := range []struct {
		targets, exclude any
		name             string
		want             bool
	}{
		{[]string{"q_proj"}, nil, q, true},
		{[]string{"proj"}, nil, q, false}, // a suffix counts only after a dot
		{[]string{"self_attn.q_proj"}, nil, q, true},
		{[]string{q}, nil, q, true},
		{[]string{"k_proj"}, nil, q, false},
		{`.*q_proj`, nil, q, true},
		{`q_proj`, nil, q, false}, // a full match, not a search
		{`.*\.0\..*_proj`, nil, q, true},
		{`.*\.1\..*_proj`, nil, q, false},
		{[]string{"q_proj"}, []string{"model.layers.0.self_attn.q_proj"}, q, false},
		{[]string{"q_proj"}, `.*layers\.1\..*`, q, true},
	} {
		cfg, err := ParseLoRAConfig(loraConfig(t, map[string]any{"target_modules": c.targets, "exclude_modules": c.exclude}))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Adapts(c.name); got != c.want {
			t.Errorf("targets %v exclude %v: Adapts(%q) = %v, want %v", c.targets, c.exclude, c.name, got, c.want)
		}
	}
}

// TestWriteLoRAReadsBack writes a folder and reads it back: names,
// shapes, values and the config's keys.
func TestWriteLoRAReadsBack(t *testing.T) {
	dir := t.TempDir()
	in := []LoRATensor{
		{Name: LoRAPrefix + "model.layers.0.self_attn.q_proj.lora_A.weight", Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}},
		{Name: LoRAPrefix + "model.layers.0.self_attn.q_proj.lora_B.weight", Shape: []int{4, 2}, Data: []float32{-1, 0, 1, 2, 3, 4, 5, 6}},
	}
	if err := WriteLoRA(dir, LoRAConfigJSON(2, 4, false, []string{"q_proj"}, "base"), in); err != nil {
		t.Fatal(err)
	}
	a, err := ReadLoRA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.R != 2 || a.Config.Scaling() != 2 || !slices.Equal(a.Config.Targets, []string{"q_proj"}) {
		t.Errorf("config read back as %+v", a.Config)
	}
	if len(a.Tensors) != 2 {
		t.Fatalf("%d tensors read back", len(a.Tensors))
	}
	for _, got := range a.Tensors {
		i := slices.IndexFunc(in, func(w LoRATensor) bool { return w.Name == got.Name })
		if i < 0 || !slices.Equal(got.Shape, in[i].Shape) || !slices.Equal(got.Data, in[i].Data) || got.Module != "model.layers.0.self_attn.q_proj" {
			t.Errorf("tensor %q read back as %v %v (module %q)", got.Name, got.Shape, got.Data, got.Module)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, LoRAWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	var header struct {
		Metadata map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(raw[8:8+binary.LittleEndian.Uint64(raw)], &header); err != nil || header.Metadata["format"] != "pt" {
		t.Errorf("__metadata__ %v (%v), want format pt", header.Metadata, err)
	}
	// A tensor that is no LoRA factor is refused by name.
	in[1].Name = LoRAPrefix + "model.layers.0.self_attn.q_proj.lora_embedding_B"
	if err := WriteLoRA(dir, LoRAConfigJSON(2, 4, false, []string{"q_proj"}, "base"), in); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLoRA(dir); err == nil || !strings.Contains(err.Error(), "lora_embedding_B") {
		t.Errorf("a stray tensor: got %v", err)
	}
	if err := os.Remove(filepath.Join(dir, LoRAConfigFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLoRA(dir); err == nil || !strings.Contains(err.Error(), LoRAConfigFile) {
		t.Errorf("no config: got %v", err)
	}
}
