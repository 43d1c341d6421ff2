package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Backend is what every tokenizer implementation offers: the pure-Go
// Tokenizer of this package and, with the build tag hftokenizers, the
// HFTokenizer wrapping Hugging Face's Rust library.
type Backend interface {
	// Encode returns the ids of text. addSpecial applies the
	// post-processor, as add_special_tokens=True does in Hugging Face
	// (for example a leading <bos>). Added and special tokens written in
	// the text are matched either way.
	Encode(text string, addSpecial bool) ([]int, error)
	// Decode returns the text of ids, without any clean-up of
	// tokenization spaces. skipSpecial drops special tokens. An id
	// outside the vocabulary is an error that names it.
	Decode(ids []int, skipSpecial bool) (string, error)
	// VocabSize is the size of the id space: every id is below it.
	VocabSize() int
}

var _ Backend = (*Tokenizer)(nil)

// Tokenizer is a Hugging Face tokenizer.json tokenizer. It is safe for
// concurrent use by several goroutines.
type Tokenizer struct {
	model      *bpeModel
	normalizer normalizer
	pre        []preTokenizer
	byteLevel  bool // the model's input is mapped to the GPT-2 byte alphabet
	added      *addedVocab
	post       postProcessor
	decoder    decoder

	vocabSize int
	idTok     []string
	hasTok    []bool
	special   []bool
	addedIDs  map[string]int
	cfg       Config

	// regexTimeout is the regex budget per 100 KB of text (0: the
	// default); see regex.go.
	regexTimeout time.Duration

	pool sync.Pool // *encState
}

// Config holds what tokenizer_config.json says about special tokens and
// chat formatting. Encoding does not depend on it.
type Config struct {
	BOSToken, EOSToken, PADToken, UNKToken string
	AddBOSToken, AddEOSToken               bool
	// ChatTemplate is the Jinja chat template ("default" one if several).
	ChatTemplate string
}

// encState is the per-call scratch space of Encode.
type encState struct {
	rawSplits, normSplits []tokSplit
	p1, p2                []piece
	spans                 []span
	marks                 []markedSpan
	word, key             []byte
	syms                  []symbol
	heap                  mergeHeap
	// lim bounds the regex time and text growth of the whole Encode;
	// normalized counts the bytes the normalizer produced.
	lim        limits
	normalized int
}

func (t *Tokenizer) state() *encState {
	if st, ok := t.pool.Get().(*encState); ok {
		return st
	}
	return &encState{}
}

// Encode returns the ids of text. With addSpecial the post-processor adds
// its special tokens (add_special_tokens=True). Added tokens written in the
// text are always matched. Invalid UTF-8 is first repaired with U+FFFD.
// A regex of the tokenizer file that runs past its time budget stops
// Encode with a *RegexError (see SetRegexTimeout).
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]int, error) {
	st := t.state()
	defer t.pool.Put(st)
	return t.encode(st, text, addSpecial)
}

// encode is Encode with the scratch space st, whose lim.work tests read.
func (t *Tokenizer) encode(st *encState, text string, addSpecial bool) ([]int, error) {
	text = lossyString(text)
	st.lim = newLimits(t.regexTimeout, len(text))
	st.lim.work = int64(len(text)) // repairing it, finding the added tokens
	st.normalized = 0
	ids := make([]int, 0, len(text)/3+4)
	var err error
	if t.added.raw.empty() {
		ids, err = t.encodeSegment(st, text, 0, ids)
	} else {
		st.rawSplits = t.added.findMatches(text, t.added.raw, st.rawSplits[:0])
		for _, sp := range st.rawSplits {
			if sp.id >= 0 {
				ids = append(ids, sp.id)
				continue
			}
			if ids, err = t.encodeSegment(st, text[sp.start:sp.end], sp.start, ids); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: encode: %w", err)
	}
	if addSpecial && t.post != nil {
		ids = t.post.process(ids)
	}
	return ids, nil
}

// encodeSegment normalizes the text between two raw added tokens, matches
// the normalized added tokens in it and encodes the rest.
func (t *Tokenizer) encodeSegment(st *encState, seg string, orig int, ids []int) ([]int, error) {
	if seg == "" {
		return ids, nil
	}
	s := seg
	if t.normalizer != nil {
		var err error
		if s, err = t.normalizer.normalize(seg, &st.lim); err != nil {
			return ids, err
		}
		st.lim.work += int64(len(seg))
		// Each segment is normalized alone (a Prepend adds its text to
		// every one): the limit is on their total.
		st.normalized += len(s)
		if err := st.lim.grow("normalizer", st.normalized); err != nil {
			return ids, err
		}
	}
	if t.added.normalized.empty() {
		return t.encodeText(st, s, orig, ids)
	}
	var err error
	st.normSplits = t.added.findMatches(s, t.added.normalized, st.normSplits[:0])
	for _, sp := range st.normSplits {
		if sp.id >= 0 {
			ids = append(ids, sp.id)
			continue
		}
		if ids, err = t.encodeText(st, s[sp.start:sp.end], orig+sp.start, ids); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

// encodeText pre-tokenizes normalized text and runs the model on each
// pre-token.
func (t *Tokenizer) encodeText(st *encState, s string, orig int, ids []int) ([]int, error) {
	if s == "" {
		return ids, nil
	}
	if len(t.pre) == 0 {
		return t.tokenizeWord(st, s, ids)
	}
	in := append(st.p1[:0], piece{s, orig})
	out := st.p2[:0]
	var err error
	for _, p := range t.pre {
		if out, err = p.apply(in, out[:0], st); err != nil {
			return ids, err
		}
		in, out = out, in
	}
	st.p1, st.p2 = in, out
	for _, pc := range in {
		if ids, err = t.tokenizeWord(st, pc.s, ids); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

func (t *Tokenizer) tokenizeWord(st *encState, s string, ids []int) ([]int, error) {
	st.lim.work += int64(len(s))
	if t.byteLevel {
		st.word = appendByteLevel(st.word[:0], s)
	} else {
		st.word = append(st.word[:0], s...)
	}
	return t.model.tokenize(st, st.word, ids)
}

// Decode returns the text of ids. skipSpecial drops the special tokens
// (skip_special_tokens=True); tokenization spaces are not cleaned up. An id
// outside the vocabulary is an error naming it; so is a *RegexError, as for
// Encode.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) (string, error) {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if err := t.checkID(id); err != nil {
			return "", err
		}
		if skipSpecial && t.special[id] {
			continue
		}
		toks = append(toks, t.idTok[id])
	}
	return t.decodeTokens(toks)
}

func (t *Tokenizer) checkID(id int) error {
	if id < 0 || id >= t.vocabSize {
		return fmt.Errorf("tokenizer: decode: id %d out of range [0, %d)", id, t.vocabSize)
	}
	if !t.hasTok[id] {
		return fmt.Errorf("tokenizer: decode: id %d has no token", id)
	}
	return nil
}

func (t *Tokenizer) decodeTokens(toks []string) (string, error) {
	if t.decoder == nil {
		return strings.Join(toks, " "), nil
	}
	n := 0
	for _, tok := range toks {
		n += len(tok)
	}
	l := newLimits(t.regexTimeout, n)
	out, err := t.decoder.decodeChain(toks, &l)
	if err != nil {
		return "", fmt.Errorf("tokenizer: decode: %w", err)
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return strings.Join(out, ""), nil
}

// VocabSize is the size of the id space, added tokens included: every id
// is below it.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of a token (an added token, or a model token in
// the model's own spelling, e.g. "Ġhello" for byte-level vocabularies).
func (t *Tokenizer) TokenID(tok string) (int, bool) {
	if id, ok := t.addedIDs[tok]; ok {
		return id, true
	}
	if id, ok := t.model.vocab[tok]; ok {
		return int(id), true
	}
	return 0, false
}

// IDToken returns the token of an id, in the vocabulary's spelling.
func (t *Tokenizer) IDToken(id int) (string, bool) {
	if id < 0 || id >= t.vocabSize || !t.hasTok[id] {
		return "", false
	}
	return t.idTok[id], true
}

// IsSpecial reports whether id is a special token (skipped by Decode with
// skipSpecial).
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < t.vocabSize && t.special[id]
}

// Config returns what tokenizer_config.json said; the zero Config when
// there was none.
func (t *Tokenizer) Config() Config { return t.cfg }

// BOS returns the id of the configured beginning-of-sequence token.
func (t *Tokenizer) BOS() (int, bool) { return t.configID(t.cfg.BOSToken) }

// EOS returns the id of the configured end-of-sequence token.
func (t *Tokenizer) EOS() (int, bool) { return t.configID(t.cfg.EOSToken) }

func (t *Tokenizer) configID(tok string) (int, bool) {
	if tok == "" {
		return 0, false
	}
	return t.TokenID(tok)
}

func (t *Tokenizer) setConfig(data []byte) error {
	var v struct {
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		PAD          json.RawMessage `json:"pad_token"`
		UNK          json.RawMessage `json:"unk_token"`
		AddBOS       *bool           `json:"add_bos_token"`
		AddEOS       *bool           `json:"add_eos_token"`
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	var c Config
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *string
	}{{"bos_token", v.BOS, &c.BOSToken}, {"eos_token", v.EOS, &c.EOSToken}, {"pad_token", v.PAD, &c.PADToken}, {"unk_token", v.UNK, &c.UNKToken}} {
		s, err := configToken(f.raw)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		*f.dst = s
	}
	c.AddBOSToken = v.AddBOS != nil && *v.AddBOS
	c.AddEOSToken = v.AddEOS != nil && *v.AddEOS
	if !isNull(v.ChatTemplate) {
		if err := json.Unmarshal(v.ChatTemplate, &c.ChatTemplate); err != nil {
			var list []struct{ Name, Template string }
			if err2 := json.Unmarshal(v.ChatTemplate, &list); err2 != nil {
				return fmt.Errorf("chat_template: want a string or a list of {name, template}")
			}
			for i, x := range list {
				if i == 0 || x.Name == "default" {
					c.ChatTemplate = x.Template
				}
			}
		}
	}
	t.cfg = c
	return nil
}

// configToken reads a special token written as a string, as an object with
// "content", or as null.
func configToken(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.Content == nil {
		return "", fmt.Errorf("want a string or an object with content")
	}
	return *o.Content, nil
}
