package qwen3_test

import (
	"encoding/json"
	"errors"
	"github.com/gozoo/gozoo/zoo/zootest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/qwen3"
)

func caseDir(name string) string { return zootest.GoldenDir(name) }

func TestGolden(t *testing.T) { zootest.Golden(t, "qwen3_gqa_tied", "qwen3_untied_v5rope") }

func readConfig(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(caseDir(name), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func parse(t *testing.T, m map[string]any) (*qwen3.Config, error) {
	t.Helper()
	b, _ := json.Marshal(m)
	return qwen3.ParseConfig(b)
}

func TestConfigDefaultsAndForms(t *testing.T) {
	m := readConfig(t, "qwen3_gqa_tied")
	delete(m, "head_dim")
	m["some_future_key"] = map[string]any{"x": 1}
	c, err := parse(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if *c.HeadDim != 128 {
		t.Errorf("head_dim defaults to %d, want 128 (Qwen3's default, not hidden/heads)", *c.HeadDim)
	}

	// The legacy and v5 rope forms give the same model.
	legacy := readConfig(t, "qwen3_gqa_tied")
	v5 := readConfig(t, "qwen3_gqa_tied")
	delete(v5, "rope_theta")
	delete(v5, "rope_scaling")
	v5["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 1e6}
	logitsOf := func(m map[string]any) []float32 {
		c, err := parse(t, m)
		if err != nil {
			t.Fatal(err)
		}
		model, err := zoo.NewRandom(c, 1)
		if err != nil {
			t.Fatal(err)
		}
		return lastLogits(t, model, []int{1, 2, 3, 4, 5})
	}
	if d := maxDiff(logitsOf(legacy), logitsOf(v5)); d != 0 {
		t.Errorf("legacy and v5 rope configs differ by %g", d)
	}

	bad := []struct {
		edit   func(m map[string]any)
		errHas string
	}{
		{func(m map[string]any) { m["num_key_value_heads"] = 3 }, "num_key_value_heads"},
		{func(m map[string]any) { m["hidden_act"] = "relu" }, `"relu"`},
		{func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 2} }, `"yarn"`},
		{func(m map[string]any) { m["hidden_size"] = 0 }, "hidden_size"},
		{func(m map[string]any) { m["layer_types"] = []string{"full_attention"} }, "layer_types"},
	}
	for _, b := range bad {
		m := readConfig(t, "qwen3_gqa_tied")
		b.edit(m)
		if _, err := parse(t, m); err == nil || !strings.Contains(err.Error(), b.errHas) {
			t.Errorf("want an error mentioning %s, got %v", b.errHas, err)
		}
	}
}

func TestUnknownModelTypeIsRefused(t *testing.T) {
	_, err := zoo.ParseConfig([]byte(`{"model_type": "gpt_neox"}`))
	var u *zoo.ErrUnsupported
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "qwen3") || !strings.Contains(err.Error(), "gpt_neox") {
		t.Fatalf("got %v, want an error naming gpt_neox and the supported types", err)
	}
}

func lastLogits(t *testing.T, m zoo.Model, ids []int) []float32 { return zootest.LastLogits(t, m, ids) }

func maxDiff(a, b []float32) float64 { return zootest.MaxDiff(a, b) }

// TestEveryWeightMatters perturbs each kind of tensor in turn.
func TestEveryWeightMatters(t *testing.T) {
	model, err := zoo.Load(caseDir("qwen3_untied_v5rope"))
	if err != nil {
		t.Fatal(err)
	}
	zootest.EveryWeightMatters(t, model, []int{5, 17, 3, 99, 250, 7},
		"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
		"model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
		"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
		"model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
		"model.layers.0.self_attn.q_norm.weight", "model.layers.1.self_attn.k_norm.weight",
		"model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight")
}

// writeCase copies a golden case's config and weights so a test can break them.
func writeCase(t *testing.T, name string, edit func(cfg map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	cfg := readConfig(t, name)
	if edit != nil {
		edit(cfg)
	}
	b, _ := json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
	w, err := os.ReadFile(filepath.Join(caseDir(name), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors"), w, 0o644)
	return dir
}

func TestLoadFailsLoudly(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(cfg map[string]any)
		errHas []string
	}{
		// Untied config over a tied checkpoint: lm_head.weight is missing.
		{"missing tensor", func(c map[string]any) { c["tie_word_embeddings"] = false }, []string{`"lm_head.weight"`, "missing", "model.safetensors"}},
		// A config whose sizes disagree with the tensors.
		{"shape mismatch", func(c map[string]any) { c["intermediate_size"] = 96 }, []string{"gate_proj.weight", "config.json implies"}},
		{"more layers than stored", func(c map[string]any) { c["num_hidden_layers"] = 4 }, []string{`"model.layers.3.`}},
		{"unsupported model type", func(c map[string]any) { c["model_type"] = "mamba" }, []string{`"mamba"`, "supported: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := zoo.Load(writeCase(t, "qwen3_gqa_tied", c.edit))
			if err == nil {
				t.Fatal("loaded without error")
			}
			for _, want := range c.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
		})
	}
}

// TestKVCacheMatchesFullForward decodes token by token and compares each
// step with the full forward over the same prefix.
func TestKVCacheMatchesFullForward(t *testing.T) {
	model, err := zoo.Load(caseDir("qwen3_gqa_tied"))
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 26, 43, 38, 32, 7, 95, 2, 88, 41, 9}
	full, err := graphs.NewSession(model, graphs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	want, err := full.Logits(ids)
	if err != nil {
		t.Fatal(err)
	}
	// Prompt of 11 (chunks 8 + 2 + 1), then one token at a time.
	s, err := graphs.NewSession(model, graphs.Options{Capacity: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Append(ids[:11])
	if err != nil {
		t.Fatal(err)
	}
	for i := 11; ; i++ {
		if d := maxDiff(got, want[i-1]); d > 5e-5 {
			t.Fatalf("position %d: cached logits differ from the full forward by %g", i-1, d)
		}
		if i == len(ids) {
			break
		}
		if got, err = s.Append(ids[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentSessions runs several generations at once on one loaded
// model; each must equal the same generation run alone. Run with -race.
func TestConcurrentSessions(t *testing.T) {
	model, err := zoo.Load(caseDir("qwen3_untied_v5rope"))
	if err != nil {
		t.Fatal(err)
	}
	greedy := func(prompt []int) ([]int, error) {
		s, err := graphs.NewSession(model, graphs.Options{Capacity: 64})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		l, err := s.Append(prompt)
		var out []int
		for i := 0; err == nil && i < 10; i++ {
			next := graphs.Argmax(l)
			out = append(out, next)
			l, err = s.Append([]int{next})
		}
		return out, err
	}
	prompts := [][]int{{1, 2, 3}, {400, 17, 9, 9, 31, 2, 8, 100, 1, 5, 6}, {7}, {12, 13, 14, 15, 16, 17, 18, 19, 20}}
	want := make([][]int, len(prompts))
	for i, p := range prompts {
		if want[i], err = greedy(p); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(prompts))
	for rep := 0; rep < 2; rep++ {
		for i, p := range prompts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := greedy(p)
				if err == nil && !slices.Equal(got, want[i]) {
					err = errors.New("concurrent generation differs from the lone one")
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSessionRejectsBadInput(t *testing.T) {
	model, err := zoo.Load(caseDir("qwen3_gqa_tied"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := graphs.NewSession(model, graphs.Options{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		ids    []int
		errHas string
	}{
		{nil, "no tokens"},
		{[]int{1, 512}, "token 512"},
		{[]int{-1}, "token -1"},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9}, "capacity of 8"},
	} {
		if _, err := s.Append(c.ids); err == nil || !strings.Contains(err.Error(), c.errHas) {
			t.Errorf("Append(%v): got %v, want an error mentioning %q", c.ids, err, c.errHas)
		}
	}
	if _, err := graphs.NewSession(model, graphs.Options{Capacity: 1 << 20}); err == nil {
		t.Error("a cache larger than max_position_embeddings was accepted")
	}
}

// TestRandomModels checks that an in-memory random model and the checkpoint
// `gozoo random` writes for the same seed are the same model.
func TestRandomModels(t *testing.T) {
	cfgJSON, err := os.ReadFile(filepath.Join(caseDir("qwen3_untied_v5rope"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := zoo.ParseConfig(cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := zoo.NewRandom(cfg, 42)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{1, 2, 3, 4}
	want := lastLogits(t, mem, ids)
	for _, dtype := range []string{"f32", "bf16"} {
		dir := t.TempDir()
		if err := zoo.WriteRandomCheckpoint(cfgJSON, dir, dtype, 42); err != nil {
			t.Fatal(err)
		}
		m, err := zoo.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		d := maxDiff(want, lastLogits(t, m, ids))
		if dtype == "f32" && d != 0 {
			t.Errorf("f32 checkpoint differs from the in-memory model by %g", d)
		}
		if dtype == "bf16" && (d == 0 || d > 0.05) {
			t.Errorf("bf16 checkpoint differs by %g, want small but nonzero rounding", d)
		}
	}
	other, _ := zoo.NewRandom(cfg, 43)
	if maxDiff(want, lastLogits(t, other, ids)) == 0 {
		t.Error("seeds 42 and 43 gave the same model")
	}
}

func TestSlidingWindowLayers(t *testing.T) {
	w := 4
	s := qwen3.Sliding{UseSlidingWindow: true, SlidingWindow: &w, MaxWindowLayers: 1}
	got, err := s.Windows(3)
	if err != nil || !slices.Equal(got, []int{0, 4, 4}) {
		t.Fatalf("windows %v %v, want [0 4 4]", got, err)
	}
	off := qwen3.Sliding{SlidingWindow: &w, MaxWindowLayers: 1}
	if got, _ := off.Windows(3); !slices.Equal(got, []int{0, 0, 0}) {
		t.Errorf("use_sliding_window false: %v", got)
	}
	// A sliding layer changes what a long prompt's last token sees.
	m := readConfig(t, "qwen3_gqa_tied")
	base, err := zoo.Load(caseDir("qwen3_gqa_tied"))
	if err != nil {
		t.Fatal(err)
	}
	m["use_sliding_window"], m["sliding_window"], m["max_window_layers"] = true, 3, 0
	c, err := parse(t, m)
	if err != nil {
		t.Fatal(err)
	}
	slid, err := c.Build(base.Weights())
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{1, 2, 3, 4, 5, 6, 7, 8}
	if d := maxDiff(lastLogits(t, base, ids), lastLogits(t, slid, ids)); d < 1e-4 {
		t.Errorf("a 3-key window moved the logits by only %g", d)
	}
}
