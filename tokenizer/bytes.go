package tokenizer

import (
	"unicode/utf8"
)

// GPT-2 byte-level alphabet: every byte gets a printable stand-in rune so
// that a byte string can be written as text. Printable Latin-1 bytes stand
// for themselves; the other 68 bytes are mapped, in order, to U+0100....
var (
	byteToRune [256]rune
	// byteToUTF8 holds the UTF-8 encoding of byteToRune[b] (1 or 2 bytes).
	byteToUTF8 [256]struct {
		n int
		b [2]byte
	}
	// runeToByte maps a stand-in rune back to its byte; -1 when the rune is
	// not part of the alphabet. Every stand-in is below 0x144.
	runeToByte [0x144]int16
)

func init() {
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !printable(b) {
			r = rune(256 + n)
			n++
		}
		byteToRune[b] = r
		runeToByte[r] = int16(b)
		var buf [4]byte
		k := utf8.EncodeRune(buf[:], r)
		byteToUTF8[b].n = k
		copy(byteToUTF8[b].b[:], buf[:k])
	}
}

// appendByteLevel appends the byte-level spelling of s to dst.
func appendByteLevel(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		e := &byteToUTF8[s[i]]
		if e.n == 1 {
			dst = append(dst, e.b[0])
		} else {
			dst = append(dst, e.b[0], e.b[1])
		}
	}
	return dst
}

// appendByteLevelToken appends the bytes a byte-level token stands for. As
// in Hugging Face's ByteLevel decoder, a token holding any rune outside the
// alphabet (an added token such as "<|im_start|> " with a real space) is
// copied as its raw UTF-8 instead.
func appendByteLevelToken(dst []byte, tok string) []byte {
	start := len(dst)
	for _, r := range tok {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return append(dst[:start], tok...)
		}
		dst = append(dst, byte(runeToByte[r]))
	}
	return dst
}

// appendLossy appends b to dst, replacing every ill-formed sequence by
// U+FFFD the way Rust's String::from_utf8_lossy does (one replacement per
// maximal subpart, the Unicode/WHATWG practice). Go's own helpers either
// replace byte by byte or collapse whole runs, so this is written by hand.
func appendLossy(dst []byte, b []byte) []byte {
	if utf8.Valid(b) {
		return append(dst, b...)
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			dst = append(dst, c)
			i++
			continue
		}
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			need = 2
		case c == 0xED:
			need, hi = 2, 0x9F
		case c == 0xF0:
			need, lo = 3, 0x90
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		case c == 0xF4:
			need, hi = 3, 0x8F
		default:
			dst = append(dst, "\uFFFD"...)
			i++
			continue
		}
		j := i + 1
		ok := true
		for k := 0; k < need; k++ {
			if j >= len(b) || b[j] < lo || b[j] > hi {
				ok = false
				break
			}
			lo, hi = 0x80, 0xBF
			j++
		}
		if ok {
			dst = append(dst, b[i:j]...)
		} else {
			dst = append(dst, "\uFFFD"...)
		}
		i = j
	}
	return dst
}

// lossyString is appendLossy for a string.
func lossyString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string(appendLossy(nil, []byte(s)))
}
