package tokenizer

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// TestReferenceCases checks every case of every reference tokenizer on all
// four fields against the ids and texts of Hugging Face's Rust library.
func TestReferenceCases(t *testing.T) {
	for _, name := range allTokenizers {
		t.Run(name, func(t *testing.T) {
			tok := loadRef(t, name)
			cases := loadCases(t, name)
			var pass [4]int
			for i, c := range cases {
				label := fmt.Sprintf("case %d (%s) %.40q", i, c.Category, c.Text)
				ids, err := tok.Encode(c.Text, false)
				if err != nil {
					t.Errorf("%s: Encode: %v", label, err)
				} else if !equalIDs(ids, c.IDs) {
					t.Errorf("%s: ids\n got %v\nwant %v", label, ids, c.IDs)
				} else {
					pass[0]++
				}
				ids, err = tok.Encode(c.Text, true)
				if err != nil {
					t.Errorf("%s: Encode special: %v", label, err)
				} else if !equalIDs(ids, c.IDsWithSpecial) {
					t.Errorf("%s: ids_with_special\n got %v\nwant %v", label, ids, c.IDsWithSpecial)
				} else {
					pass[1]++
				}
				text, err := tok.Decode(c.IDs, false)
				if err != nil {
					t.Errorf("%s: Decode: %v", label, err)
				} else if text != c.Decoded {
					t.Errorf("%s: decoded\n got %q\nwant %q", label, text, c.Decoded)
				} else {
					pass[2]++
				}
				text, err = tok.Decode(c.IDsWithSpecial, true)
				if err != nil {
					t.Errorf("%s: Decode skip: %v", label, err)
				} else if text != c.DecodedSkipSpecial {
					t.Errorf("%s: decoded_skip_special\n got %q\nwant %q", label, text, c.DecodedSkipSpecial)
				} else {
					pass[3]++
				}
			}
			n := len(cases)
			t.Logf("%s: ids %d/%d, ids_with_special %d/%d, decoded %d/%d, decoded_skip_special %d/%d",
				name, pass[0], n, pass[1], n, pass[2], n, pass[3], n)
		})
	}
}

// TestStreamDecoder checks that streaming every case id by id gives the
// same text as Decode, in both skip modes, and never a split character.
func TestStreamDecoder(t *testing.T) {
	for _, name := range allTokenizers {
		t.Run(name, func(t *testing.T) {
			tok := loadRef(t, name)
			for i, c := range loadCases(t, name) {
				for _, skip := range []bool{false, true} {
					for _, ids := range [][]int{c.IDs, c.IDsWithSpecial} {
						want, err := tok.Decode(ids, skip)
						if err != nil {
							t.Fatal(err)
						}
						got, err := streamAll(tok, ids, skip)
						if err != nil {
							t.Errorf("case %d skip=%v: %v", i, skip, err)
						} else if got != want {
							t.Errorf("case %d skip=%v: streamed %q, Decode %q", i, skip, got, want)
						}
					}
				}
			}
		})
	}
}

// streamAll streams ids and returns the text. Every Push must return
// text that Decode of all the ids continues with: no half character (a
// pending U+FFFD), nothing a later id rewrites.
func streamAll(tok *Tokenizer, ids []int, skip bool) (string, error) {
	s, _, err := streamAllCounting(tok, ids, skip)
	return s, err
}

// streamAllCounting is streamAll that also returns how many ids the
// stream decoder decoded, every window together (its work).
func streamAllCounting(tok *Tokenizer, ids []int, skip bool) (string, int, error) {
	want, _ := tok.Decode(ids, skip)
	d := tok.NewStreamDecoder(skip)
	var b strings.Builder
	for _, id := range ids {
		s, err := d.Push(id)
		if err != nil {
			return b.String(), d.decoded, err
		}
		if !strings.HasPrefix(want[b.Len():], s) {
			return b.String(), d.decoded, fmt.Errorf("push of %d returned %q, which the decoded text does not continue with", id, s)
		}
		b.WriteString(s)
	}
	s, err := d.Flush()
	b.WriteString(s)
	return b.String(), d.decoded, err
}

// TestStreamDecoderRandom streams random id sequences, biased towards
// partial UTF-8 (byte tokens, multi-byte pieces) and special tokens.
func TestStreamDecoderRandom(t *testing.T) {
	for _, name := range []string{"qwen3", "mistral"} {
		tok := loadRef(t, name)
		var pool []int
		for id := 0; id < tok.VocabSize(); id++ {
			s, _ := tok.IDToken(id)
			if tok.IsSpecial(id) || strings.HasPrefix(s, "<0x") || strings.ContainsAny(s, "âĠãĥĦ▁") || id < 300 {
				pool = append(pool, id)
			}
		}
		rng := rand.New(rand.NewSource(4))
		for i := 0; i < 2000; i++ {
			ids := make([]int, rng.Intn(12))
			for k := range ids {
				if rng.Intn(3) == 0 {
					ids[k] = rng.Intn(tok.VocabSize())
				} else {
					ids[k] = pool[rng.Intn(len(pool))]
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
