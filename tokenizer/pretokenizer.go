package tokenizer

import (
	"strings"
	"unicode"
)

// preTokenizer cuts (and possibly rewrites) pieces into smaller pieces.
type preTokenizer interface {
	// apply appends the pre-tokens of every piece of in to out.
	apply(in, out []piece, st *encState) ([]piece, error)
}

// splitPre is the Split pre-tokenizer.
type splitPre struct {
	m      matcher
	beh    behavior
	invert bool
}

func (p *splitPre) apply(in, out []piece, st *encState) ([]piece, error) {
	var err error
	for _, pc := range in {
		if out, err = splitPieces(pc.s, pc.orig, p.m, p.beh, p.invert, st, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// byteLevelPre is the ByteLevel pre-tokenizer. When it is the last step of
// the pipeline (the usual case) its byte-to-rune mapping is left to the
// model, which maps each word into a scratch buffer (mapBytes false);
// otherwise it rewrites the pieces itself.
type byteLevelPre struct {
	addPrefixSpace bool
	useRegex       bool
	mapBytes       bool
}

func (p *byteLevelPre) apply(in, out []piece, st *encState) ([]piece, error) {
	start := len(out)
	for _, pc := range in {
		s := pc.s
		if p.addPrefixSpace && !strings.HasPrefix(s, " ") {
			s = " " + s
		}
		if p.useRegex {
			var err error
			if out, err = splitPieces(s, pc.orig, scanMatcher{scanGPT2}, behIsolated, false, st, out); err != nil {
				return out, err
			}
		} else if s != "" {
			out = append(out, piece{s, pc.orig})
		}
	}
	if p.mapBytes {
		for i := start; i < len(out); i++ {
			out[i].s = string(appendByteLevel(nil, out[i].s))
		}
	}
	return out, nil
}

// digitsPre is the Digits pre-tokenizer. Like Rust's char::is_numeric it
// isolates every Unicode number (Nd, Nl, No: "½", "²"), not only 0-9.
type digitsPre struct{ individual bool }

func (p *digitsPre) apply(in, out []piece, st *encState) ([]piece, error) {
	beh := behContiguous
	if p.individual {
		beh = behIsolated
	}
	var err error
	for _, pc := range in {
		if out, err = splitPieces(pc.s, pc.orig, runeMatcher{unicode.IsNumber}, beh, false, st, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// metaspacePre is the Metaspace pre-tokenizer: spaces become the
// replacement rune, which is prepended per the scheme and split on.
type metaspacePre struct {
	rep    string
	scheme prependScheme
	split  bool
}

func (p *metaspacePre) apply(in, out []piece, st *encState) ([]piece, error) {
	var err error
	for _, pc := range in {
		s := strings.ReplaceAll(pc.s, " ", p.rep)
		switch p.scheme {
		case prependAlways:
			if !strings.HasPrefix(s, p.rep) && s != "" {
				s = p.rep + s
			}
		case prependFirst:
			// Only for the piece that starts the original input.
			if !strings.HasPrefix(s, p.rep) && s != "" && pc.orig == 0 {
				s = p.rep + s
			}
		}
		if !p.split {
			if s != "" {
				out = append(out, piece{s, pc.orig})
			}
			continue
		}
		if out, err = splitPieces(s, pc.orig, literalMatcher{p.rep}, behMergedWithNext, false, st, out); err != nil {
			return out, err
		}
	}
	return out, nil
}
