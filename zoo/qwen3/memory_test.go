package qwen3_test

import (
	"encoding/json"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/zoo"
)

// procKB reads a field (VmRSS, VmHWM) of /proc/self/status in KiB.
func procKB(field string) (float64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseFloat(f[0], 64)
			return kb, err == nil
		}
	}
	return 0, false
}

// TestLoadHoldsAtMostOneExtraTensor checks the loader's memory promise: the
// peak resident set while loading is the final weights plus about one
// source tensor, not a second copy of the checkpoint.
func TestLoadHoldsAtMostOneExtraTensor(t *testing.T) {
	if _, ok := procKB("VmHWM"); !ok || os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) != nil {
		t.Skip("needs Linux /proc to measure peak RSS")
	}
	cfg := map[string]any{
		"model_type": "qwen3", "vocab_size": 16000, "hidden_size": 640, "intermediate_size": 1792,
		"num_hidden_layers": 2, "num_attention_heads": 10, "num_key_value_heads": 2, "head_dim": 64,
		"tie_word_embeddings": false, "eos_token_id": 2, "max_position_embeddings": 256,
	}
	b, _ := json.Marshal(cfg)
	dir := t.TempDir()
	if err := zoo.WriteRandomCheckpoint(b, dir, "f32", 1); err != nil {
		t.Fatal(err)
	}
	c, _ := zoo.ParseConfig(b)
	var weights, largest float64
	for _, s := range c.Tensors() {
		n := 4.0
		for _, d := range s.Shape {
			n *= float64(d)
		}
		weights += n / 1024
		largest = max(largest, n/1024)
	}
	runtime.GC()
	debug.FreeOSMemory()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	before, _ := procKB("VmRSS")
	m, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	peak, _ := procKB("VmHWM")
	growth := peak - before
	t.Logf("weights %.0f MB, largest tensor %.0f MB, peak RSS growth while loading %.0f MB", weights/1024, largest/1024, growth/1024)
	const slack = 32 * 1024 // runtime and test overhead
	if growth > weights+largest+slack {
		t.Errorf("loading grew RSS by %.0f MB, more than weights %.0f MB + one tensor %.0f MB", growth/1024, weights/1024, largest/1024)
	}
	runtime.KeepAlive(m)
}
