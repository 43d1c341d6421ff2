package grammar

import "fmt"

// The compiler writes every rule as one nondeterministic automaton over
// bytes (Thompson style: epsilon moves, byte-range edges, and call edges
// that run another rule and come back), which dfa.go determinizes.
//
// Emitters take the state to start from and return the state where they
// end; a construct that loops (star, plus) loops on states of its own, so
// edges that the caller adds to the returned state never join a loop.

type nfaEdge struct {
	lo, hi byte
	to     int32
}

type nfaCall struct {
	rule int32
	to   int32
}

type nfaState struct {
	eps   []int32
	edges []nfaEdge
	calls []nfaCall
}

type nfa struct {
	states []nfaState
	limit  int
}

// limitHit is the panic of a builder that would pass its limit; the
// compiler recovers it as an error naming the limit and the schema path.
type limitHit struct{ what string }

func (n *nfa) newState() int32 {
	if len(n.states) >= n.limit {
		panic(limitHit{fmt.Sprintf("more than the limit of %d automaton states (Limits.States)", n.limit)})
	}
	n.states = append(n.states, nfaState{})
	return int32(len(n.states) - 1)
}

func (n *nfa) eps(from, to int32) {
	n.states[from].eps = append(n.states[from].eps, to)
}

func (n *nfa) edge(from int32, lo, hi byte, to int32) {
	n.states[from].edges = append(n.states[from].edges, nfaEdge{lo, hi, to})
}

func (n *nfa) call(from, rule, to int32) {
	n.states[from].calls = append(n.states[from].calls, nfaCall{rule, to})
}

// lit emits the bytes of s.
func (n *nfa) lit(from int32, s string) int32 {
	for i := 0; i < len(s); i++ {
		to := n.newState()
		n.edge(from, s[i], s[i], to)
		from = to
	}
	return from
}

// byteRange emits one byte in [lo, hi].
func (n *nfa) byteRange(from int32, lo, hi byte) int32 {
	to := n.newState()
	n.edge(from, lo, hi, to)
	return to
}

// emitter writes a fragment from a state and returns its end.
type emitter func(from int32) int32

// alt emits the union of the fragments.
func (n *nfa) alt(from int32, es ...emitter) int32 {
	end := n.newState()
	for _, e := range es {
		s := n.newState()
		n.eps(from, s)
		n.eps(e(s), end)
	}
	return end
}

// opt emits e or nothing.
func (n *nfa) opt(from int32, e emitter) int32 {
	s := n.newState()
	n.eps(from, s)
	end := e(s)
	out := n.newState()
	n.eps(end, out)
	n.eps(from, out)
	return out
}

// star emits e zero or more times.
func (n *nfa) star(from int32, e emitter) int32 {
	loop := n.newState()
	n.eps(from, loop)
	n.eps(e(loop), loop)
	out := n.newState()
	n.eps(loop, out)
	return out
}

// repeat emits e between min and max times (max < 0: no upper bound).
func (n *nfa) repeat(from int32, e emitter, min, max int) int32 {
	for i := 0; i < min; i++ {
		from = e(from)
	}
	if max < 0 {
		return n.star(from, e)
	}
	out := n.newState()
	for i := min; i < max; i++ {
		n.eps(from, out)
		s := n.newState()
		n.eps(from, s)
		from = e(s)
	}
	n.eps(from, out)
	return out
}

func (n *nfa) String() string { return fmt.Sprintf("nfa(%d states)", len(n.states)) }
