package grammar

import "fmt"

// The automaton's run: a set of stacks of frames. A frame is a state of
// some rule; the frame below it is where its caller returns (its state is
// the call's return state). Frames are interned, so a stack is one frame
// id and equal stacks share ids.

type frame struct{ state, parent int32 }

type frameTab struct {
	frames []frame
	index  map[frame]int32
}

func (t *frameTab) intern(s, p int32) int32 {
	f := frame{s, p}
	if id, ok := t.index[f]; ok {
		return id
	}
	if t.index == nil {
		t.index = map[frame]int32{}
	}
	id := int32(len(t.frames))
	t.frames = append(t.frames, f)
	t.index[f] = id
	return id
}

func (t *frameTab) reset() {
	t.frames = t.frames[:0]
	clear(t.index)
}

// maxClosure bounds the frames one closure may visit (a guard: the
// compiler refuses the grammars that would need more, left recursion).
const maxClosure = 1 << 16

// closure adds to out the stacks that (s, p) stands for once calls are
// pushed and ended rules popped: those whose top can read a byte. pop
// says a frame with no parent ended in a rule other than the root (the
// unknown caller goes on); end says the root rule ended (the text may
// stop).
func (g *Grammar) closure(t *frameTab, s, p int32, out []int32) (_ []int32, pop, end bool) {
	budget := maxClosure
	var rec func(s, p int32)
	rec = func(s, p int32) {
		if budget--; budget < 0 {
			return
		}
		f := g.flags[s]
		if f&fBytes != 0 {
			out = append(out, t.intern(s, p))
		}
		if f&fCalls != 0 {
			for _, cl := range g.calls[s] {
				rec(g.start[cl.rule], t.intern(cl.ret, p))
			}
		}
		if f&fAccept != 0 {
			switch {
			case p >= 0:
				fr := t.frames[p]
				rec(fr.state, fr.parent)
			case g.rule[s] == 0:
				end = true
			default:
				pop = true
			}
		}
	}
	rec(s, p)
	return out, pop, end
}

// Matcher runs a grammar over bytes. It is not safe for concurrent use.
type Matcher struct {
	g   *Grammar
	tab frameTab
	// cores are the stacks after the last byte, before their closure:
	// frame ids whose state is where the byte led.
	cores   []int32
	scratch []int32
}

// NewMatcher starts a run of the grammar at the beginning of the text.
func (g *Grammar) NewMatcher() *Matcher {
	m := &Matcher{g: g}
	m.cores = []int32{m.tab.intern(g.start[0], -1)}
	return m
}

// ready returns the stacks whose top can read a byte, and whether the
// text may end here.
func (m *Matcher) ready() ([]int32, bool) {
	out := m.scratch[:0]
	end := false
	for _, c := range m.cores {
		fr := m.tab.frames[c]
		var e bool
		out, _, e = m.g.closure(&m.tab, fr.state, fr.parent, out)
		end = end || e
	}
	m.scratch = out
	return uniqueInt32(out), end
}

// CanEnd reports whether the text so far is complete: a valid JSON text
// for the schema.
func (m *Matcher) CanEnd() bool {
	_, end := m.ready()
	return end
}

// AcceptByte reads one byte; false (and no change) when the grammar
// refuses it.
func (m *Matcher) AcceptByte(b byte) bool {
	set, _ := m.ready()
	var next []int32
	for _, id := range set {
		fr := m.tab.frames[id]
		if s := m.g.next(fr.state, b); s >= 0 {
			next = append(next, m.tab.intern(s, fr.parent))
		}
	}
	if len(next) == 0 {
		return false
	}
	m.cores = uniqueInt32(next)
	return true
}

// Accept reads bytes; false (and no change) when the grammar refuses
// them.
func (m *Matcher) Accept(b []byte) bool {
	saved := m.cores
	for _, c := range b {
		if !m.AcceptByte(c) {
			m.cores = saved
			return false
		}
	}
	return true
}

// Depth is the deepest stack of the run (1 without recursion).
func (m *Matcher) Depth() int {
	d := 0
	for _, c := range m.cores {
		k := 0
		for id := c; id >= 0; id = m.tab.frames[id].parent {
			k++
		}
		d = max(d, k)
	}
	return d
}

func (m *Matcher) String() string {
	return fmt.Sprintf("matcher(%d stacks, depth %d)", len(m.cores), m.Depth())
}
