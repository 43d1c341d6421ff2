package tokenizer

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// The regexes of a tokenizer file (Split patterns, Replace patterns of
// normalizers and decoders) run on regexp2, a backtracking engine: a
// pattern such as `(a+)+$` takes time exponential in the length of a text
// it fails on, and one with a lookahead to the end of the text makes every
// match cost the whole text. So each operation (an Encode, a Decode, the
// normalization of the added tokens while loading) gets one time budget
// for all its regex searches: the regex timeout (DefaultRegexTimeout, or
// what SetRegexTimeout set) plus as much again for every 100 KB of text,
// so the budget grows with the input as good regexes do (regexp2 runs the
// Qwen3 pattern at about 6 MB/s, 60 times faster than the budget's floor).
// regexp2 enforces it inside a search (MatchTimeout, on a copy of the
// regex compiled for that size of budget); the loop between searches
// checks it too. The operation then fails with a *RegexError that names
// the file and the pattern.
//
// The same limits bound how much the normalizers and decoders of a file
// may grow the text: at most maxGrowth times the input plus growthSlack
// bytes, so that a chain of Replace steps cannot turn a short text into
// gigabytes.

// DefaultRegexTimeout is the time the regexes of a tokenizer file may take
// in one Encode or Decode of up to 100 KB of text; every further 100 KB
// adds as much again. Good patterns take a few milliseconds per 100 KB.
const DefaultRegexTimeout = time.Second

// regexBudgetBytes is the amount of text each regex timeout pays for.
const regexBudgetBytes = 100_000

const (
	// maxGrowth and growthSlack bound the text the normalizers and
	// decoders may produce: maxGrowth times the input plus growthSlack
	// bytes. NFKC grows text 18 times at most, Replace(" ", "▁") 3 times.
	maxGrowth   = 32
	growthSlack = 1 << 20
)

// ErrRegexTimeout is reported (within a *RegexError) when a regex of a
// tokenizer file runs past its time budget; test for it with errors.Is.
var ErrRegexTimeout = errors.New("match ran past its time budget")

// RegexError is the error of an Encode or Decode stopped by a regex of the
// tokenizer file: it ran past its time budget (Err is ErrRegexTimeout) or
// the regex engine failed.
type RegexError struct {
	// File is the tokenizer file: its path for Load and FromFolder,
	// "tokenizer.json" for FromJSON. It is empty while the file loads
	// (the load error names the file).
	File string
	// Component says where the file uses the regex, e.g.
	// "pre_tokenizer: Split" or "normalizer: Replace".
	Component string
	// Pattern is the regex as the file writes it.
	Pattern string
	// Budget is the time the operation's regexes were given.
	Budget time.Duration
	// Err is ErrRegexTimeout or the engine's error.
	Err error
}

// Error returns "FILE: COMPONENT: regex PATTERN: ERR", the pattern cut to
// 200 bytes.
func (e *RegexError) Error() string {
	p := e.Pattern
	if len(p) > 200 {
		p = strings.ToValidUTF8(p[:200], "") + "..."
	}
	msg := fmt.Sprintf("%s: regex %q: %v", e.Component, p, e.Err)
	if errors.Is(e.Err, ErrRegexTimeout) {
		msg += fmt.Sprintf(" of %v", e.Budget.Round(time.Millisecond))
	}
	if e.File != "" {
		msg = e.File + ": " + msg
	}
	return msg
}

// Unwrap returns Err.
func (e *RegexError) Unwrap() error { return e.Err }

// SetRegexTimeout sets the time budget of the tokenizer file's regexes: d
// per Encode or Decode of up to 100 KB of text, d more for every further
// 100 KB. A d of zero or less restores DefaultRegexTimeout. It does not
// change how t encodes text that stays within the budget. Call it before
// sharing t between goroutines.
func (t *Tokenizer) SetRegexTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultRegexTimeout
	}
	t.regexTimeout = d
}

// limits bounds what one operation may spend on the components of a
// tokenizer file: regex time and text growth. The zero value allows
// DefaultRegexTimeout and any growth; newLimits makes real ones.
type limits struct {
	budget   time.Duration // for all the regex searches
	deadline time.Time     // set by the first search
	maxLen   int           // longest text a normalizer or decoder may produce; 0: any

	// work counts what the operation did in the loops whose cost grows
	// with the text: bytes read by the scanners, matchers and
	// normalizers, pieces cut, runes handed to regexp2 and matches it
	// returned, symbols merged by the BPE model. Nothing reads it but the
	// tests, which check that it grows linearly with the input
	// (TestLinearScaling); it is counted with one add per call, match,
	// word or merge, never per byte, so it costs nothing measurable.
	work int64
}

// newLimits returns the limits of an operation on n bytes of text, with
// regex timeout d (DefaultRegexTimeout if d <= 0).
func newLimits(d time.Duration, n int) limits {
	if d <= 0 {
		d = DefaultRegexTimeout
	}
	d = min(d, maxTierTimeout)
	extra := float64(d) * float64(n) / regexBudgetBytes
	b := d + time.Duration(min(extra, float64(maxTierTimeout)))
	return limits{budget: min(b, maxTierTimeout), maxLen: maxGrowth*n + growthSlack}
}

// remaining starts the clock on the first call and returns the time left.
// The zero limits get DefaultRegexTimeout.
func (l *limits) remaining() time.Duration {
	if l.deadline.IsZero() {
		if l.budget <= 0 {
			l.budget = DefaultRegexTimeout
		}
		l.deadline = time.Now().Add(l.budget)
		return l.budget
	}
	return time.Until(l.deadline)
}

// grow checks that a component may produce n bytes of text.
func (l *limits) grow(component string, n int) error {
	if l.maxLen > 0 && n > l.maxLen {
		return fmt.Errorf("%s: the text would grow to %d bytes, over the limit of %d (%d times the input plus %d)",
			component, n, l.maxLen, maxGrowth, growthSlack)
	}
	return nil
}

// Compiled copies of a regex carry a MatchTimeout of tierUnit<<k; a search
// uses the smallest one that covers the time left, so regexp2 stops it
// within twice the budget at most. The tiers are compiled when first
// needed: most tokenizers use one or two.
const (
	tierUnit       = 1 << 26 // ns, about 67 ms
	numTiers       = 25      // the last is about 26 days
	maxTierTimeout = time.Duration(tierUnit) << (numTiers - 1)
)

// fileRegex is a regex of a tokenizer file, run under the limits of the
// operation that uses it.
type fileRegex struct {
	pattern   string
	component string // e.g. "pre_tokenizer: Split"
	file      string // set once the tokenizer is built; "" while it loads
	tiers     [numTiers]atomic.Pointer[regexp2.Regexp]
}

// compileRegex compiles a pattern of a tokenizer file, used by component.
func compileRegex(pattern, component string) (*fileRegex, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("bad regex %q: %w", pattern, err)
	}
	r := &fileRegex{pattern: pattern, component: component}
	re.MatchTimeout = time.Duration(tierUnit)
	r.tiers[0].Store(re)
	return r, nil
}

// forTime returns the copy of the regex whose MatchTimeout is the smallest
// tier at least d.
func (r *fileRegex) forTime(d time.Duration) *regexp2.Regexp {
	k := 0
	for k < numTiers-1 && time.Duration(tierUnit)<<k < d {
		k++
	}
	if re := r.tiers[k].Load(); re != nil {
		return re
	}
	// The pattern compiled once already; it compiles again.
	re := regexp2.MustCompile(r.pattern, regexp2.None)
	re.MatchTimeout = time.Duration(tierUnit) << k
	if r.tiers[k].CompareAndSwap(nil, re) {
		return re
	}
	return r.tiers[k].Load()
}

func (r *fileRegex) error(l *limits, err error) error {
	return &RegexError{File: r.file, Component: r.component, Pattern: r.pattern, Budget: l.budget, Err: err}
}

// find appends the matches of r in s to dst, left to right, as byte
// offsets.
func (r *fileRegex) find(s string, dst []span, l *limits) ([]span, error) {
	if s == "" {
		return dst, nil
	}
	left := l.remaining()
	if left <= 0 {
		return dst, r.error(l, ErrRegexTimeout)
	}
	re := r.forTime(left)
	// regexp2 reports rune offsets; map them back to bytes.
	runes := []rune(s)
	l.work += int64(len(runes))
	off := make([]int, len(runes)+1)
	b := 0
	for i, c := range runes {
		off[i] = b
		b += utf8.RuneLen(c)
	}
	off[len(runes)] = b
	mt, err := re.FindRunesMatch(runes)
	defer func(before int) { l.work += int64(len(dst) - before) }(len(dst)) // the matches returned
	for n := 1; mt != nil && err == nil; n++ {
		dst = append(dst, span{off[mt.Index], off[mt.Index+mt.Length]})
		// time.Now costs about as much as a short match: look every 32.
		if n%32 == 0 && l.remaining() <= 0 {
			return dst, r.error(l, ErrRegexTimeout)
		}
		mt, err = re.FindNextMatch(mt)
	}
	if err != nil {
		// regexp2's timeout error quotes the whole input: drop it.
		if strings.HasPrefix(err.Error(), "match timeout") || l.remaining() <= 0 {
			return dst, r.error(l, ErrRegexTimeout)
		}
		msg := err.Error()
		if len(msg) > 200 {
			msg = strings.ToValidUTF8(msg[:200], "") + "..."
		}
		return dst, r.error(l, errors.New(msg))
	}
	return dst, nil
}

// replace replaces every match of r in s by content, taken literally, as
// Hugging Face's Replace does (no $1 expansion).
func (r *fileRegex) replace(s, content, component string, l *limits) (string, error) {
	spans, err := r.find(s, nil, l)
	if err != nil || len(spans) == 0 {
		return s, err
	}
	n := len(s)
	for _, sp := range spans {
		n += len(content) - (sp.end - sp.start)
	}
	if err := l.grow(component, n); err != nil {
		return s, err
	}
	var b strings.Builder
	b.Grow(n)
	prev := 0
	for _, sp := range spans {
		b.WriteString(s[prev:sp.start])
		b.WriteString(content)
		prev = sp.end
	}
	b.WriteString(s[prev:])
	return b.String(), nil
}

// replaceLiteral replaces every occurrence of the non-empty lit in s by
// content, within the growth limit.
func replaceLiteral(s, lit, content, component string, l *limits) (string, error) {
	if len(content) > len(lit) {
		k := strings.Count(s, lit)
		if k == 0 {
			return s, nil
		}
		if err := l.grow(component, len(s)+k*(len(content)-len(lit))); err != nil {
			return s, err
		}
	}
	return strings.ReplaceAll(s, lit, content), nil
}

// fileRegexes lists the regexes of t's components.
func (t *Tokenizer) fileRegexes() []*fileRegex {
	var out []*fileRegex
	var norm func(n normalizer)
	norm = func(n normalizer) {
		switch n := n.(type) {
		case replaceNormalizer:
			if n.re != nil {
				out = append(out, n.re)
			}
		case sequenceNormalizer:
			for _, x := range n {
				norm(x)
			}
		}
	}
	norm(t.normalizer)
	for _, p := range t.pre {
		if sp, ok := p.(*splitPre); ok {
			if m, ok := sp.m.(regexMatcher); ok {
				out = append(out, m.re)
			}
		}
	}
	var dec func(d decoder)
	dec = func(d decoder) {
		switch d := d.(type) {
		case replaceDecoder:
			if d.re != nil {
				out = append(out, d.re)
			}
		case sequenceDecoder:
			for _, x := range d {
				dec(x)
			}
		}
	}
	dec(t.decoder)
	return out
}

// setFile records the name of the file t was read from, for errors.
func (t *Tokenizer) setFile(name string) {
	for _, r := range t.fileRegexes() {
		r.file = name
	}
}
