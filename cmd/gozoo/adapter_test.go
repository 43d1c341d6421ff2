package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/golden"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

var loraCase = filepath.Join("..", "..", "testdata", "golden", "llama_lora_qv")

// goldenLogits are a case's input ids and the logits transformers gives
// for them (with its adapter).
func goldenLogits(t *testing.T, dir string) ([]int, []float32) {
	t.Helper()
	g, err := loaders.OpenSafetensors(filepath.Join(dir, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	raw, _, err := g.ReadInt64("input_ids")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, len(raw))
	for i, v := range raw {
		ids[i] = int(v)
	}
	logits, _, err := g.Float32s("logits")
	if err != nil {
		t.Fatal(err)
	}
	return ids, logits
}

// TestQuantizeMergesAdapter writes the LoRA case as an F32 GGUF with its
// adapter merged (gozoo quantize --adapter): the file alone, with no
// adapter, gives the adapted model's logits within the case's tolerance
// (2e-4; merging only reorders float32 sums), and without --adapter it
// does not (the adapter moves them by 12.7).
func TestQuantizeMergesAdapter(t *testing.T) {
	ids, want := goldenLogits(t, loraCase)
	for _, c := range []struct {
		name    string
		args    []string
		matches bool
		// unmerged applies the adapter to the GGUF's model: llama's Q
		// rows are in llama.cpp's order there, and the update must meet
		// them in HF's.
		unmerged bool
	}{
		{"merged", []string{"--adapter", filepath.Join(loraCase, "adapter")}, true, false},
		{"base", nil, false, false},
		{"adapter on the GGUF", nil, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "m.gguf")
			stdout, stderr, status := gozoo(t, "", append([]string{"quantize", "--model", loraCase, "--type", "f32", "--out", out}, c.args...)...)
			if status != 0 {
				t.Fatalf("status %d\n%s%s", status, stdout, stderr)
			}
			m, err := zoo.LoadGGUF(out, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(m.Params().Adapters()); n != 0 {
				t.Fatalf("the GGUF came back with %d adapters", n)
			}
			if c.unmerged {
				if q, _ := m.Params().Get("model.layers.0.self_attn.q_proj.weight"); q.PermutedHeads == 0 {
					t.Fatal("the GGUF's q_proj is not in llama.cpp's row order: the case tests nothing")
				}
				if _, err := m.Params().LoadLoRA("a", filepath.Join(loraCase, "adapter")); err != nil {
					t.Fatal(err)
				}
			}
			s, err := graphs.NewSession(m, graphs.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rows, err := s.AppendAll(graphs.IDs(ids...))
			if err != nil {
				t.Fatal(err)
			}
			V := m.VocabSize()
			var d float64
			for i, r := range rows {
				d = max(d, golden.MaxAbsDiff(r, want[i*V:(i+1)*V]))
			}
			t.Logf("max |logits - golden| = %.3g", d)
			if (d <= 2e-4) != c.matches {
				t.Errorf("max |logits - golden| = %.3g, want within 2e-4: %v", d, c.matches)
			}
		})
	}
	// A quantized base cannot take a merge: refused by the tensor's name.
	q8 := filepath.Join(t.TempDir(), "q8.gguf")
	if _, stderr, status := gozoo(t, "", "quantize", "--model", loraCase, "--type", "q8_0", "--out", q8); status != 0 {
		t.Fatal(stderr)
	}
	m, err := zoo.LoadGGUF(q8, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Params().LoadLoRA("a", filepath.Join(loraCase, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Merge(m.Params()); err == nil || !strings.Contains(err.Error(), "q_proj.weight") {
		t.Errorf("merging into Q8_0: %v", err)
	}
}

// TestAdapterFlags: gozoo golden --adapter applies the given folder, and
// an adapter for another model fails naming a tensor; perplexity takes
// --adapter and refuses a folder that is none.
func TestAdapterFlags(t *testing.T) {
	own := filepath.Join(loraCase, "adapter")
	other := filepath.Join("..", "..", "testdata", "golden", "qwen3_lora_all", "adapter")
	if out, errb, status := gozoo(t, "", "golden", "--adapter", own, loraCase); status != 0 || !strings.HasPrefix(out, "PASS") {
		t.Errorf("golden --adapter (its own): %d %s%s", status, out, errb)
	}
	if out, _, status := gozoo(t, "", "golden", "--adapter", other, loraCase); status != 1 || !strings.Contains(out, ".lora_") {
		t.Errorf("golden --adapter (another model's): %d %s", status, out)
	}
	ids, _ := goldenLogits(t, loraCase)
	idsFile := filepath.Join(t.TempDir(), "ids.json")
	b, _ := json.Marshal(ids)
	if err := os.WriteFile(idsFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ppl := func(extra ...string) (string, string, int) {
		return gozoo(t, "", append([]string{"perplexity", "--model", loraCase, "--ids", idsFile, "--ctx", "20", "--json"}, extra...)...)
	}
	base, errb, status := ppl()
	adapted, errb2, status2 := ppl("--adapter", own)
	if status != 0 || status2 != 0 || base == adapted {
		t.Errorf("perplexity without and with --adapter: %d %q %s, %d %q %s", status, base, errb, status2, adapted, errb2)
	}
	if _, errb, status := ppl("--adapter", t.TempDir()); status != 1 || !strings.Contains(errb, "adapter_config.json") {
		t.Errorf("perplexity --adapter of an empty folder: %d %s", status, errb)
	}
}

// TestTrainLoRA: gozoo train --lora-r trains an adapter on the bundled
// model, reports its optimizer state against full fine-tuning's, writes
// a PEFT folder, and gozoo run loads it back with --adapter.
func TestTrainLoRA(t *testing.T) {
	model := filepath.Join("..", "..", bundledModel)
	data := filepath.Join(t.TempDir(), "data.txt")
	if err := os.WriteFile(data, []byte(strings.Repeat("In the beginning God created the heaven and the earth.\n", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "adapter")
	stdout, stderr, status := gozoo(t, "", "train", "--model", model, "--data", data, "--steps", "3", "--seq-len", "16",
		"--lr", "1e-2", "--lora-r", "4", "--lora-targets", "q_proj,v_proj", "--out", out)
	if status != 0 {
		t.Fatalf("status %d\n%s%s", status, stdout, stderr)
	}
	// kjv-tiny: 6 layers, q_proj 128→128, v_proj 128→64; r=4.
	const params = 6 * 4 * ((128 + 128) + (128 + 64))
	if !strings.Contains(stdout, fmt.Sprintf("%d trained parameters, AdamW state %d bytes", params, 8*params)) {
		t.Errorf("stdout does not report %d trained parameters and %d bytes of state:\n%s", params, 8*params, stdout)
	}
	a, err := loaders.ReadLoRA(out)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.R != 4 || a.Config.Alpha != 8 || len(a.Tensors) != 24 {
		t.Errorf("saved r=%d alpha=%g with %d tensors", a.Config.R, a.Config.Alpha, len(a.Tensors))
	}
	if stdout, stderr, status := gozoo(t, "", "run", "--model", model, "--adapter", out, "--prompt", "In the", "--max-tokens", "3", "--temperature", "0"); status != 0 {
		t.Errorf("run --adapter: %d %s%s", status, stdout, stderr)
	}
}
