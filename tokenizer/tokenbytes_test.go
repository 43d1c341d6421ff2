package tokenizer

import (
	"bytes"
	"strings"
	"testing"
)

// TestTokenBytes: a byte-level tokenizer's token bytes concatenate to the
// decoded text (partial UTF-8 tokens included); SentencePiece's ▁ is a
// space and its <0xXX> tokens are raw bytes.
func TestTokenBytes(t *testing.T) {
	tok := loadRef(t, "qwen3")
	for _, c := range loadCases(t, "qwen3") {
		var b []byte
		for _, id := range c.IDs {
			tb, ok := tok.TokenBytes(id)
			if !ok {
				t.Fatalf("id %d has no bytes", id)
			}
			b = append(b, tb...)
		}
		if !bytes.Equal(b, []byte(c.Decoded)) {
			t.Errorf("%q: token bytes %q", c.Decoded, b)
		}
	}
	if b, _ := tok.TokenBytes(220); string(b) != " " {
		t.Errorf("Ġ: %q", b)
	}
	if b, _ := tok.TokenBytes(151645); string(b) != "<|im_end|>" {
		t.Errorf("<|im_end|>: %q", b)
	}
	if _, ok := tok.TokenBytes(-1); ok {
		t.Error("id -1 has bytes")
	}

	sp := loadRef(t, "mistral")
	for _, c := range loadCases(t, "mistral") {
		if strings.Contains(c.Text, "<") || c.Text == "" {
			continue // added tokens in the text
		}
		var b []byte
		for _, id := range c.IDs {
			tb, _ := sp.TokenBytes(id)
			b = append(b, tb...)
		}
		// The decoder drops the first token's leading space (Strip).
		if got := strings.TrimPrefix(string(b), " "); got != c.Decoded {
			t.Errorf("%q: token bytes %q", c.Decoded, b)
		}
	}
	id, ok := sp.TokenID("<0xE4>")
	if b, _ := sp.TokenBytes(id); !ok || !bytes.Equal(b, []byte{0xE4}) {
		t.Errorf("<0xE4>: %q", b)
	}
}
