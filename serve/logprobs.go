package serve

import (
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gozoo/gozoo/zoo/generate"
)

// tokenBytes gives a token's own bytes: for a byte-level vocabulary
// (GPT-2's alphabet, Qwen3's, SmolLM's) and byte-fallback tokens
// (<0xE2>) the exact bytes it stands for, even half a UTF-8 character;
// for others its decoded text.
type tokenBytes struct {
	tok   generate.Tokenizer
	cache sync.Map // int -> []byte
}

// idTokener is the zoo tokenizer's lookup of a token's spelling.
type idTokener interface {
	IDToken(id int) (string, bool)
}

func (t *tokenBytes) bytes(id int) []byte {
	if v, ok := t.cache.Load(id); ok {
		return v.([]byte)
	}
	b := t.compute(id)
	t.cache.Store(id, b)
	return b
}

func (t *tokenBytes) compute(id int) []byte {
	if t.tok == nil {
		return nil
	}
	text, err := t.tok.Decode([]int{id}, false)
	if err != nil {
		return nil
	}
	if !strings.ContainsRune(text, utf8.RuneError) {
		return []byte(text)
	}
	// The token is part of a character: its spelling says which bytes.
	if it, ok := t.tok.(idTokener); ok {
		if s, ok := it.IDToken(id); ok {
			if b, ok := byteFallback(s); ok {
				return []byte{b}
			}
			if b, ok := byteLevel(s); ok {
				return b
			}
		}
	}
	return []byte(text)
}

// byteFallback reads a SentencePiece byte token, "<0xE2>".
func byteFallback(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	v := 0
	for _, c := range s[3:5] {
		switch {
		case '0' <= c && c <= '9':
			v = v*16 + int(c-'0')
		case 'a' <= c && c <= 'f':
			v = v*16 + int(c-'a') + 10
		case 'A' <= c && c <= 'F':
			v = v*16 + int(c-'A') + 10
		default:
			return 0, false
		}
	}
	return byte(v), true
}

// byteLevelRunes maps GPT-2's byte-level alphabet back to bytes.
var byteLevelRunes = func() map[rune]byte {
	m := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			m[rune(b)] = byte(b)
		} else {
			m[rune(256+n)] = byte(b)
			n++
		}
	}
	return m
}()

// byteLevel reads a byte-level token's bytes; false when a rune is
// outside the alphabet.
func byteLevel(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		b, ok := byteLevelRunes[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}

// finiteLogprob is a log-probability JSON can carry: -Inf (a token the
// model rules out) and NaN become -9999, as OpenAI writes them.
func finiteLogprob(v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return -9999
	}
	return v
}

// chatLogprob is one token of a chat choice's logprobs.content.
type chatLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func intBytes(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// chatLogprobOf is tok's entry for logprobs.content.
func (s *Server) chatLogprobOf(tok generate.Token) chatLogprob {
	b := s.bytes.bytes(tok.ID)
	lp := chatLogprob{Token: string(b), Logprob: finiteLogprob(tok.Logprob), Bytes: intBytes(b), TopLogprobs: []chatTopLogprob{}}
	for _, t := range tok.TopLogprobs {
		tb := s.bytes.bytes(t.ID)
		lp.TopLogprobs = append(lp.TopLogprobs, chatTopLogprob{Token: string(tb), Logprob: finiteLogprob(t.Logprob), Bytes: intBytes(tb)})
	}
	return lp
}
