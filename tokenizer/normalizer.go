package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites the text of one segment before pre-tokenization,
// within the limits of the operation (regex time, text growth).
type normalizer interface {
	normalize(s string, l *limits) (string, error)
}

type unicodeNormalizer struct{ form norm.Form }

func (n unicodeNormalizer) normalize(s string, _ *limits) (string, error) {
	// Most text is ASCII, which every form leaves unchanged.
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii || n.form.IsNormalString(s) {
		return s, nil
	}
	return n.form.String(s), nil
}

// replaceNormalizer is Replace: every match of the pattern becomes content.
// The content is literal, as in Hugging Face ("$1" is not expanded).
type replaceNormalizer struct {
	lit     string     // for a String pattern
	re      *fileRegex // for a Regex pattern
	content string
}

func (n replaceNormalizer) normalize(s string, l *limits) (string, error) {
	if n.re == nil {
		return replaceLiteral(s, n.lit, n.content, "normalizer: Replace", l)
	}
	return n.re.replace(s, n.content, "normalizer: Replace", l)
}

// prependNormalizer is Prepend: adds its text in front of any non-empty
// segment.
type prependNormalizer struct{ prefix string }

func (n prependNormalizer) normalize(s string, l *limits) (string, error) {
	if s == "" {
		return s, nil
	}
	if err := l.grow("normalizer: Prepend", len(n.prefix)+len(s)); err != nil {
		return s, err
	}
	return n.prefix + s, nil
}

// stripNormalizer is the Strip normalizer: trims white space.
type stripNormalizer struct{ left, right bool }

func (n stripNormalizer) normalize(s string, _ *limits) (string, error) {
	if n.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s, nil
}

type sequenceNormalizer []normalizer

func (n sequenceNormalizer) normalize(s string, l *limits) (string, error) {
	var err error
	for _, x := range n {
		if s, err = x.normalize(s, l); err != nil {
			return s, err
		}
	}
	return s, nil
}
