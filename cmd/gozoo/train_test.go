package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/tokenizer"
	"github.com/gozoo/gozoo/zoo"
)

// TestTrainCommand trains a tiny model from scratch for a few steps on a
// text with the Mistral tokenizer, continues it, and loads the result.
func TestTrainCommand(t *testing.T) {
	dir := t.TempDir()
	var cfg map[string]any
	data, err := os.ReadFile("../../testdata/golden/qwen3_gqa_tied/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["head_dim"] = 32000, 16, 32, 1, 8
	data, _ = json.Marshal(cfg)
	config := filepath.Join(dir, "config.json")
	text := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(config, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, []byte(strings.Repeat("In the beginning was the word, and the word was Go.\n", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	tok := "../../testdata/tokenizers/mistral"
	args := []string{"train", "--config", config, "--data", text, text, "--tokenizer", tok, "--steps", "4",
		"--seq-len", "8", "--batch", "2", "--lr", "1e-2", "--log-every", "2", "--seed", "3", "--out", out}
	stdout, errb, status := gozoo(t, "", args...)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errb)
	}
	for _, want := range []string{"2 files", "step 1/4 loss", "step 2/4 loss", "step 4/4 loss", "tok/s", "model.safetensors", "tokenizer.json"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	again, _, _ := gozoo(t, "", args...)
	if stripTimes(again) != stripTimes(stdout) {
		t.Errorf("the same seed printed other losses:\n%s\n%s", stdout, again)
	}
	if _, err := zoo.Load(out); err != nil {
		t.Fatal(err)
	}
	// --stop-at ends the run early on the full run's schedule and curve;
	// --save-dtype bf16 halves the file.
	short := filepath.Join(dir, "short")
	stopped, errb, status := gozoo(t, "", append(slices.Clone(args[:len(args)-1]), short, "--stop-at", "2", "--save-dtype", "bf16")...)
	if status != 0 {
		t.Fatalf("--stop-at: status %d: %s", status, errb)
	}
	if line := lineWith(stripTimes(stopped), "step 2/4 loss"); line == "" || line != lineWith(stripTimes(stdout), "step 2/4 loss") || strings.Contains(stopped, "step 4/4") {
		t.Errorf("--stop-at 2 of 4 steps printed\n%s\nwant the full run's step-2 line\n%s", stopped, stdout)
	}
	if !strings.Contains(stopped, "(BF16, step 2)") {
		t.Errorf("--save-dtype bf16: %s", stopped)
	}
	m, err := zoo.Load(short)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params().All() {
		// Vectors (norm weights) are widened to float32 on load.
		if len(p.Shape) == 2 && p.DType != graphs.BF16 {
			t.Fatalf("%s loaded as %s from a --save-dtype bf16 checkpoint", p.Name, p.DType)
		}
	}
	if _, errb, status := gozoo(t, "", append(slices.Clone(args), "--save-dtype", "f8")...); status != 2 || !strings.Contains(errb, "f8") {
		t.Errorf("--save-dtype f8: status %d, %q", status, errb)
	}
	// Continue from the checkpoint, writing over it.
	stdout, errb, status = gozoo(t, "", "train", "--model", out, "--data", text, "--steps", "2", "--seq-len", "8", "--out", out)
	if status != 0 || !strings.Contains(stdout, "step 2/2 loss") {
		t.Fatalf("continuing: status %d: %s%s", status, stdout, errb)
	}
	if !strings.Contains(stdout, "continuing AdamW from "+out+"/optimizer.safetensors (4 updates)") {
		t.Errorf("continuing did not restore AdamW's state saved with the checkpoint:\n%s", stdout)
	}
	if _, err := zoo.Load(out); err != nil {
		t.Fatal(err)
	}
	if _, _, status := gozoo(t, "", "train", "--config", config, "--data", text, "--steps", "2", "--out", out); status != 2 {
		t.Errorf("no tokenizer: status %d", status)
	}
	if _, errb, status := gozoo(t, "", "train", "--config", config, "--data", filepath.Join(dir, "missing.txt"), "--tokenizer", tok, "--steps", "2", "--out", out); status != 1 || !strings.Contains(errb, "missing.txt") {
		t.Errorf("missing data file: status %d, %q", status, errb)
	}
}

// lineWith is the first line of s holding sub, or "".
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// stripTimes drops the timing fields of the loss lines.
func stripTimes(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, " tok/s"); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// TestTrainTokenizerCommand learns a small BPE from two files listed
// after --data, with flags after them, and loads the result.
func TestTrainTokenizerCommand(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, []byte(strings.Repeat("In the beginning God created the heaven and the earth.\n", 30)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "tok")
	stdout, errb, status := gozoo(t, "", "train-tokenizer", "--data", a, b, "--vocab", "300", "--out", out)
	if status != 0 || !strings.Contains(stdout, "tokenizer.json") {
		t.Fatalf("status %d: %s%s", status, stdout, errb)
	}
	tok, err := tokenizer.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	// A short text runs out of pairs seen twice before 300 ids.
	if n := tok.VocabSize(); n <= 257 || n > 300 {
		t.Errorf("vocabulary of %d ids, want merges and at most 300", n)
	}
	if eos, ok := tok.EOS(); !ok || eos != 0 {
		t.Errorf("EOS %d (%v), want <|endoftext|> at id 0", eos, ok)
	}
	if ids, _ := tok.Encode(" the", false); len(ids) != 1 {
		t.Errorf(`" the" is %d tokens after training on a text full of it`, len(ids))
	}
	if _, _, status := gozoo(t, "", "train-tokenizer", "--data", a); status != 2 {
		t.Errorf("no --out: status %d", status)
	}
	if _, errb, status := gozoo(t, "", "train-tokenizer", "--data", a, "--vocab", "10", "--out", out); status != 1 || !strings.Contains(errb, "vocab size 10") {
		t.Errorf("--vocab 10: status %d, %q", status, errb)
	}
}
