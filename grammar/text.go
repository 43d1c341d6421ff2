package grammar

import "math"

// Free text. Inside a JSON string most of the vocabulary is allowed, and
// a plain walk of the trie would visit most of its nodes for each state
// of a string. Two summaries let the walk skip whole subtrees instead:
//
//   - per trie node (Vocab.textNeed): whether every token below it goes on
//     from a character boundary with valid UTF-8 text (no quote, backslash
//     or control byte; a token may end inside a character), and how many
//     characters the longest of them needs (a partial one counted);
//   - per grammar state (Grammar.textBudget): whether the state is "free
//     text": every character in that sense leads to one same next state,
//     through the same UTF-8 states for every byte sequence, and for how
//     many characters in a row that holds (unbounded for a loop: a plain
//     string; maxLength - k at the k-th character of a bounded one).
//
// A subtree whose tokens need no more characters than the state's budget
// is allowed whole: its tokens are a range of the trie's token list.

// UTF-8 decoding states of a JSON string's raw text.
const (
	uBoundary uint8 = iota
	uNeed1          // one continuation byte
	uNeed2
	uNeed3
	uE0 // after E0: A0-BF, then one more
	uED // after ED: 80-9F (no surrogates), then one more
	uF0 // after F0: 90-BF, then two more
	uF4 // after F4: 80-8F, then two more
	uBad
)

// uNext reads byte b in UTF-8 state u: the next state, whether it
// completes a character, and false when the byte is not valid raw JSON
// string text there.
func uNext(u uint8, b byte) (uint8, bool, bool) {
	cont := b >= 0x80 && b <= 0xBF
	switch u {
	case uBoundary:
		switch {
		case b >= 0x20 && b <= 0x7F:
			if b == '"' || b == '\\' {
				return uBad, false, false
			}
			return uBoundary, true, true
		case b >= 0xC2 && b <= 0xDF:
			return uNeed1, false, true
		case b == 0xE0:
			return uE0, false, true
		case b == 0xED:
			return uED, false, true
		case b >= 0xE1 && b <= 0xEF:
			return uNeed2, false, true
		case b == 0xF0:
			return uF0, false, true
		case b >= 0xF1 && b <= 0xF3:
			return uNeed3, false, true
		case b == 0xF4:
			return uF4, false, true
		}
		return uBad, false, false
	case uNeed1:
		if cont {
			return uBoundary, true, true
		}
	case uNeed2:
		if cont {
			return uNeed1, false, true
		}
	case uNeed3:
		if cont {
			return uNeed2, false, true
		}
	case uE0:
		if b >= 0xA0 && b <= 0xBF {
			return uNeed1, false, true
		}
	case uED:
		if b >= 0x80 && b <= 0x9F {
			return uNeed1, false, true
		}
	case uF0:
		if b >= 0x90 && b <= 0xBF {
			return uNeed2, false, true
		}
	case uF4:
		if b >= 0x80 && b <= 0x8F {
			return uNeed2, false, true
		}
	}
	return uBad, false, false
}

// noText marks a trie node whose subtree cannot be skipped as text.
const noText = math.MaxUint16

// textSummary computes Vocab.textNeed; pathOK[i] says the path to node i
// is valid text from a boundary, chars[i] how many characters it needs.
func (v *Vocab) textSummary() (pathOK []bool, chars []uint16) {
	n := len(v.tb)
	u := make([]uint8, n)
	chars = make([]uint16, n) // characters completed along the path, plus one for a partial one
	pathOK = make([]bool, n)
	var pathBad [maxTokenBytes + 1]bool
	bad := make([]int32, n+1) // bad[i+1]: bad nodes among 0..i
	var pathU [maxTokenBytes + 1]uint8
	var pathC [maxTokenBytes + 1]uint16
	pathU[0] = uBoundary
	for i := 0; i < n; i++ {
		d := int(v.tdepth[i])
		pu, pc := pathU[d-1], pathC[d-1]
		isBad := pu == uBad
		nu, done, ok := uint8(uBad), false, false
		if !isBad {
			nu, done, ok = uNext(pu, v.tb[i])
			isBad = !ok
		}
		c := pc
		if pu != uBoundary {
			c-- // the partial character counted at the parent
		}
		if done || nu != uBoundary {
			c++
		}
		u[i], chars[i] = nu, min(c, noText-1)
		pathU[d], pathC[d] = nu, chars[i]
		pathBad[d] = pathBad[d-1] || isBad
		pathOK[i] = !pathBad[d]
		bad[i+1] = bad[i]
		if isBad {
			bad[i+1]++
		}
	}
	// sub[i]: the most characters any node of i's subtree (i included)
	// needs; children come after their parent.
	sub := make([]uint16, n)
	for i := n - 1; i >= 0; i-- {
		m := chars[i]
		for c := int32(i + 1); c < v.tend[i]; c = v.tend[c] {
			m = max(m, sub[c])
		}
		sub[i] = m
	}
	v.textNeed = make([]uint16, n)
	for i := 0; i < n; i++ {
		v.textNeed[i] = noText
		if u[i] != uBoundary || bad[v.tend[i]]-bad[i+1] != 0 {
			continue
		}
		m := uint16(0)
		for c := int32(i + 1); c < v.tend[i]; c = v.tend[c] {
			m = max(m, sub[c])
		}
		if m >= chars[i] {
			v.textNeed[i] = m - chars[i]
		} else {
			v.textNeed[i] = 0
		}
	}
	return pathOK, chars
}

// unboundedText is the budget of a free-text loop: more than any token
// needs, less than noText.
const unboundedText = noText - 1

// freeText reports whether s is free text (see above) and its next
// state after one character.
func (g *Grammar) freeText(s int32) (int32, bool) {
	// Quick refusals: most states read no plain letter.
	if g.next(s, 'a') < 0 || g.next(s, ' ') < 0 || g.next(s, '~') < 0 {
		return -1, false
	}
	type pair struct {
		u uint8
		t int32
	}
	succ := int32(-1)
	seen := []pair{{uBoundary, s}}
	for k := 0; k < len(seen); k++ {
		p := seen[k]
		for b := 0; b < 256; b++ {
			u2, done, ok := uNext(p.u, byte(b))
			if !ok {
				continue
			}
			t2 := g.next(p.t, byte(b))
			if t2 < 0 {
				return -1, false
			}
			if done {
				if succ < 0 {
					succ = t2
				} else if succ != t2 {
					return -1, false
				}
				continue
			}
			q := pair{u2, t2}
			found := false
			for _, x := range seen {
				found = found || x == q
			}
			if !found {
				if len(seen) > 64 {
					return -1, false
				}
				seen = append(seen, q)
			}
		}
	}
	return succ, succ >= 0
}

// computeTextBudget fills g.textBudget: -1 for a state that is not free
// text, else how many characters in a row it takes.
func (g *Grammar) computeTextBudget() {
	n := len(g.flags)
	g.textBudget = make([]int32, n)
	next := make([]int32, n)
	const unknown = -2
	for s := range g.textBudget {
		g.textBudget[s] = unknown
	}
	for s := 0; s < n; s++ {
		if g.textBudget[s] != unknown {
			continue
		}
		// Follow the chain of free-text states from s.
		var chain []int32
		onChain := map[int32]bool{}
		t := int32(s)
		end := int32(0) // the budget past the chain's end
		for {
			if b := g.textBudget[t]; b != unknown {
				end = max(b, 0)
				break
			}
			if onChain[t] {
				end = unboundedText
				break
			}
			nx, ok := g.freeText(t)
			if !ok {
				g.textBudget[t] = -1
				end = 0
				break
			}
			chain = append(chain, t)
			onChain[t] = true
			next[t] = nx
			t = nx
		}
		for i := len(chain) - 1; i >= 0; i-- {
			if end < unboundedText {
				end++
			}
			g.textBudget[chain[i]] = end
		}
	}
}
