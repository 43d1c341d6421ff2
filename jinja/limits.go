package jinja

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits bound the time and memory of one render, so that a hostile or
// broken template (chat templates come with downloaded checkpoints) fails
// with a *LimitError instead of running for hours or exhausting memory.
//
// A zero field takes its value from DefaultLimits; a negative field turns
// that limit off. The work-sized limits are checked before the work is
// done: `'x' * 10000000000`, a huge padding width or a join that would
// build a huge string fail before anything is allocated.
type Limits struct {
	// MaxSteps bounds the work of a render, in steps: one for each
	// statement executed, expression evaluated, loop iteration and
	// built-in call, plus one for each item (list element, dict entry) and
	// each 64 bytes of string that a built-in, a comparison or an output
	// reads or produces. Context cancellation is checked every 1024 steps.
	MaxSteps int64
	// MaxLoopIterations bounds the iterations of all for loops of a
	// render together, loop filters (`for x in xs if ...`) included.
	MaxLoopIterations int64
	// MaxOutputBytes bounds the rendered text and every string the
	// template builds on the way (the output of a macro or a set block, a
	// concatenation, a join, a repr or JSON text, a padded or repeated
	// string). A list or dict the template builds counts 16 bytes an item.
	MaxOutputBytes int64
	// MaxAllocBytes bounds the bytes of all strings and lists a render
	// builds, added up over the whole render (an upper bound on the memory
	// its values can hold).
	MaxAllocBytes int64
	// MaxDepth bounds the nesting of macro calls (a macro calling itself),
	// caller() and recursive loop() calls, as Python's recursion limit
	// does for jinja2.
	MaxDepth int
	// MaxNesting bounds how deeply a template nests (blocks inside blocks,
	// operators and brackets inside one expression), checked by
	// ParseWithLimits (Parse uses the default), and how deeply lists and
	// dicts nest inside one another when they are printed, compared,
	// hashed or serialised to JSON.
	MaxNesting int
}

// DefaultLimits returns the limits Parse and Render use. They are far
// above what real chat templates need: the seven reference templates
// (testdata/chat_templates) render a 1,000-message conversation in under
// 0.6% of MaxSteps and 0.1% of MaxLoopIterations, building under 1% of
// MaxAllocBytes, and a 10,000-message one in under 6%; they nest at most
// 18 deep and call no macro recursively; their output is kilobytes to a
// few megabytes. Under these limits a hostile template gets about a
// second or two of CPU and a few hundred megabytes of memory at most.
func DefaultLimits() Limits {
	return Limits{
		MaxSteps:          20_000_000,
		MaxLoopIterations: 2_000_000,
		MaxOutputBytes:    64 << 20,
		MaxAllocBytes:     512 << 20,
		MaxDepth:          256,
		MaxNesting:        256,
	}
}

// resolved fills in defaults (zero fields) and turns negative fields into
// "no limit" (the largest value of the field's type).
func (l Limits) resolved() Limits {
	d := DefaultLimits()
	pick64 := func(v, def int64) int64 {
		switch {
		case v == 0:
			return def
		case v < 0:
			return math.MaxInt64
		}
		return v
	}
	pick := func(v, def int) int {
		switch {
		case v == 0:
			return def
		case v < 0:
			return math.MaxInt
		}
		return v
	}
	return Limits{
		MaxSteps:          pick64(l.MaxSteps, d.MaxSteps),
		MaxLoopIterations: pick64(l.MaxLoopIterations, d.MaxLoopIterations),
		MaxOutputBytes:    pick64(l.MaxOutputBytes, d.MaxOutputBytes),
		MaxAllocBytes:     pick64(l.MaxAllocBytes, d.MaxAllocBytes),
		MaxDepth:          pick(l.MaxDepth, d.MaxDepth),
		MaxNesting:        pick(l.MaxNesting, d.MaxNesting),
	}
}

// LimitError is a render (or, for MaxNesting, a parse) stopped by one of
// its Limits. Limit names the Limits field and Max its value, so the
// message says which knob to turn if the template is legitimate.
type LimitError struct {
	Limit  string // Limits field, e.g. "MaxSteps"
	Max    int64  // the limit's value
	Name   string // template name given to Parse
	Line   int    // template line being rendered, 0 if unknown
	Detail string // what hit the limit, e.g. "'x' * 10000000000 would build 10000000000 bytes"
}

// Error reads "name line N: template limit exceeded: Limit = Max: detail".
func (e *LimitError) Error() string {
	name := e.Name
	if name == "" {
		name = "template"
	}
	loc := name
	if e.Line > 0 {
		loc += " line " + strconv.Itoa(e.Line)
	}
	msg := fmt.Sprintf("%s: template limit exceeded: %s = %d", loc, e.Limit, e.Max)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// abort is the panic value that carries a limit or cancellation error from
// deep inside a render (a repr, a comparison, a string method) to
// RenderContext, which recovers it. Nothing else is recovered.
type abort struct{ err error }

// bytesPerStep is how many bytes of string count as one step.
const bytesPerStep = 64

// itemBytes is what an item of a list or dict counts for the byte limits:
// a Go interface value.
const itemBytes = 16

// ctxEvery is how many steps pass between two looks at the context.
const ctxEvery = 1024

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// fail stops the render with a *LimitError for the node being evaluated.
func (st *state) fail(limit string, max int64, format string, args ...any) {
	err := &LimitError{Limit: limit, Max: max, Name: st.t.name, Line: st.t.line(st.pos()), Detail: fmt.Sprintf(format, args...)}
	panic(abort{err})
}

// step counts one step. It is the hot path: one add and one compare.
func (st *state) step() {
	st.steps++
	if st.steps >= st.next {
		st.checkpoint()
	}
}

// charge counts n steps at once.
func (st *state) charge(n int64) {
	if st == nil {
		return
	}
	st.steps = satAdd(st.steps, n)
	if st.steps >= st.next {
		st.checkpoint()
	}
}

// checkpoint runs every ctxEvery steps and when MaxSteps is reached: it
// enforces MaxSteps and looks at the context.
func (st *state) checkpoint() {
	if st.steps > st.lim.MaxSteps {
		st.fail("MaxSteps", st.lim.MaxSteps, "the render took more than %d steps", st.lim.MaxSteps)
	}
	if st.done != nil {
		select {
		case <-st.done:
			line := st.t.line(st.pos())
			name := st.t.name
			if name == "" {
				name = "template"
			}
			panic(abort{fmt.Errorf("%s line %d: render stopped: %w", name, line, context.Cause(st.ctx))})
		default:
		}
	}
	st.next = min(satAdd(st.lim.MaxSteps, 1), satAdd(st.steps, ctxEvery))
}

// iteration counts one loop iteration.
func (st *state) iteration() {
	st.iters++
	if st.iters > st.lim.MaxLoopIterations {
		st.fail("MaxLoopIterations", st.lim.MaxLoopIterations, "the loops of the render ran more than %d times", st.lim.MaxLoopIterations)
	}
	st.step()
}

// buildStr accounts for a string of n bytes that is about to be built
// (what names the operation, for the error): it must fit MaxOutputBytes,
// it counts towards MaxAllocBytes, and every 64 bytes count as a step.
// Callers call it before allocating where the size is known in advance;
// where it is only known afterwards it is called with the result, which
// then is at most a small factor larger than inputs that passed the same
// check.
func (st *state) buildStr(n int64, what string) {
	if st == nil || n <= 0 {
		return
	}
	if n > st.lim.MaxOutputBytes {
		st.fail("MaxOutputBytes", st.lim.MaxOutputBytes, "%s would build %d bytes", what, n)
	}
	st.alloc = satAdd(st.alloc, n)
	if st.alloc > st.lim.MaxAllocBytes {
		st.fail("MaxAllocBytes", st.lim.MaxAllocBytes, "%s: the render built more than %d bytes in all", what, st.lim.MaxAllocBytes)
	}
	st.byteAcc += n
	if st.byteAcc >= bytesPerStep {
		st.charge(st.byteAcc / bytesPerStep)
		st.byteAcc %= bytesPerStep
	}
}

// buildItems is buildStr for a list of n items: itemBytes each, and a
// step each.
func (st *state) buildItems(n int64, what string) {
	if st == nil || n <= 0 {
		return
	}
	st.buildStr(satMul(n, itemBytes), what)
	st.charge(n)
}

// cost is the work of reading v once, in steps, as built-ins charge it
// for their inputs: the bytes of a string. (Lists and dicts cost nothing
// here: len() of a list is free, and the built-ins that walk one charge
// per item as they go.)
func cost(v Value) int64 {
	if s, ok := v.(string); ok {
		return int64(len(s)) / bytesPerStep
	}
	return 0
}

// chargeArgs charges the inputs of a built-in call.
func (st *state) chargeArgs(v Value, a *callArgs) {
	n := 1 + cost(v)
	if a != nil {
		for _, x := range a.pos {
			n += cost(x)
		}
		for _, k := range a.kw {
			n += cost(k.val)
		}
	}
	st.charge(n)
}

// result accounts for the value a built-in returned: a string or list
// counts as built (see build).
func (st *state) result(v Value, what string) {
	switch x := v.(type) {
	case string:
		st.buildStr(int64(len(x)), what)
	case *List:
		st.buildItems(int64(len(x.Items)), what)
	}
}

// nest checks the nesting depth of a value being walked.
func (st *state) nest(depth int) {
	if st != nil && depth > st.lim.MaxNesting {
		st.fail("MaxNesting", int64(st.lim.MaxNesting), "lists or dicts nested more than %d deep", st.lim.MaxNesting)
	}
}

// sbuf is a strings.Builder that stops the render instead of growing past
// MaxOutputBytes, and counts what it writes as built. With a nil state it
// is an ordinary builder, or, with trunc set, one that silently stops at
// trunc bytes and sets full (for values quoted in error messages).
type sbuf struct {
	b     strings.Builder
	st    *state
	what  string
	trunc int
	full  bool
}

func (st *state) newBuf(what string) *sbuf { return &sbuf{st: st, what: what} }

// room returns how much of n bytes may be written.
func (b *sbuf) room(n int) int {
	if b.trunc > 0 {
		if left := b.trunc - b.b.Len(); n > left {
			b.full = true
			return max(left, 0)
		}
		return n
	}
	if b.st != nil {
		if int64(b.b.Len())+int64(n) > b.st.lim.MaxOutputBytes {
			b.st.fail("MaxOutputBytes", b.st.lim.MaxOutputBytes, "%s would build more than %d bytes", b.what, b.st.lim.MaxOutputBytes)
		}
		b.st.buildStr(int64(n), b.what)
	}
	return n
}

// WriteString appends s.
func (b *sbuf) WriteString(s string) {
	if n := b.room(len(s)); n < len(s) {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n-- // cut at a character boundary
		}
		s = s[:n]
	}
	b.b.WriteString(s)
}

// byte appends c.
func (b *sbuf) byte(c byte) {
	if b.room(1) == 1 {
		b.b.WriteByte(c)
	}
}

// WriteRune appends r.
func (b *sbuf) WriteRune(r rune) {
	n := utf8.RuneLen(r)
	if n < 0 {
		n = 3 // written as U+FFFD
	}
	if b.room(n) == n {
		b.b.WriteRune(r)
	}
}

// Len is the number of bytes written.
func (b *sbuf) Len() int { return b.b.Len() }

// String returns what was written.
func (b *sbuf) String() string { return b.b.String() }

// tick is step for code that may run without a state (nil: unmetered).
func (st *state) tick() {
	if st != nil {
		st.step()
	}
}
