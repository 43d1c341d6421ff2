package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A regular-expression subset for "pattern", with ECMA-262's meaning
// (JSON Schema's dialect) over code points: literals, escapes (\d \D \w
// \W \s \S \t \n \r \f \v \0 \xHH \uHHHH \cX and escaped
// metacharacters), classes [...] and [^...] with ranges, ".", groups
// (...), (?:...) and (?<name>...), alternation, the quantifiers * + ? {n}
// {n,} {n,m} (greedy or lazy: the same language), and the anchors ^ and $
// at the start and end of the pattern or of a top-level alternative.
// Without an anchor a pattern matches anywhere in the string, as in JSON
// Schema. Lookaround, backreferences, word boundaries, Unicode property
// escapes and anchors elsewhere are refused by name.

type reOp uint8

const (
	reSet    reOp = iota // one character of set
	reCat                // subs in sequence
	reAlt                // any of subs
	reRepeat             // subs[0] min..max times (max < 0: unbounded)
	reEmpty              // the empty string
)

type reNode struct {
	op       reOp
	set      runeSet
	subs     []*reNode
	min, max int
}

// maxRegexRepeat bounds {n,m} counts; maxRegexDepth the nesting of groups.
const (
	maxRegexRepeat = 1000
	maxRegexDepth  = 100
)

type reParser struct {
	src   string
	pos   int
	depth int
}

// regexError says what in the pattern is refused.
type regexError struct{ msg string }

func (e *regexError) Error() string { return e.msg }

func (p *reParser) fail(format string, args ...any) {
	panic(&regexError{fmt.Sprintf(format, args...)})
}

// reAlternative is one top-level alternative with its anchors.
type reAlternative struct {
	node           *reNode
	atStart, atEnd bool
}

// parseRegex parses a pattern into its top-level alternatives.
func parseRegex(src string) (alts []reAlternative, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*regexError)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	if !utf8.ValidString(src) {
		return nil, &regexError{"pattern is not valid UTF-8"}
	}
	p := &reParser{src: src}
	for {
		var a reAlternative
		if p.peek() == '^' {
			p.pos++
			a.atStart = true
		}
		a.node = p.parseCat(true)
		if p.peek() == '$' {
			p.pos++
			a.atEnd = true
		}
		alts = append(alts, a)
		if p.pos >= len(p.src) {
			return alts, nil
		}
		switch p.peek() {
		case '|':
			p.pos++
		case ')':
			p.fail("unmatched ) at offset %d", p.pos)
		case '^':
			p.fail("anchor ^ at offset %d is not at the start of the pattern or of a top-level alternative", p.pos)
		case '$':
			p.fail("anchor $ at offset %d is not at the end of the pattern or of a top-level alternative", p.pos)
		default:
			p.fail("unexpected %q at offset %d", p.peek(), p.pos)
		}
	}
}

func (p *reParser) peek() rune {
	if p.pos >= len(p.src) {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return r
}

func (p *reParser) next() rune {
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return r
}

// parseAlt parses alternatives inside a group.
func (p *reParser) parseAlt() *reNode {
	var subs []*reNode
	for {
		subs = append(subs, p.parseCat(false))
		if p.peek() != '|' {
			break
		}
		p.pos++
	}
	if len(subs) == 1 {
		return subs[0]
	}
	return &reNode{op: reAlt, subs: subs}
}

// parseCat parses a sequence up to |, ) or the end. At the top level a
// $ that ends an alternative is left for the caller.
func (p *reParser) parseCat(top bool) *reNode {
	var subs []*reNode
	for p.pos < len(p.src) {
		r := p.peek()
		if r == '|' || r == ')' {
			break
		}
		if r == '$' {
			rest := p.src[p.pos+1:]
			if top && (rest == "" || rest[0] == '|') {
				break
			}
			p.fail("anchor $ at offset %d is not at the end of the pattern or of a top-level alternative", p.pos)
		}
		if r == '^' {
			p.fail("anchor ^ at offset %d is not at the start of the pattern or of a top-level alternative", p.pos)
		}
		subs = append(subs, p.parseRepeat())
	}
	switch len(subs) {
	case 0:
		return &reNode{op: reEmpty}
	case 1:
		return subs[0]
	}
	return &reNode{op: reCat, subs: subs}
}

func (p *reParser) parseRepeat() *reNode {
	start := p.pos
	atom := p.parseAtom()
	for quantified := false; ; quantified = true {
		min, max := 0, 0
		switch p.peek() {
		case '*':
			p.pos++
			min, max = 0, -1
		case '+':
			p.pos++
			min, max = 1, -1
		case '?':
			p.pos++
			min, max = 0, 1
		case '{':
			var ok bool
			if min, max, ok = p.parseBraces(); !ok {
				return atom // a literal {, read by the next atom
			}
		default:
			return atom
		}
		if p.peek() == '?' { // lazy: the same language
			p.pos++
		}
		if quantified {
			p.fail("quantifier at offset %d repeats a quantifier", start)
		}
		atom = &reNode{op: reRepeat, subs: []*reNode{atom}, min: min, max: max}
	}
}

// parseBraces reads {n}, {n,} or {n,m}; ok is false (and nothing is
// read) when the brace does not start one, as ECMA-262's Annex B reads it.
func (p *reParser) parseBraces() (min, max int, ok bool) {
	rest := p.src[p.pos:]
	end := strings.IndexByte(rest, '}')
	if end < 0 {
		return 0, 0, false
	}
	body := rest[1:end]
	lo, hi, comma := strings.Cut(body, ",")
	num := func(s string) (int, bool) {
		if s == "" {
			return 0, false
		}
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0, false
			}
		}
		if len(s) > 6 {
			return maxRegexRepeat + 1, true
		}
		v, _ := strconv.Atoi(s)
		return v, true
	}
	if min, ok = num(lo); !ok {
		return 0, 0, false
	}
	switch {
	case !comma:
		max = min
	case hi == "":
		max = -1
	default:
		if max, ok = num(hi); !ok {
			return 0, 0, false
		}
	}
	if min > maxRegexRepeat || max > maxRegexRepeat {
		p.fail("repetition {%s} at offset %d exceeds the limit of %d", body, p.pos, maxRegexRepeat)
	}
	if max >= 0 && max < min {
		p.fail("repetition {%s} at offset %d has its maximum below its minimum", body, p.pos)
	}
	p.pos += end + 1
	return min, max, true
}

func (p *reParser) parseAtom() *reNode {
	at := p.pos
	r := p.next()
	switch r {
	case '(':
		if p.depth >= maxRegexDepth {
			p.fail("groups nest deeper than the limit of %d", maxRegexDepth)
		}
		rest := p.src[p.pos:]
		switch {
		case strings.HasPrefix(rest, "?:"):
			p.pos += 2
		case strings.HasPrefix(rest, "?="), strings.HasPrefix(rest, "?!"):
			p.fail("lookahead (%s at offset %d is not supported", rest[:2], at)
		case strings.HasPrefix(rest, "?<="), strings.HasPrefix(rest, "?<!"):
			p.fail("lookbehind (%s at offset %d is not supported", rest[:3], at)
		case strings.HasPrefix(rest, "?<"):
			end := strings.IndexByte(rest, '>')
			if end < 0 {
				p.fail("unterminated group name at offset %d", at)
			}
			p.pos += end + 1
		case strings.HasPrefix(rest, "?"):
			p.fail("group modifier (? at offset %d is not supported", at)
		}
		p.depth++
		n := p.parseAlt()
		p.depth--
		if p.peek() != ')' {
			p.fail("missing ) for the group at offset %d", at)
		}
		p.pos++
		return n
	case '[':
		return &reNode{op: reSet, set: p.parseClass(at)}
	case '.':
		return &reNode{op: reSet, set: lineTerminators.complement()}
	case '\\':
		return &reNode{op: reSet, set: p.parseEscape(at, false)}
	case '*', '+', '?':
		p.fail("quantifier %q at offset %d follows nothing", r, at)
	case '{':
		p.pos = at
		if _, _, ok := p.parseBraces(); ok {
			p.fail("quantifier at offset %d follows nothing", at)
		}
		p.pos = at + 1
	}
	return &reNode{op: reSet, set: single(r).normalize()}
}

var (
	lineTerminators = runeSet{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}
	digitSet        = runeSet{{'0', '9'}}
	wordSet         = runeSet{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	// spaceSet is ECMA-262's WhiteSpace and LineTerminator.
	spaceSet = runeSet{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
		{0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}
)

// parseEscape reads what follows a backslash. inClass: inside [...],
// where \b is a backspace.
func (p *reParser) parseEscape(at int, inClass bool) runeSet {
	if p.pos >= len(p.src) {
		p.fail("pattern ends with a backslash")
	}
	r := p.next()
	switch r {
	case 'd':
		return digitSet
	case 'D':
		return digitSet.complement()
	case 'w':
		return wordSet
	case 'W':
		return wordSet.complement()
	case 's':
		return spaceSet
	case 'S':
		return spaceSet.complement()
	case 't':
		return single('\t')
	case 'n':
		return single('\n')
	case 'r':
		return single('\r')
	case 'f':
		return single('\f')
	case 'v':
		return single('\v')
	case '0':
		if c := p.peek(); c >= '0' && c <= '9' {
			p.fail("octal escape \\0%c at offset %d is not supported", c, at)
		}
		return single(0)
	case 'b':
		if inClass {
			return single('\b')
		}
		p.fail("word boundary \\b at offset %d is not supported", at)
	case 'B':
		p.fail("non-word-boundary \\B at offset %d is not supported", at)
	case 'x':
		return single(p.hex(2, at)).normalize()
	case 'u':
		if p.peek() == '{' {
			p.fail("code point escape \\u{...} at offset %d is not supported (it needs the u flag)", at)
		}
		v := p.hex(4, at)
		if v >= surrogateLo && v <= surrogateHi {
			p.fail("surrogate escape \\u%04X at offset %d is not supported", v, at)
		}
		return single(v)
	case 'c':
		c := p.peek()
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			p.pos++
			return single(c % 32)
		}
		p.fail("control escape \\c at offset %d needs a letter", at)
	case 'p', 'P':
		p.fail("Unicode property escape \\%c at offset %d is not supported", r, at)
	case 'k':
		p.fail("named backreference \\k at offset %d is not supported", at)
	}
	if r >= '1' && r <= '9' {
		p.fail("backreference \\%c at offset %d is not supported", r, at)
	}
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
		p.fail("unknown escape \\%c at offset %d", r, at)
	}
	return single(r).normalize()
}

func (p *reParser) hex(n, at int) rune {
	if p.pos+n > len(p.src) {
		p.fail("escape at offset %d needs %d hex digits", at, n)
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
	if err != nil {
		p.fail("escape at offset %d needs %d hex digits", at, n)
	}
	p.pos += n
	return rune(v)
}

// parseClass reads a class after its [.
func (p *reParser) parseClass(at int) runeSet {
	neg := false
	if p.peek() == '^' {
		neg = true
		p.pos++
	}
	var set runeSet
	// item reads one class atom: a single rune (ok) or a set (\d ...).
	item := func() (r rune, s runeSet, single bool) {
		if p.pos >= len(p.src) {
			p.fail("missing ] for the class at offset %d", at)
		}
		c := p.next()
		if c != '\\' {
			return c, nil, true
		}
		e := p.pos - 1
		s = p.parseEscape(e, true)
		if len(s) == 1 && s[0].lo == s[0].hi {
			return s[0].lo, nil, true
		}
		return 0, s, false
	}
	for {
		if p.pos >= len(p.src) {
			p.fail("missing ] for the class at offset %d", at)
		}
		if p.peek() == ']' {
			p.pos++
			break
		}
		lo, s, ok := item()
		if !ok {
			set = append(set, s...)
			continue
		}
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.pos++
			hi, s2, ok2 := item()
			if !ok2 {
				// [a-\d]: Annex B reads the - literally.
				set = append(set, runeRange{lo, lo}, runeRange{'-', '-'})
				set = append(set, s2...)
				continue
			}
			if hi < lo {
				p.fail("class range %c-%c at offset %d is out of order", lo, hi, at)
			}
			set = append(set, runeRange{lo, hi})
			continue
		}
		set = append(set, runeRange{lo, lo})
	}
	set = set.normalize()
	if neg {
		set = set.complement()
	}
	return set
}

// Rune-level automata. A pattern compiles to a nondeterministic automaton
// over characters, which is determinized (rdfa), intersected with the
// other string constraints (length, format) and then spelled in JSON's
// bytes by the compiler.

type rnEdge struct {
	set runeSet
	to  int32
}

type rnState struct {
	eps   []int32
	edges []rnEdge
}

type rnfa struct {
	states []rnState
	limit  int
}

func (n *rnfa) newState() int32 {
	if len(n.states) >= n.limit {
		panic(&regexError{fmt.Sprintf("pattern needs more than the limit of %d automaton states (Limits.States)", n.limit)})
	}
	n.states = append(n.states, rnState{})
	return int32(len(n.states) - 1)
}

func (n *rnfa) emit(from int32, node *reNode) int32 {
	switch node.op {
	case reEmpty:
		return from
	case reSet:
		to := n.newState()
		if !node.set.empty() {
			n.states[from].edges = append(n.states[from].edges, rnEdge{node.set, to})
		}
		return to
	case reCat:
		for _, s := range node.subs {
			from = n.emit(from, s)
		}
		return from
	case reAlt:
		end := n.newState()
		for _, s := range node.subs {
			st := n.newState()
			n.states[from].eps = append(n.states[from].eps, st)
			e := n.emit(st, s)
			n.states[e].eps = append(n.states[e].eps, end)
		}
		return end
	case reRepeat:
		sub := node.subs[0]
		for i := 0; i < node.min; i++ {
			st := n.newState()
			n.states[from].eps = append(n.states[from].eps, st)
			from = n.emit(st, sub)
		}
		out := n.newState()
		if node.max < 0 {
			loop := n.newState()
			n.states[from].eps = append(n.states[from].eps, loop)
			e := n.emit(loop, sub)
			n.states[e].eps = append(n.states[e].eps, loop)
			n.states[loop].eps = append(n.states[loop].eps, out)
			return out
		}
		for i := node.min; i < node.max; i++ {
			n.states[from].eps = append(n.states[from].eps, out)
			st := n.newState()
			n.states[from].eps = append(n.states[from].eps, st)
			from = n.emit(st, sub)
		}
		n.states[from].eps = append(n.states[from].eps, out)
		return out
	}
	panic("unreachable")
}

// rdfa is a deterministic automaton over characters: each state's edges
// have disjoint sets; state 0 is the start.
type rdfa struct {
	edges  [][]rnEdge
	accept []bool
}

// compilePattern builds the automaton of the strings a pattern matches
// (search semantics, as JSON Schema's pattern).
func compilePattern(src string, limit int) (d *rdfa, err error) {
	alts, err := parseRegex(src)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*regexError)
			if !ok {
				panic(r)
			}
			d, err = nil, e
		}
	}()
	n := &rnfa{limit: limit}
	start := n.newState()
	end := n.newState()
	anyLoop := func(from int32) int32 {
		loop := n.newState()
		n.states[from].eps = append(n.states[from].eps, loop)
		n.states[loop].edges = append(n.states[loop].edges, rnEdge{anyRune, loop})
		out := n.newState()
		n.states[loop].eps = append(n.states[loop].eps, out)
		return out
	}
	for _, a := range alts {
		s := n.newState()
		n.states[start].eps = append(n.states[start].eps, s)
		if !a.atStart {
			s = anyLoop(s)
		}
		e := n.emit(s, a.node)
		if !a.atEnd {
			e = anyLoop(e)
		}
		n.states[e].eps = append(n.states[e].eps, end)
	}
	return n.determinize(start, end, limit)
}

// determinize is the subset construction over character classes.
func (n *rnfa) determinize(start, end int32, limit int) (*rdfa, error) {
	d := &rdfa{}
	index := map[string]int32{}
	var queue [][]int32
	mark := make([]bool, len(n.states))
	closure := func(set []int32) []int32 {
		stack := append([]int32(nil), set...)
		var out []int32
		for _, s := range set {
			mark[s] = true
		}
		out = append(out, set...)
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, t := range n.states[s].eps {
				if !mark[t] {
					mark[t] = true
					out = append(out, t)
					stack = append(stack, t)
				}
			}
		}
		for _, s := range out {
			mark[s] = false
		}
		sortInt32(out)
		return out
	}
	add := func(set []int32) (int32, error) {
		k := setKey(set)
		if id, ok := index[k]; ok {
			return id, nil
		}
		if len(d.edges) >= limit {
			return 0, &regexError{fmt.Sprintf("pattern needs more than the limit of %d automaton states (Limits.States)", limit)}
		}
		id := int32(len(d.edges))
		index[k] = id
		d.edges = append(d.edges, nil)
		acc := false
		for _, s := range set {
			acc = acc || s == end
		}
		d.accept = append(d.accept, acc)
		queue = append(queue, set)
		return id, nil
	}
	if _, err := add(closure([]int32{start})); err != nil {
		return nil, err
	}
	for i := 0; i < len(queue); i++ {
		set := queue[i]
		var bounds []rune
		var edges []rnEdge
		for _, s := range set {
			for _, e := range n.states[s].edges {
				edges = append(edges, e)
				for _, r := range e.set {
					bounds = append(bounds, r.lo, r.hi+1)
				}
			}
		}
		bounds = uniqueRunes(bounds)
		byTarget := map[string]int{}
		var out []rnEdge
		var targets [][]int32
		for b := 0; b+1 < len(bounds); b++ {
			lo, hi := bounds[b], bounds[b+1]-1
			var tgt []int32
			for _, e := range edges {
				if e.set.contains(lo) {
					tgt = append(tgt, e.to)
				}
			}
			if len(tgt) == 0 {
				continue
			}
			tgt = closure(uniqueInt32(tgt))
			k := setKey(tgt)
			j, ok := byTarget[k]
			if !ok {
				j = len(out)
				byTarget[k] = j
				out = append(out, rnEdge{})
				targets = append(targets, tgt)
			}
			out[j].set = append(out[j].set, runeRange{lo, hi})
		}
		for j := range out {
			id, err := add(targets[j])
			if err != nil {
				return nil, err
			}
			out[j].to = id
			out[j].set = out[j].set.normalize()
		}
		d.edges[i] = out
	}
	return d, nil
}

// intersect is the product automaton: the strings both accept.
func (a *rdfa) intersect(b *rdfa, limit int) (*rdfa, error) {
	d := &rdfa{}
	index := map[[2]int32]int32{}
	var queue [][2]int32
	add := func(p [2]int32) (int32, error) {
		if id, ok := index[p]; ok {
			return id, nil
		}
		if len(d.edges) >= limit {
			return 0, fmt.Errorf("string constraints need more than the limit of %d automaton states (Limits.States)", limit)
		}
		id := int32(len(d.edges))
		index[p] = id
		d.edges = append(d.edges, nil)
		d.accept = append(d.accept, a.accept[p[0]] && b.accept[p[1]])
		queue = append(queue, p)
		return id, nil
	}
	if _, err := add([2]int32{0, 0}); err != nil {
		return nil, err
	}
	for i := 0; i < len(queue); i++ {
		p := queue[i]
		for _, ea := range a.edges[p[0]] {
			for _, eb := range b.edges[p[1]] {
				s := ea.set.intersect(eb.set)
				if s.empty() {
					continue
				}
				to, err := add([2]int32{ea.to, eb.to})
				if err != nil {
					return nil, err
				}
				d.edges[i] = append(d.edges[i], rnEdge{s, to})
			}
		}
	}
	return d, nil
}

// lengthDFA accepts strings of min..max characters (max < 0: no bound).
func lengthDFA(min, max int) *rdfa {
	top := max
	if max < 0 {
		top = min
	}
	d := &rdfa{edges: make([][]rnEdge, top+1), accept: make([]bool, top+1)}
	for k := 0; k <= top; k++ {
		d.accept[k] = k >= min
		switch {
		case k < top:
			d.edges[k] = []rnEdge{{anyRune, int32(k + 1)}}
		case max < 0:
			d.edges[k] = []rnEdge{{anyRune, int32(k)}}
		}
	}
	return d
}

// literalDFA accepts exactly s.
func literalDFA(s string) *rdfa {
	rs := []rune(s)
	d := &rdfa{edges: make([][]rnEdge, len(rs)+1), accept: make([]bool, len(rs)+1)}
	for i, r := range rs {
		d.edges[i] = []rnEdge{{single(r).normalize(), int32(i + 1)}}
		if d.edges[i][0].set.empty() { // U+FFFD stands for a lone surrogate
			d.edges[i][0].set = single(replacementR)
		}
	}
	d.accept[len(rs)] = true
	return d
}

// trim removes the states from which no accepting state is reachable;
// it reports whether the start state survives (the language is not
// empty).
func (a *rdfa) trim() bool {
	live := make([]bool, len(a.edges))
	for changed := true; changed; {
		changed = false
		for s := range a.edges {
			if live[s] {
				continue
			}
			if a.accept[s] {
				live[s] = true
				changed = true
				continue
			}
			for _, e := range a.edges[s] {
				if live[e.to] {
					live[s] = true
					changed = true
					break
				}
			}
		}
	}
	for s := range a.edges {
		out := a.edges[s][:0]
		for _, e := range a.edges[s] {
			if live[e.to] {
				out = append(out, e)
			}
		}
		a.edges[s] = out
	}
	return live[0]
}

// matches runs the automaton over s.
func (a *rdfa) matches(s string) bool {
	st := int32(0)
	for _, r := range s {
		next := int32(-1)
		for _, e := range a.edges[st] {
			if e.set.contains(r) {
				next = e.to
				break
			}
		}
		if next < 0 {
			return false
		}
		st = next
	}
	return a.accept[st]
}

// isAll reports whether the automaton accepts every string (one
// accepting state looping on every character).
func (a *rdfa) isAll() bool {
	return len(a.edges) == 1 && a.accept[0] && len(a.edges[0]) == 1 && a.edges[0][0].set.equal(anyRune)
}

func uniqueRunes(x []rune) []rune {
	if len(x) == 0 {
		return x
	}
	sortRunes(x)
	out := x[:1]
	for _, v := range x[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}
