package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// span is a byte range [start, end) of a string.
type span struct{ start, end int }

// matcher finds the non-overlapping matches of a pattern, left to right.
type matcher interface {
	find(s string, dst []span) ([]span, error)
}

// literalMatcher matches a fixed, non-empty string.
type literalMatcher struct{ lit string }

func (m literalMatcher) find(s string, dst []span) ([]span, error) {
	for i := 0; ; {
		k := strings.Index(s[i:], m.lit)
		if k < 0 {
			return dst, nil
		}
		dst = append(dst, span{i + k, i + k + len(m.lit)})
		i += k + len(m.lit)
	}
}

// runeMatcher matches every single rune for which pred is true.
type runeMatcher struct{ pred func(rune) bool }

func (m runeMatcher) find(s string, dst []span) ([]span, error) {
	for i, r := range s {
		if m.pred(r) {
			dst = append(dst, span{i, i + utf8.RuneLen(r)})
		}
	}
	return dst, nil
}

// regexMatcher runs a pattern with regexp2, which implements the lookaround
// and Unicode classes these files use (Go's regexp has no lookahead), under
// the limits of the Encode that runs it (see regex.go).
type regexMatcher struct {
	re *fileRegex
}

// newPatternMatcher returns the fastest matcher for a Split/Replace pattern:
// a hand-written scanner for the known pre-tokenizer regexes, regexp2 for
// any other regex, a literal matcher for strings.
func newPatternMatcher(p patternJSON) (matcher, error) {
	switch {
	case p.String != nil:
		if *p.String == "" {
			return nil, fmt.Errorf("empty String pattern is not supported")
		}
		return literalMatcher{*p.String}, nil
	case p.Regex != nil:
		if k := scanKindOf(*p.Regex); k != scanNone {
			return scanMatcher{k}, nil
		}
		re, err := compileRegex(*p.Regex, "pre_tokenizer: Split")
		if err != nil {
			return nil, err
		}
		return regexMatcher{re}, nil
	}
	return nil, fmt.Errorf("pattern needs a String or a Regex")
}

// find runs the pattern under limits of its own, as for an Encode of s;
// splitPieces uses the Encode's.
func (m regexMatcher) find(s string, dst []span) ([]span, error) {
	l := newLimits(DefaultRegexTimeout, len(s))
	return m.re.find(s, dst, &l)
}

// behavior is a SplitDelimiterBehavior.
type behavior int

const (
	behRemoved behavior = iota
	behIsolated
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

func parseBehavior(s string) (behavior, error) {
	switch s {
	case "Removed":
		return behRemoved, nil
	case "Isolated":
		return behIsolated, nil
	case "MergedWithPrevious":
		return behMergedWithPrevious, nil
	case "MergedWithNext":
		return behMergedWithNext, nil
	case "Contiguous":
		return behContiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

// piece is one pre-token: its text and the offset in the original input
// where it starts (used by Metaspace's prepend_scheme "first").
type piece struct {
	s    string
	orig int
}

type markedSpan struct {
	span
	match bool
}

// splitPieces cuts s at the matches of m and appends the non-empty parts to
// out, following Hugging Face's NormalizedString::split.
func splitPieces(s string, orig int, m matcher, beh behavior, invert bool, st *encState, out []piece) ([]piece, error) {
	if s == "" {
		return out, nil
	}
	var err error
	switch m := m.(type) {
	case regexMatcher:
		st.spans, err = m.re.find(s, st.spans[:0], &st.lim)
	case scanMatcher:
		st.spans = m.scan(s, st.spans[:0], &st.lim.work)
	default:
		st.spans, err = m.find(s, st.spans[:0])
		st.lim.work += int64(len(s))
	}
	if err != nil {
		return out, err
	}
	st.lim.work += int64(len(st.spans))
	if beh == behIsolated {
		// Every part is kept as is, match or not: cut at each boundary.
		prev := 0
		for _, sp := range st.spans {
			if sp.start > prev {
				out = append(out, piece{s[prev:sp.start], orig + prev})
			}
			if sp.end > sp.start {
				out = append(out, piece{s[sp.start:sp.end], orig + sp.start})
			}
			prev = sp.end
		}
		if prev < len(s) {
			out = append(out, piece{s[prev:], orig + prev})
		}
		return out, nil
	}
	// The (offsets, is_match) list covering s.
	marks := st.marks[:0]
	prev := 0
	for _, sp := range st.spans {
		if prev != sp.start {
			marks = append(marks, markedSpan{span{prev, sp.start}, false})
		}
		marks = append(marks, markedSpan{sp, true})
		prev = sp.end
	}
	if prev != len(s) {
		marks = append(marks, markedSpan{span{prev, len(s)}, false})
	}
	if invert {
		for i := range marks {
			marks[i].match = !marks[i].match
		}
	}
	var parts []span
	switch beh {
	case behRemoved:
		for _, mk := range marks {
			if !mk.match {
				parts = append(parts, mk.span)
			}
		}
	case behMergedWithPrevious:
		prevMatch := false
		for _, mk := range marks {
			if mk.match && !prevMatch && len(parts) > 0 {
				parts[len(parts)-1].end = mk.end
			} else {
				parts = append(parts, mk.span)
			}
			prevMatch = mk.match
		}
	case behMergedWithNext:
		prevMatch := false
		for i := len(marks) - 1; i >= 0; i-- {
			mk := marks[i]
			if mk.match && !prevMatch && len(parts) > 0 {
				parts[len(parts)-1].start = mk.start
			} else {
				parts = append(parts, mk.span)
			}
			prevMatch = mk.match
		}
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
	case behContiguous:
		prevMatch := false
		for _, mk := range marks {
			if mk.match == prevMatch && len(parts) > 0 {
				parts[len(parts)-1].end = mk.end
			} else {
				parts = append(parts, mk.span)
			}
			prevMatch = mk.match
		}
	}
	st.marks = marks
	for _, p := range parts {
		if p.end > p.start {
			out = append(out, piece{s[p.start:p.end], orig + p.start})
		}
	}
	return out, nil
}
