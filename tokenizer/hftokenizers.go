//go:build hftokenizers

// The Rust backend: Hugging Face's tokenizers library through cgo. Build
// with -tags hftokenizers and libtokenizers.a from
// github.com/daulet/tokenizers v1.24.0 (see the package documentation).

package tokenizer

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	hf "github.com/daulet/tokenizers"
)

// HFTokenizer runs Hugging Face's Rust tokenizers library. It satisfies
// Backend like Tokenizer does. The C interface passes strings
// NUL-terminated, so text holding U+0000 cannot be encoded and decoded
// text stops at one.
type HFTokenizer struct {
	tk    *hf.Tokenizer
	vocab int
}

var _ Backend = (*HFTokenizer)(nil)

// LoadHF loads dir/tokenizer.json with the Rust library.
func LoadHF(dir string) (*HFTokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	tk, err := hf.FromFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &HFTokenizer{tk: tk, vocab: int(tk.VocabSize())}, nil
}

// Encode returns the ids of text; addSpecial applies the post-processor.
func (h *HFTokenizer) Encode(text string, addSpecial bool) ([]int, error) {
	if strings.IndexByte(text, 0) >= 0 {
		return nil, errors.New("tokenizer: encode: the hftokenizers backend cannot pass text holding NUL")
	}
	ids, _ := h.tk.Encode(text, addSpecial)
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out, nil
}

// Decode returns the text of ids. The Rust library skips unknown ids; this
// wrapper reports them, as Tokenizer does.
func (h *HFTokenizer) Decode(ids []int, skipSpecial bool) (string, error) {
	u := make([]uint32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= h.vocab {
			return "", fmt.Errorf("tokenizer: decode: id %d out of range [0, %d)", id, h.vocab)
		}
		u[i] = uint32(id)
	}
	return h.tk.Decode(u, skipSpecial), nil
}

// VocabSize is the number of tokens, added tokens included.
func (h *HFTokenizer) VocabSize() int { return h.vocab }

// Close frees the Rust tokenizer.
func (h *HFTokenizer) Close() error { return h.tk.Close() }
