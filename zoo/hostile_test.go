package zoo_test

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/procstat"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/all"
)

// A hostile input must be refused having allocated less than
// hostileAlloc: before these checks a config.json whose sizes disagreed
// with its small model.safetensors (num_hidden_layers 10^6, or head_dim
// 10^8) declared and allocated by those sizes, past 2 GB, before the
// first tensor's shape was compared. The bytes allocated, not the time
// taken, show that nothing was built by the claimed sizes; hangGuard only
// turns a refusal that never comes into a failure.
const (
	hostileAlloc = 256 << 20
	hangGuard    = 3 * time.Minute
)

// bounded runs f and fails the test if it allocated
// (runtime.MemStats.TotalAlloc) more than hostileAlloc, or had not
// returned after hangGuard.
func bounded(t *testing.T, f func() error) error {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan error, 1)
	go func() { done <- f() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(hangGuard):
		t.Fatalf("hung: still running after %v", hangGuard)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > hostileAlloc {
		t.Errorf("allocated %d MiB, more than %d MiB", alloc>>20, hostileAlloc>>20)
	}
	return err
}

// editedCheckpoint is a golden case's folder with config.json edited:
// keys of edits are config.json fields, "a.b" for b inside object a; the
// weights are the case's own (linked, not copied).
func editedCheckpoint(t *testing.T, golden string, edits map[string]any) string {
	t.Helper()
	src := filepath.Join("..", "testdata", "golden", golden)
	data, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range edits {
		obj := cfg
		parts := strings.Split(k, ".")
		for _, p := range parts[:len(parts)-1] {
			obj = obj[p].(map[string]any)
		}
		obj[parts[len(parts)-1]] = v
	}
	dir := t.TempDir()
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	weights, err := filepath.Abs(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(weights, filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func wantError(t *testing.T, err error, has ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", has)
	}
	for _, s := range has {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %s", err, s)
		}
	}
}

// TestHostileConfigIsRefusedUpFront loads small golden checkpoints whose
// config.json claims huge sizes: past loaders' limits (refused as the
// config is read, naming config.json and the field), or within them but
// disagreeing with the tensors present (refused before any weight is
// read, naming model.safetensors, the tensor and the field).
func TestHostileConfigIsRefusedUpFront(t *testing.T) {
	cases := []struct {
		name, golden string
		edits        map[string]any
		errHas       []string
	}{
		// Past the limits of loaders.CheckConfigSizes.
		{"vocab_size 1e9", "llama_mha_untied", map[string]any{"vocab_size": 1e9}, []string{"config.json", "vocab_size 1000000000"}},
		{"hidden_size 1e6", "llama_mha_untied", map[string]any{"hidden_size": 1e6}, []string{"config.json", "hidden_size 1000000"}},
		{"num_hidden_layers 1e6", "llama_mha_untied", map[string]any{"num_hidden_layers": 1e6}, []string{"config.json", "num_hidden_layers 1000000"}},
		{"max_position_embeddings 1e12", "llama_mha_untied", map[string]any{"max_position_embeddings": 1e12}, []string{"config.json", "max_position_embeddings"}},
		{"head_dim 1e8", "llama_mha_untied", map[string]any{"head_dim": 1e8}, []string{"config.json", "head_dim 100000000"}},
		{"num_experts 1e6", "qwen3_moe_normtopk", map[string]any{"num_experts": 1e6}, []string{"config.json", "num_experts 1000000"}},
		{"moe_intermediate_size 1e9", "qwen3_moe_normtopk", map[string]any{"moe_intermediate_size": 1e9}, []string{"config.json", "moe_intermediate_size"}},
		{"mlp_only_layers of 1e5", "qwen3_moe_normtopk", map[string]any{"mlp_only_layers": make([]int, 100000)}, []string{"config.json", "mlp_only_layers"}},
		{"n_embd 1e7", "gpt2_prefixed", map[string]any{"n_embd": 1e7}, []string{"config.json", "n_embd"}},
		{"text_config.vocab_size 1e9", "smolvlm-full", map[string]any{"text_config.vocab_size": 1e9}, []string{"config.json", "text_config.vocab_size"}},
		{"vision_config.image_size 1e9", "smolvlm-full", map[string]any{"vision_config.image_size": 1e9}, []string{"config.json", "vision_config.image_size"}},
		// Within the limits, checked against the tensors present.
		{"vocab_size 2^24", "llama_mha_untied", map[string]any{"vocab_size": loaders.MaxVocab},
			[]string{"model.safetensors", "model.embed_tokens.weight", "16777216 is config.json's vocab_size"}},
		{"hidden_size 2^18", "llama_mha_untied", map[string]any{"hidden_size": 1 << 18, "num_attention_heads": 64, "num_key_value_heads": 64},
			[]string{"model.safetensors", "model.embed_tokens.weight", "262144 is config.json's hidden_size"}},
		{"num_hidden_layers 1024", "llama_mha_untied", map[string]any{"num_hidden_layers": loaders.MaxLayers},
			[]string{"model.safetensors", `missing tensor "model.layers.2.`, "num_hidden_layers 1024"}},
		{"head_dim 2^14", "llama_mha_untied", map[string]any{"head_dim": loaders.MaxHeadDim}, []string{"model.safetensors", "q_proj.weight"}},
		{"head_dim 2^14 in every layer", "gemma3_sliding_mqa", map[string]any{"head_dim": loaders.MaxHeadDim, "num_hidden_layers": loaders.MaxLayers, "layer_types": nil},
			[]string{"model.safetensors", "q_proj.weight"}},
		{"num_experts 4096", "qwen3_moe_normtopk", map[string]any{"num_experts": loaders.MaxExperts, "num_experts_per_tok": 2},
			[]string{"model.safetensors", "mlp.gate.weight"}},
		{"n_positions 2^30", "gpt2_prefixed", map[string]any{"n_positions": loaders.MaxPositions},
			[]string{"model.safetensors", "wpe.weight", "1073741824 is config.json's max_position_embeddings"}},
		{"text_config.num_hidden_layers 1024", "smolvlm-full", map[string]any{"text_config.num_hidden_layers": loaders.MaxLayers},
			[]string{"model.safetensors", "missing tensor", "num_hidden_layers 1024"}},
		{"every size at its limit", "llama_mha_untied", map[string]any{
			"vocab_size": loaders.MaxVocab, "hidden_size": loaders.MaxWidth, "intermediate_size": loaders.MaxWidth,
			"num_hidden_layers": loaders.MaxLayers, "num_attention_heads": 64, "num_key_value_heads": 64,
		}, []string{"config.json's sizes imply more than 4398046511104 parameters"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := editedCheckpoint(t, c.golden, c.edits)
			err := bounded(t, func() error {
				_, err := zoo.Load(dir)
				return err
			})
			wantError(t, err, c.errHas...)
			t.Log(err)
		})
	}
}

// TestHostileContextCapacity: max_position_embeddings sizes nothing until
// a session's KV cache, so a model claiming 10^9 positions loads, and a
// session asking for them all is refused up front, its KV cache compared
// with the memory available.
func TestHostileContextCapacity(t *testing.T) {
	dir := editedCheckpoint(t, "llama_mha_untied", map[string]any{"max_position_embeddings": 1e9})
	var m zoo.Model
	if err := bounded(t, func() (err error) { m, err = zoo.Load(dir); return err }); err != nil {
		t.Fatal(err)
	}
	s, err := graphs.NewSession(m, graphs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Capacity() != graphs.DefaultCapacity {
		t.Errorf("default capacity %d, want %d", s.Capacity(), graphs.DefaultCapacity)
	}
	s.Close()
	if _, ok := procstat.AvailableMemory(); !ok {
		t.Skip("the memory available is not known here")
	}
	err = bounded(t, func() error {
		s, err := graphs.NewSession(m, graphs.Options{Capacity: 1e9})
		if err == nil {
			s.Close()
		}
		return err
	})
	wantError(t, err, "context capacity 1000000000", "MiB of KV cache", "memory available")
	t.Log(err)
}

// TestHostileRandomConfig: NewRandom and WriteRandomCheckpoint (gozoo
// random) have no file to check against; a config past the limits is
// refused as it is parsed, and one whose parameters total more than
// loaders.MaxParameters as it is declared, before any weight is made.
func TestHostileRandomConfig(t *testing.T) {
	base := map[string]any{
		"model_type": "llama", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
		"num_hidden_layers": 2, "num_attention_heads": 2, "eos_token_id": 1,
	}
	cases := []struct {
		name   string
		edits  map[string]any
		errHas []string
	}{
		{"num_hidden_layers 1e6", map[string]any{"num_hidden_layers": 1e6}, []string{"num_hidden_layers 1000000"}},
		{"vocab_size 1e9", map[string]any{"vocab_size": 1e9}, []string{"vocab_size 1000000000"}},
		{"past MaxParameters", map[string]any{"vocab_size": loaders.MaxVocab, "hidden_size": loaders.MaxWidth, "num_attention_heads": 64},
			[]string{"more than 4398046511104 parameters", "model.embed_tokens.weight", "[16777216 262144]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]any{}
			for k, v := range base {
				m[k] = v
			}
			for k, v := range c.edits {
				m[k] = v
			}
			data, _ := json.Marshal(m)
			err := bounded(t, func() error {
				cfg, err := zoo.ParseConfig(data)
				if err != nil {
					return err
				}
				_, err = zoo.NewRandom(cfg, 1)
				return err
			})
			wantError(t, err, c.errHas...)
			dir := t.TempDir()
			err = bounded(t, func() error { return zoo.WriteRandomCheckpoint(data, dir, "bf16", 1) })
			wantError(t, err, c.errHas...)
			if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
				t.Error("model.safetensors was written")
			}
		})
	}
}

// TestHostileSafetensors: a model.safetensors whose header claims what the
// file does not hold is refused as it is opened, naming the file.
func TestHostileSafetensors(t *testing.T) {
	file := func(header string, data []byte) []byte {
		b := make([]byte, 8, 8+len(header)+len(data))
		binary.LittleEndian.PutUint64(b, uint64(len(header)))
		return append(append(b, header...), data...)
	}
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 1<<62)
	cases := []struct {
		name   string
		data   []byte
		errHas []string
	}{
		{"header length 2^62", huge, []string{"model.safetensors", "header length 4611686018427387904"}},
		{"a tensor of 10^24 values in 4 bytes", file(`{"model.embed_tokens.weight":{"dtype":"F32","shape":[1000000000000,1000000000000],"data_offsets":[0,4]}}`, make([]byte, 4)),
			[]string{"model.safetensors", "model.embed_tokens.weight", "overflows"}},
		{"data offsets past the file", file(`{"model.embed_tokens.weight":{"dtype":"F32","shape":[1000000,1000],"data_offsets":[0,4000000000]}}`, make([]byte, 4)),
			[]string{"model.safetensors", "model.embed_tokens.weight", "past the end"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := editedCheckpoint(t, "llama_mha_untied", nil)
			path := filepath.Join(dir, "model.safetensors")
			os.Remove(path)
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			err := bounded(t, func() error { _, err := zoo.Load(dir); return err })
			wantError(t, err, c.errHas...)
		})
	}
}

// TestRandomTooLarge: a random model that cannot fit in memory is refused
// before anything is allocated, with the sizes named.
func TestRandomTooLarge(t *testing.T) {
	avail, ok := procstat.AvailableMemory()
	if !ok {
		t.Skip("this system does not report available memory")
	}
	// A llama whose float32 weights need several times the memory there is:
	// 512 layers of 8192x8192 (within every config limit).
	cfg, err := zoo.ParseConfig([]byte(`{"model_type": "llama", "vocab_size": 32000, "hidden_size": 8192, "intermediate_size": 28672,
		"num_hidden_layers": 512, "num_attention_heads": 64, "num_key_value_heads": 8, "eos_token_id": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = zoo.NewRandom(cfg, 1)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "MiB of memory available") {
		t.Fatalf("want an error naming the memory, got %v (available %d MiB)", err, avail>>20)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Errorf("refusing allocated %d MB", grew>>20)
	}
}
