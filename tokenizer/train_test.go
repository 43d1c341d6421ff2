package tokenizer

import (
	"bytes"
	"strings"
	"testing"
)

func TestTrainBPE(t *testing.T) {
	text := strings.Repeat("In the beginning God created the heaven and the earth.\nAnd the earth was without form, and void; and darkness was upon the face of the deep.\n", 50)
	opts := BPETrainOptions{VocabSize: 320, SpecialTokens: []string{"<|endoftext|>"}}
	data, err := TrainBPE([]string{text, "Ünïcödé and emoji 🙂 stay whole bytes."}, opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := TrainBPE([]string{text, "Ünïcödé and emoji 🙂 stay whole bytes."}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again) {
		t.Fatal("two trainings on the same text wrote different files")
	}
	tok, err := FromJSON(data)
	if err != nil {
		t.Fatalf("the trained tokenizer.json does not load: %v", err)
	}
	if got := tok.VocabSize(); got != 320 {
		t.Errorf("vocab size %d, want 320", got)
	}
	if id, ok := tok.TokenID("<|endoftext|>"); !ok || id != 0 || !tok.IsSpecial(0) {
		t.Errorf("<|endoftext|> is id %d (found %v), want special id 0", id, ok)
	}
	// Frequent words become single tokens, with GPT-2's leading space.
	for _, w := range []string{" the", " earth", " and"} {
		ids, err := tok.Encode(w, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 {
			t.Errorf("%q encodes to %d tokens, want 1", w, len(ids))
		}
	}
	// Every text round-trips, seen or not, specials matched whole.
	for _, s := range []string{text[:200], "Zebras quickly jump over the lazy dog!", "héllo wörld 🙂", "a<|endoftext|>b"} {
		ids, err := tok.Encode(s, false)
		if err != nil {
			t.Fatal(err)
		}
		back, err := tok.Decode(ids, false)
		if err != nil {
			t.Fatal(err)
		}
		if back != s {
			t.Errorf("round trip of %q gave %q", s, back)
		}
	}
	ids, _ := tok.Encode("a<|endoftext|>b", false)
	if len(ids) != 3 || ids[1] != 0 {
		t.Errorf("a<|endoftext|>b encodes to %v, want the special as one id between", ids)
	}
	// Training compresses: the trained vocabulary needs far fewer ids
	// than bytes on its own text.
	n, _ := tok.Encode(text, false)
	if len(n)*3 > len(text) {
		t.Errorf("%d bytes became %d tokens: training did not compress", len(text), len(n))
	}
}

func TestTrainBPEErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		texts []string
		opts  BPETrainOptions
		want  string
	}{
		{"vocab below bytes", []string{"abc"}, BPETrainOptions{VocabSize: 200}, "below the 256"},
		{"repeated special", []string{"abc"}, BPETrainOptions{VocabSize: 300, SpecialTokens: []string{"<s>", "<s>"}}, "repeated"},
		{"no text", nil, BPETrainOptions{VocabSize: 300}, "no text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := TrainBPE(c.texts, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
