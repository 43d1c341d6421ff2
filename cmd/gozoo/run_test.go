package main

import (
	"strings"
	"testing"
)

func TestRunBundledModel(t *testing.T) {
	t.Chdir("../..") // the README's command runs from the repository root
	out, errb, status := gozoo(t, "", "run", "--prompt", "Hello, Go!", "--max-tokens", "6", "--seed", "1")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errb)
	}
	if strings.TrimSpace(out) == "" {
		t.Error("no text streamed")
	}
	if !strings.Contains(errb, "6 generated") || !strings.Contains(errb, "stop: max_tokens") || !strings.Contains(errb, "tok/s") {
		t.Errorf("summary line missing or wrong: %q", errb)
	}
	// The same seed reproduces the same text; greedy ignores the seed.
	again, _, _ := gozoo(t, "", "run", "--prompt", "Hello, Go!", "--max-tokens", "6", "--seed", "1")
	if again != out {
		t.Errorf("seed 1 twice: %q then %q", out, again)
	}
	g1, _, _ := gozoo(t, "", "run", "--prompt", "Hello", "--max-tokens", "4", "--temperature", "0", "--seed", "1")
	g2, _, _ := gozoo(t, "", "run", "--prompt", "Hello", "--max-tokens", "4", "--temperature", "0", "--seed", "2")
	if g1 != g2 {
		t.Errorf("greedy runs differ: %q vs %q", g1, g2)
	}
}

func TestRunErrors(t *testing.T) {
	if _, _, status := gozoo(t, "", "run"); status != 2 {
		t.Errorf("no prompt: status %d", status)
	}
	_, errb, status := gozoo(t, "", "run", "--model", t.TempDir(), "--prompt", "x")
	if status != 1 || !strings.Contains(errb, "config.json") {
		t.Errorf("empty model folder: status %d, %q", status, errb)
	}
}

func TestRunChat(t *testing.T) {
	t.Chdir("../..")
	_, errb, status := gozoo(t, "", "run", "--model", "testdata/models/qwen3-tiny", "--chat", "--system", "Be brief.", "--prompt", "What is Go?", "--max-tokens", "3", "--seed", "5")
	// <|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is Go?<|im_end|>\n<|im_start|>assistant\n
	if status != 0 || !strings.Contains(errb, "[20 prompt tokens, 3 generated") {
		t.Fatalf("status %d: %q", status, errb)
	}
}
