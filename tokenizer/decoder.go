package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// decoder turns token strings back into text. Like Hugging Face's
// Decoder::decode_chain it maps a list of strings to a list of strings;
// the results are concatenated at the end. l bounds the regex time and
// the growth of the text.
type decoder interface {
	decodeChain(toks []string, l *limits) ([]string, error)
}

// byteLevelDecoder maps byte-level runes back to bytes across all tokens
// at once, then repairs invalid UTF-8 with U+FFFD.
type byteLevelDecoder struct{}

func (byteLevelDecoder) decodeChain(toks []string, _ *limits) ([]string, error) {
	n := 0
	for _, t := range toks {
		n += len(t)
	}
	b := make([]byte, 0, n)
	for _, t := range toks {
		b = appendByteLevelToken(b, t)
	}
	if utf8.Valid(b) {
		return []string{string(b)}, nil
	}
	return []string{string(appendLossy(nil, b))}, nil
}

// byteFallbackDecoder turns runs of "<0xXX>" tokens into the bytes they
// stand for; a run that is not valid UTF-8 gives one U+FFFD per byte.
type byteFallbackDecoder struct{}

func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	// Rust's u8::from_str_radix, which also takes a leading '+'.
	h := t[3:5]
	if h[0] == '+' {
		h = h[1:]
	}
	v := 0
	for i := 0; i < len(h); i++ {
		c := h[i]
		var d int
		switch {
		case '0' <= c && c <= '9':
			d = int(c - '0')
		case 'a' <= c && c <= 'f':
			d = int(c-'a') + 10
		case 'A' <= c && c <= 'F':
			d = int(c-'A') + 10
		default:
			return 0, false
		}
		v = v*16 + d
	}
	return byte(v), true
}

func (byteFallbackDecoder) decodeChain(toks []string, _ *limits) ([]string, error) {
	out := make([]string, 0, len(toks))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range toks {
		if b, ok := byteToken(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out, nil
}

// fuseDecoder joins all tokens into one.
type fuseDecoder struct{}

func (fuseDecoder) decodeChain(toks []string, _ *limits) ([]string, error) {
	return []string{strings.Join(toks, "")}, nil
}

// stripDecoder removes up to start leading and stop trailing copies of
// content from every token.
type stripDecoder struct {
	content     rune
	start, stop int
}

func (d stripDecoder) decodeChain(toks []string, _ *limits) ([]string, error) {
	out := make([]string, len(toks))
	for i, t := range toks {
		rs := []rune(t)
		cut := 0
		for cut < d.start && cut < len(rs) && rs[cut] == d.content {
			cut++
		}
		stop := len(rs)
		for k := 0; k < min(d.stop, len(rs)-cut); k++ {
			if rs[len(rs)-k-1] != d.content {
				break
			}
			stop = len(rs) - k - 1
		}
		out[i] = string(rs[cut:stop])
	}
	return out, nil
}

// replaceDecoder is Replace applied to every token, the content taken
// literally.
type replaceDecoder struct {
	lit     string
	re      *fileRegex
	content string
}

func (d replaceDecoder) decodeChain(toks []string, l *limits) ([]string, error) {
	const component = "decoder: Replace"
	out := make([]string, len(toks))
	total := 0
	for i, t := range toks {
		var s string
		var err error
		if d.re == nil {
			s, err = replaceLiteral(t, d.lit, d.content, component, l)
		} else {
			s, err = d.re.replace(t, d.content, component, l)
		}
		if err != nil {
			return nil, err
		}
		total += len(s)
		if err := l.grow(component, total); err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// metaspaceDecoder turns the replacement rune back into spaces; in the
// first token it is dropped unless the prepend scheme is "never".
type metaspaceDecoder struct {
	rep   rune
	never bool
}

func (d metaspaceDecoder) decodeChain(toks []string, _ *limits) ([]string, error) {
	out := make([]string, len(toks))
	for i, t := range toks {
		drop := i == 0 && !d.never
		var b strings.Builder
		for _, r := range t {
			switch {
			case r != d.rep:
				b.WriteRune(r)
			case !drop:
				b.WriteByte(' ')
			}
		}
		out[i] = b.String()
	}
	return out, nil
}

type sequenceDecoder []decoder

func (d sequenceDecoder) decodeChain(toks []string, l *limits) ([]string, error) {
	var err error
	for _, x := range d {
		if toks, err = x.decodeChain(toks, l); err != nil {
			return nil, err
		}
	}
	return toks, nil
}

// postProcessor adds the special tokens of add_special_tokens=True.
type postProcessor interface {
	process(ids []int) []int
}

// templatePost is TemplateProcessing's "single" template: ids of special
// tokens around the sequence.
type templatePost struct {
	pieces []templatePiece
}

type templatePiece struct {
	sequence bool // the sequence "A"
	ids      []int
}

func (p *templatePost) process(ids []int) []int {
	n := len(ids)
	for _, pc := range p.pieces {
		n += len(pc.ids)
	}
	out := make([]int, 0, n)
	for _, pc := range p.pieces {
		if pc.sequence {
			out = append(out, ids...)
		} else {
			out = append(out, pc.ids...)
		}
	}
	return out
}

// noopPost is the ByteLevel post-processor, which only trims offsets.
type noopPost struct{}

func (noopPost) process(ids []int) []int { return ids }

type sequencePost []postProcessor

func (p sequencePost) process(ids []int) []int {
	for _, x := range p {
		ids = x.process(ids)
	}
	return ids
}
