package main

import (
	"bufio"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/gozoo/gozoo/zoo"
)

// dictionary reads the word list shipped in testdata/dict (SCOWL's
// American English list, as Debian's wamerican installs it), lowercased.
func dictionary(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "dict", "american-english.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{}
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		words[strings.ToLower(sc.Text())] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return words
}

// dictionaryShare is the share of text's words (runs of letters) that are
// in dict, and the number of words.
func dictionaryShare(text string, dict map[string]bool) (float64, int) {
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
	var in int
	for _, w := range words {
		w = strings.ToLower(strings.Trim(w, "'"))
		if dict[w] || dict[strings.TrimSuffix(w, "'s")] {
			in++
		}
	}
	if len(words) == 0 {
		return 0, 0
	}
	return float64(in) / float64(len(words)), len(words)
}

// TestBundledModelWritesEnglish runs the README's first command: gozoo run
// with no --model runs the model gozoo train made (testdata/models/kjv-tiny,
// see its README.md), whose greedy continuation must be mostly dictionary
// words. The exact text is not checked: a retrained model may differ.
//
// The same check on the same architecture and tokenizer with random
// weights must fail, so the threshold measures what training taught.
func TestBundledModelWritesEnglish(t *testing.T) {
	t.Chdir("../..")
	if bundledModel != "testdata/models/kjv-tiny" {
		t.Fatalf("gozoo run's default model is %s, not the trained kjv-tiny", bundledModel)
	}
	dict := dictionary(t)
	const minShare, minWords = 0.9, 30
	for _, prompt := range []string{"In the beginning", "And the LORD said unto Moses,", "Blessed are the"} {
		out, errb, status := gozoo(t, "", "run", "--prompt", prompt, "--max-tokens", "64", "--temperature", "0")
		if status != 0 {
			t.Fatalf("gozoo run --prompt %q: status %d: %s", prompt, status, errb)
		}
		share, n := dictionaryShare(out, dict)
		t.Logf("%q → %q: %d words, %.0f%% in the dictionary", prompt, out, n, 100*share)
		if n < minWords || share < minShare {
			t.Errorf("%q: %d words, %.0f%% in the dictionary; want at least %d words and %.0f%%:\n%s", prompt, n, 100*share, minWords, 100*minShare, out)
		}
	}

	// Control: random weights of the same config, sampled at temperature 1.
	config, err := os.ReadFile(filepath.Join(bundledModel, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	random := t.TempDir()
	if err := zoo.WriteRandomCheckpoint(config, random, "f32", 1); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(bundledModel, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(random, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errb, status := gozoo(t, "", "run", "--model", random, "--prompt", "In the beginning", "--max-tokens", "64", "--temperature", "1", "--top-k", "0", "--top-p", "1", "--seed", "1")
	if status != 0 {
		t.Fatalf("random weights: status %d: %s", status, errb)
	}
	share, n := dictionaryShare(out, dict)
	t.Logf("random weights → %q: %d words, %.0f%% in the dictionary", out, n, 100*share)
	if share >= minShare {
		t.Errorf("random weights pass the dictionary check (%.0f%% of %d words): it does not measure training", 100*share, n)
	}
}
