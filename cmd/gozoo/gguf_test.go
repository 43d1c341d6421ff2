package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
)

// TestRunGGUF streams from a GGUF file with nothing beside it: the
// weights, the embedded Qwen3 tokenizer and chat template.
func TestRunGGUF(t *testing.T) {
	file := filepath.Join(testfiles.Fixture(t, "gguf", "qwen3_q8_0"), "model.gguf")
	_, errb, status := gozoo(t, "", "run", "--model", file, "--chat", "--prompt", "Why is the sky blue?", "--max-tokens", "4", "--seed", "1")
	// <|im_start|>user\\nWhy is the sky blue?<|im_end|>\\n<|im_start|>assistant\\n
	if status != 0 || !strings.Contains(errb, "[14 prompt tokens, 4 generated") {
		t.Fatalf("status %d: %q", status, errb)
	}
	// A folder holding model.gguf and no config.json loads the same way.
	if _, errb, status := gozoo(t, "", "run", "--model", filepath.Dir(file), "--prompt", "Hello", "--max-tokens", "2"); status != 0 {
		t.Fatalf("folder: status %d: %q", status, errb)
	}
}

// TestEncodeGGUF tokenizes with the GGUF's embedded tokenizer as llama.cpp
// does: the strings of the case's golden.json.
func TestEncodeGGUF(t *testing.T) {
	dir := testfiles.Fixture(t, "gguf", "qwen3_q8_0")
	var meta struct {
		Tokenizer struct {
			Cases []struct {
				Text string `json:"text"`
				IDs  []int  `json:"ids"`
			} `json:"cases"`
		} `json:"tokenizer"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if len(meta.Tokenizer.Cases) < 30 {
		t.Fatalf("%d tokenizer cases", len(meta.Tokenizer.Cases))
	}
	var in strings.Builder
	for _, c := range meta.Tokenizer.Cases {
		line, _ := json.Marshal(map[string]string{"text": c.Text})
		in.Write(line)
		in.WriteByte('\n')
	}
	out, errb, status := gozoo(t, in.String(), "encode", "--tokenizer", filepath.Join(dir, "model.gguf"))
	if status != 0 {
		t.Fatalf("status %d: %s", status, errb)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(meta.Tokenizer.Cases) {
		t.Fatalf("%d lines for %d cases", len(lines), len(meta.Tokenizer.Cases))
	}
	for i, c := range meta.Tokenizer.Cases {
		var got struct{ IDs []int }
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if !slicesEqual(got.IDs, c.IDs) {
			t.Errorf("%q: %v, llama.cpp %v", c.Text, got.IDs, c.IDs)
		}
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestQuantize writes checkpoints as GGUF in every type and runs the files
// alone: the tokenizer written into them encodes as the checkpoint's
// tokenizer.json does. The bundled KJV model (a 4,096-token vocabulary)
// goes through every type; the tiny Qwen3 with Qwen3's real tokenizer
// (151,643 tokens, whose conversion costs most of a call under -race)
// goes through one, with its chat template.
func TestQuantize(t *testing.T) {
	models := filepath.Join("..", "..", "testdata", "models")
	texts := "{\"text\": \"Hello, world! 123 <|im_start|>user\"}\n{\"text\": \"naïve café — ünïcode\"}\n"
	for _, tc := range []struct {
		model string
		types []string
		run   []string // run's flags beside --model
		says  string   // what run's summary line holds
	}{
		{"kjv-tiny", []string{"q8_0", "q4_0", "q4_k_m", "q4_1", "q5_1", "q2_k", "q3_k_m", "q5_k_s", "q5_k_m", "iq4_nl", "iq4_xs"},
			[]string{"--prompt", "In the beginning"}, " prompt tokens, 3 generated"},
		// <|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n
		{"qwen3-tiny", []string{"q4_k_m"}, []string{"--chat", "--prompt", "Why is the sky blue?"}, "[14 prompt tokens, 3 generated"},
	} {
		model := filepath.Join(models, tc.model)
		want, errb, status := gozoo(t, texts, "encode", "--tokenizer", model)
		if status != 0 {
			t.Fatalf("%s: encode: %s", tc.model, errb)
		}
		for _, typ := range tc.types {
			out := filepath.Join(t.TempDir(), tc.model+"-"+typ+".gguf")
			if _, errb, status := gozoo(t, "", "quantize", "--model", model, "--type", typ, "--out", out); status != 0 {
				t.Fatalf("%s %s: status %d: %s", tc.model, typ, status, errb)
			}
			args := append([]string{"run", "--model", out, "--max-tokens", "3", "--temperature", "0"}, tc.run...)
			_, errb, status := gozoo(t, "", args...)
			if status != 0 || !strings.Contains(errb, tc.says) {
				t.Fatalf("%s %s: run: status %d: %q", tc.model, typ, status, errb)
			}
			got, errb, status := gozoo(t, texts, "encode", "--tokenizer", out)
			if status != 0 || got != want {
				t.Errorf("%s %s: the embedded tokenizer encodes %q, tokenizer.json %q (%s)", tc.model, typ, got, want, errb)
			}
		}
	}
	model := filepath.Join(models, "qwen3-tiny")
	if _, errb, status := gozoo(t, "", "quantize", "--model", model, "--type", "q3_k", "--out", filepath.Join(t.TempDir(), "x.gguf")); status != 1 || !strings.Contains(errb, `"q3_k"`) {
		t.Errorf("unknown type: status %d, %q", status, errb)
	}
}
