package tokenizer

import (
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLinearScaling encodes inputs of n and 10n characters that defeat the
// pre-tokenizer (one 100k-character word, a long run of spaces, ...) and
// checks the time grows about linearly: the ratio must stay below 30,
// where quadratic work would give 100. Times are the best of a few runs,
// so a busy machine does not make the test flaky.
func TestLinearScaling(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
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
				ts, tl := bestTime(t, tok, small), bestTime(t, tok, large)
				ratio := float64(tl) / float64(max(ts, time.Microsecond))
				t.Logf("%-12s n=%d: %v, 10n: %v, ratio %.1f", in.name, n, ts, tl, ratio)
				if ratio > 30 {
					t.Errorf("%s: 10x the input took %.1fx the time (%v vs %v)", in.name, ratio, tl, ts)
				}
			}
		})
	}
}

func bestTime(t *testing.T, tok *Tokenizer, s string) time.Duration {
	best := time.Duration(1 << 62)
	// Seven tries: the short inputs take well under a millisecond, where
	// one preemption on a shared machine is enough to halve the ratio.
	for i := 0; i < 7; i++ {
		start := time.Now()
		if _, err := tok.Encode(s, false); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
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
