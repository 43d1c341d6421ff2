package grammar

import (
	"fmt"
	"strings"
)

// Grammar is a compiled grammar: a set of rules, each a deterministic
// automaton over bytes whose states may also call another rule (push it,
// and come back to a return state when it ends). Rule 0 is the whole
// text; it is never called. Calls appear only where a schema recurses
// (a $ref cycle, or "any JSON value" nested in itself) or a large
// subschema repeats; everything else is inlined into one automaton. A
// Grammar is immutable and safe for concurrent use.
type Grammar struct {
	ncls int
	cls  [256]uint8
	// trans[s*ncls+c] is the state after a byte of class c in state s,
	// or -1.
	trans []int32
	flags []uint8
	rule  []int32 // the rule of each state
	calls [][]call
	start []int32 // each rule's start state
	names []string
	// textBudget[s]: -1, or the characters in a row that state s takes as
	// free text (text.go).
	textBudget []int32
	// loops[s] has the ASCII bytes that lead from s back to s, for a
	// state that is not accepting (mask.go skips the trie's subtrees
	// made of them); nil where there are none.
	loops [][2]uint64
	// description says what was compiled, for errors and String.
	description string
}

type call struct{ rule, ret int32 }

const (
	fAccept uint8 = 1 << iota // the state's rule may end here
	fCalls                    // the state calls rules
	fBytes                    // the state has byte transitions
)

// States is the number of automaton states.
func (g *Grammar) States() int { return len(g.flags) }

// Rules is the number of rules (1 for a grammar without recursion).
func (g *Grammar) Rules() int { return len(g.start) }

func (g *Grammar) String() string {
	return fmt.Sprintf("grammar(%s: %d rules, %d states, %d byte classes)", g.description, len(g.start), len(g.flags), g.ncls)
}

// next is the state after byte b in state s, or -1.
func (g *Grammar) next(s int32, b byte) int32 {
	return g.trans[int(s)*g.ncls+int(g.cls[b])]
}

// ruleSpec is a rule's automaton in the NFA.
type ruleSpec struct {
	start, end int32
	name       string
}

// build determinizes each rule of n (the subset construction, over byte
// classes), drops the states from which the rule cannot end, and checks
// that no rule calls itself before reading a byte.
func build(n *nfa, rules []ruleSpec, lim Limits) (*Grammar, error) {
	g := &Grammar{}
	// Byte classes: the bytes no edge tells apart share a class.
	var cut [257]bool
	cut[0], cut[256] = true, true
	for _, st := range n.states {
		for _, e := range st.edges {
			cut[e.lo] = true
			cut[int(e.hi)+1] = true
		}
	}
	c := -1
	for b := 0; b < 256; b++ {
		if cut[b] {
			c++
		}
		g.cls[b] = uint8(c)
	}
	g.ncls = c + 1

	mark := make([]uint32, len(n.states))
	gen := uint32(0)
	var stack []int32
	closure := func(set []int32) []int32 {
		gen++
		out := make([]int32, 0, len(set)*2)
		stack = stack[:0]
		for _, s := range set {
			if mark[s] != gen {
				mark[s] = gen
				out = append(out, s)
				stack = append(stack, s)
			}
		}
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, t := range n.states[s].eps {
				if mark[t] != gen {
					mark[t] = gen
					out = append(out, t)
					stack = append(stack, t)
				}
			}
		}
		sortInt32(out)
		return out
	}

	type pending struct {
		set  []int32
		rule int32
	}
	index := map[string]int32{}
	var queue []pending
	work := 0
	add := func(set []int32, r int32) (int32, error) {
		k := fmt.Sprint(r) + ":" + setKey(set)
		if id, ok := index[k]; ok {
			return id, nil
		}
		if len(queue) >= lim.DFAStates {
			return 0, fmt.Errorf("the grammar needs more than the limit of %d automaton states (Limits.DFAStates)", lim.DFAStates)
		}
		id := int32(len(queue))
		index[k] = id
		queue = append(queue, pending{set, r})
		var f uint8
		for _, s := range set {
			if s == rules[r].end {
				f |= fAccept
			}
		}
		g.flags = append(g.flags, f)
		g.rule = append(g.rule, r)
		g.calls = append(g.calls, nil)
		g.trans = append(g.trans, make([]int32, g.ncls)...)
		return id, nil
	}
	for r, spec := range rules {
		id, err := add(closure([]int32{spec.start}), int32(r))
		if err != nil {
			return nil, err
		}
		g.start = append(g.start, id)
		g.names = append(g.names, spec.name)
	}
	targets := make([][]int32, g.ncls)
	for i := 0; i < len(queue); i++ {
		p := queue[i]
		for c := range targets {
			targets[c] = targets[c][:0]
		}
		callTargets := map[int32][]int32{}
		var callOrder []int32
		for _, s := range p.set {
			st := &n.states[s]
			work += 1 + len(st.edges)
			for _, e := range st.edges {
				for c := g.cls[e.lo]; ; c++ {
					targets[c] = append(targets[c], e.to)
					if c == g.cls[e.hi] {
						break
					}
				}
			}
			for _, cl := range st.calls {
				if _, ok := callTargets[cl.rule]; !ok {
					callOrder = append(callOrder, cl.rule)
				}
				callTargets[cl.rule] = append(callTargets[cl.rule], cl.to)
			}
		}
		if work > lim.Work {
			return nil, fmt.Errorf("building the grammar takes more than the limit of %d steps (Limits.Work)", lim.Work)
		}
		row := int(i) * g.ncls
		seen := map[string]int32{}
		for c := range targets {
			if len(targets[c]) == 0 {
				g.trans[row+c] = -1
				continue
			}
			raw := uniqueInt32(targets[c])
			k := setKey(raw)
			id, ok := seen[k]
			if !ok {
				cl := closure(raw)
				work += len(cl)
				var err error
				if id, err = add(cl, p.rule); err != nil {
					return nil, err
				}
				seen[k] = id
			}
			g.trans[row+c] = id
			g.flags[i] |= fBytes
		}
		for _, r := range callOrder {
			id, err := add(closure(uniqueInt32(callTargets[r])), p.rule)
			if err != nil {
				return nil, err
			}
			g.calls[i] = append(g.calls[i], call{r, id})
			g.flags[i] |= fCalls
		}
	}
	if err := g.trim(); err != nil {
		return nil, err
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	g.computeTextBudget()
	g.loops = make([][2]uint64, len(g.flags))
	for st := range g.flags {
		if g.flags[st]&fAccept != 0 {
			continue
		}
		for b := 1; b < 0x80; b++ {
			if g.next(int32(st), byte(b)) == int32(st) {
				g.loops[st][b>>6] |= 1 << (b & 63)
			}
		}
	}
	return g, nil
}

// trim drops the states from which their rule cannot end (through bytes
// and calls of rules that can end), and the edges into them, so that
// every prefix the grammar allows can be completed.
func (g *Grammar) trim() error {
	n := len(g.flags)
	live := make([]bool, n)
	ruleLive := make([]bool, len(g.start))
	for changed := true; changed; {
		changed = false
		for s := 0; s < n; s++ {
			if live[s] {
				continue
			}
			ok := g.flags[s]&fAccept != 0
			for c := 0; c < g.ncls && !ok; c++ {
				t := g.trans[s*g.ncls+c]
				ok = t >= 0 && live[t]
			}
			for _, cl := range g.calls[s] {
				ok = ok || ruleLive[cl.rule] && live[cl.ret]
			}
			if ok {
				live[s] = true
				changed = true
				if r := g.rule[s]; int32(s) == g.start[r] {
					ruleLive[r] = true
				}
			}
		}
	}
	if !live[g.start[0]] {
		return fmt.Errorf("the schema accepts no JSON value")
	}
	for s := 0; s < n; s++ {
		g.flags[s] &^= fBytes | fCalls
		for c := 0; c < g.ncls; c++ {
			t := &g.trans[s*g.ncls+c]
			if *t >= 0 && !live[*t] {
				*t = -1
			}
			if *t >= 0 {
				g.flags[s] |= fBytes
			}
		}
		out := g.calls[s][:0]
		for _, cl := range g.calls[s] {
			if ruleLive[cl.rule] && live[cl.ret] {
				out = append(out, cl)
			}
		}
		g.calls[s] = out
		if len(out) > 0 {
			g.flags[s] |= fCalls
		}
	}
	return nil
}

// checkLeftRecursion refuses a rule that can call itself before reading
// a byte: its automaton would push forever. Every rule is a JSON value,
// which reads at least one byte, so only the calls of start states count.
func (g *Grammar) checkLeftRecursion() error {
	state := make([]uint8, len(g.start)) // 0 new, 1 on the path, 2 done
	var path []string
	var visit func(r int32) error
	visit = func(r int32) error {
		switch state[r] {
		case 1:
			return fmt.Errorf("the schema refers to itself before any JSON text (left recursion through %s)", strings.Join(append(path, g.names[r]), " -> "))
		case 2:
			return nil
		}
		state[r] = 1
		path = append(path, g.names[r])
		for _, cl := range g.calls[g.start[r]] {
			if err := visit(cl.rule); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		state[r] = 2
		return nil
	}
	for r := range g.start {
		if err := visit(int32(r)); err != nil {
			return err
		}
	}
	return nil
}
