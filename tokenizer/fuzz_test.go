package tokenizer

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The fuzz targets' seed corpora live in testdata/fuzz/<Target>/: trimmed
// copies of the vendored Qwen3 and Mistral files and small hand-made
// tokenizers. Run one with
//
//	go test -run '^$' -fuzz FuzzLoad -fuzztime 10m -parallel 1 ./tokenizer/

// maxFuzzFile is the largest tokenizer.json FuzzLoad tries: big enough for
// every component, small enough to mutate quickly.
const maxFuzzFile = 64 << 10

// fuzzTexts are encoded by every tokenizer FuzzLoad builds.
var fuzzTexts = []string{
	"Hello, world! It's 2024.",
	"  a  b\n\n\tc  ",
	"héllo ünïcödé 中文字 😀 ½²",
	"<s>[INST] x </s><|im_start|>user<|im_end|>",
	"abcxyz aab abab <m> hello",
	"\x00\xff\xfe invalid",
}

// checkIDs checks that ids are tokens of tok and decode without error.
func checkIDs(t *testing.T, tok *Tokenizer, text string, ids []int) {
	t.Helper()
	for _, id := range ids {
		if id < 0 || id >= tok.VocabSize() {
			t.Fatalf("Encode(%q): id %d out of range [0, %d)", text, id, tok.VocabSize())
		}
		if _, ok := tok.IDToken(id); !ok {
			t.Fatalf("Encode(%q): id %d has no token", text, id)
		}
	}
	for _, skip := range []bool{false, true} {
		if _, err := tok.Decode(ids, skip); err != nil && !limitError(err) {
			t.Fatalf("Decode(Encode(%q)): %v", text, err)
		}
	}
}

// limitError reports whether err is one of the limits of regex.go.
func limitError(err error) bool {
	return errors.Is(err, ErrRegexTimeout) || strings.Contains(err.Error(), "the text would grow")
}

// FuzzLoad loads arbitrary tokenizer.json files: the result is a tokenizer
// or an error naming the file, never a panic; a tokenizer encodes a few
// texts into ids that are its tokens.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzFile {
			return
		}
		tok, err := FromJSON(data)
		if err != nil {
			if tok != nil {
				t.Fatal("a tokenizer and an error")
			}
			if !strings.HasPrefix(err.Error(), "tokenizer.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		tok.SetRegexTimeout(20 * time.Millisecond)
		for _, text := range fuzzTexts {
			for _, special := range []bool{false, true} {
				ids, err := tok.Encode(text, special)
				if err != nil {
					// Limits, or an unk_token missing from the vocabulary.
					if !limitError(err) && !strings.Contains(err.Error(), "unk_token") {
						t.Fatalf("Encode(%q): %v", text, err)
					}
					continue
				}
				checkIDs(t, tok, text, ids)
			}
		}
	})
}

// expectedRoundTrip is what Qwen3 decodes its encoding of text to: text
// repaired as Encode does, with the NFC normalizer applied to each segment
// between the added tokens (which are matched before normalizing and
// decode to themselves).
func expectedRoundTrip(tok *Tokenizer, text string) string {
	text = lossyString(text)
	var b strings.Builder
	for _, sp := range tok.added.findMatches(text, tok.added.raw, nil) {
		seg := text[sp.start:sp.end]
		if sp.id < 0 {
			seg = norm.NFC.String(seg)
		}
		b.WriteString(seg)
	}
	return b.String()
}

// FuzzEncodeDecode encodes arbitrary text with Qwen3: Encode never fails,
// every id is a token, and decoding gives the text back (NFC-normalized,
// invalid UTF-8 as U+FFFD), at once or streamed. Mistral's tokenizer, whose
// decoder does not round-trip, must still give valid ids.
func FuzzEncodeDecode(f *testing.F) {
	qwen := loadRef(f, "qwen3")
	mistral := loadRef(f, "mistral")
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 1<<16 {
			return
		}
		ids, err := qwen.Encode(text, false)
		if err != nil {
			t.Fatalf("Encode(%q): %v", text, err)
		}
		checkIDs(t, qwen, text, ids)
		got, err := qwen.Decode(ids, false)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if want := expectedRoundTrip(qwen, text); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", text, got, want)
		}
		if utf8.ValidString(text) && norm.NFC.IsNormalString(text) && got != text {
			t.Fatalf("NFC text %q came back as %q", text, got)
		}
		streamed, err := streamAll(qwen, ids, false)
		if err != nil || streamed != got {
			t.Fatalf("stream decode of %q = %q, %v; want %q", text, streamed, err, got)
		}
		withSpecial, err := qwen.Encode(text, true)
		if err != nil || !equalIDs(withSpecial, ids) {
			t.Fatalf("Encode(%q, true) = %v, %v; want %v", text, withSpecial, err, ids)
		}

		ids, err = mistral.Encode(text, true)
		if err != nil {
			t.Fatalf("Mistral Encode(%q): %v", text, err)
		}
		checkIDs(t, mistral, text, ids)
	})
}

// ggufFuzzMeta builds GGUF tokenizer metadata from the fuzzer's values:
// tokens and merges one per line, token types one per byte, the rest
// switched by the bits of flags.
func ggufFuzzMeta(tokens string, types []byte, merges, pre string, bos, eos int64, flags uint8) map[string]any {
	meta := map[string]any{"tokenizer.ggml.model": "gpt2"}
	if flags&1 != 0 {
		meta["tokenizer.ggml.model"] = "llama"
	}
	if flags&2 == 0 {
		meta["tokenizer.ggml.pre"] = pre
	}
	toks := strings.Split(tokens, "\n")
	if flags&4 != 0 {
		anyToks := make([]any, len(toks))
		for i, s := range toks {
			anyToks[i] = s
		}
		meta["tokenizer.ggml.tokens"] = anyToks
	} else {
		meta["tokenizer.ggml.tokens"] = toks
	}
	if len(types) > 0 {
		tt := make([]int32, len(types))
		for i, b := range types {
			tt[i] = int32(int8(b))
		}
		meta["tokenizer.ggml.token_type"] = tt
	}
	if flags&8 == 0 {
		meta["tokenizer.ggml.merges"] = strings.Split(merges, "\n")
	}
	if flags&16 != 0 {
		meta["tokenizer.ggml.bos_token_id"] = uint32(bos)
		meta["tokenizer.ggml.eos_token_id"] = eos
		meta["tokenizer.ggml.padding_token_id"] = uint64(eos)
	}
	if flags&32 != 0 {
		meta["tokenizer.ggml.add_bos_token"] = true
	}
	if flags&64 != 0 {
		meta["tokenizer.ggml.add_eos_token"] = true
	}
	if flags&128 != 0 {
		meta["general.name"] = pre
		meta["tokenizer.chat_template"] = merges
	}
	return meta
}

// FuzzGGUFMetadata builds tokenizers from arbitrary GGUF metadata: an
// error naming the file or a tokenizer whose ids for text are tokens.
func FuzzGGUFMetadata(f *testing.F) {
	f.Fuzz(func(t *testing.T, tokens string, types []byte, merges, pre string, bos, eos int64, flags uint8, text string) {
		if len(tokens)+len(types)+len(merges)+len(text) > 1<<16 {
			return
		}
		tok, err := FromGGUFMetadata("fuzz.gguf", ggufFuzzMeta(tokens, types, merges, pre, bos, eos, flags))
		if err != nil {
			if tok != nil {
				t.Fatal("a tokenizer and an error")
			}
			if !strings.HasPrefix(err.Error(), "tokenizer: fuzz.gguf: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, special := range []bool{false, true} {
			ids, err := tok.Encode(text, special)
			if err != nil {
				t.Fatalf("Encode(%q): %v", text, err)
			}
			checkIDs(t, tok, text, ids)
		}
	})
}
