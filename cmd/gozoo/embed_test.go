package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/zoo/generate"
)

type embedLine struct {
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

func readEmbedLines(t *testing.T, out string) []embedLine {
	t.Helper()
	var got []embedLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e embedLine
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, e)
	}
	return got
}

// TestEmbedCommand embeds lines from stdin and from a file, batched and
// one at a time, against generate.Embed on the tokenized lines.
func TestEmbedCommand(t *testing.T) {
	model := filepath.Join("..", "..", "testdata", "models", "qwen3-tiny")
	lines := []string{"In the beginning", "God created the heaven and the earth.", "And the earth was without form, and void", "x"}
	text := strings.Join(lines, "\r\n") // no newline after the last line
	g, err := generate.Load(model, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	inputs := make([][]int, len(lines))
	for i, l := range lines {
		if inputs[i], err = g.Encode(l); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "lines.txt")
	if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, stdin string
		args        []string
		opts        generate.EmbedOptions
	}{
		{"stdin mean", text, nil, generate.EmbedOptions{Pool: generate.PoolMean}},
		{"file last normalized", "", []string{"--file", path, "--pool", "last", "--normalize"}, generate.EmbedOptions{Pool: generate.PoolLast, Normalize: true}},
		{"batch 1", text, []string{"--batch", "1", "--pool", "mean", "--normalize"}, generate.EmbedOptions{Pool: generate.PoolMean, Normalize: true}},
		{"batch 3", text, []string{"--batch", "3", "--pool", "last"}, generate.EmbedOptions{Pool: generate.PoolLast}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errb, status := gozoo(t, tc.stdin, append([]string{"embed", "--model", model}, tc.args...)...)
			if status != 0 {
				t.Fatalf("status %d: %s", status, errb)
			}
			got := readEmbedLines(t, out)
			want, err := generate.Embed(context.Background(), g.Model, inputs, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(lines) {
				t.Fatalf("%d lines out for %d in", len(got), len(lines))
			}
			for i, e := range got {
				if e.Index != i || len(e.Embedding) != g.Model.HiddenSize() {
					t.Fatalf("line %d: index %d, %d values", i, e.Index, len(e.Embedding))
				}
				var ss float64
				for d, v := range e.Embedding {
					// Other batches round differently (see generate's tests).
					if math.Abs(float64(v-want[i][d])) > 2e-5 {
						t.Fatalf("line %d value %d: %g, generate.Embed %g", i, d, v, want[i][d])
					}
					ss += float64(v) * float64(v)
				}
				if tc.opts.Normalize && math.Abs(math.Sqrt(ss)-1) > 1e-6 {
					t.Errorf("line %d: norm %g after --normalize", i, math.Sqrt(ss))
				}
			}
		})
	}
}

func TestEmbedCommandErrors(t *testing.T) {
	model := filepath.Join("..", "..", "testdata", "models", "qwen3-tiny") // adds no BOS
	for _, tc := range []struct {
		name, stdin string
		args        []string
		status      int
		want        string
	}{
		{"no model", "a", nil, 2, "usage: gozoo embed"},
		{"unknown pooling", "a", []string{"--model", model, "--pool", "max"}, 1, `--pool: unknown pooling "max": want mean or last`},
		{"batch 0", "a", []string{"--model", model, "--batch", "0"}, 1, "--batch must be at least 1"},
		{"missing file", "", []string{"--model", model, "--file", filepath.Join(t.TempDir(), "nope.txt")}, 1, "nope.txt: no such file"},
		{"no input", "", []string{"--model", model}, 1, "no lines of text to embed"},
		{"empty line", "a\n\nb\n", []string{"--model", model}, 1, "line 2 (index 1) has no tokens"},
		{"missing model", "a", []string{"--model", t.TempDir()}, 1, "config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errb, status := gozoo(t, tc.stdin, append([]string{"embed"}, tc.args...)...)
			if status != tc.status || !strings.Contains(errb, tc.want) || out != "" || strings.Contains(errb, "panic") {
				t.Errorf("status %d (want %d), stdout %q, stderr %q, want it to contain %q", status, tc.status, out, errb, tc.want)
			}
		})
	}
}
