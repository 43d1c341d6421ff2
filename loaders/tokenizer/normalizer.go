package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites the text of one segment before pre-tokenization.
type normalizer interface {
	normalize(s string) (string, error)
}

type unicodeNormalizer struct{ form norm.Form }

func (n unicodeNormalizer) normalize(s string) (string, error) {
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
type replaceNormalizer struct {
	lit     string          // for a String pattern
	re      *regexp2.Regexp // for a Regex pattern
	content string
}

func (n replaceNormalizer) normalize(s string) (string, error) {
	if n.re == nil {
		return strings.ReplaceAll(s, n.lit, n.content), nil
	}
	return n.re.Replace(s, n.content, -1, -1)
}

// prependNormalizer is Prepend: adds its text in front of any non-empty
// segment.
type prependNormalizer struct{ prefix string }

func (n prependNormalizer) normalize(s string) (string, error) {
	if s == "" {
		return s, nil
	}
	return n.prefix + s, nil
}

// stripNormalizer is the Strip normalizer: trims white space.
type stripNormalizer struct{ left, right bool }

func (n stripNormalizer) normalize(s string) (string, error) {
	if n.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s, nil
}

type sequenceNormalizer []normalizer

func (n sequenceNormalizer) normalize(s string) (string, error) {
	var err error
	for _, x := range n {
		if s, err = x.normalize(s); err != nil {
			return s, err
		}
	}
	return s, nil
}
