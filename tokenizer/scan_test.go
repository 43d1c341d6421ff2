package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// onigContractions spells out what Oniguruma's (?i:...) matches for the
// contraction alternatives, U+017F (long s, case-folded to 's') included.
// regexp2 lowercases instead of case folding and misses U+017F; with this
// spelling it runs the Rust library's pattern.
const onigContractions = `(?:'[sS\x{17F}]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`

var scannerPatterns = []struct {
	name, pattern, reference string
}{
	{"qwen2", patternQwen2, strings.Replace(patternQwen2, `(?i:'s|'t|'re|'ve|'m|'ll|'d)`, onigContractions, 1)},
	{"llama3", patternLlama3, strings.Replace(patternLlama3, `(?i:'s|'t|'re|'ve|'m|'ll|'d)`, onigContractions, 1)},
	{"gpt2", patternGPT2, patternGPT2},
}

// scanPieces lists the pieces of s for a matcher.
func scanPieces(t testing.TB, m matcher, s string) []string {
	t.Helper()
	spans, err := m.find(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	prev := 0
	for _, sp := range spans {
		if sp.start > prev {
			out = append(out, "~"+s[prev:sp.start]) // unmatched text
		}
		out = append(out, s[sp.start:sp.end])
		prev = sp.end
	}
	if prev < len(s) {
		out = append(out, "~"+s[prev:])
	}
	return out
}

// scanAlphabet mixes the character classes the patterns distinguish:
// letters of several categories, numbers (Nd, Nl, No), every kind of
// white space, U+FEFF and U+200B (not white space), punctuation, emoji,
// combining marks and contraction fragments.
var scanAlphabet = []string{
	"a", "b", "Z", "é", "ß", "Ω", "中", "ǅ", "ʰ", "\u0301", "\u0308",
	"0", "7", "٣", "²", "½", "Ⅻ", "１",
	" ", " ", " ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\u2003", "\u3000", "\u2028", "\u2029", "\u1680", "\u180e",
	"\ufeff", "\u200b", "\u200d",
	"'", "'", ",", ".", "-", "!", "$", "«", "😀", "👍🏽", "\x00",
	"'s", "'S", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'lL", "'LL", "'d", "'D", "'ſ", "ſ", "'K",
	"hello", " world", "  ", "   ", "\n\n", " \n ", "123", "1234567",
}

func randomScanText(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.Intn(24); n > 0; n-- {
		b.WriteString(scanAlphabet[rng.Intn(len(scanAlphabet))])
	}
	return b.String()
}

// scanCorpus returns the reference corpus texts and some prose.
func scanCorpus(t *testing.T) []string {
	var texts []string
	for _, name := range []string{"qwen3", "mistral"} {
		for _, c := range loadCases(t, name) {
			texts = append(texts, c.Text)
		}
	}
	prose, err := os.ReadFile(filepath.Join("testdata", "prose.txt"))
	if err != nil {
		t.Fatal(err)
	}
	texts = append(texts, strings.Split(string(prose), "\n\n")...)
	return texts
}

// TestScannersMatchRegexp2 checks the hand-written scanners against regexp2
// running the same patterns, on the corpus, prose and random strings.
func TestScannersMatchRegexp2(t *testing.T) {
	texts := scanCorpus(t)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		texts = append(texts, randomScanText(rng))
	}
	for _, p := range scannerPatterns {
		t.Run(p.name, func(t *testing.T) {
			re, err := compileRegex(p.reference, "test")
			if err != nil {
				t.Fatal(err)
			}
			ref := regexMatcher{re}
			scan := scanMatcher{scanKindOf(p.pattern)}
			if scan.kind == scanNone {
				t.Fatal("pattern not recognised")
			}
			bad := 0
			for _, s := range texts {
				got, want := scanPieces(t, scan, s), scanPieces(t, ref, s)
				if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
					t.Errorf("%q:\n scanner %q\n regexp2 %q", s, got, want)
					if bad++; bad > 10 {
						t.FailNow()
					}
				}
			}
			t.Logf("%d texts split identically", len(texts))
		})
	}
}

// TestLongSFold pins the one place the scanners follow Oniguruma rather
// than plain regexp2: (?i) matches U+017F LATIN SMALL LETTER LONG S as 's'.
func TestLongSFold(t *testing.T) {
	got := scanPieces(t, scanMatcher{scanQwen2}, "x'ſy")
	want := []string{"x", "'ſ", "y"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func FuzzScanners(f *testing.F) {
	for _, s := range []string{"", "Hello world", "it's  \n\n x", "a\u00a0\u2003b", "12345 ½²", "'S'LL'ſ", "\r\n\t x\ufeffy"} {
		f.Add(s)
	}
	var refs [3]matcher
	for i, p := range scannerPatterns {
		re, err := compileRegex(p.reference, "test")
		if err != nil {
			f.Fatal(err)
		}
		refs[i] = regexMatcher{re}
	}
	f.Fuzz(func(t *testing.T, s string) {
		s = lossyString(s)
		for i, p := range scannerPatterns {
			got := scanPieces(t, scanMatcher{scanKindOf(p.pattern)}, s)
			want := scanPieces(t, refs[i], s)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Fatalf("%s %q:\n scanner %q\n regexp2 %q", p.name, s, got, want)
			}
		}
	})
}

// qwen3ViaRegexp2 loads Qwen3 with its Split pattern spelled the way
// Oniguruma reads it, which the scanners do not recognise, so the general
// regexp2 path runs. The tests that use it check the ids and the work of
// good input, not the regex time budget (hostile_test.go does), so its
// budget is a minute per 100 KB, thousands of times what the pattern
// needs: a loaded machine or -race cannot make it trip.
func qwen3ViaRegexp2(t testing.TB) *Tokenizer {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tokenizerDir(t, "qwen3"), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(onigContractions)
	const old = `(?i:'s|'t|'re|'ve|'m|'ll|'d)`
	if !bytes.Contains(data, []byte(old)) {
		t.Fatal("Qwen3 pattern not found")
	}
	data = bytes.Replace(data, []byte(old), quoted[1:len(quoted)-1], 1)
	tok, err := FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tok.pre[0].(*splitPre).m.(regexMatcher); !ok {
		t.Fatal("the regexp2 path is not in use")
	}
	tok.SetRegexTimeout(time.Minute)
	return tok
}

func TestRegexp2FallbackCases(t *testing.T) {
	tok := qwen3ViaRegexp2(t)
	for i, c := range loadCases(t, "qwen3") {
		if ids, err := tok.Encode(c.Text, true); err != nil || !equalIDs(ids, c.IDsWithSpecial) {
			t.Errorf("case %d %q: got %v, %v; want %v", i, c.Text, ids, err, c.IDsWithSpecial)
		}
	}
	text := readProse(t)
	want, _ := loadRef(t, "qwen3").Encode(text, false)
	if got, _ := tok.Encode(text, false); !equalIDs(got, want) {
		t.Error("prose encodes differently through regexp2")
	}
}
