package grammar

import (
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// Token masks.
//
// The tokens allowed after a stack (s, p) are those the top frame's state
// s reads without ending its rule, plus, where the rule can end part-way
// through a token, the rest of that token read by the caller p. The first
// part depends on s alone: a walk of the vocabulary's trie from s, which
// skips each subtree at the first byte the automaton refuses, computes it
// once, together with the trie nodes where the rule may end (pops). The
// walk is cached per state, so a state seen before costs a lookup; for a
// grammar without recursion (every $ref inlined, the common case) the
// whole mask is that cached walk, and EOS is in it where the text may end.
// The rest of a popped token is a walk of that node's subtree from the
// caller's state, cached per (node, state).
//
// This machinery is written by hand after llama.cpp's grammar sampler and
// XGrammar's split of context-independent tokens; no Go library does it.

// walkResult is one walk: the tokens it allows, the nodes where the
// bottom frame may end with bytes left, and whether it may end before
// reading any.
type walkResult struct {
	dense      []uint64 // nil: sparse
	ids        []int32
	pops       []int32
	popAtStart bool
	count      int
	bytes      int
}

// Constraint is a Grammar over a Vocab, with the cache of walks. It is
// safe for concurrent use: every sequence that generates with the grammar
// shares it (a server keeps one per schema and tokenizer).
type Constraint struct {
	g *Grammar
	v *Vocab

	root []atomic.Pointer[walkResult] // walks from the trie's root, per state
	mu   sync.Mutex
	sub  map[int64]*walkResult // walks below a node: node<<32 | state
	// pair holds whole masks of a stack whose mask depends only on its
	// top state and its caller's state: state<<32 | caller state.
	pair    map[int64][]uint64
	used    atomic.Int64 // bytes the cache holds
	maxUsed int64

	hits, misses atomic.Int64
	pool         sync.Pool // *walker
}

// DefaultCacheBytes bounds a Constraint's cache of masks.
const DefaultCacheBytes = 256 << 20

// NewConstraint pairs a grammar with a vocabulary.
func NewConstraint(g *Grammar, v *Vocab) *Constraint {
	return &Constraint{g: g, v: v, root: make([]atomic.Pointer[walkResult], g.States()), sub: map[int64]*walkResult{}, pair: map[int64][]uint64{}, maxUsed: DefaultCacheBytes}
}

// SetCacheBytes bounds the memory of the mask cache (past it, masks are
// computed each time).
func (c *Constraint) SetCacheBytes(n int64) { c.maxUsed = n }

// Grammar returns the grammar.
func (c *Constraint) Grammar() *Grammar { return c.g }

// Vocab returns the vocabulary.
func (c *Constraint) Vocab() *Vocab { return c.v }

// CacheStats reports the mask cache's lookups that found a walk (hits),
// those that computed one (misses), and the bytes it holds.
func (c *Constraint) CacheStats() (hits, misses, bytes int64) {
	return c.hits.Load(), c.misses.Load(), c.used.Load()
}

// Precompute walks every state's mask now (a grammar's cold cost paid
// once, as XGrammar does at compile time); states past the cache limit
// are left to be computed when met.
func (c *Constraint) Precompute() {
	for s := range c.root {
		c.rootWalk(int32(s))
	}
}

func (c *Constraint) rootWalk(s int32) *walkResult {
	if w := c.root[s].Load(); w != nil {
		c.hits.Add(1)
		return w
	}
	c.misses.Add(1)
	w := c.walk(-1, s)
	if c.used.Load()+int64(w.bytes) <= c.maxUsed {
		if c.root[s].CompareAndSwap(nil, w) {
			c.used.Add(int64(w.bytes))
		}
	}
	return w
}

func (c *Constraint) subWalk(n, s int32) *walkResult {
	key := int64(n)<<32 | int64(uint32(s))
	c.mu.Lock()
	w, ok := c.sub[key]
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
		return w
	}
	c.misses.Add(1)
	w = c.walk(n, s)
	if c.used.Load()+int64(w.bytes) <= c.maxUsed {
		c.mu.Lock()
		if _, ok := c.sub[key]; !ok {
			c.sub[key] = w
			c.used.Add(int64(w.bytes) + 64)
		}
		c.mu.Unlock()
	}
	return w
}

// level is the walk's automaton after a trie node's prefix: one stack
// (state s over parent p, -1 being the walk's unknown caller) on the
// fast path, or (s = general) the set of stacks in walker.sets at the
// same depth.
type level struct{ s, p int32 }

const general = -2

// walker is a walk's scratch space.
type walker struct {
	tab    frameTab
	levels []level
	sets   [][]int32
	// pos has a bit per position of the trie's token list (Vocab.ttoks):
	// the tokens allowed, set by ranges.
	pos  []uint64
	pops []int32
	buf  []int32
}

// setRange sets bits lo..hi-1.
func setRange(b []uint64, lo, hi int32) {
	if lo >= hi {
		return
	}
	lw, hw := lo>>6, (hi-1)>>6
	lm := ^uint64(0) << (lo & 63)
	hm := ^uint64(0) >> (63 - (hi-1)&63)
	if lw == hw {
		b[lw] |= lm & hm
		return
	}
	b[lw] |= lm
	for w := lw + 1; w < hw; w++ {
		b[w] = ^uint64(0)
	}
	b[hw] |= hm
}

// walk computes the tokens allowed after (s, unknown caller) among the
// trie nodes below n (n = -1: every token), and the pops.
func (c *Constraint) walk(n, s int32) *walkResult {
	g, v := c.g, c.v
	wk, _ := c.pool.Get().(*walker)
	if wk == nil {
		wk = &walker{}
	}
	defer c.pool.Put(wk)
	wk.tab.reset()
	wk.pops = wk.pops[:0]
	if nw := (len(v.ttoks) + 63) / 64; len(wk.pos) != nw {
		wk.pos = make([]uint64, nw)
	}
	if len(wk.levels) < v.maxDepth+2 {
		wk.levels = make([]level, v.maxDepth+2)
		wk.sets = make([][]int32, v.maxDepth+2)
	}
	lo, hi, base := int32(0), v.fullEnd, 0
	seed := false // start from the clean tokens; walk the others
	if n >= 0 {
		lo, hi, base = n+1, v.tend[n], int(v.tdepth[n])
	} else if g.flags[s]&fCalls == 0 && g.textBudget[s] >= v.cleanNeed {
		lo, hi, seed = v.fullEnd, int32(len(v.tb)), true
	}
	// The walk sets bits of the token positions of nodes lo..hi-1 only:
	// the words it reads and clears afterwards are those (a subtree's
	// walk is short, and most walks are of subtrees).
	wlo, whi := int(v.toff[lo])>>6, (int(v.toff[hi])+63)>>6
	pos := wk.pos[wlo:whi]
	defer clear(pos)
	res := &walkResult{}
	// The start: (s, caller) with its calls pushed and ends seen.
	set, pop, end := g.closure(&wk.tab, s, -1, nil)
	res.popAtStart = pop
	if ok := wk.setLevel(0, set); ok {
		c.walkRange(wk, lo, hi, base)
	}
	res.pops = append([]int32(nil), wk.pops...)
	var eos []int32
	if end && n < 0 {
		eos = v.eos
	}
	count := len(eos)
	for _, w := range pos {
		count += bits.OnesCount64(w)
	}
	res.count = count
	switch {
	case seed:
		res.dense = slices.Clone(v.clean)
		for k, w := range pos {
			for ; w != 0; w &= w - 1 {
				id := v.ttoks[(wlo+k)<<6+bits.TrailingZeros64(w)]
				res.dense[id>>6] |= 1 << (id & 63)
			}
		}
		for _, id := range eos {
			res.dense[id>>6] |= 1 << (id & 63)
		}
		res.bytes = len(res.dense) * 8
	case count <= v.size/32:
		res.ids = make([]int32, 0, count)
		res.ids = append(res.ids, eos...)
		for k, w := range pos {
			for ; w != 0; w &= w - 1 {
				res.ids = append(res.ids, v.ttoks[(wlo+k)<<6+bits.TrailingZeros64(w)])
			}
		}
		res.bytes = len(res.ids) * 4
	case n < 0 && count > len(v.ttoks)/2:
		// A walk of the whole trie: start from every token and clear
		// those refused (positions 0..full-1, the whole trie's tokens).
		res.dense = slices.Clone(v.all)
		full := int(v.toff[v.fullEnd])
		for k, w := range wk.pos[:(full+63)/64] {
			w = ^w
			if k == (full-1)/64 && full&63 != 0 {
				w &= 1<<(full&63) - 1
			}
			for ; w != 0; w &= w - 1 {
				id := v.ttoks[k<<6+bits.TrailingZeros64(w)]
				res.dense[id>>6] &^= 1 << (id & 63)
			}
		}
		for _, id := range eos {
			res.dense[id>>6] |= 1 << (id & 63)
		}
		res.bytes = len(res.dense) * 8
	default:
		res.dense = make([]uint64, (v.size+63)/64)
		for k, w := range pos {
			for ; w != 0; w &= w - 1 {
				id := v.ttoks[(wlo+k)<<6+bits.TrailingZeros64(w)]
				res.dense[id>>6] |= 1 << (id & 63)
			}
		}
		for _, id := range eos {
			res.dense[id>>6] |= 1 << (id & 63)
		}
		res.bytes = len(res.dense) * 8
	}
	res.bytes += len(res.pops)*4 + 64
	return res
}

// setLevel sets the level at depth d to a set of stacks (a single one
// takes the fast path); false when the set is empty.
func (wk *walker) setLevel(d int, set []int32) bool {
	set = uniqueInt32(set)
	switch len(set) {
	case 0:
		return false
	case 1:
		fr := wk.tab.frames[set[0]]
		wk.levels[d] = level{fr.state, fr.parent}
	default:
		wk.levels[d] = level{general, -1}
		wk.sets[d] = append(wk.sets[d][:0], set...)
	}
	return true
}

// walkRange walks trie nodes lo..hi-1 (whose depth is base+1 and more)
// from the level at depth 0.
func (c *Constraint) walkRange(wk *walker, lo, hi int32, base int) {
	g, v := c.g, c.v
	trans, flags, rule, cls, ncls := g.trans, g.flags, g.rule, &g.cls, int32(g.ncls)
	nodes := v.nodes
	budget := g.textBudget
	loops, below := g.loops, v.below
	levels := wk.levels
	pos := wk.pos
	for i := lo; i < hi; {
		nd := &nodes[i]
		d := int(nd.depth) - base
		pl := levels[d-1]
		var live, pop, end bool
		if pl.s >= 0 {
			s2 := trans[pl.s*ncls+int32(cls[nd.b])]
			if s2 < 0 {
				i = nd.end
				continue
			}
			f := flags[s2]
			if f&fCalls == 0 && (f&fAccept == 0 || pl.p < 0) {
				// Fast path: one stack, no call, no return to a known
				// caller.
				if t0, t1 := nd.toff, nodes[i+1].toff; t0 < t1 {
					setRange(pos, t0, t1)
				}
				if f&fAccept != 0 && rule[s2] != 0 && nd.end > i+1 {
					wk.pops = append(wk.pops, i)
				}
				if f&fBytes == 0 {
					i = nd.end
					continue
				}
				if int32(nd.need) <= budget[s2] && f&fAccept == 0 {
					// Free text that every token below fits: all of them.
					setRange(pos, nodes[i+1].toff, nodes[nd.end].toff)
					i = nd.end
					continue
				}
				if l := &loops[s2]; l[0]|l[1] != 0 {
					if bl := &below[i]; bl[0]&^l[0] == 0 && bl[1]&^l[1] == 0 {
						// Every byte below loops on s2: all of them.
						setRange(pos, nodes[i+1].toff, nodes[nd.end].toff)
						i = nd.end
						continue
					}
				}
				levels[d] = level{s2, pl.p}
				i++
				continue
			}
			var set []int32
			set, pop, end = g.closure(&wk.tab, s2, pl.p, wk.buf[:0])
			wk.buf = set[:0]
			live = wk.setLevel(d, set)
		} else {
			set := wk.buf[:0]
			for _, id := range wk.sets[d-1] {
				fr := wk.tab.frames[id]
				s2 := trans[fr.state*ncls+int32(cls[nd.b])]
				if s2 < 0 {
					continue
				}
				var pp, e bool
				set, pp, e = g.closure(&wk.tab, s2, fr.parent, set)
				pop = pop || pp
				end = end || e
			}
			wk.buf = set[:0]
			live = wk.setLevel(d, set)
		}
		if !live && !pop && !end {
			i = nd.end
			continue
		}
		setRange(pos, nd.toff, nodes[i+1].toff)
		if pop && nd.end > i+1 {
			wk.pops = append(wk.pops, i)
		}
		if !live {
			i = nd.end
			continue
		}
		i++
	}
}

// TokenMatcher is one sequence's run of a Constraint: the tokens allowed
// next, and the tokens chosen. It is not safe for concurrent use.
type TokenMatcher struct {
	c *Constraint
	m *Matcher
	// done: an EOS token was accepted; only EOS is allowed after it.
	done bool
	mask []uint64
	eos  []uint64 // the EOS-only mask
}

// NewMatcher starts a sequence at the beginning of the text.
func (c *Constraint) NewMatcher() *TokenMatcher {
	return &TokenMatcher{c: c, m: c.g.NewMatcher()}
}

// Matcher returns the byte-level run.
func (t *TokenMatcher) Matcher() *Matcher { return t.m }

// Done reports whether an EOS token was accepted.
func (t *TokenMatcher) Done() bool { return t.done }

// CanEnd reports whether the text so far is a complete JSON text for the
// grammar (an EOS token is allowed).
func (t *TokenMatcher) CanEnd() bool { return t.done || t.m.CanEnd() }

// Accept reads a token; false (and no change) when it is not allowed.
func (t *TokenMatcher) Accept(id int) bool {
	v := t.c.v
	if v.isEOS(id) {
		if t.CanEnd() {
			t.done = true
			return true
		}
		return false
	}
	if t.done {
		return false
	}
	b := v.Token(id)
	if b == nil {
		return false
	}
	return t.m.Accept(b)
}

// Mask returns the tokens allowed next as a bitset over the vocabulary's
// ids (bit id%64 of word id/64). It is valid until the next Accept and
// must not be modified: it may be the cache's own.
func (t *TokenMatcher) Mask() []uint64 {
	v := t.c.v
	words := (v.size + 63) / 64
	if t.done {
		if t.eos == nil {
			t.eos = make([]uint64, words)
			for _, e := range v.eos {
				t.eos[e>>6] |= 1 << (e & 63)
			}
		}
		return t.eos
	}
	m, c := t.m, t.c
	pairKey := int64(-1)
	if len(m.cores) == 1 {
		fr := m.tab.frames[m.cores[0]]
		if fr.parent < 0 {
			w := c.rootWalk(fr.state)
			if w.dense != nil && len(w.pops) == 0 && !w.popAtStart {
				return w.dense
			}
		} else {
			pairKey = int64(fr.state)<<32 | int64(m.tab.frames[fr.parent].state)
			c.mu.Lock()
			mask, ok := c.pair[pairKey]
			c.mu.Unlock()
			if ok {
				c.hits.Add(1)
				return mask
			}
		}
	}
	if len(t.mask) != words {
		t.mask = make([]uint64, words)
	} else {
		clear(t.mask)
	}
	deep := false
	for _, core := range m.cores {
		fr := m.tab.frames[core]
		w := c.rootWalk(fr.state)
		t.or(w)
		deep = t.cont(w, -1, fr.parent, 0) || deep
	}
	if pairKey >= 0 && !deep && c.used.Load()+int64(8*words) <= c.maxUsed {
		mask := slices.Clone(t.mask)
		c.mu.Lock()
		if _, ok := c.pair[pairKey]; !ok {
			c.pair[pairKey] = mask
			c.used.Add(int64(8*words) + 64)
		}
		c.mu.Unlock()
	}
	return t.mask
}

// cont adds the tokens that go on in the caller p after w's pops (n: the
// node w started below; -1 the root). deep reports whether it needed
// the caller's caller: the mask then depends on more than the top two
// frames' states.
func (t *TokenMatcher) cont(w *walkResult, n, p int32, depth int) (deep bool) {
	if !w.popAtStart && len(w.pops) == 0 {
		return false
	}
	if depth > 0 {
		deep = true
	}
	if p < 0 || depth > 1<<12 {
		return deep
	}
	fr := t.m.tab.frames[p]
	if w.popAtStart {
		var w2 *walkResult
		if n < 0 {
			w2 = t.c.rootWalk(fr.state)
		} else {
			w2 = t.c.subWalk(n, fr.state)
		}
		t.or(w2)
		deep = t.cont(w2, n, fr.parent, depth+1) || deep
	}
	for _, node := range w.pops {
		w2 := t.c.subWalk(node, fr.state)
		t.or(w2)
		deep = t.cont(w2, node, fr.parent, depth+1) || deep
	}
	return deep
}

func (t *TokenMatcher) or(w *walkResult) {
	if w.dense != nil {
		for i, x := range w.dense {
			t.mask[i] |= x
		}
		return
	}
	for _, id := range w.ids {
		t.mask[id>>6] |= 1 << (id & 63)
	}
}

// Allowed reports whether id is allowed next (through Mask).
func (t *TokenMatcher) Allowed(id int) bool {
	if id < 0 || id >= t.c.v.size {
		return false
	}
	m := t.Mask()
	return m[id>>6]>>(id&63)&1 != 0
}

var negInf = float32(math.Inf(-1))

// negInfs is a block of -Inf to copy over 64 logits at once.
var negInfs = func() (b [64]float32) {
	for i := range b {
		b[i] = negInf
	}
	return
}()

// Apply sets the logits of the tokens not allowed next to -Inf (logits
// past the vocabulary too). When no token is allowed (a vocabulary that
// cannot spell what the grammar needs), the EOS tokens are left so that
// generation ends.
func (t *TokenMatcher) Apply(logits []float32) {
	mask := t.Mask()
	any := false
	for i, w := range mask {
		base := i * 64
		if base >= len(logits) {
			break
		}
		seg := logits[base:min(base+64, len(logits))]
		switch {
		case w == 0:
			copy(seg, negInfs[:])
		case w == math.MaxUint64:
			any = true
		default:
			any = true
			for z := ^w; z != 0; z &= z - 1 {
				if j := bits.TrailingZeros64(z); j < len(seg) {
					seg[j] = negInf
				}
			}
		}
	}
	for j := len(mask) * 64; j < len(logits); j += 64 {
		copy(logits[j:], negInfs[:])
	}
	if !any {
		for _, e := range t.c.v.eos {
			if int(e) < len(logits) {
				logits[e] = 0
			}
		}
	}
}

// Count is the number of allowed tokens in a mask.
func Count(mask []uint64) int {
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	return n
}
