package grammar

import (
	"fmt"
	"strconv"
	"strings"
)

// Numbers with bounds. A bound is kept as the decimal its JSON text
// spells, never as a float, and the grammar compares a number's digits
// with it as they come: an integer or a decimal fraction meets minimum,
// maximum, exclusiveMinimum and exclusiveMaximum exactly. A bounded
// number is written without an exponent (1e3 spelled 1000); an unbounded
// one may use any JSON spelling.

// decimal is an exact decimal number.
type decimal struct {
	neg  bool
	ip   string // integer digits, no leading zeros ("0" for none)
	frac string // fraction digits, no trailing zeros
}

// maxBoundDigits bounds the digits a bound may spell out (1e308, the
// largest float, has 309).
const maxBoundDigits = 1100

// parseDecimal reads a JSON number's text exactly.
func parseDecimal(s string) (decimal, error) {
	var d decimal
	t := s
	if strings.HasPrefix(t, "-") {
		d.neg = true
		t = t[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(t), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expPart, "+"))
		if err != nil || e > maxBoundDigits || e < -maxBoundDigits {
			return d, fmt.Errorf("number %s: exponent out of the range ±%d", s, maxBoundDigits)
		}
		exp = e
	}
	ip, fp, _ := strings.Cut(mant, ".")
	digits := ip + fp
	point := len(ip) + exp
	if point < 0 {
		digits = strings.Repeat("0", -point) + digits
		point = 0
	}
	if point > len(digits) {
		digits += strings.Repeat("0", point-len(digits))
	}
	d.ip = strings.TrimLeft(digits[:point], "0")
	if d.ip == "" {
		d.ip = "0"
	}
	d.frac = strings.TrimRight(digits[point:], "0")
	if len(d.ip)+len(d.frac) > maxBoundDigits {
		return d, fmt.Errorf("number %s has more than %d digits", s, maxBoundDigits)
	}
	if d.isZero() {
		d.neg = false
	}
	return d, nil
}

func (d decimal) isZero() bool { return d.ip == "0" && d.frac == "" }

func (d decimal) negate() decimal {
	if !d.isZero() {
		d.neg = !d.neg
	}
	return d
}

// cmpMag compares the magnitudes of a and b.
func cmpMag(a, b decimal) int {
	if len(a.ip) != len(b.ip) {
		return sign(len(a.ip) - len(b.ip))
	}
	if c := strings.Compare(a.ip, b.ip); c != 0 {
		return c
	}
	return strings.Compare(a.frac, b.frac)
}

// cmpDec compares a and b.
func cmpDec(a, b decimal) int {
	switch {
	case a.neg && !b.neg:
		return -1
	case !a.neg && b.neg:
		return 1
	case a.neg:
		return -cmpMag(a, b)
	}
	return cmpMag(a, b)
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func (d decimal) String() string {
	s := d.ip
	if d.frac != "" {
		s += "." + d.frac
	}
	if d.neg {
		s = "-" + s
	}
	return s
}

// bound is one side of an interval.
type bound struct {
	set  bool
	incl bool
	d    decimal
}

// interval is the numbers a schema's bounds allow.
type interval struct{ lo, hi bound }

// tighterLo keeps the stronger of two lower bounds.
func tighterLo(a, b bound) bound {
	if !a.set {
		return b
	}
	if !b.set {
		return a
	}
	switch c := cmpDec(a.d, b.d); {
	case c > 0:
		return a
	case c < 0:
		return b
	}
	a.incl = a.incl && b.incl
	return a
}

func tighterHi(a, b bound) bound {
	if !a.set {
		return b
	}
	if !b.set {
		return a
	}
	switch c := cmpDec(a.d, b.d); {
	case c < 0:
		return a
	case c > 0:
		return b
	}
	a.incl = a.incl && b.incl
	return a
}

// contains reports whether the interval holds x.
func (iv interval) contains(x decimal) bool {
	if iv.lo.set {
		c := cmpDec(x, iv.lo.d)
		if c < 0 || c == 0 && !iv.lo.incl {
			return false
		}
	}
	if iv.hi.set {
		c := cmpDec(x, iv.hi.d)
		if c > 0 || c == 0 && !iv.hi.incl {
			return false
		}
	}
	return true
}

// magBounds are bounds on a magnitude (a number without its sign).
// ok is false when no magnitude meets them.
func magBounds(lo, hi bound) (mlo, mhi bound, ok bool) {
	// A lower bound below zero, or zero inclusive, says nothing about a
	// magnitude.
	if lo.set && (!lo.d.neg && !lo.d.isZero() || lo.d.isZero() && !lo.incl) {
		mlo = lo
	}
	if hi.set {
		if hi.d.neg && !hi.d.isZero() || hi.d.isZero() && !hi.incl {
			return mlo, mhi, false
		}
		mhi = hi
	}
	return mlo, mhi, true
}

// cmpState follows the comparison of a magnitude being read with a
// bound's magnitude.
type cmpState struct {
	n int16 // digits of the current part read (capped)
	c int8  // lexicographic comparison so far (-1, 0, 1)
	// done: the comparison is decided, as c.
	done bool
}

// magState is a state of the magnitude automaton: where in the syntax
// (0 start, 1 integer digits after a non-zero first, 2 the integer "0",
// 3 after the point, 4 fraction digits) and the comparison with each
// bound.
type magState struct {
	phase  uint8
	lo, hi cmpState
}

// stepInt reads an integer digit.
func (c cmpState) stepInt(b decimal, digit byte) cmpState {
	if c.done {
		return c
	}
	L := int16(len(b.ip))
	if c.n >= L {
		// More integer digits than the bound has: greater.
		return cmpState{n: L + 1, c: 1, done: true}
	}
	if c.c == 0 {
		c.c = int8(sign(int(digit) - int(b.ip[c.n])))
	}
	c.n++
	return c
}

// endInt ends the integer part: the comparison of the integer parts is
// then known; equal parts leave the fractions to compare.
func (c cmpState) endInt(b decimal) cmpState {
	if c.done {
		return c
	}
	L := int16(len(b.ip))
	switch {
	case c.n < L:
		return cmpState{c: -1, done: true}
	case c.c != 0:
		return cmpState{c: c.c, done: true}
	}
	return cmpState{}
}

// stepFrac reads a fraction digit (after endInt).
func (c cmpState) stepFrac(b decimal, digit byte) cmpState {
	if c.done {
		return c
	}
	f := byte('0')
	if int(c.n) < len(b.frac) {
		f = b.frac[c.n]
	}
	if digit != f {
		return cmpState{c: int8(sign(int(digit) - int(f))), done: true}
	}
	if int(c.n) < len(b.frac) {
		c.n++
	}
	return c
}

// final is the comparison once the number ends (in the fraction phase).
func (c cmpState) final(b decimal) int {
	if c.done {
		return int(c.c)
	}
	if int(c.n) < len(b.frac) {
		return -1 // the bound has non-zero digits left
	}
	return 0
}

func (m magState) step(lo, hi bound, ch byte, integer bool) (magState, bool) {
	isDigit := ch >= '0' && ch <= '9'
	stepI := func() {
		if lo.set {
			m.lo = m.lo.stepInt(lo.d, ch)
		}
		if hi.set {
			m.hi = m.hi.stepInt(hi.d, ch)
		}
	}
	switch m.phase {
	case 0:
		if !isDigit {
			return m, false
		}
		stepI()
		if ch == '0' {
			m.phase = 2
		} else {
			m.phase = 1
		}
	case 1, 2:
		switch {
		case isDigit && m.phase == 1:
			stepI()
		case ch == '.' && !integer:
			if lo.set {
				m.lo = m.lo.endInt(lo.d)
			}
			if hi.set {
				m.hi = m.hi.endInt(hi.d)
			}
			m.phase = 3
		default:
			return m, false
		}
	case 3, 4:
		if !isDigit {
			return m, false
		}
		if lo.set {
			m.lo = m.lo.stepFrac(lo.d, ch)
		}
		if hi.set {
			m.hi = m.hi.stepFrac(hi.d, ch)
		}
		m.phase = 4
	}
	// Decided against a bound: no way on.
	if lo.set && m.lo.done && m.lo.c < 0 || hi.set && m.hi.done && m.hi.c > 0 {
		return m, false
	}
	return m, true
}

func (m magState) accepts(lo, hi bound) bool {
	if m.phase != 1 && m.phase != 2 && m.phase != 4 {
		return false
	}
	fin := func(c cmpState, b decimal) int {
		if m.phase != 4 {
			c = c.endInt(b)
		}
		return c.final(b)
	}
	if lo.set {
		if f := fin(m.lo, lo.d); f < 0 || f == 0 && !lo.incl {
			return false
		}
	}
	if hi.set {
		if f := fin(m.hi, hi.d); f > 0 || f == 0 && !hi.incl {
			return false
		}
	}
	return true
}

// magDFA is a small deterministic automaton over "0123456789.".
type magDFA struct {
	next   [][11]int32 // per state: digits 0-9, then '.'; -1: none
	accept []bool
}

// buildMag builds the automaton of the magnitudes (integer: no fraction)
// within the bounds, without dead states; nil when there is none.
func buildMag(lo, hi bound, integer bool) *magDFA {
	d := &magDFA{}
	index := map[magState]int32{}
	var queue []magState
	add := func(m magState) int32 {
		if id, ok := index[m]; ok {
			return id
		}
		id := int32(len(queue))
		index[m] = id
		queue = append(queue, m)
		d.next = append(d.next, [11]int32{})
		d.accept = append(d.accept, m.accepts(lo, hi))
		return id
	}
	add(magState{})
	for i := 0; i < len(queue); i++ {
		for k := 0; k < 11; k++ {
			ch := byte('0' + k)
			if k == 10 {
				ch = '.'
			}
			if m, ok := queue[i].step(lo, hi, ch, integer); ok {
				d.next[i][k] = add(m)
			} else {
				d.next[i][k] = -1
			}
		}
	}
	// Trim the states that reach no accepting state.
	live := make([]bool, len(d.next))
	for changed := true; changed; {
		changed = false
		for s := range d.next {
			if live[s] {
				continue
			}
			ok := d.accept[s]
			for _, t := range d.next[s] {
				ok = ok || t >= 0 && live[t]
			}
			if ok {
				live[s] = true
				changed = true
			}
		}
	}
	if !live[0] {
		return nil
	}
	for s := range d.next {
		for k, t := range d.next[s] {
			if t >= 0 && !live[t] {
				d.next[s][k] = -1
			}
		}
	}
	return d
}

// emitMag writes the automaton into n from from; returns the end.
func (n *nfa) emitMag(from int32, d *magDFA) int32 {
	states := make([]int32, len(d.next))
	for i := range states {
		states[i] = n.newState()
	}
	n.eps(from, states[0])
	end := n.newState()
	for s, next := range d.next {
		for k := 0; k < 10; {
			t := next[k]
			j := k
			for j+1 < 10 && next[j+1] == t {
				j++
			}
			if t >= 0 {
				n.edge(states[s], byte('0'+k), byte('0'+j), states[t])
			}
			k = j + 1
		}
		if t := next[10]; t >= 0 {
			n.edge(states[s], '.', '.', states[t])
		}
		if d.accept[s] {
			n.eps(states[s], end)
		}
	}
	return end
}

// numberEmitter writes a JSON number (integer: no fraction or
// exponent) within iv; ok is false when the interval holds no such
// number.
func (n *nfa) numberEmitter(iv interval, integer bool) (e emitter, ok bool) {
	if !iv.lo.set && !iv.hi.set {
		return func(s int32) int32 { return n.emitPlainNumber(s, integer) }, true
	}
	var branches []emitter
	// Without a sign: the magnitude is the value.
	if lo, hi, ok := magBounds(iv.lo, iv.hi); ok {
		if d := buildMag(lo, hi, integer); d != nil {
			branches = append(branches, func(s int32) int32 { return n.emitMag(s, d) })
		}
	}
	// With a minus sign: value -m within [lo, hi] is m within [-hi, -lo].
	nlo, nhi := iv.hi, iv.lo
	nlo.d, nhi.d = nlo.d.negate(), nhi.d.negate()
	if lo, hi, ok := magBounds(nlo, nhi); ok {
		if d := buildMag(lo, hi, integer); d != nil {
			branches = append(branches, func(s int32) int32 { return n.emitMag(n.lit(s, "-"), d) })
		}
	}
	switch len(branches) {
	case 0:
		return nil, false
	case 1:
		return branches[0], true
	}
	return func(s int32) int32 { return n.alt(s, branches...) }, true
}

// emitPlainNumber writes any JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// (integer: without the fraction and exponent).
func (n *nfa) emitPlainNumber(from int32, integer bool) int32 {
	digits := func(s int32) int32 {
		return n.star(n.byteRange(s, '0', '9'), func(s int32) int32 { return n.byteRange(s, '0', '9') })
	}
	s := n.opt(from, func(s int32) int32 { return n.lit(s, "-") })
	s = n.alt(s,
		func(s int32) int32 { return n.lit(s, "0") },
		func(s int32) int32 {
			return n.star(n.byteRange(s, '1', '9'), func(s int32) int32 { return n.byteRange(s, '0', '9') })
		})
	if integer {
		return s
	}
	s = n.opt(s, func(s int32) int32 { return digits(n.lit(s, ".")) })
	return n.opt(s, func(s int32) int32 {
		e := n.byteRange(s, 'e', 'e')
		n.edge(s, 'E', 'E', e)
		e = n.opt(e, func(s int32) int32 {
			t := n.byteRange(s, '+', '+')
			n.edge(s, '-', '-', t)
			return t
		})
		return digits(e)
	})
}
