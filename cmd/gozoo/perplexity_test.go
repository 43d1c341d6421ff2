package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/zoo/generate"
)

// lastJSON decodes stdout's last line.
func lastJSON(t *testing.T, stdout string, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("last stdout line: %v\n%s", err, stdout)
	}
}

// TestPerplexityGolden runs gozoo perplexity over every case of
// testdata/ppl, one chunk at a time and eight at once, against the
// reference computed from transformers' float32 forward.
func TestPerplexityGolden(t *testing.T) {
	cases := testfiles.Cases(t, "ppl")
	if len(cases) == 0 {
		t.Fatal("no perplexity cases in testdata/ppl")
	}
	for _, dir := range cases {
		name := filepath.Base(dir)
		var ref struct {
			Ctx          int     `json:"ctx"`
			NChunk       int     `json:"n_chunk"`
			TokensScored int     `json:"tokens_scored"`
			NLLMean      float64 `json:"nll_mean"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "ppl.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		model := testfiles.Fixture(t, "golden", name)
		for _, batch := range []string{"1", "8"} {
			t.Run(name+"/batch"+batch, func(t *testing.T) {
				out, errb, status := gozoo(t, "", "perplexity", "--model", model, "--ids", filepath.Join(dir, "ids.json"),
					"--ctx", strconv.Itoa(ref.Ctx), "--batch", batch, "--json")
				if status != 0 {
					t.Fatalf("status %d: %s", status, errb)
				}
				var got pplResult
				lastJSON(t, out, &got)
				if d := math.Abs(got.NLLMean - ref.NLLMean); d > 1e-4 || math.IsNaN(d) {
					t.Errorf("nll_mean %.9f, reference %.9f (diff %.3g)", got.NLLMean, ref.NLLMean, d)
				}
				if got.TokensScored != ref.TokensScored || got.NChunk != ref.NChunk {
					t.Errorf("%d tokens scored in %d chunks, reference %d in %d", got.TokensScored, got.NChunk, ref.TokensScored, ref.NChunk)
				}
				if math.Abs(got.PPL-math.Exp(got.NLLMean)) > 1e-9*got.PPL {
					t.Errorf("ppl %g is not exp(nll_mean %g)", got.PPL, got.NLLMean)
				}
			})
		}
	}
}

// TestPerplexityFile tokenizes a text file with the model's tokenizer:
// the same figures as its ids given as --ids.
func TestPerplexityFile(t *testing.T) {
	model := filepath.Join("..", "..", "testdata", "models", "qwen3-tiny")
	text := strings.Repeat("In the beginning God created the heaven and the earth. ", 8)
	dir := t.TempDir()
	textPath := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(textPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := generate.Load(model, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ids, err := g.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ids)
	idsPath := filepath.Join(dir, "ids.json")
	if err := os.WriteFile(idsPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var fromFile, fromIDs pplResult
	for _, run := range []struct {
		flag, path string
		res        *pplResult
	}{{"--file", textPath, &fromFile}, {"--ids", idsPath, &fromIDs}} {
		out, errb, status := gozoo(t, "", "perplexity", "--model", model, run.flag, run.path, "--ctx", "32", "--batch", "2", "--json")
		if status != 0 {
			t.Fatalf("%s: status %d: %s", run.flag, status, errb)
		}
		lastJSON(t, out, run.res)
	}
	if fromFile != fromIDs || fromFile.NChunk != len(ids)/32 || fromFile.TokensScored != fromFile.NChunk*15 {
		t.Errorf("--file %+v, --ids %+v (%d ids)", fromFile, fromIDs, len(ids))
	}
}

func TestPerplexityErrors(t *testing.T) {
	model := testfiles.Fixture(t, "golden", "gpt2_original_bf16") // 48 positions, 512 tokens
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ids := filepath.Join(testfiles.Root(t), "testdata", "ppl", "gpt2_original_bf16", "ids.json")
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"no model", []string{"--ids", ids}, 2, "usage: gozoo perplexity"},
		{"no input", []string{"--model", model}, 2, "usage: gozoo perplexity"},
		{"both inputs", []string{"--model", model, "--ids", ids, "--file", ids}, 2, "usage: gozoo perplexity"},
		{"missing ids file", []string{"--model", model, "--ids", filepath.Join(dir, "nope.json")}, 1, "nope.json: no such file"},
		{"missing text file", []string{"--model", model, "--file", filepath.Join(dir, "nope.txt")}, 1, "nope.txt: no such file"},
		{"ids not an array", []string{"--model", model, "--ids", write("object.json", `{"ids": [1, 2]}`)}, 1, "object.json: want a JSON array of token ids"},
		{"ids not JSON", []string{"--model", model, "--ids", write("garbage.json", `[1, 2`)}, 1, "garbage.json: want a JSON array of token ids"},
		{"string id", []string{"--model", model, "--ids", write("string.json", `[1, 2, "3"]`)}, 1, `string.json: element 2 ("3"): not an integer token id`},
		{"fractional id", []string{"--model", model, "--ids", write("float.json", `[1, 2.5]`)}, 1, "float.json: element 1 (2.5): not an integer token id"},
		{"id outside vocabulary", []string{"--model", model, "--ids", write("vocab.json", `[1, 2, 3, 512, 4]`)}, 1, "vocab.json: token id 512 at index 3 is outside the model's vocabulary [0, 512)"},
		{"negative id", []string{"--model", model, "--ids", write("negative.json", `[-1]`)}, 1, "token id -1 at index 0"},
		{"ctx 2", []string{"--model", model, "--ids", ids, "--ctx", "2"}, 1, "--ctx 2 scores no token"},
		{"ctx 0", []string{"--model", model, "--ids", ids, "--ctx", "0"}, 1, "--ctx 0 scores no token"},
		{"ctx past the model", []string{"--model", model, "--ids", ids, "--ctx", "64"}, 1, "--ctx 64 is longer than the model's 48 positions"},
		{"too few ids", []string{"--model", model, "--ids", write("short.json", `[1, 2, 3]`), "--ctx", "16"}, 1, "short.json: 3 tokens make no chunk of 16 (--ctx)"},
		{"batch 0", []string{"--model", model, "--ids", ids, "--batch", "0"}, 1, "--batch must be at least 1"},
		{"model missing", []string{"--model", filepath.Join(dir, "nomodel"), "--ids", ids}, 1, "config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errb, status := gozoo(t, "", append([]string{"perplexity"}, tc.args...)...)
			if status != tc.status || !strings.Contains(errb, tc.want) {
				t.Errorf("status %d (want %d), stderr %q, want it to contain %q", status, tc.status, errb, tc.want)
			}
			if strings.Contains(errb, "panic") || out != "" {
				t.Errorf("stdout %q, stderr %q", out, errb)
			}
		})
	}
	// The default --ctx of 512 is cut to the model's 48 positions.
	var all []int
	if b, err := os.ReadFile(ids); err != nil || json.Unmarshal(b, &all) != nil {
		t.Fatalf("%s: %v", ids, err)
	}
	out, errb, status := gozoo(t, "", "perplexity", "--model", model, "--ids", ids, "--json")
	var res pplResult
	if status != 0 {
		t.Fatalf("default ctx: status %d: %s", status, errb)
	}
	lastJSON(t, out, &res)
	if res.NChunk != len(all)/48 || res.TokensScored != res.NChunk*(48-1-24) {
		t.Errorf("default ctx on %d ids and 48 positions: %+v", len(all), res)
	}
}
