package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The split patterns of the zoo's tokenizers need lookahead (`\s+(?!\S)`),
// which Go's regexp lacks; regexp2 runs them correctly but at a few MB/s.
// No library offers a fast matcher for them, so the three patterns that
// matter are implemented below by hand, one function per pattern, and
// TestScannersMatchRegexp2 checks them against regexp2 on the corpus and on
// random strings. Any other pattern goes to regexp2.
const (
	// patternQwen2 is Qwen2/Qwen3's pre-tokenizer regex: one digit per token.
	patternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternLlama3 is Llama-3's (and SmolLM3's): up to three digits.
	patternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternGPT2 is the regex of the ByteLevel pre-tokenizer (use_regex).
	patternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// Character classes as the regex engines see them: \p{L}, \p{N} and \s
// (White_Space, which is what Go's unicode.IsSpace tests) are disjoint.
const (
	clL  uint8 = 1 << iota // \p{L}
	clN                    // \p{N}
	clS                    // \s
	clNL                   // \r or \n (also clS)
)

var asciiClass [128]uint8

func init() {
	for c := 0; c < 128; c++ {
		asciiClass[c] = classOfRune(rune(c))
	}
}

func classOfRune(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return clS | clNL
	case unicode.IsLetter(r):
		return clL
	case unicode.IsNumber(r):
		return clN
	case unicode.IsSpace(r):
		return clS
	}
	return 0
}

// charAt returns the rune at s[i], its size and its class. s is valid UTF-8.
func charAt(s string, i int) (rune, int, uint8) {
	if b := s[i]; b < utf8.RuneSelf {
		return rune(b), 1, asciiClass[b]
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return r, n, classOfRune(r)
}

// spanClass returns the end of the run of runes of class cl starting at i.
func spanClass(s string, i int, cl uint8) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if asciiClass[b]&cl == 0 {
				return i
			}
			i++
			continue
		}
		_, n, c := charAt(s, i)
		if c&cl == 0 {
			return i
		}
		i += n
	}
	return i
}

// spanOther returns the end of the run of [^\s\p{L}\p{N}] starting at i.
func spanOther(s string, i int) int {
	for i < len(s) {
		_, n, c := charAt(s, i)
		if c != 0 {
			return i
		}
		i += n
	}
	return i
}

// spanNL returns the end of the run of [\r\n] starting at i.
func spanNL(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// spaceRun scans the \s run starting at i. It returns its end, the start of
// its last rune, and the position of its last \r or \n (-1 if none).
func spaceRun(s string, i int) (end, last, lastNL int) {
	lastNL = -1
	last = i
	for i < len(s) {
		r, n, c := charAt(s, i)
		if c&clS == 0 {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = i
		}
		last = i
		i += n
	}
	return i, last, lastNL
}

// contractionFold matches (?i:s|t|re|ve|m|ll|d) at s[i:] and returns its
// length, 0 if none. Oniguruma (the engine of the Rust library) folds case
// with Unicode case folding, under which U+017F LATIN SMALL LETTER LONG S
// matches 's'; regexp2 lowercases instead and does not match it. The Rust
// behaviour is the one implemented here.
func contractionFold(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	switch s[i] | 0x20 {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if i+1 < len(s) && s[i+1]|0x20 == 'e' {
			return 2
		}
	case 'l':
		if i+1 < len(s) && s[i+1]|0x20 == 'l' {
			return 2
		}
	}
	if strings.HasPrefix(s[i:], "\u017F") {
		return 2
	}
	return 0
}

// contractionExact matches (?:s|t|re|ve|m|ll|d) at s[i:], case-sensitively.
func contractionExact(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	switch s[i] {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if i+1 < len(s) && s[i+1] == 'e' {
			return 2
		}
	case 'l':
		if i+1 < len(s) && s[i+1] == 'l' {
			return 2
		}
	}
	return 0
}

// matchQwenAt returns the end of the match of patternQwen2 (maxDigits 1) or
// patternLlama3 (maxDigits 3) that starts at i, and how far it read (a
// run of white space is read to its end even where the match stops short
// of it). Every rune is matched by some alternative, so the matches tile
// the string and one always starts at i. The alternatives are tried in the
// pattern's order, as a backtracking engine does.
func matchQwenAt(s string, i int, maxDigits int) (int, int) {
	r, n, c := charAt(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if k := contractionFold(s, i+1); k > 0 {
			return same(i + 1 + k)
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c&clL != 0 {
		return same(spanClass(s, i+n, clL))
	}
	if c&(clN|clNL) == 0 && i+n < len(s) {
		if _, n2, c2 := charAt(s, i+n); c2&clL != 0 {
			return same(spanClass(s, i+n+n2, clL))
		}
	}
	// \p{N} or \p{N}{1,3}
	if c&clN != 0 {
		j := i + n
		for k := 1; k < maxDigits && j < len(s); k++ {
			_, n2, c2 := charAt(s, j)
			if c2&clN == 0 {
				break
			}
			j += n2
		}
		return same(j)
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	if c == 0 {
		return same(spanNL(s, spanOther(s, i+n)))
	}
	if r == ' ' && i+1 < len(s) {
		if _, n2, c2 := charAt(s, i+1); c2 == 0 {
			return same(spanNL(s, spanOther(s, i+1+n2)))
		}
	}
	// r is whitespace from here on.
	end, last, lastNL := spaceRun(s, i)
	// \s*[\r\n]+ : up to the last newline of the run.
	if lastNL >= 0 {
		return lastNL + 1, end
	}
	// \s+(?!\S) : the run, less its last rune when a non-space follows.
	if end == len(s) {
		return end, end
	}
	if last > i {
		return last, end
	}
	// \s+
	return end, end
}

// matchGPT2At returns the end of the match of patternGPT2 starting at i,
// and how far it read (as matchQwenAt).
func matchGPT2At(s string, i int) (int, int) {
	r, n, c := charAt(s, i)
	if r == '\'' {
		if k := contractionExact(s, i+1); k > 0 {
			return same(i + 1 + k)
		}
	}
	switch {
	case c&clL != 0:
		return same(spanClass(s, i+n, clL))
	case c&clN != 0:
		return same(spanClass(s, i+n, clN))
	case c == 0:
		return same(spanOther(s, i+n))
	}
	if r == ' ' && i+1 < len(s) {
		_, n2, c2 := charAt(s, i+1)
		switch {
		case c2&clL != 0:
			return same(spanClass(s, i+1+n2, clL))
		case c2&clN != 0:
			return same(spanClass(s, i+1+n2, clN))
		case c2 == 0:
			return same(spanOther(s, i+1+n2))
		}
	}
	end, last, _ := spaceRun(s, i)
	if end == len(s) {
		return end, end
	}
	if last > i {
		return last, end
	}
	return end, end
}

// scanKind names a hand-written matcher.
type scanKind int

const (
	scanNone scanKind = iota
	scanQwen2
	scanLlama3
	scanGPT2
)

func scanKindOf(pattern string) scanKind {
	switch pattern {
	case patternQwen2:
		return scanQwen2
	case patternLlama3:
		return scanLlama3
	case patternGPT2:
		return scanGPT2
	}
	return scanNone
}

// scanMatcher finds the matches of one of the known patterns.
type scanMatcher struct{ kind scanKind }

func (m scanMatcher) matchAt(s string, i int) (int, int) {
	switch m.kind {
	case scanQwen2:
		return matchQwenAt(s, i, 1)
	case scanLlama3:
		return matchQwenAt(s, i, 3)
	default:
		return matchGPT2At(s, i)
	}
}

func (m scanMatcher) find(s string, dst []span) ([]span, error) {
	var work int64
	return m.scan(s, dst, &work), nil
}

// scan is find that also adds to *work the bytes the scanner read (see
// limits.work): one add per call.
func (m scanMatcher) scan(s string, dst []span, work *int64) []span {
	read := 0
	for i := 0; i < len(s); {
		j, reach := m.matchAt(s, i)
		dst = append(dst, span{i, j})
		read += reach - i
		i = j
	}
	*work += int64(read)
	return dst
}

// same is a match that read no further than its end.
func same(end int) (int, int) { return end, end }
