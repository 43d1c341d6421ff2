package grammar

import (
	"slices"
	"unicode/utf8"
)

// runeRange is an inclusive range of code points.
type runeRange struct{ lo, hi rune }

// runeSet is a sorted list of disjoint, non-adjacent ranges.
type runeSet []runeRange

const (
	maxRune      = utf8.MaxRune
	surrogateLo  = 0xD800
	surrogateHi  = 0xDFFF
	replacementR = utf8.RuneError
)

// anyRune is every Unicode scalar value (surrogates are not characters).
var anyRune = runeSet{{0, surrogateLo - 1}, {surrogateHi + 1, maxRune}}

func single(r rune) runeSet { return runeSet{{r, r}} }

// normalize sorts and merges ranges and removes surrogates.
func (s runeSet) normalize() runeSet {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b runeRange) int { return int(a.lo - b.lo) })
	var out runeSet
	for _, r := range s {
		if r.lo > r.hi {
			continue
		}
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out.intersect(anyRune)
}

func (s runeSet) union(t runeSet) runeSet { return append(slices.Clone(s), t...).normalize() }

func (s runeSet) intersect(t runeSet) runeSet {
	var out runeSet
	i, j := 0, 0
	for i < len(s) && j < len(t) {
		lo, hi := max(s[i].lo, t[j].lo), min(s[i].hi, t[j].hi)
		if lo <= hi {
			out = append(out, runeRange{lo, hi})
		}
		if s[i].hi < t[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// complement is every scalar value not in s.
func (s runeSet) complement() runeSet {
	var out runeSet
	next := rune(0)
	for _, r := range s {
		if r.lo > next {
			out = append(out, runeRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= maxRune {
		out = append(out, runeRange{next, maxRune})
	}
	return out.intersect(anyRune)
}

func (s runeSet) contains(r rune) bool {
	i, ok := slices.BinarySearchFunc(s, r, func(x runeRange, r rune) int {
		switch {
		case x.hi < r:
			return -1
		case x.lo > r:
			return 1
		}
		return 0
	})
	return ok && i >= 0
}

func (s runeSet) empty() bool { return len(s) == 0 }

func (s runeSet) equal(t runeSet) bool { return slices.Equal(s, t) }

// shortEscapes are JSON's two-character escapes and the runes they stand for.
var shortEscapes = []struct {
	c byte
	r rune
}{{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', '\b'}, {'f', '\f'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}}

// rawAllowed are the runes a JSON string may hold unescaped: all but the
// quote, the backslash and the control characters U+0000..U+001F.
var rawAllowed = runeSet{{0x20, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, surrogateLo - 1}, {surrogateHi + 1, maxRune}}

// emitJSONChars emits one character of a JSON string's contents, in any
// of its spellings, for each rune of s: raw UTF-8 where JSON allows it,
// the two-character escapes, \uXXXX (hex digits in either case) and, for
// runes past U+FFFF, a \uD8xx\uDCxx surrogate pair. Lone surrogates are
// refused: they are no character.
func (n *nfa) emitJSONChars(from int32, s runeSet) int32 {
	end := n.newState()
	if raw := s.intersect(rawAllowed); !raw.empty() {
		n.emitUTF8(from, raw, end)
	}
	var esc int32 = -1
	escape := func() int32 {
		if esc < 0 {
			esc = n.byteRange(from, '\\', '\\')
		}
		return esc
	}
	for _, e := range shortEscapes {
		if s.contains(e.r) {
			n.edge(escape(), e.c, e.c, end)
		}
	}
	bmp := s.intersect(runeSet{{0, 0xFFFF}})
	astral := s.intersect(runeSet{{0x10000, maxRune}})
	if !bmp.empty() || !astral.empty() {
		u := n.byteRange(escape(), 'u', 'u')
		if !bmp.empty() {
			n.emitHex4(u, bmp, end)
		}
		if !astral.empty() {
			n.emitSurrogatePairs(u, astral, end)
		}
	}
	return end
}

// emitUTF8 adds paths from from to end spelling each rune of s in UTF-8,
// as sequences of byte ranges (the utf8-ranges construction).
func (n *nfa) emitUTF8(from int32, s runeSet, end int32) {
	for _, r := range s {
		n.utf8Range(from, r.lo, r.hi, end)
	}
}

var utf8Max = [4]rune{0x7F, 0x7FF, 0xFFFF, maxRune}

func (n *nfa) utf8Range(from int32, lo, hi rune, end int32) {
	if lo > hi {
		return
	}
	// Split where the encoded length changes.
	for i := 0; i < 3; i++ {
		if lo <= utf8Max[i] && hi > utf8Max[i] {
			n.utf8Range(from, lo, utf8Max[i], end)
			n.utf8Range(from, utf8Max[i]+1, hi, end)
			return
		}
	}
	if hi < 0x80 {
		n.edge(from, byte(lo), byte(hi), end)
		return
	}
	// Split until all but the leading bytes span whole continuation
	// ranges: then the range is one sequence of byte ranges.
	for i := 1; i < 4; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				n.utf8Range(from, lo, lo|m, end)
				n.utf8Range(from, (lo|m)+1, hi, end)
				return
			}
			if hi&m != m {
				n.utf8Range(from, lo, (hi&^m)-1, end)
				n.utf8Range(from, hi&^m, hi, end)
				return
			}
		}
	}
	var a, b [4]byte
	la := utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	s := from
	for i := 0; i < la; i++ {
		if i == la-1 {
			n.edge(s, a[i], b[i], end)
		} else {
			s = n.byteRange(s, a[i], b[i])
		}
	}
}

// emitHex4 adds paths from from to end spelling each code point of s
// (all at most U+FFFF) as four hex digits, either case.
func (n *nfa) emitHex4(from int32, s runeSet, end int32) {
	for _, r := range s {
		n.hexRange(from, uint32(r.lo), uint32(r.hi), 4, end)
	}
}

// hexDigits adds edges from from to to for every hex digit (either case)
// of value in [lo, hi] (0..15).
func (n *nfa) hexDigits(from int32, lo, hi uint32, to int32) {
	if lo <= 9 {
		n.edge(from, byte('0'+lo), byte('0'+min(hi, 9)), to)
	}
	if hi >= 10 {
		l := max(lo, 10) - 10
		h := hi - 10
		n.edge(from, byte('a'+l), byte('a'+h), to)
		n.edge(from, byte('A'+l), byte('A'+h), to)
	}
}

// hexRange adds paths for the fixed-width (digits) hex spellings of
// every value in [lo, hi].
func (n *nfa) hexRange(from int32, lo, hi uint32, digits int, end int32) {
	if lo > hi {
		return
	}
	if digits == 1 {
		n.hexDigits(from, lo, hi, end)
		return
	}
	shift := uint(4 * (digits - 1))
	m := uint32(1)<<shift - 1
	lh, hh := lo>>shift, hi>>shift
	if lh == hh {
		s := n.newState()
		n.hexDigits(from, lh, lh, s)
		n.hexRange(s, lo&m, hi&m, digits-1, end)
		return
	}
	// A partial first digit, whole middle digits, a partial last digit.
	if lo&m != 0 {
		n.hexRange(from, lo, lo|m, digits, end)
		lh++
	}
	if hi&m != m {
		n.hexRange(from, hi&^m, hi, digits, end)
		hh--
	}
	if lh <= hh {
		s := n.newState()
		n.hexDigits(from, lh, hh, s)
		n.hexRange(s, 0, m, digits-1, end)
	}
}

// emitSurrogatePairs adds paths from from (after "\u") to end spelling
// each rune of s (all past U+FFFF) as a UTF-16 surrogate pair of escapes.
func (n *nfa) emitSurrogatePairs(from int32, s runeSet, end int32) {
	pair := func(r rune) (uint32, uint32) {
		v := uint32(r - 0x10000)
		return 0xD800 + v>>10, 0xDC00 + v&0x3FF
	}
	rect := func(hlo, hhi, llo, lhi uint32) {
		mid := n.newState()
		n.hexRange(from, hlo, hhi, 4, mid)
		u := n.lit(mid, `\u`)
		n.hexRange(u, llo, lhi, 4, end)
	}
	for _, r := range s {
		h1, l1 := pair(r.lo)
		h2, l2 := pair(r.hi)
		if h1 == h2 {
			rect(h1, h1, l1, l2)
			continue
		}
		rect(h1, h1, l1, 0xDFFF)
		if h1+1 <= h2-1 {
			rect(h1+1, h2-1, 0xDC00, 0xDFFF)
		}
		rect(h2, h2, 0xDC00, l2)
	}
}
