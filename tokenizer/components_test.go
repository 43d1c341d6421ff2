package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// toyChars is the alphabet of the toy tokenizer: ids 0..len-1 in order.
const toyChars = "abcdefghijklmnopqrstuvwxyz <>_"

// toyJSON builds a small BPE tokenizer.json with the given extra top-level
// fields (normalizer, added_tokens, ...).
func toyJSON(t *testing.T, extra map[string]any) []byte {
	t.Helper()
	vocab := map[string]int{}
	for i, r := range toyChars {
		vocab[string(r)] = i
	}
	merges := []string{"h e", "l l", "he ll", "hell o"}
	for _, m := range merges {
		vocab[strings.ReplaceAll(m, " ", "")] = len(vocab)
	}
	doc := map[string]any{
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	for k, v := range extra {
		doc[k] = v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// toyIDs spells s in toy ids, one id per character, with "hello" merged.
func toyIDs(t *testing.T, tok *Tokenizer, parts ...string) []int {
	t.Helper()
	var ids []int
	for _, p := range parts {
		if id, ok := tok.TokenID(p); ok && len(p) > 1 {
			ids = append(ids, id)
			continue
		}
		for _, r := range p {
			ids = append(ids, strings.IndexRune(toyChars, r))
		}
	}
	return ids
}

func TestAddedTokenFlags(t *testing.T) {
	tok := func(content string, flags ...string) map[string]any {
		m := map[string]any{"id": 50, "content": content, "special": true, "normalized": false,
			"lstrip": false, "rstrip": false, "single_word": false}
		for _, f := range flags {
			m[f] = true
		}
		return m
	}
	tests := []struct {
		name  string
		token map[string]any
		text  string
		want  []string // parts: "<m>" is the added token, "hello" the merged word, others char by char
	}{
		{"plain", tok("<m>"), "a <m> b", []string{"a ", "<m>", " b"}},
		{"lstrip", tok("<m>", "lstrip"), "a  <m> b", []string{"a", "<m>", " b"}},
		{"rstrip", tok("<m>", "rstrip"), "a <m>  b", []string{"a ", "<m>", "b"}},
		{"lstrip after token", tok("<m>", "lstrip"), "<m> <m>", []string{"<m>", "<m>"}},
		{"single_word inside a word", tok("<m>", "single_word"), "a<m>b", []string{"a<m>b"}},
		{"single_word alone", tok("<m>", "single_word"), "a <m> b", []string{"a ", "<m>", " b"}},
		{"single_word at the edges", tok("<m>", "single_word"), "<m>", []string{"<m>"}},
		{"longest first", tok("<m>"), "hello<m>", []string{"hello", "<m>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]any{"added_tokens": []any{tc.token, tok("<m>>")}}
			extra["added_tokens"].([]any)[1].(map[string]any)["id"] = 51
			tk, err := FromJSON(toyJSON(t, extra))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tk.Encode(tc.text, false)
			if err != nil {
				t.Fatal(err)
			}
			if want := toyIDs(t, tk, tc.want...); !equalIDs(got, want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.text, got, want)
			}
		})
	}
	// The longer of two tokens starting at the same place wins.
	tk, err := FromJSON(toyJSON(t, map[string]any{"added_tokens": []any{tok("<m>"), map[string]any{"id": 51, "content": "<m>>", "special": true}}}))
	if err != nil {
		t.Fatal(err)
	}
	// Ids not in the model's vocabulary are assigned after it, in order,
	// whatever the file says (as the Rust library does).
	id, ok := tk.TokenID("<m>>")
	if !ok || id != 35 {
		t.Fatalf("TokenID(<m>>) = %d, %v; want 35", id, ok)
	}
	if got, _ := tk.Encode("a<m>>", false); !equalIDs(got, []int{0, 35}) {
		t.Errorf("longest match: got %v", got)
	}
}

func TestNormalizedAddedToken(t *testing.T) {
	// A normalized token is matched in the normalized text: its NFD
	// content "é" (e + U+0301) matches the NFC input.
	tk, err := FromJSON(toyJSON(t, map[string]any{
		"normalizer":   map[string]any{"type": "NFC"},
		"added_tokens": []any{map[string]any{"id": 50, "content": "e\u0301", "special": false, "normalized": true}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := tk.TokenID("e\u0301")
	for _, text := range []string{"ab\u00e9", "abe\u0301"} {
		got, err := tk.Encode(text, false)
		if err != nil {
			t.Fatal(err)
		}
		if !equalIDs(got, []int{0, 1, id}) {
			t.Errorf("Encode(%q) = %v, want [0 1 %d]", text, got, id)
		}
	}
	if tk.IsSpecial(id) {
		t.Error("non-special token reported special")
	}
	if s, err := tk.Decode([]int{0, id}, true); s != "a e\u0301" || err != nil {
		t.Errorf("Decode = %q, %v (no decoder: tokens joined by spaces)", s, err)
	}
}

func TestLoadErrors(t *testing.T) {
	model := `"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}`
	tests := []struct {
		name, json, want string
	}{
		{"unknown pre-tokenizer", `{` + model + `, "pre_tokenizer": {"type": "Foo"}}`, `tokenizer.json: pre_tokenizer: unknown type "Foo"`},
		{"nested unknown", `{` + model + `, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits"}, {"type": "Bar"}]}}`, `tokenizer.json: pre_tokenizer: Sequence[1]: unknown type "Bar"`},
		{"unsupported normalizer", `{` + model + `, "normalizer": {"type": "Lowercase"}}`, `tokenizer.json: normalizer: unsupported type "Lowercase"`},
		{"unknown decoder", `{` + model + `, "decoder": {"type": "Sequence", "decoders": [{"type": "Nope"}]}}`, `tokenizer.json: decoder: Sequence[0]: unknown type "Nope"`},
		{"unknown post-processor", `{` + model + `, "post_processor": {"type": "Foo"}}`, `tokenizer.json: post_processor: unknown type "Foo"`},
		{"missing type", `{` + model + `, "normalizer": {"prepend": "x"}}`, `tokenizer.json: normalizer: missing "type"`},
		{"unsupported model", `{"model": {"type": "Unigram", "vocab": []}}`, `tokenizer.json: model: unsupported type "Unigram"`},
		{"merge out of vocab", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a q"]}}`, `tokenizer.json: model: merges: [0]: token "q" not in vocab`},
		{"bad merge", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}}`, `tokenizer.json: model: merges: [0]: "a" is not two tokens`},
		{"missing model", `{"normalizer": null}`, `tokenizer.json: model: missing`},
		{"syntax", `{` + model + `, "decoder": {"type": }}`, `tokenizer.json: invalid JSON at offset`},
		{"truncated", `{"model": {"type": "BPE", "vocab": {"a": 0`, `tokenizer.json: model: vocab: invalid JSON at offset`},
		{"bad regex", `{` + model + `, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(?<"}, "behavior": "Isolated"}}`, `tokenizer.json: pre_tokenizer: Split: bad regex "(?<"`},
		{"bad behavior", `{` + model + `, "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"}}`, `tokenizer.json: pre_tokenizer: Split: unknown split behavior "Sideways"`},
		{"template token", `{` + model + `, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}], "special_tokens": {}}}`, `tokenizer.json: post_processor: TemplateProcessing: special token "<s>" missing`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromJSON([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}

	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "tokenizer.json")) {
		t.Errorf("Load of an empty dir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{`+model+`, "pre_tokenizer": {"type": "Foo"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "tokenizer.json") + `: pre_tokenizer: unknown type "Foo"`
	if _, err := Load(dir); err == nil || err.Error() != want {
		t.Errorf("Load error %v, want %q", err, want)
	}
}

func TestDecodeBadID(t *testing.T) {
	tok := loadRef(t, "qwen3")
	for _, id := range []int{-1, tok.VocabSize(), 1 << 40} {
		_, err := tok.Decode([]int{9707, id}, false)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("id %d", id)) {
			t.Errorf("Decode with id %d: %v", id, err)
		}
		if _, err := tok.NewStreamDecoder(false).Push(id); err == nil {
			t.Errorf("Push(%d) succeeded", id)
		}
	}
}

func TestVocabularyAccessors(t *testing.T) {
	tok := loadRef(t, "qwen3")
	if n := tok.VocabSize(); n != 151669 {
		t.Errorf("VocabSize = %d, want 151669", n)
	}
	for _, c := range []struct {
		tok     string
		id      int
		special bool
	}{{"<|im_start|>", 151644, true}, {"<think>", 151667, false}, {"hello", 14990, false}, {"Ġworld", 1879, false}} {
		if id, ok := tok.TokenID(c.tok); !ok || id != c.id {
			t.Errorf("TokenID(%q) = %d, %v", c.tok, id, ok)
		}
		if s, ok := tok.IDToken(c.id); !ok || s != c.tok {
			t.Errorf("IDToken(%d) = %q, %v", c.id, s, ok)
		}
		if tok.IsSpecial(c.id) != c.special {
			t.Errorf("IsSpecial(%d) = %v", c.id, !c.special)
		}
	}
	if id, ok := tok.EOS(); !ok || id != 151645 {
		t.Errorf("EOS = %d, %v; want <|im_end|> 151645", id, ok)
	}
	if _, ok := tok.BOS(); ok {
		t.Error("Qwen3 has no BOS token")
	}
	if !strings.Contains(tok.Config().ChatTemplate, "im_start") {
		t.Error("chat template not read from tokenizer_config.json")
	}
	m := loadRef(t, "mistral")
	if id, ok := m.BOS(); !ok || id != 1 {
		t.Errorf("Mistral BOS = %d, %v", id, ok)
	}
}

func TestLossyUTF8(t *testing.T) {
	tests := []struct{ in, want string }{
		{"abc", "abc"},
		{"\xe4\xb8", "\uFFFD"},                 // truncated 3-byte: one replacement
		{"\xe4\xb8a", "\uFFFDa"},               // the same, mid-string
		{"\xe4\xb8\xad", "中"},                  // valid
		{"\xf0\x80\x80", "\uFFFD\uFFFD\uFFFD"}, // overlong start: each byte
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate
		{"\xc0\x80", "\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x9f\x98", "\uFFFD"},
		{"\x80\x80", "\uFFFD\uFFFD"},
		{"a\xffb", "a\uFFFDb"},
	}
	for _, tc := range tests {
		if got := string(appendLossy(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("appendLossy(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// naiveMerge is the textbook BPE loop: merge the lowest-ranked adjacent
// pair, leftmost first, until none is left. O(n^2), for checking.
func naiveMerge(m *bpeModel, w []byte) []int {
	var ids []int32
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRune(w[i:])
		if id, ok := m.vocab[string(w[i:i+n])]; ok {
			ids = append(ids, id)
		} else {
			for _, b := range w[i : i+n] {
				ids = append(ids, m.byteIDs[b])
			}
		}
		i += n
	}
	for {
		best, bestRank := -1, uint64(1<<62)
		for i := 0; i+1 < len(ids); i++ {
			if v, ok := m.merges[pairKey(ids[i], ids[i+1])]; ok && v>>32 < bestRank {
				best, bestRank = i, v>>32
			}
		}
		if best < 0 {
			break
		}
		v := m.merges[pairKey(ids[best], ids[best+1])]
		ids[best] = int32(uint32(v))
		ids = append(ids[:best+1], ids[best+2:]...)
	}
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// TestMergeMatchesNaive checks the priority-queue merge against the
// textbook loop on random words.
func TestMergeMatchesNaive(t *testing.T) {
	pieces := []string{"e", "t", "a", "th", "he", "in", "er", "an", " ", "  ", "▁", "ing", "tion", "é", "中", "😀", "1", "0", "\n", "ab", "ba", "z", "q", "x"}
	rng := rand.New(rand.NewSource(2))
	for _, name := range []string{"qwen3", "mistral"} {
		tok := loadRef(t, name)
		st := &encState{}
		for i := 0; i < 3000; i++ {
			var b strings.Builder
			for n := 1 + rng.Intn(40); n > 0; n-- {
				b.WriteString(pieces[rng.Intn(len(pieces))])
			}
			word := b.String()
			var w []byte
			if tok.byteLevel {
				w = appendByteLevel(nil, word)
			} else {
				w = []byte(strings.ReplaceAll(word, " ", "▁"))
			}
			got, err := tok.model.mergeWord(st, w, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := naiveMerge(tok.model, w); !equalIDs(got, want) {
				t.Fatalf("%s %q: heap %v, naive %v", name, word, got, want)
			}
		}
	}
}
