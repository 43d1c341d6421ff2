package tokenizer

import (
	"fmt"
	"sort"
	"strings"
)

// This file builds a Tokenizer from the tokenizer.ggml.* metadata of a GGUF
// file, with llama.cpp's semantics (src/llama-vocab.cpp,
// llama_vocab::impl::load and tokenize): the same BPE model, pre-tokenizer
// steps, byte-level mapping and decoder as a tokenizer.json tokenizer, built
// from different inputs. What differs from Hugging Face is spelled out where
// it is decided:
//
//   - no normalizer: llama.cpp applies none (Qwen3's tokenizer.json has NFC);
//   - the pre-tokenizer comes from tokenizer.ggml.pre (gguf_pre.go);
//   - control, user-defined and unknown tokens are matched in the text
//     longest first, each over the whole text, as tokenizer_st_partition does
//     (gguf_special.go), and some tokens become control tokens by their text
//     (e.g. "</s>", "<|im_end|>");
//   - a duplicated merge keeps its first rank (HF keeps the last);
//   - with addSpecial, BOS/EOS are added per add_bos_token/add_eos_token.

// GGUF token types (tokenizer.ggml.token_type), llama.cpp's
// llama_token_type.
const (
	ggufTypeUndefined   = 0
	ggufTypeNormal      = 1
	ggufTypeUnknown     = 2
	ggufTypeControl     = 3
	ggufTypeUserDefined = 4
	ggufTypeUnused      = 5
	ggufTypeByte        = 6
)

// ggufAttr is a token's attribute set, after llama.cpp's llama_token_attr
// (only the bits used here).
type ggufAttr uint16

const (
	attrUnknown ggufAttr = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrLStrip
	attrRStrip
)

// The metadata keys read here.
const (
	ggufKeyModel        = "tokenizer.ggml.model"
	ggufKeyPre          = "tokenizer.ggml.pre"
	ggufKeyTokens       = "tokenizer.ggml.tokens"
	ggufKeyTokenType    = "tokenizer.ggml.token_type"
	ggufKeyMerges       = "tokenizer.ggml.merges"
	ggufKeyAddBOS       = "tokenizer.ggml.add_bos_token"
	ggufKeyAddEOS       = "tokenizer.ggml.add_eos_token"
	ggufKeyChatTemplate = "tokenizer.chat_template"
	ggufKeyName         = "general.name"
	ggufKeyArch         = "general.architecture"
)

// Indexes of the special token ids llama.cpp keeps.
const (
	spBOS = iota
	spEOS
	spEOT
	spEOM
	spUNK
	spSEP
	spPAD
	spMASK
	spFIMPre
	spFIMSuf
	spFIMMid
	spFIMPad
	spFIMRep
	spFIMSep
	numSpecialIDs
)

// ggufSpecialKeys lists the id keys in the order llama.cpp reads them; a
// later key overrides an earlier one (the deprecated prefix/suffix/middle
// keys come last).
var ggufSpecialKeys = []struct {
	key string
	sp  int
}{
	{"tokenizer.ggml.bos_token_id", spBOS},
	{"tokenizer.ggml.eos_token_id", spEOS},
	{"tokenizer.ggml.eot_token_id", spEOT},
	{"tokenizer.ggml.eom_token_id", spEOM},
	{"tokenizer.ggml.unknown_token_id", spUNK},
	{"tokenizer.ggml.seperator_token_id", spSEP}, // sic: llama.cpp's spelling
	{"tokenizer.ggml.padding_token_id", spPAD},
	{"tokenizer.ggml.mask_token_id", spMASK},
	{"tokenizer.ggml.fim_pre_token_id", spFIMPre},
	{"tokenizer.ggml.fim_suf_token_id", spFIMSuf},
	{"tokenizer.ggml.fim_mid_token_id", spFIMMid},
	{"tokenizer.ggml.fim_pad_token_id", spFIMPad},
	{"tokenizer.ggml.fim_rep_token_id", spFIMRep},
	{"tokenizer.ggml.fim_sep_token_id", spFIMSep},
	{"tokenizer.ggml.prefix_token_id", spFIMPre},
	{"tokenizer.ggml.suffix_token_id", spFIMSuf},
	{"tokenizer.ggml.middle_token_id", spFIMMid},
}

// ggufVocab is what FromGGUFMetadata learns from the metadata before it
// builds the Tokenizer.
type ggufVocab struct {
	tokens  []string
	attr    []ggufAttr
	ids     map[string]int32
	special [numSpecialIDs]int // -1: none
	addBOS  bool
	addEOS  bool
	pre     ggufPreSpec
}

// FromGGUFMetadata builds a Tokenizer from the tokenizer metadata of a GGUF
// file, as llama.cpp reads it: tokenizer.ggml.model, tokenizer.ggml.pre,
// tokenizer.ggml.tokens, tokenizer.ggml.token_type, tokenizer.ggml.merges,
// the special token ids (tokenizer.ggml.bos_token_id, eos_token_id,
// padding_token_id, ...), tokenizer.ggml.add_bos_token,
// tokenizer.ggml.add_eos_token and tokenizer.chat_template. name is the
// file, used in errors.
//
// meta holds the file's key-value pairs as a GGUF reader returns them:
// scalars as their sized Go types (uint8 ... int64, float32, float64, bool,
// string), arrays as typed slices ([]string for the tokens and merges,
// []int32 for the token types). Ids and token types may come as any integer
// type.
//
// The result encodes as llama.cpp's llama_tokenize(text, add_special,
// parse_special=true) does: control, user-defined and unknown tokens written
// in the text are matched, and no normalizer runs (llama.cpp has none for
// these vocabularies). Encode's addSpecial adds the BOS and EOS tokens that
// add_bos_token and add_eos_token ask for. Decode skips control and unknown
// tokens with skipSpecial. Config reports the special tokens, the add flags
// and the chat template.
//
// Only tokenizer.ggml.model "gpt2" (byte-level BPE) is supported, with the
// pre-tokenizers whose splitting rules are implemented exactly (see
// GGUFPreTokenizers); "llama" (SentencePiece) and other models are errors
// that name the model and the file. Malformed metadata (a missing key, a
// wrong type, arrays of different lengths, merges that name unknown tokens)
// is an error that names the key and the file.
func FromGGUFMetadata(name string, meta map[string]any) (*Tokenizer, error) {
	t, err := fromGGUFMetadata(meta)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	return t, nil
}

func fromGGUFMetadata(meta map[string]any) (*Tokenizer, error) {
	model, ok, err := metaString(meta, ggufKeyModel)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s: missing (no tokenizer in this file)", ggufKeyModel)
	}
	switch model {
	case "gpt2":
	case "llama":
		return nil, fmt.Errorf(`%s %q (SentencePiece) is not supported: only "gpt2" (byte-level BPE) is`, ggufKeyModel, model)
	default:
		return nil, fmt.Errorf(`%s %q is not supported: only "gpt2" (byte-level BPE) is`, ggufKeyModel, model)
	}
	preName, _, err := metaString(meta, ggufKeyPre)
	if err != nil {
		return nil, err
	}
	pre, err := ggufPre(preName)
	if err != nil {
		return nil, err
	}

	v := &ggufVocab{pre: pre}
	if err := v.readTokens(meta); err != nil {
		return nil, err
	}
	merges, ok, err := metaStrings(meta, ggufKeyMerges)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s: missing (a gpt2 tokenizer needs its merges)", ggufKeyMerges)
	}
	if err := v.readSpecialIDs(meta); err != nil {
		return nil, err
	}
	v.retypeByText()
	if err := v.setStripAttrs(meta); err != nil {
		return nil, err
	}

	m, err := v.bpeModel(merges)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{
		model:     m,
		pre:       pre.steps(),
		byteLevel: true,
		decoder:   byteLevelDecoder{},
		vocabSize: len(v.tokens),
		idTok:     v.tokens,
		hasTok:    m.hasTok,
		special:   make([]bool, len(v.tokens)),
		addedIDs:  map[string]int{},
	}
	for id, a := range v.attr {
		t.special[id] = a&(attrControl|attrUnknown) != 0
	}
	t.added = v.specials(t.addedIDs)
	if v.addBOS || v.addEOS {
		p := &templatePost{}
		if v.addBOS {
			p.pieces = append(p.pieces, templatePiece{ids: []int{v.special[spBOS]}})
		}
		p.pieces = append(p.pieces, templatePiece{sequence: true})
		if v.addEOS {
			p.pieces = append(p.pieces, templatePiece{ids: []int{v.special[spEOS]}})
		}
		t.post = p
	}
	tmpl, _, err := metaString(meta, ggufKeyChatTemplate)
	if err != nil {
		return nil, err
	}
	t.cfg = Config{
		BOSToken:     v.tokenText(spBOS),
		EOSToken:     v.tokenText(spEOS),
		PADToken:     v.tokenText(spPAD),
		UNKToken:     v.tokenText(spUNK),
		AddBOSToken:  v.addBOS,
		AddEOSToken:  v.addEOS,
		ChatTemplate: tmpl,
	}
	return t, nil
}

// readTokens reads the vocabulary and the token types. As in llama.cpp an
// empty token is renamed "[EMPTY_<id>]" and a duplicate is an error; a
// missing token_type array makes every token normal.
func (v *ggufVocab) readTokens(meta map[string]any) error {
	toks, ok, err := metaStrings(meta, ggufKeyTokens)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: missing", ggufKeyTokens)
	}
	if len(toks) == 0 {
		return fmt.Errorf("%s: empty vocabulary", ggufKeyTokens)
	}
	if len(toks) > 1<<31-1 {
		return fmt.Errorf("%s: %d tokens is too many", ggufKeyTokens, len(toks))
	}
	types, haveTypes, err := metaInts(meta, ggufKeyTokenType)
	if err != nil {
		return err
	}
	if haveTypes && len(types) < len(toks) {
		return fmt.Errorf("%s: %d types for %d tokens in %s", ggufKeyTokenType, len(types), len(toks), ggufKeyTokens)
	}
	v.tokens = make([]string, len(toks))
	v.attr = make([]ggufAttr, len(toks))
	v.ids = make(map[string]int32, len(toks))
	for i, tok := range toks {
		if tok == "" {
			tok = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if prev, dup := v.ids[tok]; dup {
			return fmt.Errorf("%s: duplicate token %q at ids %d and %d", ggufKeyTokens, tok, prev, i)
		}
		v.ids[tok] = int32(i)
		v.tokens[i] = tok
		a := attrNormal
		if haveTypes {
			switch types[i] {
			case ggufTypeNormal:
			case ggufTypeUnknown:
				a = attrUnknown
			case ggufTypeControl:
				a = attrControl
			case ggufTypeUserDefined:
				a = attrUserDefined
			case ggufTypeUnused:
				a = attrUnused
			case ggufTypeByte:
				a = attrByte
			case ggufTypeUndefined:
				a = 0
			default: // values llama.cpp does not know count as undefined
				a = 0
			}
		}
		v.attr[i] = a
	}
	return nil
}

// readSpecialIDs reads the special token ids and the add_bos/add_eos flags.
// As in llama.cpp a gpt2 vocabulary defaults BOS and EOS to id 11, a default
// outside the vocabulary means none, and an id key outside the vocabulary is
// ignored (llama.cpp warns and keeps the default).
func (v *ggufVocab) readSpecialIDs(meta map[string]any) error {
	for i := range v.special {
		v.special[i] = -1
	}
	v.special[spBOS], v.special[spEOS] = 11, 11
	if v.pre.noBOS {
		v.special[spBOS] = -1
	}
	n := len(v.tokens)
	for i := range v.special {
		if v.special[i] >= n {
			v.special[i] = -1
		}
	}
	for _, k := range ggufSpecialKeys {
		id, ok, err := metaInt(meta, k.key)
		if err != nil {
			return err
		}
		if ok && id >= 0 && id < int64(n) {
			v.special[k.sp] = int(id)
		}
	}
	v.addBOS = v.pre.addBOS
	if b, ok, err := metaBool(meta, ggufKeyAddBOS); err != nil {
		return err
	} else if ok {
		v.addBOS = b
	}
	if b, ok, err := metaBool(meta, ggufKeyAddEOS); err != nil {
		return err
	} else if ok {
		v.addEOS = b
	}
	if v.addBOS && v.special[spBOS] < 0 {
		return fmt.Errorf("%s is true, but tokenizer.ggml.bos_token_id is not set", ggufKeyAddBOS)
	}
	if v.addEOS && v.special[spEOS] < 0 {
		return fmt.Errorf("%s is true, but tokenizer.ggml.eos_token_id is not set", ggufKeyAddEOS)
	}
	return nil
}

func (v *ggufVocab) tokenText(sp int) string {
	if id := v.special[sp]; id >= 0 {
		return v.tokens[id]
	}
	return ""
}

// bpeModel builds the BPE model: every token is in the model's vocabulary
// (llama.cpp's text_to_token sees them all), merges are "left right" with
// rank = index. A merge whose parts or result are not tokens is an error:
// llama.cpp would merge such text anyway and then fall back to bytes, which
// an id-based model cannot reproduce, and no converted file has one.
func (v *ggufVocab) bpeModel(merges []string) (*bpeModel, error) {
	n := len(v.tokens)
	m := &bpeModel{
		vocab:        v.ids,
		vocabR:       v.tokens,
		hasTok:       make([]bool, n),
		merges:       make(map[uint64]uint64, len(merges)),
		unkID:        -1,
		ignoreMerges: v.pre.ignoreMerges,
		cache:        newWordCache(),
	}
	for i := range m.hasTok {
		m.hasTok[i] = true
	}
	for i := range m.byteIDs {
		m.byteIDs[i] = -1
	}
	if len(merges) > 1<<31-1 {
		return nil, fmt.Errorf("%s: %d merges is too many", ggufKeyMerges, len(merges))
	}
	for rank, s := range merges {
		// llama.cpp splits at the first space after the first byte.
		k := -1
		if len(s) > 1 {
			if j := strings.IndexByte(s[1:], ' '); j >= 0 {
				k = j + 1
			}
		}
		if k < 0 {
			return nil, fmt.Errorf("%s[%d]: %q is not two tokens separated by a space", ggufKeyMerges, rank, s)
		}
		a, b := s[:k], s[k+1:]
		aID, ok := v.ids[a]
		if !ok {
			return nil, fmt.Errorf("%s[%d]: token %q is not in %s", ggufKeyMerges, rank, a, ggufKeyTokens)
		}
		bID, ok := v.ids[b]
		if !ok {
			return nil, fmt.Errorf("%s[%d]: token %q is not in %s", ggufKeyMerges, rank, b, ggufKeyTokens)
		}
		newID, ok := v.ids[a+b]
		if !ok {
			return nil, fmt.Errorf("%s[%d]: merged token %q is not in %s", ggufKeyMerges, rank, a+b, ggufKeyTokens)
		}
		key := pairKey(aID, bID)
		if _, dup := m.merges[key]; dup {
			continue // llama.cpp's bpe_ranks.emplace keeps the first rank
		}
		m.merges[key] = uint64(rank)<<32 | uint64(uint32(newID))
	}
	return m, nil
}

// specials returns the added vocabulary of a GGUF tokenizer: the control,
// user-defined and unknown tokens, which llama.cpp matches in the raw text
// before anything else (its special tokens cache), longest first. It fills
// addedIDs with them.
func (v *ggufVocab) specials(addedIDs map[string]int) *addedVocab {
	var ids []int
	for id, a := range v.attr {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			ids = append(ids, id)
		}
	}
	// llama.cpp sorts by length only (std::sort, so equal lengths come in
	// no defined order); equal lengths go by id here.
	sort.SliceStable(ids, func(i, j int) bool { return len(v.tokens[ids[i]]) > len(v.tokens[ids[j]]) })
	av := &addedVocab{raw: newTrie(), normalized: newTrie()}
	sp := &ggufSpecials{trie: av.raw}
	for k, id := range ids {
		a := v.attr[id]
		tok := v.tokens[id]
		av.tokens = append(av.tokens, addedToken{
			ID:      id,
			Content: tok,
			LStrip:  a&attrLStrip != 0,
			RStrip:  a&attrRStrip != 0,
			Special: a&(attrControl|attrUnknown) != 0,
		})
		av.raw.add(tok, int32(k))
		addedIDs[tok] = id
	}
	sp.tokens = av.tokens
	av.raw.finish()
	av.normalized.finish()
	av.partition = sp.partition
	return av
}
