package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/gozoo/gozoo/loaders"
)

// Load reads dir/tokenizer.json and, when present, dir/tokenizer_config.json.
// dir needs no config.json. Errors name the file.
func Load(dir string) (*Tokenizer, error) {
	f, err := loaders.ReadFolder(dir, loaders.TokenizerFile, loaders.TokenizerConfigFile)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return FromFolder(f)
}

// FromFolder builds a Tokenizer from the tokenizer.json and, when present,
// the tokenizer_config.json of a checkpoint folder already read, as Load
// does, without touching the disk. Errors name the file; a missing
// tokenizer.json matches fs.ErrNotExist.
func FromFolder(f *loaders.Folder) (*Tokenizer, error) {
	path := f.Path(loaders.TokenizerFile)
	if f.TokenizerJSON == nil {
		return nil, fmt.Errorf("tokenizer: %w", &fs.PathError{Op: "open", Path: path, Err: syscall.ENOENT})
	}
	t, err := parseTokenizer(f.TokenizerJSON, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.TokenizerConfig != nil {
		if err := t.setConfig(f.TokenizerConfig); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path(loaders.TokenizerConfigFile), err)
		}
	}
	return t, nil
}

// FromJSON builds a Tokenizer from the contents of a tokenizer.json file.
func FromJSON(data []byte) (*Tokenizer, error) {
	t, err := parseTokenizer(data, "tokenizer.json")
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return t, nil
}

// SetConfig applies the contents of a tokenizer_config.json file (special
// token names, chat template) to a Tokenizer made by FromJSON. It does not
// change how t encodes. Call it before sharing t between goroutines.
func (t *Tokenizer) SetConfig(data []byte) error {
	if err := t.setConfig(data); err != nil {
		return fmt.Errorf("tokenizer_config.json: %w", err)
	}
	return nil
}

func isNull(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// parseTokenizer reads a tokenizer.json; name is the file, which errors at
// encode time name.
func parseTokenizer(data []byte, name string) (*Tokenizer, error) {
	t := &Tokenizer{}
	// The model (most of the file) is read in place, in one pass.
	fields, err := topLevel(data, map[string]func(*jsonReader) error{
		"model": func(r *jsonReader) error {
			if r.peek() == 'n' {
				return r.skip()
			}
			m, err := parseModel(r)
			if err != nil {
				return fmt.Errorf("model: %w", err)
			}
			t.model = m
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	if t.model == nil {
		return nil, errors.New("model: missing")
	}
	if raw := fields["normalizer"]; !isNull(raw) {
		if t.normalizer, err = parseNormalizer(raw); err != nil {
			return nil, fmt.Errorf("normalizer: %w", err)
		}
	}
	if raw := fields["pre_tokenizer"]; !isNull(raw) {
		if t.pre, err = parsePreTokenizer(raw); err != nil {
			return nil, fmt.Errorf("pre_tokenizer: %w", err)
		}
	}
	// The byte-to-rune step of a final ByteLevel pre-tokenizer is fused
	// into the model, which maps each word into a scratch buffer.
	if n := len(t.pre); n > 0 {
		if bl, ok := t.pre[n-1].(*byteLevelPre); ok {
			bl.mapBytes = false
			t.byteLevel = true
			if !bl.addPrefixSpace && !bl.useRegex {
				t.pre = t.pre[:n-1]
			}
		}
	}
	var added []addedToken
	if raw := fields["added_tokens"]; !isNull(raw) {
		if added, err = parseAddedTokens(raw); err != nil {
			return nil, fmt.Errorf("added_tokens: %w", err)
		}
	}
	if err := t.buildAdded(added); err != nil {
		return nil, fmt.Errorf("added_tokens: %w", err)
	}
	if raw := fields["post_processor"]; !isNull(raw) {
		if t.post, err = parsePost(raw); err != nil {
			return nil, fmt.Errorf("post_processor: %w", err)
		}
		if err := t.checkPostIDs(t.post); err != nil {
			return nil, fmt.Errorf("post_processor: %w", err)
		}
	}
	if raw := fields["decoder"]; !isNull(raw) {
		if t.decoder, err = parseDecoder(raw); err != nil {
			return nil, fmt.Errorf("decoder: %w", err)
		}
	}
	t.setFile(name)
	return t, nil
}

// typeOf reads the "type" field of a component.
func typeOf(raw []byte) (string, error) {
	var v struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	if v.Type == nil {
		return "", errors.New(`missing "type"`)
	}
	return *v.Type, nil
}

// unknownType reports a component type this package does not implement,
// telling apart Hugging Face types it lacks from names nobody knows.
func unknownType(typ string, known ...string) error {
	for _, k := range known {
		if k == typ {
			return fmt.Errorf("unsupported type %q", typ)
		}
	}
	return fmt.Errorf("unknown type %q", typ)
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

func parseNormalizer(raw []byte) (normalizer, error) {
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	var v struct {
		Normalizers []json.RawMessage `json:"normalizers"`
		Pattern     patternJSON       `json:"pattern"`
		Content     string            `json:"content"`
		Prepend     string            `json:"prepend"`
		StripLeft   bool              `json:"strip_left"`
		StripRight  bool              `json:"strip_right"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	switch typ {
	case "NFC":
		return unicodeNormalizer{norm.NFC}, nil
	case "NFD":
		return unicodeNormalizer{norm.NFD}, nil
	case "NFKC":
		return unicodeNormalizer{norm.NFKC}, nil
	case "NFKD":
		return unicodeNormalizer{norm.NFKD}, nil
	case "Prepend":
		return prependNormalizer{v.Prepend}, nil
	case "Strip":
		return stripNormalizer{v.StripLeft, v.StripRight}, nil
	case "Replace":
		n := replaceNormalizer{content: v.Content}
		switch {
		case v.Pattern.String != nil && *v.Pattern.String != "":
			n.lit = *v.Pattern.String
		case v.Pattern.Regex != nil:
			if n.re, err = compileRegex(*v.Pattern.Regex, "normalizer: Replace"); err != nil {
				return nil, fmt.Errorf("Replace: %w", err)
			}
		default:
			return nil, errors.New("Replace: pattern needs a non-empty String or a Regex")
		}
		return n, nil
	case "Sequence":
		seq := sequenceNormalizer{}
		for i, r := range v.Normalizers {
			n, err := parseNormalizer(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			seq = append(seq, n)
		}
		return seq, nil
	}
	return nil, unknownType(typ, "BertNormalizer", "StripAccents", "Lowercase", "Nmt", "Precompiled", "ByteLevel")
}

type metaspaceJSON struct {
	Replacement    string  `json:"replacement"`
	PrependScheme  *string `json:"prepend_scheme"`
	AddPrefixSpace *bool   `json:"add_prefix_space"`
	Split          *bool   `json:"split"`
}

func (m metaspaceJSON) parse() (rune, prependScheme, bool, error) {
	r, n := utf8.DecodeRuneInString(m.Replacement)
	if m.Replacement == "" || n != len(m.Replacement) {
		return 0, 0, false, fmt.Errorf("Metaspace: replacement %q is not one character", m.Replacement)
	}
	scheme := prependAlways
	if m.PrependScheme != nil {
		switch *m.PrependScheme {
		case "always":
		case "first":
			scheme = prependFirst
		case "never":
			scheme = prependNever
		default:
			return 0, 0, false, fmt.Errorf("Metaspace: unknown prepend_scheme %q", *m.PrependScheme)
		}
	}
	if m.AddPrefixSpace != nil && !*m.AddPrefixSpace {
		if m.PrependScheme != nil && scheme != prependNever {
			return 0, 0, false, errors.New("Metaspace: add_prefix_space does not match prepend_scheme")
		}
		scheme = prependNever
	}
	split := m.Split == nil || *m.Split
	return r, scheme, split, nil
}

// parsePreTokenizer returns the steps of a pre-tokenizer, a Sequence
// flattened.
func parsePreTokenizer(raw []byte) ([]preTokenizer, error) {
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	var v struct {
		Pretokenizers    []json.RawMessage `json:"pretokenizers"`
		Pattern          patternJSON       `json:"pattern"`
		Behavior         string            `json:"behavior"`
		Invert           bool              `json:"invert"`
		AddPrefixSpace   bool              `json:"add_prefix_space"`
		UseRegex         *bool             `json:"use_regex"`
		IndividualDigits bool              `json:"individual_digits"`
		metaspaceJSON
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	switch typ {
	case "Sequence":
		var steps []preTokenizer
		for i, r := range v.Pretokenizers {
			p, err := parsePreTokenizer(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			steps = append(steps, p...)
		}
		return steps, nil
	case "Split":
		m, err := newPatternMatcher(v.Pattern)
		if err != nil {
			return nil, fmt.Errorf("Split: %w", err)
		}
		beh, err := parseBehavior(v.Behavior)
		if err != nil {
			return nil, fmt.Errorf("Split: %w", err)
		}
		return []preTokenizer{&splitPre{m: m, beh: beh, invert: v.Invert}}, nil
	case "ByteLevel":
		return []preTokenizer{&byteLevelPre{addPrefixSpace: v.AddPrefixSpace, useRegex: v.UseRegex == nil || *v.UseRegex, mapBytes: true}}, nil
	case "Digits":
		return []preTokenizer{&digitsPre{individual: v.IndividualDigits}}, nil
	case "Metaspace":
		r, scheme, split, err := v.metaspaceJSON.parse()
		if err != nil {
			return nil, err
		}
		return []preTokenizer{&metaspacePre{rep: string(r), scheme: scheme, split: split}}, nil
	}
	return nil, unknownType(typ, "BertPreTokenizer", "Whitespace", "WhitespaceSplit", "Punctuation",
		"CharDelimiterSplit", "UnicodeScripts", "FixedLength")
}

func parseDecoder(raw []byte) (decoder, error) {
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	var v struct {
		Decoders []json.RawMessage `json:"decoders"`
		Pattern  patternJSON       `json:"pattern"`
		Content  json.RawMessage   `json:"content"`
		Start    int               `json:"start"`
		Stop     int               `json:"stop"`
		metaspaceJSON
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	var content string
	if len(v.Content) > 0 {
		if err := json.Unmarshal(v.Content, &content); err != nil {
			return nil, fmt.Errorf("%s: content: %w", typ, err)
		}
	}
	switch typ {
	case "ByteLevel":
		return byteLevelDecoder{}, nil
	case "ByteFallback":
		return byteFallbackDecoder{}, nil
	case "Fuse":
		return fuseDecoder{}, nil
	case "Strip":
		r, n := utf8.DecodeRuneInString(content)
		if content == "" || n != len(content) {
			return nil, fmt.Errorf("Strip: content %q is not one character", content)
		}
		return stripDecoder{content: r, start: v.Start, stop: v.Stop}, nil
	case "Replace":
		d := replaceDecoder{content: content}
		switch {
		case v.Pattern.String != nil && *v.Pattern.String != "":
			d.lit = *v.Pattern.String
		case v.Pattern.Regex != nil:
			if d.re, err = compileRegex(*v.Pattern.Regex, "decoder: Replace"); err != nil {
				return nil, fmt.Errorf("Replace: %w", err)
			}
		default:
			return nil, errors.New("Replace: pattern needs a non-empty String or a Regex")
		}
		return d, nil
	case "Metaspace":
		r, scheme, _, err := v.metaspaceJSON.parse()
		if err != nil {
			return nil, err
		}
		return metaspaceDecoder{rep: r, never: scheme == prependNever}, nil
	case "Sequence":
		seq := sequenceDecoder{}
		for i, r := range v.Decoders {
			d, err := parseDecoder(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			seq = append(seq, d)
		}
		return seq, nil
	}
	return nil, unknownType(typ, "BPEDecoder", "WordPiece", "CTC")
}

func parsePost(raw []byte) (postProcessor, error) {
	typ, err := typeOf(raw)
	if err != nil {
		return nil, err
	}
	var v struct {
		Processors    []json.RawMessage `json:"processors"`
		Single        []json.RawMessage `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int `json:"ids"`
		} `json:"special_tokens"`
		Sep json.RawMessage `json:"sep"`
		Cls json.RawMessage `json:"cls"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", typ, err)
	}
	switch typ {
	case "ByteLevel":
		return noopPost{}, nil
	case "Sequence":
		seq := sequencePost{}
		for i, r := range v.Processors {
			p, err := parsePost(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			seq = append(seq, p)
		}
		return seq, nil
	case "TemplateProcessing":
		p := &templatePost{}
		for i, r := range v.Single {
			var pc struct {
				SpecialToken *struct{ ID string } `json:"SpecialToken"`
				Sequence     *struct{ ID string } `json:"Sequence"`
			}
			if err := json.Unmarshal(r, &pc); err != nil {
				return nil, fmt.Errorf("TemplateProcessing: single[%d]: %w", i, err)
			}
			switch {
			case pc.Sequence != nil:
				if pc.Sequence.ID == "A" {
					p.pieces = append(p.pieces, templatePiece{sequence: true})
				}
			case pc.SpecialToken != nil:
				st, ok := v.SpecialTokens[pc.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("TemplateProcessing: special token %q missing from special_tokens", pc.SpecialToken.ID)
				}
				p.pieces = append(p.pieces, templatePiece{ids: st.IDs})
			default:
				return nil, fmt.Errorf("TemplateProcessing: single[%d]: want SpecialToken or Sequence", i)
			}
		}
		return p, nil
	case "BertProcessing", "RobertaProcessing":
		cls, err := tokenIDPair(v.Cls)
		if err != nil {
			return nil, fmt.Errorf("%s: cls: %w", typ, err)
		}
		sep, err := tokenIDPair(v.Sep)
		if err != nil {
			return nil, fmt.Errorf("%s: sep: %w", typ, err)
		}
		return &templatePost{pieces: []templatePiece{{ids: []int{cls}}, {sequence: true}, {ids: []int{sep}}}}, nil
	}
	return nil, unknownType(typ)
}

// checkPostIDs checks that the ids a post-processor adds are tokens, so
// that Encode returns only ids below VocabSize that Decode takes. (The Rust
// library would emit any id the file names.)
func (t *Tokenizer) checkPostIDs(p postProcessor) error {
	switch p := p.(type) {
	case *templatePost:
		for _, pc := range p.pieces {
			for _, id := range pc.ids {
				if id < 0 || id >= t.vocabSize || !t.hasTok[id] {
					return fmt.Errorf("special token id %d is not in the vocabulary (%d ids)", id, t.vocabSize)
				}
			}
		}
	case sequencePost:
		for _, x := range p {
			if err := t.checkPostIDs(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// tokenIDPair reads a ["token", id] pair.
func tokenIDPair(raw json.RawMessage) (int, error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return 0, errors.New(`want ["token", id]`)
	}
	var id int
	if err := json.Unmarshal(pair[1], &id); err != nil {
		return 0, err
	}
	return id, nil
}

func parseAddedTokens(raw []byte) ([]addedToken, error) {
	var list []struct {
		addedToken
		ID         *int    `json:"id"`
		Content    *string `json:"content"`
		Normalized *bool   `json:"normalized"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	out := make([]addedToken, len(list))
	for i, x := range list {
		if x.Content == nil {
			return nil, fmt.Errorf("[%d]: missing content", i)
		}
		t := x.addedToken
		t.Content = *x.Content
		t.ID = -1
		if x.ID != nil {
			t.ID = *x.ID
		}
		t.Normalized = !t.Special
		if x.Normalized != nil {
			t.Normalized = *x.Normalized
		}
		out[i] = t
	}
	return out, nil
}

// parseModel reads a BPE model. The vocabulary and merges go through
// jsonReader; the merges are resolved once every field is known.
func parseModel(r *jsonReader) (*bpeModel, error) {
	m := &bpeModel{unkID: -1, cache: newWordCache()}
	for i := range m.byteIDs {
		m.byteIDs[i] = -1
	}
	var (
		typ       *string
		mergesRaw []byte
		haveVocab bool
		maxID     int32 = -1
		prefix    *string
		suffix    *string
		unk       *string
		small     = map[string]*bool{"fuse_unk": &m.fuseUnk, "byte_fallback": &m.byteFallback, "ignore_merges": &m.ignoreMerges}
		strs      = map[string]**string{"type": &typ, "continuing_subword_prefix": &prefix, "end_of_word_suffix": &suffix, "unk_token": &unk}
	)
	sawPrefix, parsedMerges := false, false
	err := r.object(func(key string) error {
		if key == "continuing_subword_prefix" {
			sawPrefix = true
		}
		if (key == "vocab" || key == "merges") && typ != nil && *typ != "BPE" {
			return unknownType(*typ, "WordPiece", "WordLevel", "Unigram")
		}
		switch {
		case key == "vocab":
			haveVocab = true
			m.vocab = make(map[string]int32)
			err := r.object(func(tok string) error {
				id, err := r.integer()
				if err != nil {
					return err
				}
				if id < 0 || id > 1<<31-1 {
					return r.errorf("bad id %d", id)
				}
				m.vocab[tok] = int32(id)
				maxID = max(maxID, int32(id))
				return nil
			})
			if err != nil {
				return fmt.Errorf("vocab: %w", err)
			}
			return nil
		case key == "merges":
			if haveVocab && sawPrefix {
				// The usual order: everything the merges need is known,
				// so they are read in place.
				parsedMerges = true
				return m.parseMerges(r)
			}
			var err error
			mergesRaw, err = r.rawValue()
			return err
		case small[key] != nil:
			v, err := r.rawValue()
			if err != nil {
				return err
			}
			if isNull(v) {
				return nil
			}
			if err := json.Unmarshal(v, small[key]); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			return nil
		case strs[key] != nil:
			v, err := r.rawValue()
			if err != nil {
				return err
			}
			if err := json.Unmarshal(v, strs[key]); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			if key == "continuing_subword_prefix" && prefix != nil {
				m.prefix = *prefix
			}
			return nil
		}
		return r.skip()
	})
	if err != nil {
		return nil, err
	}
	if typ != nil && *typ != "BPE" {
		return nil, unknownType(*typ, "WordPiece", "WordLevel", "Unigram")
	}
	if typ == nil && mergesRaw == nil && !parsedMerges {
		return nil, errors.New(`missing "type"`)
	}
	if !haveVocab {
		return nil, errors.New("BPE: missing vocab")
	}
	if prefix != nil {
		m.prefix = *prefix
	}
	if suffix != nil {
		m.suffix = *suffix
	}
	if unk != nil {
		m.unkToken = *unk
		if id, ok := m.vocab[*unk]; ok {
			m.unkID = id
		}
	}
	if int(maxID) >= 4*len(m.vocab)+1<<16 {
		return nil, fmt.Errorf("BPE: vocab ids up to %d for %d tokens", maxID, len(m.vocab))
	}
	m.vocabR = make([]string, maxID+1)
	m.hasTok = make([]bool, maxID+1)
	for tok, id := range m.vocab {
		m.vocabR[id] = tok
		m.hasTok[id] = true
	}
	for b := 0; b < 256; b++ {
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = id
		}
	}
	switch {
	case parsedMerges:
	case mergesRaw == nil:
		return nil, errors.New("BPE: missing merges")
	default:
		if err := m.parseMerges(&jsonReader{data: mergesRaw}); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parseMerges reads merges in either format: "a b" strings or ["a", "b"]
// pairs. As in Rust, a later duplicate of a pair overrides its rank.
func (m *bpeModel) parseMerges(r *jsonReader) error {
	if err := m.readMerges(r); err != nil {
		return fmt.Errorf("merges: %w", err)
	}
	return nil
}

func (m *bpeModel) readMerges(r *jsonReader) error {
	if err := r.expect('['); err != nil {
		return err
	}
	// Size the map from a quick count of the quotes that follow: four per
	// pair, two per "a b" string.
	n := bytes.Count(r.data[r.pos:], []byte{'"'})
	if r.peek() == '[' {
		n /= 4
	} else {
		n /= 2
	}
	m.merges = make(map[uint64]uint64, n)
	var left, key []byte
	rank := 0
	if r.peek() == ']' {
		r.pos++
		return nil
	}
	for ; ; rank++ {
		var a, b []byte
		switch r.peek() {
		case '"':
			s, err := r.str()
			if err != nil {
				return err
			}
			i := bytes.IndexByte(s, ' ')
			if i < 0 || bytes.IndexByte(s[i+1:], ' ') >= 0 {
				return fmt.Errorf("[%d]: %q is not two tokens separated by a space", rank, s)
			}
			left = append(left[:0], s[:i]...)
			a, b = left, s[i+1:]
		case '[':
			r.pos++
			s, err := r.str()
			if err != nil {
				return fmt.Errorf("[%d]: %w", rank, err)
			}
			left = append(left[:0], s...)
			if err := r.expect(','); err != nil {
				return fmt.Errorf("[%d]: %w", rank, err)
			}
			if b, err = r.str(); err != nil {
				return fmt.Errorf("[%d]: %w", rank, err)
			}
			if err := r.expect(']'); err != nil {
				return fmt.Errorf("[%d]: want a pair: %w", rank, err)
			}
			a = left
		default:
			return fmt.Errorf("[%d]: %w", rank, r.errorf("want a string or a pair"))
		}
		aID, ok := m.vocab[string(a)]
		if !ok {
			return fmt.Errorf("[%d]: token %q not in vocab", rank, a)
		}
		bID, ok := m.vocab[string(b)]
		if !ok {
			return fmt.Errorf("[%d]: token %q not in vocab", rank, b)
		}
		if len(b) < len(m.prefix) {
			return fmt.Errorf("[%d]: token %q is shorter than continuing_subword_prefix", rank, b)
		}
		key = append(append(key[:0], a...), b[len(m.prefix):]...)
		newID, ok := m.vocab[string(key)]
		if !ok {
			return fmt.Errorf("[%d]: merged token %q not in vocab", rank, key)
		}
		m.merges[pairKey(aID, bID)] = uint64(rank)<<32 | uint64(uint32(newID))
		if r.peek() == ',' {
			r.pos++
			continue
		}
		return r.expect(']')
	}
}

// buildAdded registers the added tokens as Rust's AddedVocabulary does:
// a token already in the model keeps the model's id, a new one gets the
// next free id; special tokens are matched before the others.
func (t *Tokenizer) buildAdded(tokens []addedToken) error {
	m := t.model
	addedIDs := map[string]int{}
	byID := map[int]addedToken{}
	seen := map[addedToken]bool{}
	specialSet := map[string]bool{}
	var specials, others []addedToken
	for _, tok := range tokens {
		if tok.Special && tok.Content != "" && !specialSet[tok.Content] {
			specials = append(specials, tok)
			specialSet[tok.Content] = true
		}
	}
	maxAdded := -1
	for _, tok := range tokens {
		key := tok
		key.ID = 0
		if tok.Content == "" || seen[key] {
			continue
		}
		seen[key] = true
		id, ok := addedIDs[tok.Content]
		if !ok {
			if v, ok2 := m.vocab[tok.Content]; ok2 {
				id, ok = int(v), true
			}
		}
		if !ok {
			size := len(m.vocab)
			switch {
			case maxAdded < 0:
				id = size
			case maxAdded >= size || size == 0:
				id = maxAdded + 1
			default:
				id = size
			}
		}
		addedIDs[tok.Content] = id
		maxAdded = max(maxAdded, id)
		byID[id] = tok
		if !specialSet[tok.Content] {
			others = append(others, tok)
		}
	}

	av := &addedVocab{raw: newTrie(), normalized: newTrie()}
	// The normalizer runs on the normalized tokens under one set of
	// limits, as for an Encode of them all.
	n := 0
	for _, tok := range tokens {
		n += len(tok.Content)
	}
	lim := newLimits(t.regexTimeout, n)
	for _, tok := range append(specials, others...) {
		id := addedIDs[tok.Content]
		info := byID[id]
		info.ID = id
		k := int32(len(av.tokens))
		av.tokens = append(av.tokens, info)
		if !tok.Normalized {
			av.raw.add(tok.Content, k)
			continue
		}
		pat := tok.Content
		if t.normalizer != nil {
			var err error
			if pat, err = t.normalizer.normalize(pat, &lim); err != nil {
				return fmt.Errorf("normalizing %q: %w", tok.Content, err)
			}
		}
		av.normalized.add(pat, k)
	}
	av.raw.finish()
	av.normalized.finish()
	t.added = av

	// The id space: model ids and added ids.
	size := len(m.vocabR)
	for id := range byID {
		size = max(size, id+1)
	}
	t.vocabSize = size
	t.idTok = make([]string, size)
	t.hasTok = make([]bool, size)
	copy(t.idTok, m.vocabR)
	copy(t.hasTok, m.hasTok)
	for id, tok := range byID {
		t.idTok[id] = tok.Content
		t.hasTok[id] = true
	}
	t.addedIDs = addedIDs
	// Decoding skips an id when its token's text is a special token's.
	t.special = make([]bool, size)
	for c := range specialSet {
		if id, ok := addedIDs[c]; ok && t.idTok[id] == c {
			t.special[id] = true
		}
		if v, ok := m.vocab[c]; ok && t.idTok[v] == c {
			t.special[v] = true
		}
	}
	return nil
}
