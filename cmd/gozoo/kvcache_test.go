package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
)

// TestKVCacheFlag: --kv-cache reaches golden (fast mode against
// llama.cpp's q8_0-cache references), run and bench; --kv-f16 stays an
// alias and contradicting it names both flags; golden refuses a type it
// has no references for; unset, fast mode's cache is F16.
func TestKVCacheFlag(t *testing.T) {
	dir := testfiles.Fixture(t, "gguf", "gemma3_q3_k_m")
	out, errb, status := gozoo(t, "", "golden", "--fast", "--kv-cache", "q8_0", dir)
	if status != 0 || !strings.Contains(out, "PASS") || !strings.Contains(out, "kv=q8_0") {
		t.Fatalf("golden --fast --kv-cache q8_0: status %d: %q %q", status, out, errb)
	}
	if _, errb, status := gozoo(t, "", "golden", "--kv-cache", "q4_0", dir); status != 2 || !strings.Contains(errb, "--fast") {
		t.Errorf("golden --kv-cache q4_0 without --fast: status %d: %q", status, errb)
	}
	model := filepath.Join(dir, "model.gguf")
	if _, errb, status := gozoo(t, "", "run", "--model", model, "--prompt", "Hello", "--max-tokens", "2", "--kv-cache", "q4_0"); status != 0 {
		t.Errorf("run --kv-cache q4_0: status %d: %q", status, errb)
	}
	if _, errb, status := gozoo(t, "", "run", "--model", model, "--prompt", "Hello", "--max-tokens", "2", "--kv-f16", "--kv-cache", "q8_0"); status != 2 || !strings.Contains(errb, "--kv-f16") || !strings.Contains(errb, "--kv-cache") {
		t.Errorf("run --kv-f16 --kv-cache q8_0: status %d: %q", status, errb)
	}
	if _, errb, status := gozoo(t, "", "bench", "--model", model, "--prompt-tokens", "4", "--gen-tokens", "2", "--kv-cache", "q8_1"); status != 2 || !strings.Contains(errb, "q8_1") {
		t.Errorf("bench --kv-cache q8_1: status %d: %q", status, errb)
	}
	// Unset, the cache is F32, and F16 with --fast (llama.cpp's default).
	for args, want := range map[string]string{"": "f32", "--fast": "f16"} {
		cmd := []string{"bench", "--model", model, "--prompt-tokens", "4", "--gen-tokens", "2", "--json"}
		if args != "" {
			cmd = append(cmd, args)
		}
		out, errb, status := gozoo(t, "", cmd...)
		var res benchResult
		if status != 0 || json.Unmarshal([]byte(out), &res) != nil || res.KVCache != want {
			t.Errorf("bench %s: status %d, cache %q, want %s: %q", args, status, res.KVCache, want, errb)
		}
	}
	// bench reports the cache's bytes a token: q8_0 blocks are 34 bytes
	// for 32 values, q4_0 18, F16 64 (sliding layers' windows included
	// alike, so the ratios are the blocks').
	for typ, want := range map[string]float64{"q8_0": 34.0 / 64, "q4_0": 18.0 / 64, "f16": 1, "f32": 2} {
		out, errb, status := gozoo(t, "", "bench", "--model", model, "--prompt-tokens", "4", "--gen-tokens", "2", "--kv-cache", typ, "--json")
		var res benchResult
		if status != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("bench --kv-cache %s --json: status %d: %q %q", typ, status, out, errb)
		}
		if got := res.KVBytesPerToken / res.KVF16BytesPerToken; res.KVCache != typ || math.Abs(got-want) > 1e-9 {
			t.Errorf("bench --kv-cache %s: %s, %g bytes a token against F16's %g (ratio %g, want %g)", typ, res.KVCache, res.KVBytesPerToken, res.KVF16BytesPerToken, got, want)
		}
	}
}

// TestRunContextShift generates past kjv-tiny's 512 positions with
// --context-shift 4: one shift drops (512-4)/2 = 254 positions and the
// generation reaches its 600 tokens.
func TestRunContextShift(t *testing.T) {
	model := filepath.Join("..", "..", "testdata", "models", "kjv-tiny")
	_, errb, status := gozoo(t, "", "run", "--model", model, "--prompt", "And God said", "--seed", "7", "--max-tokens", "600", "--context-shift", "4")
	if status != 0 || !strings.Contains(errb, "600 generated") || !strings.Contains(errb, "1 context shifts dropped 254 positions") {
		t.Fatalf("status %d: %q", status, errb)
	}
	if _, errb, status := gozoo(t, "", "run", "--model", model, "--prompt", "And", "--max-tokens", "2", "--context-shift", "-3"); status != 2 || !strings.Contains(errb, "--context-shift") {
		t.Errorf("--context-shift -3: status %d: %q", status, errb)
	}
}
