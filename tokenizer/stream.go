package tokenizer

import (
	"fmt"
	"strings"
)

// StreamDecoder decodes ids one at a time, as a model generates them. It
// never returns half a UTF-8 character: while the text ends in an
// incomplete one (decoded as a pending U+FFFD) it is held back until the
// next id completes it or Flush. The text of all Push calls followed by
// Flush equals Decode of all the ids.
//
// It keeps a short window of recent ids, decodes the window and returns
// what the window's text adds to the previous one's, the method of the Rust
// library's DecodeStream; if a later id would rewrite text already
// returned, Push reports an error. Unlike DecodeStream it does not hold
// back a long run of U+FFFD (real replacement characters) until the run
// ends: once more than a few ids follow the text, the text is returned, so
// streaming stays linear in the number of ids. A StreamDecoder is not safe
// for concurrent use.
type StreamDecoder struct {
	t    *Tokenizer
	skip bool
	// ids is the window: the ids of the last returned step (context) and
	// the ids pushed since.
	ids []int
	// prefix is the text of the context ids alone, prefixIndex their
	// number.
	prefix      string
	prefixIndex int
	toks        []string
	// decoded counts the ids decoded so far, every window together: the
	// work of the Push calls, which tests check grows linearly with the
	// ids pushed (TestStreamDecoderReplacementRun).
	decoded int
}

// NewStreamDecoder returns a StreamDecoder; skipSpecial drops special
// tokens as in Decode.
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skip: skipSpecial}
}

func (d *StreamDecoder) decode(ids []int) (string, error) {
	d.decoded += len(ids)
	d.toks = d.toks[:0]
	for _, id := range ids {
		if d.skip && d.t.special[id] {
			continue
		}
		d.toks = append(d.toks, d.t.idTok[id])
	}
	return d.t.decodeTokens(d.toks)
}

// Push adds one id and returns the text it completes, possibly "".
func (d *StreamDecoder) Push(id int) (string, error) {
	if err := d.t.checkID(id); err != nil {
		return "", err
	}
	d.ids = append(d.ids, id)
	s, err := d.decode(d.ids)
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(s, "\uFFFD") && len(d.ids)-d.prefixIndex > streamHold {
		return d.checkpoint(s)
	}
	if len(s) <= len(d.prefix) || strings.HasSuffix(s, "\uFFFD") {
		return "", nil
	}
	if !strings.HasPrefix(s, d.prefix) {
		return "", fmt.Errorf("tokenizer: stream decode: id %d rewrote earlier text %q as %q", id, d.prefix, s)
	}
	out := s[len(d.prefix):]
	// Keep the ids of this step as context for the next.
	n := len(d.ids) - d.prefixIndex
	d.ids = append(d.ids[:0], d.ids[d.prefixIndex:]...)
	if d.prefix, err = d.decode(d.ids); err != nil {
		return "", err
	}
	d.prefixIndex = n
	return out, nil
}

// Flush returns the text still held back (such as a final incomplete
// character, as U+FFFD) and resets the decoder.
func (d *StreamDecoder) Flush() (string, error) {
	s, err := d.decode(d.ids)
	if err != nil {
		return "", err
	}
	prefix := d.prefix
	d.ids, d.prefix, d.prefixIndex = d.ids[:0], "", 0
	if len(s) <= len(prefix) {
		return "", nil
	}
	if !strings.HasPrefix(s, prefix) {
		return "", fmt.Errorf("tokenizer: stream decode: flush rewrote earlier text %q as %q", prefix, s)
	}
	return s[len(prefix):], nil
}

// streamHold is how many ids Push holds back while the text ends in
// U+FFFD before it looks for text it can return. An incomplete UTF-8
// character spans at most 3 bytes, so at most the last few ids; a longer
// run of U+FFFD is real replacement characters (invalid bytes, or U+FFFD
// tokens), and holding it all back would make every Push decode the
// growing window: quadratic time in the length of the run.
const streamHold = 8

// checkpoint returns the text of the window without its last 4 ids when
// that text is a proper prefix of s, the window's text: the bytes after it
// have settled how its end decodes, and later ids can no longer change it
// (as with any returned text, ByteFallback's rule that an invalid run of
// bytes is one U+FFFD per byte is the exception, which Push reports). The
// pushed ids before the cut become the next context.
func (d *StreamDecoder) checkpoint(s string) (string, error) {
	cut := len(d.ids) - 4
	s2, err := d.decode(d.ids[:cut])
	if err != nil {
		return "", err
	}
	if len(s2) <= len(d.prefix) || len(s2) >= len(s) || !strings.HasPrefix(s, s2) || !strings.HasPrefix(s2, d.prefix) {
		return "", nil
	}
	out := s2[len(d.prefix):]
	// The context becomes the ids of this step up to the cut.
	n := cut - d.prefixIndex
	d.ids = append(d.ids[:0], d.ids[d.prefixIndex:]...)
	if d.prefix, err = d.decode(d.ids[:n]); err != nil {
		return "", err
	}
	d.prefixIndex = n
	return out, nil
}
