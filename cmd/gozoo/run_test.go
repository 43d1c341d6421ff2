package main

import (
	"encoding/json"
	"fmt"
	"os"
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

// TestRunBatch: --prompts generates for every line at once; with a seed
// each sample equals the same prompt run alone with that sample's seed
// (sample i samples with seed+i), and --logprobs gives every token's.
func TestRunBatch(t *testing.T) {
	t.Chdir("../..")
	prompts := []string{"In the beginning", "And God said unto", "Hello"}
	out, errb, status := gozoo(t, strings.Join(prompts, "\n")+"\n", "run", "--prompts", "-", "--n", "2", "--max-tokens", "6", "--temperature", "0.8", "--seed", "5", "--logprobs", "3")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errb)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2*len(prompts) {
		t.Fatalf("%d lines for %d prompts of 2 samples: %q", len(lines), len(prompts), out)
	}
	for _, l := range lines {
		var got batchLine
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Logprobs) != len(got.Tokens) || len(got.Tokens) == 0 {
			t.Fatalf("prompt %d sample %d: %d log-probabilities for %d tokens", got.Prompt, got.Sample, len(got.Logprobs), len(got.Tokens))
		}
		for _, lp := range got.Logprobs {
			if len(lp.Top) != 3 || lp.Logprob > 0 || lp.Top[0].Logprob < lp.Logprob {
				t.Fatalf("token %d: log-probability %g, top %v", lp.ID, lp.Logprob, lp.Top)
			}
		}
		alone, errb, status := gozoo(t, "", "run", "--prompt", prompts[got.Prompt], "--max-tokens", "6", "--temperature", "0.8", "--seed", fmt.Sprint(5+got.Sample))
		if status != 0 {
			t.Fatalf("alone: status %d: %s", status, errb)
		}
		if strings.TrimSuffix(alone, "\n") != got.Text {
			t.Errorf("prompt %d sample %d: %q batched, %q alone", got.Prompt, got.Sample, got.Text, alone)
		}
	}
	if _, _, status := gozoo(t, "", "run", "--prompts", "-", "--prompt", "x"); status != 2 {
		t.Errorf("--prompt with --prompts: status %d", status)
	}
	if _, errb, status := gozoo(t, "\n\n", "run", "--prompts", "-"); status != 1 || !strings.Contains(errb, "no prompt") {
		t.Errorf("no prompts: status %d, %q", status, errb)
	}
}

func TestRunJSONSchema(t *testing.T) {
	t.Chdir("../..")
	schema := t.TempDir() + "/s.json"
	if err := os.WriteFile(schema, []byte(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9},"w":{"enum":["a","b"]}},"required":["n","w"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, seed := range []string{"1", "2"} {
		out, errb, status := gozoo(t, "", "run", "--model", "testdata/models/qwen3-tiny", "--prompt", "JSON:", "--json-schema", schema, "--max-tokens", "200", "--seed", seed, "--temperature", "1")
		if status != 0 || !strings.Contains(errb, "stop: eos") {
			t.Fatalf("status %d: %s", status, errb)
		}
		var v struct {
			N int    `json:"n"`
			W string `json:"w"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.N < 1 || v.N > 9 || (v.W != "a" && v.W != "b") {
			t.Errorf("seed %s: %q: %v", seed, out, err)
		}
	}
	bad := t.TempDir() + "/bad.json"
	os.WriteFile(bad, []byte(`{"type":"integer","multipleOf":2}`), 0o644)
	_, errb, status := gozoo(t, "", "run", "--prompt", "x", "--json-schema", bad)
	if status != 1 || !strings.Contains(errb, `"multipleOf"`) || !strings.Contains(errb, "/multipleOf") {
		t.Errorf("unsupported keyword: status %d, %q", status, errb)
	}
}
