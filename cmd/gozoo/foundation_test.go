package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func gozoo(t *testing.T, stdin string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var out, errb bytes.Buffer
	status = dispatch(args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), status
}

func TestGoldenCommand(t *testing.T) {
	cases, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "golden", "qwen3_*"))
	if len(cases) < 2 {
		t.Fatalf("bundled qwen3 golden cases missing: %v", cases)
	}
	out, errb, status := gozoo(t, "", append([]string{"golden"}, cases...)...)
	if status != 0 {
		t.Fatalf("status %d\n%s%s", status, out, errb)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d lines for %d cases:\n%s", len(lines), len(cases), out)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "PASS qwen3_") || !strings.Contains(l, "greedy=12/12") || !strings.Contains(l, "logits_max_abs=") {
			t.Errorf("unexpected line %q", l)
		}
	}

	// A case of a model type the zoo lacks fails by name, and the status says so.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "rwkv"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "golden.json"), []byte(`{"case": "rwkv_case", "tolerance": {"logits_atol": 1e-4}}`), 0o644)
	out, _, status = gozoo(t, "", "golden", cases[0], dir)
	if status != 1 || !strings.Contains(out, `FAIL rwkv_case model_type "rwkv" is not supported yet`) || !strings.Contains(out, "PASS ") {
		t.Fatalf("status %d, output:\n%s", status, out)
	}
}

func TestRandomAndBenchCommands(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join("..", "..", "testdata", "golden", "qwen3_gqa_tied", "config.json")
	if _, errb, status := gozoo(t, "", "random", "--config", cfg, "--out", dir, "--dtype", "bf16", "--seed", "3"); status != 0 {
		t.Fatalf("random: %s", errb)
	}
	var res map[string]any
	for _, batch := range []string{"1", "3"} {
		out, errb, status := gozoo(t, "", "bench", "--model", dir, "--prompt-tokens", "12", "--gen-tokens", "4", "--batch", batch, "--json")
		if status != 0 {
			t.Fatalf("bench --batch %s: %s", batch, errb)
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("bench --batch %s --json printed %q: %v", batch, out, err)
		}
		for _, k := range []string{"prefill_tok_s", "decode_tok_s", "load_s", "peak_rss_mb", "decode_gb_s", "prefill_gflop_s"} {
			if v, ok := res[k].(float64); !ok || v < 0 || (k != "peak_rss_mb" && k != "load_s" && v == 0) {
				t.Errorf("--batch %s: %s = %v", batch, k, res[k])
			}
		}
	}
	if k, _ := res["kernels"].(string); k != "avx512" && k != "avx2" && k != "go" {
		t.Errorf("kernels = %v", res["kernels"])
	}
	if _, errb, status := gozoo(t, "", "random", "--config", cfg, "--out", dir, "--dtype", "f8"); status == 0 || !strings.Contains(errb, `"f8"`) {
		t.Errorf("bad dtype: status %d, %s", status, errb)
	}
	if _, _, status := gozoo(t, "", "nosuchcommand"); status != 2 {
		t.Errorf("unknown command: status %d", status)
	}
}

func TestGraphCommand(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "golden", "qwen3_gqa_tied")
	out, errb, status := gozoo(t, "", "graph", "--model", dir, "--rows", "8")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errb)
	}
	for _, want := range []string{"digraph", "model.layers.2.self_attn.q_norm.weight", "Attention{layers.0", "logit_rows"} {
		if !strings.Contains(out, want) {
			t.Errorf("DOT output lacks %q", want)
		}
	}
}
