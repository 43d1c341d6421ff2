package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// GGUFMetadata turns the byte-level BPE tokenizer.json in dir into the
// tokenizer.ggml.* metadata llama.cpp's convert_hf_to_gguf.py writes for it:
// tokens in id order up to vocabSize (0: the largest id + 1), with
// "[PAD<id>]" fillers of type unused for ids without a token; added
// tokens as control (special, or looking special) or user-defined; the
// merges as "a b" strings; pre names the pre-tokenizer (see
// GGUFPreTokenizers). hf is the tokenizer loaded from the same folder,
// through which non-normalized added tokens round-trip as the converter
// does. Special ids and flags are for the caller to add.
func GGUFMetadata(dir string, hf *Tokenizer, vocabSize int, pre string) (map[string]any, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var j struct {
		Model struct {
			Type   string          `json:"type"`
			Vocab  map[string]int  `json:"vocab"`
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
		AddedTokens []struct {
			ID         int    `json:"id"`
			Content    string `json:"content"`
			Special    bool   `json:"special"`
			Normalized bool   `json:"normalized"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if j.Model.Type != "BPE" {
		return nil, fmt.Errorf("%s: model type %q: only byte-level BPE tokenizers are written to GGUF", path, j.Model.Type)
	}
	reverse := map[int]string{}
	for tok, id := range j.Model.Vocab {
		reverse[id] = tok
	}
	type addedInfo struct{ special, normalized bool }
	added := map[int]addedInfo{}
	for _, a := range j.AddedTokens {
		reverse[a.ID] = a.Content
		added[a.ID] = addedInfo{a.Special, a.Normalized}
	}
	largest := 0
	for id := range reverse {
		if id < 0 {
			return nil, fmt.Errorf("%s: negative token id %d", path, id)
		}
		largest = max(largest, id+1)
	}
	if vocabSize == 0 {
		vocabSize = largest
	}
	if largest > vocabSize {
		return nil, fmt.Errorf("%s: token id %d is outside the model's vocabulary of %d", path, largest-1, vocabSize)
	}
	looksSpecial := func(s string) bool {
		switch s {
		case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
			return true
		}
		return (strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) ||
			(strings.HasPrefix(s, "<\uff5c") && strings.HasSuffix(s, "\uff5c>")) ||
			(strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">"))
	}
	tokens := make([]string, vocabSize)
	types := make([]int32, vocabSize)
	for i := range vocabSize {
		tok, ok := reverse[i]
		if !ok {
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), ggufTypeUnused
			continue
		}
		types[i] = ggufTypeNormal
		if a, ok := added[i]; ok {
			if !a.normalized && hf != nil {
				ids, err := hf.Encode(tok, false)
				if err != nil {
					return nil, err
				}
				if tok, err = hf.Decode(ids, false); err != nil {
					return nil, err
				}
			}
			if a.special || looksSpecial(tok) {
				types[i] = ggufTypeControl
			} else {
				tok = strings.ReplaceAll(tok, "\u2581", " ")
				types[i] = ggufTypeUserDefined
			}
		}
		tokens[i] = tok
	}
	merges, err := mergeStrings(j.Model.Merges)
	if err != nil {
		return nil, fmt.Errorf("%s: model.merges: %w", path, err)
	}
	return map[string]any{
		"tokenizer.ggml.model":      "gpt2",
		"tokenizer.ggml.pre":        pre,
		"tokenizer.ggml.tokens":     tokens,
		"tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges":     merges,
	}, nil
}

// mergeStrings reads tokenizer.json's merges, "a b" strings or (newer
// files) ["a", "b"] pairs, as "a b" strings. The array is decoded whole in
// the form its first entry has: element by element, a 151k-merge
// vocabulary took most of gozoo quantize's second.
func mergeStrings(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if first := bytes.TrimLeft(raw[1:], " \t\r\n"); len(first) == 0 || first[0] != '[' {
		var merges []string
		if err := json.Unmarshal(raw, &merges); err != nil {
			return nil, err
		}
		return merges, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, err
	}
	merges := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("[%d]: a pair has 2 strings, not %d", i, len(p))
		}
		merges[i] = p[0] + " " + p[1]
	}
	return merges, nil
}
