package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gozoo/gozoo/internal/leaktest"
)

// toyWith returns the toy tokenizer.json with the given extra fields
// spelled as JSON.
func toyWith(t *testing.T, fields map[string]string) []byte {
	t.Helper()
	extra := map[string]any{}
	for k, v := range fields {
		extra[k] = json.RawMessage(v)
	}
	return toyJSON(t, extra)
}

// TestCatastrophicSplitRegex is the case: a Split pattern that
// backtracks catastrophically (2^60 steps on this input). Encode must
// fail at the regex budget, with an error naming the file, the pattern
// and the budget: DefaultRegexTimeout for this short text.
func TestCatastrophicSplitRegex(t *testing.T) {
	dir := filepath.Join("testdata", "backtrack")
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Good input is untouched.
	if ids, err := tok.Encode("aaaa", false); err != nil || len(ids) != 2 {
		t.Fatalf("Encode(aaaa) = %v, %v", ids, err)
	}
	text := strings.Repeat("a", 60) + "!"
	var ids []int
	leaktest.Guarded(t, "Encode", func() { ids, err = tok.Encode(text, false) })
	if err == nil {
		t.Fatalf("Encode = %v, want an error", ids)
	}
	if !errors.Is(err, ErrRegexTimeout) {
		t.Errorf("error %v does not match ErrRegexTimeout", err)
	}
	var re *RegexError
	if !errors.As(err, &re) {
		t.Fatalf("error %v is not a *RegexError", err)
	}
	path := filepath.Join(dir, "tokenizer.json")
	budget := newLimits(0, len(text)).budget
	if re.File != path || re.Pattern != "(a+)+$" || re.Component != "pre_tokenizer: Split" || re.Budget != budget {
		t.Errorf("RegexError = %+v, want a budget of %v", re, budget)
	}
	want := fmt.Sprintf("tokenizer: encode: %s: pre_tokenizer: Split: regex \"(a+)+$\": match ran past its time budget of %v", path, budget.Round(time.Millisecond))
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
	if strings.Contains(err.Error(), text) {
		t.Error("the error quotes the input")
	}
	// The tokenizer still works afterwards.
	if _, err := tok.Encode("aa!", false); err != nil {
		t.Errorf("Encode after a timeout: %v", err)
	}
}

// TestRegexTimeouts covers the other places a file's regex runs and the
// regexes that are slow without backtracking: every match costs the
// whole text (quadratic), which no single search's timeout catches. Each
// fails at the budget SetRegexTimeout gives it, which the error names
// (the inputs need some 2^40 backtracking steps, or 4.5*10^10 for the
// quadratic one, against a 100 ms budget).
func TestRegexTimeouts(t *testing.T) {
	long := strings.Repeat("x", 40)
	tests := []struct {
		name, field, json, component string
		decode                       bool
		text                         string
	}{
		{"split", "pre_tokenizer", `{"type": "Split", "pattern": {"Regex": "(x+x+)+y"}, "behavior": "Removed"}`, "pre_tokenizer: Split", false, long},
		{"split in sequence", "pre_tokenizer", `{"type": "Sequence", "pretokenizers": [{"type": "Digits"}, {"type": "Split", "pattern": {"Regex": "(x+x+)+y"}, "behavior": "Isolated"}]}`, "pre_tokenizer: Split", false, "1" + long},
		{"normalizer", "normalizer", `{"type": "Replace", "pattern": {"Regex": "(x+x+)+y"}, "content": "z"}`, "normalizer: Replace", false, long},
		{"decoder", "decoder", `{"type": "Replace", "pattern": {"Regex": "(x+x+)+y"}, "content": "z"}`, "decoder: Replace", true, long},
		// Quadratic: each 'a' looks ahead to the end of the text.
		{"quadratic", "pre_tokenizer", `{"type": "Split", "pattern": {"Regex": "a(?=[a-z]*$)"}, "behavior": "Isolated"}`, "pre_tokenizer: Split", false, strings.Repeat("a", 300_000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fields := map[string]string{tc.field: tc.json}
			if tc.decode {
				fields["added_tokens"] = fmt.Sprintf(`[{"id": 50, "content": %q}]`, tc.text)
			}
			tok, err := FromJSON(toyWith(t, fields))
			if err != nil {
				t.Fatal(err)
			}
			tok.SetRegexTimeout(100 * time.Millisecond)
			id := 0
			if tc.decode {
				id = tok.mustID(t, tc.text)
			}
			leaktest.Guarded(t, tc.name, func() {
				if tc.decode {
					// The decoder sees the text of an added token.
					_, err = tok.Decode([]int{id}, false)
				} else {
					_, err = tok.Encode(tc.text, false)
				}
			})
			var re *RegexError
			if !errors.As(err, &re) || !errors.Is(err, ErrRegexTimeout) {
				t.Fatalf("error %v, want a *RegexError for a timeout", err)
			}
			// The budget is 100 ms plus 100 ms per 100 KB.
			budget := newLimits(100*time.Millisecond, len(tc.text)).budget
			if re.Component != tc.component || re.File != "tokenizer.json" || re.Budget != budget {
				t.Errorf("RegexError = %+v, want a budget of %v", re, budget)
			}
			t.Log(err)
		})
	}
}

// TestRegexTimeoutLoad: a Replace normalizer that backtracks on an added
// token's content fails the load at the regex budget, naming the token.
func TestRegexTimeoutLoad(t *testing.T) {
	data := toyWith(t, map[string]string{
		"normalizer":   `{"type": "Replace", "pattern": {"Regex": "(x+x+)+y"}, "content": "z"}`,
		"added_tokens": fmt.Sprintf(`[{"id": 50, "content": %q, "normalized": true}]`, strings.Repeat("x", 40)),
	})
	var err error
	leaktest.Guarded(t, "FromJSON", func() { _, err = FromJSON(data) })
	if err == nil || !errors.Is(err, ErrRegexTimeout) || !strings.HasPrefix(err.Error(), `tokenizer.json: added_tokens: normalizing "xxx`) {
		t.Fatalf("FromJSON: %v", err)
	}
}

// TestRegexNoGoroutineLeak: regexp2 keeps one clock goroutine while
// deadlines are pending and stops it a second after the last; timeouts,
// many of them concurrent, leave nothing behind. The goroutines running
// before (a clock that earlier tests extended) are not this test's; every
// other one must end, leaktest giving it a minute to.
func TestRegexNoGoroutineLeak(t *testing.T) {
	tok, err := FromJSON(toyWith(t, map[string]string{
		"pre_tokenizer": `{"type": "Split", "pattern": {"Regex": "(x+x+)+y"}, "behavior": "Isolated"}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	tok.SetRegexTimeout(50 * time.Millisecond)
	running := goleak.IgnoreCurrent()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				if _, err := tok.Encode(strings.Repeat("x", 40), false); !errors.Is(err, ErrRegexTimeout) {
					t.Errorf("Encode: %v", err)
				}
				if _, err := tok.Encode("xxy and more", false); err != nil {
					t.Errorf("Encode: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	leaktest.VerifyNone(t, running)
}

// TestRegexGoodInputUnaffected: a megabyte through the regexp2 path
// encodes as through the scanner, and the default budget grows with the
// text, DefaultRegexTimeout more for every 100 KB. Whether regexp2 runs
// fast enough for that budget is a matter of speed, which
// BenchmarkEncodeQwen3ProseRegexp2 measures; the encode here has
// qwen3ViaRegexp2's generous budget.
func TestRegexGoodInputUnaffected(t *testing.T) {
	if testing.Short() {
		t.Skip("1 MB through regexp2")
	}
	tok := qwen3ViaRegexp2(t)
	text := strings.Repeat(readProse(t), 10)
	if got, want := newLimits(0, len(text)).budget, DefaultRegexTimeout*time.Duration(1+len(text)/regexBudgetBytes); got < want {
		t.Errorf("the default budget for %d bytes is %v, want at least %v", len(text), got, want)
	}
	got, err := tok.Encode(text, false)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := loadRef(t, "qwen3").Encode(text, false)
	if !equalIDs(got, want) {
		t.Error("ids differ from the scanner's")
	}
}

// TestReplaceContentLiteral: Replace's content is literal, as in Hugging
// Face (regexp2's Replace would expand "$1").
func TestReplaceContentLiteral(t *testing.T) {
	tok, err := FromJSON(toyWith(t, map[string]string{
		"normalizer": `{"type": "Replace", "pattern": {"Regex": "(b)"}, "content": "$1$$"}`,
		"decoder":    `{"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"Regex": "(a)"}, "content": "${1}"}, {"type": "Fuse"}]}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	n, err := tok.normalizer.normalize("abc", &limits{})
	if n != "a$1$$c" || err != nil {
		t.Errorf("normalize = %q, %v", n, err)
	}
	s, err := tok.Decode(toyIDs(t, tok, "abc"), false)
	if s != "${1}bc" || err != nil {
		t.Errorf("Decode = %q, %v", s, err)
	}
}

// TestGrowthLimits: normalizers and decoders that multiply the text stop
// with an error instead of exhausting memory.
func TestGrowthLimits(t *testing.T) {
	double := `{"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}`
	seq := "[" + strings.TrimSuffix(strings.Repeat(double+",", 64), ",") + "]"
	tests := []struct {
		name   string
		fields map[string]string
		text   string
		want   string
	}{
		{"replace chain", map[string]string{"normalizer": `{"type": "Sequence", "normalizers": ` + seq + `}`}, "aaaa", "normalizer: Replace: the text would grow"},
		{"regex replace chain", map[string]string{"normalizer": `{"type": "Sequence", "normalizers": ` + strings.ReplaceAll(seq, `"String"`, `"Regex"`) + `}`}, "aaaa", "normalizer: Replace: "},
		{"prepend per segment", map[string]string{
			"normalizer":   fmt.Sprintf(`{"type": "Prepend", "prepend": %q}`, strings.Repeat("b", 1<<16)),
			"added_tokens": `[{"id": 50, "content": "<", "special": true}]`,
		}, strings.Repeat("a<", 100), "normalizer: the text would grow"},
		{"decoder chain", map[string]string{"decoder": `{"type": "Sequence", "decoders": ` + seq + `}`}, "aaaa", "decoder: Replace: the text would grow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := FromJSON(toyWith(t, tc.fields))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := tc.fields["decoder"]; ok {
				_, err = tok.Decode(toyIDs(t, tok, tc.text), false)
			} else {
				_, err = tok.Encode(tc.text, false)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestHostileLoad feeds files whose numbers or nesting would make a naive
// loader allocate or recurse without bound: each is a named error, or a
// tokenizer sized by what the file holds.
func TestHostileLoad(t *testing.T) {
	model := `"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}`
	deep := strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000)
	deepSeq := strings.Repeat(`{"type": "Sequence", "normalizers": [`, 200) + `{"type": "NFC"}` + strings.Repeat("]}", 200)
	for _, tc := range []struct{ name, json, want string }{
		{"huge vocab id", `{"model": {"type": "BPE", "vocab": {"a": 2147483646}, "merges": []}}`, "model: BPE: vocab ids up to 2147483646 for 1 tokens"},
		{"vocab id past int32", `{"model": {"type": "BPE", "vocab": {"a": 4294967296}, "merges": []}}`, "model: vocab: invalid JSON at offset"},
		{"negative vocab id", `{"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}}`, "bad id -1"},
		{"vocab id not an integer", `{"model": {"type": "BPE", "vocab": {"a": 1e300}, "merges": []}}`, "want an integer"},
		{"deep nesting", `{` + model + `, "extra": ` + deep + `}`, "nested deeper than 128 levels"},
		{"deep model", `{"model": {"type": "BPE", "dropout": ` + deep + `}}`, "nested deeper than 128 levels"},
		{"deep sequence", `{` + model + `, "normalizer": ` + deepSeq + `}`, "nested deeper than 128 levels"},
		{"template id out of range", `{` + model + `, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}], "special_tokens": {"<s>": {"ids": [1000000000000]}}}}`, "post_processor: special token id 1000000000000 is not in the vocabulary (3 ids)"},
		{"template negative id", `{` + model + `, "post_processor": {"type": "Sequence", "processors": [{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}], "special_tokens": {"<s>": {"ids": [-1]}}}]}}`, "post_processor: special token id -1 is not in the vocabulary"},
		{"bert id out of range", `{` + model + `, "post_processor": {"type": "BertProcessing", "cls": ["<c>", 7], "sep": ["</c>", 1]}}`, "post_processor: special token id 7 is not in the vocabulary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromJSON([]byte(tc.json))
			if err == nil || !strings.HasPrefix(err.Error(), "tokenizer.json: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}

	// Added tokens' ids come from the vocabulary's size, not the file.
	tok, err := FromJSON([]byte(`{` + model + `, "added_tokens": [{"id": 4000000000000, "content": "<x>", "special": true}, {"id": -5, "content": "<y>"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 5 {
		t.Errorf("VocabSize = %d, want 5", tok.VocabSize())
	}
	// Holes in the ids are bounded by the number of entries.
	tok, err = FromJSON([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 65536}, "merges": []}}`))
	if err != nil || tok.VocabSize() != 65537 {
		t.Fatalf("FromJSON: %v", err)
	}
	if _, ok := tok.IDToken(5); ok {
		t.Error("a hole has a token")
	}
	if _, err := tok.Decode([]int{5}, false); err == nil || !strings.Contains(err.Error(), "id 5 has no token") {
		t.Errorf("Decode of a hole: %v", err)
	}
}

// streamWork bounds the ids a StreamDecoder decodes per id pushed: the
// window it decodes stays a few ids long (streamHold and the context).
const streamWork = 4 * streamHold

// TestStreamDecoderReplacementRun: a long run of U+FFFD in the output
// (a model emitting replacement characters) streams in linear time: the
// decoder holds back only the ids that can still complete a character, so
// the ids it decodes, every window together, stay within streamWork per
// id pushed. The work is counted, not timed.
func TestStreamDecoderReplacementRun(t *testing.T) {
	for _, name := range []string{"qwen3", "mistral"} {
		tok := loadRef(t, name)
		for _, text := range []string{
			strings.Repeat("\uFFFD", 30_000),
			strings.Repeat("a\uFFFD\uFFFD\xe4\xb8", 5_000),
		} {
			ids, err := tok.Encode(text, false)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := tok.Decode(ids, false)
			got, decoded, err := streamAllCounting(tok, ids, false)
			if err != nil || got != want {
				t.Fatalf("%s: streamed %d bytes (%v), Decode %d bytes", name, len(got), err, len(want))
			}
			// Holding the whole run back decoded the growing window at
			// every id: about n^2/2 ids, 450 million for 30,000 U+FFFD
			// (6.5 s for Qwen3, 49 s for Mistral).
			t.Logf("%s: %d ids streamed, %d decoded (%.1f per id)", name, len(ids), decoded, float64(decoded)/float64(len(ids)))
			if decoded > streamWork*len(ids) {
				t.Errorf("%s: streaming %d ids decoded %d, more than %d per id", name, len(ids), decoded, streamWork)
			}
		}
	}
}

// TestStreamDecoderLongRandom streams long random id sequences rich in
// pieces of characters (Qwen3's byte-level tokens) and U+FFFD, so that the
// decoder holds back long runs and returns text from the middle of them.
func TestStreamDecoderLongRandom(t *testing.T) {
	for _, name := range []string{"qwen3", "mistral"} {
		tok := loadRef(t, name)
		var bytePieces, other []int
		for id := 0; id < tok.VocabSize(); id++ {
			s, ok := tok.IDToken(id)
			switch {
			case !ok:
			case strings.HasPrefix(s, "<0x"):
				// Not ByteFallback's byte tokens: a valid run of them
				// returned as text is rewritten (as U+FFFD per byte) if
				// the next byte makes the run invalid, and the stream
				// fails, as the Rust library's DecodeStream does.
			case len([]rune(s)) == 1 && id < 300:
				bytePieces = append(bytePieces, id)
			case tok.IsSpecial(id) || strings.ContainsAny(s, "âĠãĥĦ▁ï¿½"):
				other = append(other, id)
			}
		}
		if fffd, ok := tok.TokenID("ï¿½"); ok {
			other = append(other, fffd, fffd, fffd)
		}
		if len(bytePieces) == 0 {
			bytePieces = other
		}
		rng := rand.New(rand.NewSource(5))
		for i := 0; i < 500; i++ {
			ids := make([]int, 20+rng.Intn(60))
			for k := range ids {
				switch r := rng.Intn(10); {
				case r < 6:
					ids[k] = bytePieces[rng.Intn(len(bytePieces))]
				case r < 9:
					ids[k] = other[rng.Intn(len(other))]
				default:
					ids[k] = rng.Intn(tok.VocabSize())
					if _, ok := tok.IDToken(ids[k]); !ok {
						ids[k] = other[0]
					}
				}
			}
			for _, skip := range []bool{false, true} {
				want, err := tok.Decode(ids, skip)
				if err != nil {
					t.Fatal(err)
				}
				got, err := streamAll(tok, ids, skip)
				if err != nil || got != want {
					t.Fatalf("%s %v skip=%v: streamed %q (%v), Decode %q", name, ids, skip, got, err, want)
				}
			}
		}
	}
}
