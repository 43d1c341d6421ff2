package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
)

// hfToGGUFMetadata builds the tokenizer.ggml.* metadata that llama.cpp's
// convert_hf_to_gguf.py (Model.get_vocab_base and gguf.SpecialVocab) writes
// for a byte-level BPE tokenizer.json: one token per id below vocabSize
// (the model's vocab_size; 0 = one past the largest id), "[PAD<id>]"
// fillers of type unused for ids without a token, added tokens as control
// (special, or looking special) or user-defined, the merges as "a b"
// strings. hf is the tokenizer loaded from the same file, which the
// converter uses to round-trip non-normalized added tokens.
func hfToGGUFMetadata(t testing.TB, dir string, hf *Tokenizer, vocabSize int, pre string) map[string]any {
	t.Helper()
	meta, err := GGUFMetadata(dir, hf, vocabSize, pre)
	if err != nil {
		t.Fatal(err)
	}
	meta["general.architecture"] = "test"
	return meta
}

// qwen3GGUFMetadata is the metadata of the qwen3_* GGUF files, rebuilt from
// the vendored Qwen3 tokenizer.json (vocab_size 151,936, pre "qwen2", the
// special ids of Qwen3's config).
func qwen3GGUFMetadata(t testing.TB) map[string]any {
	dir := tokenizerDir(t, "qwen3")
	meta := hfToGGUFMetadata(t, dir, loadRef(t, "qwen3"), 151936, "qwen2")
	meta["tokenizer.ggml.bos_token_id"] = uint32(151643)
	meta["tokenizer.ggml.eos_token_id"] = uint32(151645)
	meta["tokenizer.ggml.padding_token_id"] = uint32(151643)
	meta["tokenizer.ggml.add_bos_token"] = false
	meta["tokenizer.chat_template"] = "{{ messages }}"
	return meta
}

var (
	qwen3GGUFOnce sync.Once
	qwen3GGUFTok  *Tokenizer
	qwen3GGUFErr  error
)

func qwen3GGUF(t testing.TB) *Tokenizer {
	t.Helper()
	meta := qwen3GGUFMetadata(t) // outside Once: it may t.Fatal
	qwen3GGUFOnce.Do(func() { qwen3GGUFTok, qwen3GGUFErr = FromGGUFMetadata("qwen3-test.gguf", meta) })
	if qwen3GGUFErr != nil {
		t.Fatal(qwen3GGUFErr)
	}
	return qwen3GGUFTok
}

// ggufGolden is testdata/tokenizers/qwen3/gguf_cases.json (the tokenizer
// section of shared/gguf/qwen3_q8_0/golden.json).
type ggufGolden struct {
	Cases []struct {
		Text     string `json:"text"`
		IDs      []int  `json:"ids"`
		Category string `json:"category"`
	} `json:"cases"`
	KnownDifferences []struct {
		Text        string `json:"text"`
		HFIDs       []int  `json:"hf_ids"`
		LlamaCppIDs []int  `json:"llama_cpp_ids"`
	} `json:"known_differences"`
}

func loadGGUFGolden(t testing.TB, path string) ggufGolden {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g ggufGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g
}

// TestGGUFQwen3Cases encodes the 30 strings of the qwen3 GGUF golden with a
// tokenizer built from GGUF metadata (rebuilt from the vendored
// tokenizer.json the way convert_hf_to_gguf.py writes it), and the strings
// where llama.cpp and Hugging Face differ.
func TestGGUFQwen3Cases(t *testing.T) {
	tok := qwen3GGUF(t)
	g := loadGGUFGolden(t, filepath.Join(tokenizerDir(t, "qwen3"), "gguf_cases.json"))
	if len(g.Cases) != 30 || len(g.KnownDifferences) != 4 {
		t.Fatalf("gguf_cases.json: %d cases, %d known differences; want 30 and 4", len(g.Cases), len(g.KnownDifferences))
	}
	ok := 0
	for _, c := range g.Cases {
		ids, err := tok.Encode(c.Text, false)
		if err != nil {
			t.Fatalf("%q: %v", c.Text, err)
		}
		if !slices.Equal(ids, c.IDs) {
			t.Errorf("%s %q:\n got %v\nwant %v", c.Category, c.Text, ids, c.IDs)
			continue
		}
		// add_bos_token is false: addSpecial adds nothing.
		if ids2, _ := tok.Encode(c.Text, true); !slices.Equal(ids2, c.IDs) {
			t.Errorf("%q with addSpecial: got %v, want %v", c.Text, ids2, c.IDs)
		}
		if s, err := tok.Decode(ids, false); err != nil || s != c.Text {
			t.Errorf("decode %q: got %q, %v", c.Text, s, err)
		}
		ok++
	}
	t.Logf("GGUF qwen3: %d/%d golden cases match llama.cpp", ok, len(g.Cases))
	for _, d := range g.KnownDifferences {
		ids, err := tok.Encode(d.Text, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, d.LlamaCppIDs) {
			t.Errorf("known difference %q:\n got %v\nwant llama.cpp %v (HF %v)", d.Text, ids, d.LlamaCppIDs, d.HFIDs)
		}
	}
}

// TestGGUFQwen3Corpus runs the 108-string Qwen3 corpus: llama.cpp agrees
// with Hugging Face on all but the 4 known differences, where its own ids
// are expected.
func TestGGUFQwen3Corpus(t *testing.T) {
	tok := qwen3GGUF(t)
	g := loadGGUFGolden(t, filepath.Join(tokenizerDir(t, "qwen3"), "gguf_cases.json"))
	llama := map[string][]int{}
	for _, d := range g.KnownDifferences {
		llama[d.Text] = d.LlamaCppIDs
	}
	cases := loadCases(t, "qwen3")
	seen := 0
	for _, c := range cases {
		want := c.IDs
		if ids, ok := llama[c.Text]; ok {
			want = ids
			seen++
		}
		for _, addSpecial := range []bool{false, true} {
			ids, err := tok.Encode(c.Text, addSpecial)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, want) {
				t.Errorf("%s %q (addSpecial %v):\n got %v\nwant %v", c.Category, c.Text, addSpecial, ids, want)
			}
		}
	}
	if seen != len(g.KnownDifferences) {
		t.Errorf("%d of the %d known differences are in cases.jsonl", seen, len(g.KnownDifferences))
	}
}

// TestGGUFQwen3API checks what the GGUF tokenizer reports besides ids.
func TestGGUFQwen3API(t *testing.T) {
	tok := qwen3GGUF(t)
	if n := tok.VocabSize(); n != 151936 {
		t.Errorf("VocabSize = %d", n)
	}
	cfg := tok.Config()
	want := Config{BOSToken: "<|endoftext|>", EOSToken: "<|im_end|>", PADToken: "<|endoftext|>", ChatTemplate: "{{ messages }}"}
	if cfg != want {
		t.Errorf("Config = %+v, want %+v", cfg, want)
	}
	if id, ok := tok.EOS(); !ok || id != 151645 {
		t.Errorf("EOS = %d, %v", id, ok)
	}
	if id, ok := tok.BOS(); !ok || id != 151643 {
		t.Errorf("BOS = %d, %v", id, ok)
	}
	for tokText, id := range map[string]int{"<|im_start|>": 151644, "<think>": 151667, "Ġhello": 23811, "[PAD151700]": 151700, "</s>": 128247} {
		if got, ok := tok.TokenID(tokText); !ok || got != id {
			t.Errorf("TokenID(%q) = %d, %v; want %d", tokText, got, ok, id)
		}
	}
	// Control tokens (and "</s>", made one by its text) are special;
	// user-defined ones such as <think> are not.
	for id, want := range map[int]bool{151644: true, 151645: true, 128247: true, 151667: false, 14990: false, 151662: true} {
		if got := tok.IsSpecial(id); got != want {
			t.Errorf("IsSpecial(%d) = %v", id, got)
		}
	}
	ids, _ := tok.Encode("<|im_start|>user\n<think>hi</think><|im_end|>", false)
	if s, _ := tok.Decode(ids, true); s != "user\n<think>hi</think>" {
		t.Errorf("Decode(skipSpecial) = %q", s)
	}
	// No NFC: "é" written as e + U+0301 stays two characters.
	a, _ := tok.Encode("e\u0301", false)
	b, _ := tok.Encode("\u00e9", false)
	if slices.Equal(a, b) {
		t.Errorf("decomposed and composed é encode alike (%v): the GGUF tokenizer must not normalize", a)
	}
}

// TestGGUFRealFiles reads the tokenizer metadata of the llama.cpp-written
// GGUF files (testdata/gguf when vendored, else ../shared/gguf, whose
// absence skips this extra cross-check, or fails it under CI=true) with
// the test-only reader of gguf_meta_test.go. The qwen3 files must hold
// exactly the metadata rebuilt from tokenizer.json and encode their golden
// cases; every file must load and round-trip a string.
func TestGGUFRealFiles(t *testing.T) {
	var paths []string
	for _, dir := range testfiles.Cases(t, "gguf") {
		paths = append(paths, filepath.Join(dir, "model.gguf"))
	}
	rebuilt := qwen3GGUFMetadata(t)
	for _, path := range paths {
		meta, err := readGGUFMetadata(path)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := FromGGUFMetadata(path, meta)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		s := "Hello, world! 123 ½ <|im_start|> \u00e9"
		ids, err := tok.Encode(s, true)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := tok.Decode(ids, false); err != nil || back != s {
			t.Errorf("%s: round trip of %q gives %q, %v", path, s, back, err)
		}
		// The cases with Qwen3's real tokenizer have golden.json's
		// tokenizer section (README "Tokenizer metadata"); the newer
		// qwen3 cases carry a 512-token vocabulary of their own.
		var raw struct {
			Tokenizer *ggufGolden `json:"tokenizer"`
		}
		data, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "golden.json"))
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		if raw.Tokenizer == nil {
			continue
		}
		if !strings.HasPrefix(filepath.Base(filepath.Dir(path)), "qwen3") || len(raw.Tokenizer.Cases) == 0 {
			t.Errorf("%s: golden.json's tokenizer section is for Qwen3's tokenizer, with cases", path)
			continue
		}
		for _, key := range []string{"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.pre"} {
			if !equalAny(meta[key], rebuilt[key]) {
				t.Errorf("%s: %s differs from the one rebuilt from tokenizer.json", path, key)
			}
		}
		g := *raw.Tokenizer
		ok := 0
		for _, c := range g.Cases {
			ids, _ := tok.Encode(c.Text, false)
			if slices.Equal(ids, c.IDs) {
				ok++
			} else {
				t.Errorf("%s: %q: got %v, want %v", path, c.Text, ids, c.IDs)
			}
		}
		for _, d := range g.KnownDifferences {
			if ids, _ := tok.Encode(d.Text, false); !slices.Equal(ids, d.LlamaCppIDs) {
				t.Errorf("%s: known difference %q: got %v, want %v", path, d.Text, ids, d.LlamaCppIDs)
			}
		}
		t.Logf("%s: %d/%d golden cases, %d known differences reproduced", path, ok, len(g.Cases), len(g.KnownDifferences))
	}
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []string:
		y, ok := b.([]string)
		return ok && slices.Equal(x, y)
	case []int32:
		y, ok := b.([]int32)
		return ok && slices.Equal(x, y)
	}
	return a == b
}

// TestGGUFCrossHF rebuilds GGUF metadata from other reference tokenizers
// (../shared, skipped when absent) and checks the Llama-3, SmolLM and GPT-2
// pre-tokenizer families against Hugging Face's ids. Strings where
// llama.cpp differs by design are left out: those holding a token that
// llama.cpp makes a control token by its text, and, for normalizing
// tokenizers, those that NFC changes.
func TestGGUFCrossHF(t *testing.T) {
	for _, tc := range []struct {
		name, pre string
		extra     map[string]any
		addBOS    bool
	}{
		{"llama3", "llama-bpe", map[string]any{"tokenizer.ggml.bos_token_id": uint32(128000), "tokenizer.ggml.eos_token_id": uint32(128009)}, true},
		{"smol-synthetic", "smollm", map[string]any{"tokenizer.ggml.bos_token_id": int32(5), "tokenizer.ggml.eos_token_id": int32(75501), "tokenizer.ggml.add_bos_token": false}, false},
		{"cohere", "gpt-2", map[string]any{"tokenizer.ggml.add_bos_token": false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tokenizerDir(t, tc.name)
			hf := loadRef(t, tc.name)
			meta := hfToGGUFMetadata(t, dir, hf, 0, tc.pre)
			for k, v := range tc.extra {
				meta[k] = v
			}
			tok, err := FromGGUFMetadata(tc.name+".gguf", meta)
			if err != nil {
				t.Fatal(err)
			}
			// Tokens llama.cpp turns into control tokens by their text.
			var byText []string
			types := meta["tokenizer.ggml.token_type"].([]int32)
			for i, s := range meta["tokenizer.ggml.tokens"].([]string) {
				if types[i] != ggufTypeControl && tok.IsSpecial(i) {
					byText = append(byText, s)
				}
			}
			checked, skipped := 0, 0
			for _, c := range loadCases(t, tc.name) {
				if c.Decoded != c.Text || slices.ContainsFunc(byText, func(s string) bool { return strings.Contains(c.Text, s) }) {
					skipped++
					continue
				}
				ids, err := tok.Encode(c.Text, false)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, c.IDs) {
					t.Errorf("%q:\n got %v\nwant %v", c.Text, ids, c.IDs)
				}
				if tc.addBOS {
					ids, _ = tok.Encode(c.Text, true)
					if !slices.Equal(ids, c.IDsWithSpecial) {
						t.Errorf("%q with addSpecial:\n got %v\nwant %v", c.Text, ids, c.IDsWithSpecial)
					}
				}
				checked++
			}
			t.Logf("%s as GGUF (pre %q): %d cases equal to HF, %d left out (tokens made control by text: %q)", tc.name, tc.pre, checked, skipped, byText)
		})
	}
}

// tinyGGUF is a byte-level vocabulary: the 256 byte tokens, then extra
// tokens with their types.
func tinyGGUF(extra map[string]int32, merges ...string) map[string]any {
	var toks []string
	var types []int32
	for b := range 256 {
		toks = append(toks, string(byteToRune[b]))
		types = append(types, ggufTypeNormal)
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		toks = append(toks, k)
		types = append(types, extra[k])
	}
	if merges == nil {
		merges = []string{}
	}
	return map[string]any{
		"tokenizer.ggml.model":      "gpt2",
		"tokenizer.ggml.pre":        "gpt-2",
		"tokenizer.ggml.tokens":     toks,
		"tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges":     merges,
	}
}

func mustGGUF(t *testing.T, meta map[string]any) *Tokenizer {
	t.Helper()
	tok, err := FromGGUFMetadata("tiny.gguf", meta)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (t *Tokenizer) mustID(tb testing.TB, s string) int {
	tb.Helper()
	id, ok := t.TokenID(s)
	if !ok {
		tb.Fatalf("no token %q", s)
	}
	return id
}

// TestGGUFSpecialMatching checks llama.cpp's matching of special tokens:
// longest token first over the whole text (not leftmost first), user-defined
// tokens matched too, unused ones not, lstrip where llama.cpp sets it.
func TestGGUFSpecialMatching(t *testing.T) {
	tok := mustGGUF(t, tinyGGUF(map[string]int32{
		"ab": ggufTypeUserDefined, "bcd": ggufTypeUserDefined, "<ctl>": ggufTypeControl,
		"<unused>": ggufTypeUnused, "</s>": ggufTypeNormal,
	}, "a b"))
	id := func(s string) int { return tok.mustID(t, s) }
	byteID := func(c byte) int { return tok.mustID(t, string(byteToRune[c])) }
	for _, c := range []struct {
		text string
		want []int
	}{
		// HF would take "ab" (leftmost); llama.cpp takes "bcd" (longest).
		{"abcd", []int{byteID('a'), id("bcd")}},
		{"ab cd", []int{id("ab"), byteID(' '), byteID('c'), byteID('d')}},
		{"x<ctl>y", []int{byteID('x'), id("<ctl>"), byteID('y')}},
		{"<unused>", []int{byteID('<'), byteID('u'), byteID('n'), byteID('u'), byteID('s'), byteID('e'), byteID('d'), byteID('>')}},
		// "</s>" is an end-of-generation name: a control token in llama.cpp.
		{"a</s>", []int{byteID('a'), id("</s>")}},
	} {
		ids, err := tok.Encode(c.text, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, c.want) {
			t.Errorf("%q: got %v, want %v", c.text, ids, c.want)
		}
	}
	if !tok.IsSpecial(id("</s>")) || !tok.IsSpecial(id("<ctl>")) || tok.IsSpecial(id("ab")) {
		t.Error("control tokens must be special, user-defined ones not")
	}
	if s, _ := tok.Decode([]int{id("ab"), id("<ctl>"), id("</s>")}, true); s != "ab" {
		t.Errorf("Decode(skipSpecial) = %q", s)
	}

	// lstrip: llama.cpp sets it on <mask> for the jina-v2 pre-tokenizers.
	meta := tinyGGUF(map[string]int32{"<mask>": ggufTypeControl})
	meta["tokenizer.ggml.pre"] = "jina-v2-de"
	tok = mustGGUF(t, meta)
	ids, _ := tok.Encode("a \t<mask> b", false)
	if want := []int{byteID('a'), tok.mustID(t, "<mask>"), byteID(' '), byteID('b')}; !slices.Equal(ids, want) {
		t.Errorf("lstrip: got %v, want %v", ids, want)
	}
}

// TestGGUFFlags checks add_bos/add_eos, the Llama-3 default add_bos,
// ignore_merges and duplicate merges (the first rank wins).
func TestGGUFFlags(t *testing.T) {
	meta := tinyGGUF(map[string]int32{"<s>": ggufTypeControl, "</x>": ggufTypeControl, "ab": ggufTypeNormal, "bc": ggufTypeNormal},
		"b c", "a b", "b c")
	meta["tokenizer.ggml.bos_token_id"] = uint64(257) // "<s>" (extra tokens are sorted)
	meta["tokenizer.ggml.eos_token_id"] = int8(4)     // any integer type
	meta["tokenizer.ggml.add_bos_token"] = true
	meta["tokenizer.ggml.add_eos_token"] = true
	tok := mustGGUF(t, meta)
	bos, eos := tok.mustID(t, "<s>"), 4
	ids, _ := tok.Encode("abc", true)
	if want := []int{bos, tok.mustID(t, "a"), tok.mustID(t, "bc"), eos}; !slices.Equal(ids, want) {
		t.Errorf("add_bos/add_eos: got %v, want %v", ids, want)
	}
	if c := tok.Config(); !c.AddBOSToken || !c.AddEOSToken || c.BOSToken != "<s>" {
		t.Errorf("Config = %+v", c)
	}

	// llama-bpe: add_bos defaults to true, and a word that is a token is
	// not merged (ignore_merges).
	meta = tinyGGUF(map[string]int32{"<|begin_of_text|>": ggufTypeControl, "abc": ggufTypeNormal, "ab": ggufTypeNormal}, "a b")
	meta["tokenizer.ggml.pre"] = "llama-bpe"
	meta["tokenizer.ggml.bos_token_id"] = uint32(256)
	tok = mustGGUF(t, meta)
	ids, _ = tok.Encode("abc abd", true)
	want := []int{256, tok.mustID(t, "abc"), tok.mustID(t, string(byteToRune[' '])), tok.mustID(t, "ab"), tok.mustID(t, "d")}
	if !slices.Equal(ids, want) {
		t.Errorf("llama-bpe: got %v, want %v", ids, want)
	}
}

// TestGGUFPreTokenizers checks the splitting rules that differ from the
// Hugging Face scanners or are GGUF-only.
func TestGGUFPreTokenizers(t *testing.T) {
	pieces := func(steps []preTokenizer, s string) []string {
		st := &encState{}
		in := []piece{{s, 0}}
		for _, p := range steps {
			out, err := p.apply(in, nil, st)
			if err != nil {
				t.Fatal(err)
			}
			in = out
		}
		var got []string
		for _, p := range in {
			got = append(got, p.s)
		}
		return got
	}
	for _, c := range []struct {
		pre, text string
		want      []string
	}{
		// llama.cpp folds contraction case in ASCII only: "'ſ" is a word.
		{"qwen2", "it'ſa x'S 12", []string{"it", "'ſa", " x", "'S", " ", "1", "2"}},
		{"llama-bpe", "a'ſb 12345", []string{"a", "'ſb", " ", "123", "45"}},
		{"gpt-2", "I'm 12345  x", []string{"I", "'m", " 12345", " ", " x"}},
		{"smollm", "ab 123", []string{"ab", " ", "1", "2", "3"}},
		{"default", "a+=b 12345 c", []string{"a", "+=", "b", " ", "123", "45", " c"}},
	} {
		spec, err := ggufPre(c.pre)
		if err != nil {
			t.Fatal(err)
		}
		if got := pieces(spec.steps(), c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: got %q, want %q", c.pre, c.text, got, c.want)
		}
	}
	if names := GGUFPreTokenizers(); !slices.Contains(names, "qwen2") || slices.Contains(names, "") {
		t.Errorf("GGUFPreTokenizers() = %q", names)
	}
}

// TestGGUFMalformed feeds broken metadata: every case is an error that
// names the file and the key, never a panic.
func TestGGUFMalformed(t *testing.T) {
	base := func() map[string]any { return tinyGGUF(map[string]int32{"ab": ggufTypeNormal}, "a b") }
	with := func(k string, v any) map[string]any {
		m := base()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	toks := base()["tokenizer.ggml.tokens"].([]string)
	for _, c := range []struct {
		name string
		meta map[string]any
		want string
	}{
		{"nil map", nil, "tokenizer.ggml.model: missing"},
		{"no model", with("tokenizer.ggml.model", nil), "tokenizer.ggml.model: missing"},
		{"model type", with("tokenizer.ggml.model", 3), "tokenizer.ggml.model: want a string"},
		{"llama", with("tokenizer.ggml.model", "llama"), `tokenizer.ggml.model "llama" (SentencePiece) is not supported`},
		{"bert", with("tokenizer.ggml.model", "bert"), `tokenizer.ggml.model "bert" is not supported`},
		{"pre", with("tokenizer.ggml.pre", "deepseek-coder"), `tokenizer.ggml.pre "deepseek-coder" is not supported`},
		{"pre type", with("tokenizer.ggml.pre", []string{"x"}), "tokenizer.ggml.pre: want a string"},
		{"no tokens", with("tokenizer.ggml.tokens", nil), "tokenizer.ggml.tokens: missing"},
		{"tokens type", with("tokenizer.ggml.tokens", []int32{1}), "tokenizer.ggml.tokens: want an array of strings"},
		{"tokens elem", with("tokenizer.ggml.tokens", []any{"a", 2}), "tokenizer.ggml.tokens[1]: want a string"},
		{"empty vocab", with("tokenizer.ggml.tokens", []string{}), "tokenizer.ggml.tokens: empty"},
		{"duplicate", func() map[string]any {
			m := with("tokenizer.ggml.tokens", append(slices.Clone(toks), "ab"))
			delete(m, "tokenizer.ggml.token_type")
			return m
		}(), `duplicate token "ab" at ids 256 and 257`},
		{"types short", with("tokenizer.ggml.token_type", []int32{1, 1}), "tokenizer.ggml.token_type: 2 types for 257 tokens"},
		{"types type", with("tokenizer.ggml.token_type", []float32{1}), "tokenizer.ggml.token_type: want an array of integers"},
		{"types elem", with("tokenizer.ggml.token_type", []any{"x"}), "tokenizer.ggml.token_type[0]: want an integer"},
		{"no merges", with("tokenizer.ggml.merges", nil), "tokenizer.ggml.merges: missing"},
		{"merges type", with("tokenizer.ggml.merges", "a b"), "tokenizer.ggml.merges: want an array of strings"},
		{"merge unknown", with("tokenizer.ggml.merges", []string{"a b", "x zz"}), `tokenizer.ggml.merges[1]: token "zz" is not in tokenizer.ggml.tokens`},
		{"merge result", with("tokenizer.ggml.merges", []string{"b c"}), `tokenizer.ggml.merges[0]: merged token "bc" is not in tokenizer.ggml.tokens`},
		{"merge no space", with("tokenizer.ggml.merges", []string{"ab"}), `tokenizer.ggml.merges[0]: "ab" is not two tokens`},
		{"bos type", with("tokenizer.ggml.bos_token_id", "1"), "tokenizer.ggml.bos_token_id: want an integer, got string"},
		{"add_bos type", with("tokenizer.ggml.add_bos_token", uint8(1)), "tokenizer.ggml.add_bos_token: want a bool"},
		{"template type", with("tokenizer.chat_template", 1.5), "tokenizer.chat_template: want a string"},
	} {
		tok, err := FromGGUFMetadata("bad.gguf", c.meta)
		if err == nil {
			t.Errorf("%s: no error (%v)", c.name, tok != nil)
			continue
		}
		if !strings.Contains(err.Error(), "bad.gguf") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to name bad.gguf and say %q", c.name, err, c.want)
		}
	}

	// add_bos with no usable BOS id: the gpt2 default (11) is out of a
	// 3-token vocabulary, and an id key out of range is ignored as in
	// llama.cpp.
	small := map[string]any{
		"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": []string{"a", "b", "ab"},
		"tokenizer.ggml.merges": []string{"a b"}, "tokenizer.ggml.bos_token_id": uint32(7),
		"tokenizer.ggml.add_bos_token": true,
	}
	if _, err := FromGGUFMetadata("bad.gguf", small); err == nil || !strings.Contains(err.Error(), "tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set") {
		t.Errorf("add_bos without bos: %v", err)
	}
	small["tokenizer.ggml.add_bos_token"] = false
	small["tokenizer.ggml.eos_token_id"] = int64(-1)
	tok, err := FromGGUFMetadata("ok.gguf", small)
	if err != nil {
		t.Fatal(err)
	}
	if c := tok.Config(); c.BOSToken != "" || c.EOSToken != "" {
		t.Errorf("out-of-range ids: Config = %+v", c)
	}
	// An empty token is renamed as in llama.cpp; token types beyond the
	// tokens are ignored.
	small["tokenizer.ggml.tokens"] = []string{"a", "b", "ab", ""}
	small["tokenizer.ggml.token_type"] = []uint8{1, 1, 1, 1, 1, 1}
	tok, err = FromGGUFMetadata("ok.gguf", small)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := tok.IDToken(3); !ok || s != "[EMPTY_3]" {
		t.Errorf("empty token: %q", s)
	}
}
