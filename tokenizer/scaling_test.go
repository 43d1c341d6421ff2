package tokenizer

import (
	"math/rand"
	"strings"
	"sync"
	"testing"
)

// TestLinearScaling encodes inputs of n and 10n characters that defeat the
// pre-tokenizer (one 100k-character word, a long run of spaces, ...) and
// checks that the work of the encoding grows linearly. The work is
// counted, not timed (limits.work: bytes the scanners, matchers and
// normalizers read, pieces cut, runes handed to regexp2 and matches it
// returned, BPE symbols and merges), so a loaded machine changes nothing:
// 10 times the input must cost at most 11 times the work (linear work
// gives 10.0 here, quadratic work 100). regexp2's own search inside a
// match is not counted; what the tokenizer does around it is.
func TestLinearScaling(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	letters := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.Intn(26))
		}
		return string(b)
	}
	inputs := []struct {
		name string
		gen  func(n int) string
	}{
		{"word", letters},
		{"spaces", func(n int) string { return "a" + strings.Repeat(" ", n) + "b" }},
		{"newlines", func(n int) string { return "a" + strings.Repeat(" \n", n/2) + "b" }},
		{"digits", func(n int) string { return strings.Repeat("7", n) }},
		{"punctuation", func(n int) string { return strings.Repeat("-=", n/2) }},
		{"cjk", func(n int) string { return strings.Repeat("语", n) }},
	}
	const n = 10_000
	for _, name := range []string{"qwen3", "qwen3-regexp2", "mistral", "gemma3", "llama3", "cohere"} {
		t.Run(name, func(t *testing.T) {
			var tok *Tokenizer
			if name == "qwen3-regexp2" {
				tok = qwen3ViaRegexp2(t)
			} else {
				tok = loadRef(t, name)
			}
			for _, in := range inputs {
				small, large := in.gen(n), in.gen(10*n)
				// The first encode fills the word cache with the short
				// words both inputs share.
				encodeWork(t, tok, small)
				ws, wl := encodeWork(t, tok, small), encodeWork(t, tok, large)
				ratio := float64(wl) / float64(ws)
				t.Logf("%-12s n=%d: work %d, 10n: %d, ratio %.2f", in.name, n, ws, wl, ratio)
				if ratio > 11 {
					t.Errorf("%s: 10x the input took %.1fx the work (%d vs %d)", in.name, ratio, wl, ws)
				}
			}
		})
	}
}

// encodeWork encodes s and returns the work the encoding counted.
func encodeWork(t *testing.T, tok *Tokenizer, s string) int64 {
	t.Helper()
	st := &encState{}
	if _, err := tok.encode(st, s, false); err != nil {
		t.Fatal(err)
	}
	if st.lim.work <= 0 {
		t.Fatalf("encoding %d bytes counted no work", len(s))
	}
	return st.lim.work
}

// TestConcurrentUse encodes and decodes from several goroutines at once
// (run with -race) and checks every answer.
func TestConcurrentUse(t *testing.T) {
	for _, name := range []string{"qwen3", "mistral"} {
		tok := loadRef(t, name)
		cases := loadCases(t, name)
		tok.model.cache = newWordCache() // start cold, so goroutines fill it together
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for rep := 0; rep < 3; rep++ {
					for i := range cases {
						c := cases[(i+g*13)%len(cases)]
						ids, err := tok.Encode(c.Text, true)
						if err != nil || !equalIDs(ids, c.IDsWithSpecial) {
							errs <- name + ": wrong ids for " + c.Text
							return
						}
						text, err := streamAll(tok, c.IDs, false)
						if err != nil || text != c.Decoded {
							errs <- name + ": wrong stream decode for " + c.Text
							return
						}
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}
