package loaders

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckConfigSizes(t *testing.T) {
	list := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat(`"full_attention",`, n), ",") + "]" }
	cases := []struct {
		config string
		errHas []string // empty: accepted
	}{
		{`{"model_type":"llama","vocab_size":1e9}`, []string{"vocab_size 1e9", "16777216", "MaxVocab"}},
		{`{"model_type":"llama","hidden_size":1000000}`, []string{"hidden_size 1000000", "MaxWidth"}},
		{`{"model_type":"llama","intermediate_size":1e300}`, []string{"intermediate_size"}},
		{`{"model_type":"llama","intermediate_size":1e999}`, []string{"intermediate_size"}},
		{`{"model_type":"llama","num_hidden_layers":1000000}`, []string{"num_hidden_layers 1000000", "1024 layers"}},
		{`{"model_type":"gpt2","n_layer":5000}`, []string{"n_layer 5000"}},
		{`{"model_type":"llama","max_position_embeddings":1e12}`, []string{"max_position_embeddings", "MaxPositions"}},
		{`{"model_type":"qwen3_moe","num_experts":1000000}`, []string{"num_experts 1000000", "MaxExperts"}},
		{`{"model_type":"qwen3_moe","num_experts":4096,"num_hidden_layers":64}`, []string{"262144 expert MLPs", "MaxExpertLayers"}},
		{`{"model_type":"llama","head_dim":100000000}`, []string{"head_dim 100000000", "MaxHeadDim"}},
		{`{"model_type":"llama","hidden_size":262144,"num_attention_heads":2}`, []string{"hidden_size 262144 over num_attention_heads 2", "MaxHeadDim"}},
		{`{"model_type":"idefics3","text_config":{"num_hidden_layers":1000000}}`, []string{"text_config.num_hidden_layers 1000000"}},
		{`{"model_type":"idefics3","vision_config":{"image_size":1e7}}`, []string{"vision_config.image_size"}},
		// encoding/json matches keys regardless of case (and folds ſ to s).
		{`{"model_type":"llama","NUM_HIDDEN_LAYERS":1000000}`, []string{"NUM_HIDDEN_LAYERS 1000000"}},
		{`{"model_type":"llama","num_hidden_layerſ":1000000}`, []string{"num_hidden_layerſ 1000000"}},
		{`{"model_type":"qwen3","layer_types":` + list(MaxLayers+1) + `}`, []string{"layer_types has 1025 entries"}},
		{`{"model_type":"qwen3_moe","mlp_only_layers":[` + strings.TrimSuffix(strings.Repeat("1,", 5000), ",") + `]}`, []string{"mlp_only_layers has 5000 entries"}},
		// Accepted: at the limits, null, strings and negatives are the
		// family's to judge, and sizes that size nothing by themselves.
		{`{"model_type":"llama","num_hidden_layers":1024,"head_dim":16384,"vocab_size":16777216}`, nil},
		{`{"model_type":"llama","hidden_size":"huge","head_dim":null,"num_hidden_layers":-5}`, nil},
		{`{"model_type":"qwen3","layer_types":` + list(MaxLayers) + `,"sliding_window":1e15}`, nil},
		{`{"model_type":"llama","text_config":"not an object","some_config":[1e99]}`, nil},
	}
	for _, c := range cases {
		_, err := ModelType([]byte(c.config))
		if len(c.errHas) == 0 {
			if err != nil {
				t.Errorf("%.80s: %v", c.config, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%.80s: no error", c.config)
			continue
		}
		for _, want := range c.errHas {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%.80s: error %q does not mention %s", c.config, err, want)
			}
		}
	}
}

// TestRealConfigsPassTheLimits: every config under testdata is within them.
func TestRealConfigsPassTheLimits(t *testing.T) {
	var paths []string
	for _, pattern := range []string{"../testdata/golden/*/config.json", "../testdata/models/*/config.json", "../testdata/configs/*.json"} {
		m, _ := filepath.Glob(pattern)
		paths = append(paths, m...)
	}
	if len(paths) == 0 {
		t.Fatal("no configs found under testdata")
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckConfigSizes(b); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestConfigFileLimits: a config.json over MaxConfigFileBytes, or one that
// is not a regular file (a device never ends), is refused unread.
func TestConfigFileLimits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{"model_type":"llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, MaxConfigFileBytes+1); err != nil { // sparse
		t.Fatal(err)
	}
	for name, open := range map[string]func() error{
		"ReadConfig": func() error { _, _, err := ReadConfig(dir); return err },
		"OpenFolder": func() error { _, err := OpenFolder(dir); return err },
	} {
		if err := open(); err == nil || !strings.Contains(err.Error(), "limit") || !strings.Contains(err.Error(), path) {
			t.Errorf("%s of an oversized config.json: got %v", name, err)
		}
	}
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	dir = t.TempDir()
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "config.json")); err != nil {
		t.Skip(err)
	}
	if _, _, err := ReadConfig(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("config.json linked to /dev/zero: got %v", err)
	}
	idx := filepath.Join(dir, "model.safetensors.index.json")
	if err := os.Symlink("/dev/zero", idx); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("index linked to /dev/zero: got %v", err)
	}
}
