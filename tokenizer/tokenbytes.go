package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// TokenBytes returns the bytes that id stands for in the middle of a
// decoded text: what Decode adds for it between other tokens, before the
// repair of invalid UTF-8. A byte-level token or a byte-fallback token
// such as <0xE4> gives its raw byte, even when it is only part of a UTF-8
// character; a SentencePiece "▁" gives a space (the decoders that drop it
// at the start of the text, Metaspace's first token and a Strip after
// Fuse, act only at the text's edges and are left out); an added token
// gives its content. It is what constrained decoding (package grammar)
// matches tokens by. ok is false for an id with no token.
func (t *Tokenizer) TokenBytes(id int) (b []byte, ok bool) {
	if id < 0 || id >= t.vocabSize || !t.hasTok[id] {
		return nil, false
	}
	tok := t.idTok[id]
	if t.decoder == nil {
		return []byte(tok), true
	}
	l := newLimits(t.regexTimeout, len(tok))
	s, _ := rawDecode(t.decoder, tok, false, &l)
	return []byte(s), true
}

// rawDecode runs one token through the decoder chain the way it decodes
// in the middle of a text, keeping bytes that are not UTF-8. fused says a
// Fuse came earlier in the chain: the decoders after it see the whole
// text, so their edge rules (Strip) do not touch a token in the middle.
func rawDecode(d decoder, tok string, fused bool, l *limits) (string, bool) {
	switch d := d.(type) {
	case byteLevelDecoder:
		return string(appendByteLevelToken(nil, tok)), fused
	case byteFallbackDecoder:
		if b, ok := byteToken(tok); ok {
			return string([]byte{b}), fused
		}
		return tok, fused
	case fuseDecoder:
		return tok, true
	case stripDecoder:
		if fused {
			return tok, fused
		}
		c := string(d.content)
		for i := 0; i < d.start && strings.HasPrefix(tok, c); i++ {
			tok = tok[len(c):]
		}
		for i := 0; i < d.stop && strings.HasSuffix(tok, c); i++ {
			tok = tok[:len(tok)-len(c)]
		}
		return tok, fused
	case replaceDecoder:
		var s string
		var err error
		if d.re == nil {
			s, err = replaceLiteral(tok, d.lit, d.content, "decoder: Replace", l)
		} else if utf8.ValidString(tok) {
			s, err = d.re.replace(tok, d.content, "decoder: Replace", l)
		} else {
			s = tok // a regex sees runes; leave a partial character alone
		}
		if err != nil {
			return tok, fused
		}
		return s, fused
	case metaspaceDecoder:
		return strings.ReplaceAll(tok, string(d.rep), " "), fused
	case sequenceDecoder:
		for _, x := range d {
			tok, fused = rawDecode(x, tok, fused, l)
		}
		return tok, fused
	}
	return tok, fused
}
