package jinja

import (
	"context"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Template is a parsed template. It is immutable, so one Template may be
// rendered by many goroutines at once.
type Template struct {
	name   string
	src    string // normalised source, for error positions
	lines  []int  // byte offsets of the starts of lines 2, 3, ...
	body   []stmt
	limits Limits // resolved: no zero fields
}

// Parse parses a template with the chat-template environment (see the
// package documentation) and DefaultLimits. name only labels errors,
// e.g. a file name.
func Parse(name, src string) (*Template, error) {
	return ParseWithLimits(name, src, DefaultLimits())
}

// ParseWithLimits is Parse with other limits: lim.MaxNesting bounds the
// nesting of the template itself, and lim is what Render uses when its
// options carry no Limits. A template nested deeper than MaxNesting fails
// with a *LimitError.
func ParseWithLimits(name, src string, lim Limits) (*Template, error) {
	lim = lim.resolved()
	src = normalizeSource(src)
	toks, err := tokenize(name, src)
	if err != nil {
		return nil, err
	}
	p := &parser{name: name, src: src, toks: toks, maxNest: lim.MaxNesting}
	body, err := p.parseTemplate()
	if err != nil {
		return nil, err
	}
	t := &Template{name: name, src: src, body: body, limits: lim}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			t.lines = append(t.lines, i+1)
		}
	}
	if err := finish(t); err != nil {
		return nil, err
	}
	return t, nil
}

// Name is the name the template was parsed with.
func (t *Template) Name() string { return t.name }

// Limits returns the limits renders use when their options carry none,
// with defaults filled in.
func (t *Template) Limits() Limits { return t.limits }

// line is the 1-based line of a byte offset of the source.
func (t *Template) line(pos int) int {
	return 1 + sort.SearchInts(t.lines, pos+1)
}

// RenderOptions tunes one render.
type RenderOptions struct {
	// Now is the clock strftime_now reads; nil means time.Now. Tests and
	// reproducible prompts pin it.
	Now func() time.Time
	// Limits bound the render's time and memory; nil means the limits
	// the template was parsed with (DefaultLimits for Parse). Zero fields
	// take their value from DefaultLimits, negative ones turn that limit
	// off.
	Limits *Limits
}

// state is everything one render owns.
type state struct {
	t     *Template
	out   *sbuf
	now   func() time.Time
	depth int // macro and recursive loop() nesting

	lim     Limits // resolved
	steps   int64  // work done (see Limits.MaxSteps)
	next    int64  // steps at which checkpoint runs next
	iters   int64  // loop iterations
	alloc   int64  // bytes built
	byteAcc int64  // bytes built not yet counted as steps
	ctx     context.Context
	done    <-chan struct{} // ctx.Done(), nil when it can never be done

	// the statement and expression being evaluated, for the line of a
	// limit error
	curStmt stmt
	curExpr expr
}

// scope is one variable frame. Jinja2 gives each for-loop iteration,
// macro call and with-block its own frame; if-blocks share their parent's,
// which is why `{% set %}` inside an if is visible after it but a set
// inside a loop is not. Most frames hold a couple of names, so they are a
// short list (the first two inline, no allocation), indexed by a map only
// when they grow long.
type scope struct {
	small  [2]binding
	vars   []binding
	index  map[string]int // for frames of more than scopeListMax names
	parent *scope
}

type binding struct {
	name string
	val  Value
}

const scopeListMax = 8

func newScope(parent *scope) *scope {
	s := &scope{parent: parent}
	s.vars = s.small[:0]
	return s
}

// get looks name up in this frame only.
func (s *scope) get(name string) (Value, bool) {
	if s.index != nil {
		if i, ok := s.index[name]; ok {
			return s.vars[i].val, true
		}
		return nil, false
	}
	for i := range s.vars {
		if s.vars[i].name == name {
			return s.vars[i].val, true
		}
	}
	return nil, false
}

// set binds name in this frame.
func (s *scope) set(name string, v Value) {
	if s.index != nil {
		if i, ok := s.index[name]; ok {
			s.vars[i].val = v
			return
		}
		s.index[name] = len(s.vars)
	} else {
		for i := range s.vars {
			if s.vars[i].name == name {
				s.vars[i].val = v
				return
			}
		}
		if len(s.vars) == scopeListMax {
			s.index = make(map[string]int, 2*scopeListMax)
			for i, b := range s.vars {
				s.index[b.name] = i
			}
			s.index[name] = len(s.vars)
		}
	}
	s.vars = append(s.vars, binding{name, v})
}

func (s *scope) lookup(name string) (Value, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.get(name); ok {
			return v, true
		}
	}
	if g, ok := globals[name]; ok {
		return g, true
	}
	return nil, false
}

// Render renders the template with vars as its top-level variables; they
// shadow the built-in globals. Values are converted with ValueOf. The
// returned error is a *TemplateError when the template called
// raise_exception, a *LimitError when it hit one of the render's Limits,
// else a *RuntimeError.
func (t *Template) Render(vars map[string]Value, opts *RenderOptions) (string, error) {
	return t.RenderContext(context.Background(), vars, opts)
}

// RenderContext is Render that stops when ctx is done: the context is
// checked every 1024 steps (see Limits), a few microseconds apart, and a
// render stopped by it returns an error that wraps context.Cause(ctx), so
// errors.Is(err, context.Canceled) or context.DeadlineExceeded holds.
func (t *Template) RenderContext(ctx context.Context, vars map[string]Value, opts *RenderOptions) (string, error) {
	out, _, err := t.render(ctx, vars, opts)
	return out, err
}

// render is RenderContext that also returns the render's state, whose
// counters tests read.
func (t *Template) render(ctx context.Context, vars map[string]Value, opts *RenderOptions) (out string, st *state, err error) {
	root := newScope(nil)
	for k, v := range vars {
		c, err := ValueOf(v)
		if err != nil {
			return "", nil, err
		}
		root.set(k, c)
	}
	st = &state{t: t, now: time.Now, lim: t.limits, ctx: ctx}
	if opts != nil && opts.Now != nil {
		st.now = opts.Now
	}
	if opts != nil && opts.Limits != nil {
		st.lim = opts.Limits.resolved()
	}
	st.out = st.newBuf("the output")
	if ctx != nil {
		st.done = ctx.Done()
	}
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(abort)
			if !ok {
				panic(r)
			}
			out, err = "", a.err
		}
	}()
	st.checkpoint() // a context already done stops the render here
	if _, err := st.execBody(t.body, root); err != nil {
		return "", st, err
	}
	return st.out.String(), st, nil
}

// annotate gives a runtime error the line of the node being evaluated if
// a deeper node has not already.
func (st *state) annotate(err error, n interface{ position() int }) error {
	switch e := err.(type) {
	case *RuntimeError:
		if e.Line != 0 {
			return err
		}
	case *TemplateError:
		if e.Line != 0 {
			return err
		}
	default:
		return err
	}
	return withLine(err, st.t.name, st.t.line(n.position()))
}

// pos is the position of the node being evaluated, for limit errors.
func (st *state) pos() int {
	switch {
	case st.curExpr != nil:
		return st.curExpr.position()
	case st.curStmt != nil:
		return st.curStmt.position()
	}
	return 0
}

type ctl int

const (
	ctlNone ctl = iota
	ctlBreak
	ctlContinue
)

func (st *state) execBody(body []stmt, sc *scope) (ctl, error) {
	saved := st.curStmt
	for _, s := range body {
		st.step()
		st.curStmt = s
		c, err := st.exec(s, sc)
		if err != nil {
			st.curStmt = saved
			return ctlNone, st.annotate(err, s)
		}
		if c != ctlNone {
			st.curStmt = saved
			return c, nil
		}
	}
	st.curStmt = saved
	return ctlNone, nil
}

// capture renders body into a fresh buffer (macros, set blocks, filter
// blocks) and returns the text.
func (st *state) capture(body []stmt, sc *scope, what string) (string, error) {
	saved := st.out
	st.out = st.newBuf(what)
	_, err := st.execBody(body, sc)
	out := st.out.String()
	st.out = saved
	return out, err
}

func (st *state) exec(s stmt, sc *scope) (ctl, error) {
	switch n := s.(type) {
	case *textNode:
		st.out.WriteString(n.text)
	case *outputNode:
		v, err := st.eval(n.e, sc)
		if err != nil {
			return ctlNone, err
		}
		st.out.WriteString(toStr(st, v))
	case *ifNode:
		v, err := st.eval(n.cond, sc)
		if err != nil {
			return ctlNone, err
		}
		if truthy(v) {
			return st.execBody(n.body, sc)
		}
		return st.execBody(n.els, sc)
	case *forNode:
		it, err := st.eval(n.iter, sc)
		if err != nil {
			return ctlNone, err
		}
		return ctlNone, st.runLoop(n, it, sc, 0)
	case *setNode:
		v, err := st.eval(n.value, sc)
		if err != nil {
			return ctlNone, err
		}
		return ctlNone, assign(st, sc, n.target, v)
	case *setAttrNode:
		v, err := st.eval(n.value, sc)
		if err != nil {
			return ctlNone, err
		}
		return ctlNone, setNamespaceAttr(sc, n.name, n.attr, v)
	case *setBlockNode:
		text, err := st.capture(n.body, newScope(sc), "a set block")
		if err != nil {
			return ctlNone, err
		}
		var v Value = text
		for _, f := range n.filters {
			if v, err = st.applyFilter(f, v, sc); err != nil {
				return ctlNone, err
			}
		}
		if n.nsAttr != "" {
			return ctlNone, setNamespaceAttr(sc, n.target.name, n.nsAttr, v)
		}
		return ctlNone, assign(st, sc, n.target, v)
	case *macroNode:
		sc.set(n.def.name, &Macro{name: n.def.name, def: n.def, closure: sc})
	case *callBlockNode:
		caller := &Macro{name: "caller", def: n.caller, closure: sc}
		v, err := st.evalCall(n.call, sc, []kwarg{{name: "caller", val: caller}})
		if err != nil {
			return ctlNone, err
		}
		st.out.WriteString(toStr(st, v))
	case *filterBlockNode:
		text, err := st.capture(n.body, newScope(sc), "a filter block")
		if err != nil {
			return ctlNone, err
		}
		var v Value = text
		for _, f := range n.filters {
			if v, err = st.applyFilter(f, v, sc); err != nil {
				return ctlNone, err
			}
		}
		st.out.WriteString(toStr(st, v))
	case *withNode:
		inner := newScope(sc)
		for i, t := range n.targets {
			v, err := st.eval(n.values[i], sc)
			if err != nil {
				return ctlNone, err
			}
			if err := assign(st, inner, t, v); err != nil {
				return ctlNone, err
			}
		}
		return st.execBody(n.body, inner)
	case *generationNode:
		return st.execBody(n.body, sc)
	case *breakNode:
		return ctlBreak, nil
	case *continueNode:
		return ctlContinue, nil
	}
	return ctlNone, nil
}

// assign binds a set or loop target, unpacking tuples as Python does.
func assign(st *state, sc *scope, t assignTarget, v Value) error {
	if !t.isTup {
		sc.set(t.name, v)
		return nil
	}
	items, err := iterate(st, v)
	if err != nil {
		return typeErr("cannot unpack non-iterable %s object", typeName(v))
	}
	if len(items) < len(t.tuple) {
		return valueErr("not enough values to unpack (expected %d, got %d)", len(t.tuple), len(items))
	}
	if len(items) > len(t.tuple) {
		return valueErr("too many values to unpack (expected %d)", len(t.tuple))
	}
	for i, sub := range t.tuple {
		if err := assign(st, sc, sub, items[i]); err != nil {
			return err
		}
	}
	return nil
}

func setNamespaceAttr(sc *scope, name, attr string, v Value) error {
	obj, _ := sc.lookup(name)
	ns, ok := obj.(*Namespace)
	if !ok {
		return runtimeErr("cannot assign attribute on non-namespace object")
	}
	ns.attrs.SetString(attr, v)
	return nil
}

// runLoop runs a for loop over it; depth counts recursive loop() calls.
func (st *state) runLoop(n *forNode, it Value, sc *scope, depth int) error {
	items, err := iterate(st, it)
	if err != nil {
		return err
	}
	if n.filter != nil {
		// `for x in xs if cond` filters first, so loop.index, length and
		// last count only the items that pass, as in jinja2.
		kept := make([]Value, 0, len(items))
		for _, item := range items {
			st.iteration()
			fs := newScope(sc)
			if err := assign(st, fs, n.target, item); err != nil {
				return err
			}
			ok, err := st.eval(n.filter, fs)
			if err != nil {
				return err
			}
			if truthy(ok) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		_, err := st.execBody(n.els, newScope(sc))
		return err
	}
	loop := &loopContext{items: items, depth: depth, node: n, scope: sc}
	for i, item := range items {
		st.iteration()
		loop.index = i
		is := newScope(sc)
		if err := assign(st, is, n.target, item); err != nil {
			return err
		}
		is.set("loop", loop)
		c, err := st.execBody(n.body, is)
		if err != nil {
			return err
		}
		if c == ctlBreak {
			break
		}
	}
	return nil
}

// loopContext is the `loop` variable.
type loopContext struct {
	items   []Value
	index   int
	depth   int
	node    *forNode
	scope   *scope
	changed *Value // last value seen by loop.changed()
}

func (l *loopContext) attr(name string) (Value, bool) {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.index + 1), true
	case "index0":
		return int64(l.index), true
	case "revindex":
		return int64(n - l.index), true
	case "revindex0":
		return int64(n - l.index - 1), true
	case "first":
		return l.index == 0, true
	case "last":
		return l.index == n-1, true
	case "length":
		return int64(n), true
	case "depth":
		return int64(l.depth + 1), true
	case "depth0":
		return int64(l.depth), true
	case "previtem":
		if l.index == 0 {
			return &Undefined{hint: "there is no previous item", name: "previtem"}, true
		}
		return l.items[l.index-1], true
	case "nextitem":
		if l.index >= n-1 {
			return &Undefined{hint: "there is no next item", name: "nextitem"}, true
		}
		return l.items[l.index+1], true
	case "cycle":
		return &Func{Name: "cycle", fn: func(_ *state, a *callArgs) (Value, error) {
			if len(a.pos) == 0 {
				return nil, typeErr("no items for cycling given")
			}
			return a.pos[l.index%len(a.pos)], nil
		}}, true
	case "changed":
		return &Func{Name: "changed", fn: func(st *state, a *callArgs) (Value, error) {
			var cur Value = NewTuple(a.pos...)
			if l.changed != nil && equal(st, *l.changed, cur, 0) {
				return false, nil
			}
			l.changed = &cur
			return true, nil
		}}, true
	}
	return nil, false
}

// Macro is a template macro (or the caller of a {% call %} block).
type Macro struct {
	name    string
	def     *macroDef
	closure *scope
}

func (st *state) callMacro(m *Macro, a *callArgs) (Value, error) {
	st.enterCall(m.name)
	defer func() { st.depth-- }()

	d := m.def
	sc := newScope(m.closure)
	pos := a.pos
	if len(pos) > len(d.params) {
		if !d.usesVarargs {
			return nil, typeErr("macro '%s' takes not more than %d argument(s)", m.name, len(d.params))
		}
	}
	var extra []Value
	for i, p := range d.params {
		if i < len(pos) {
			sc.set(p, pos[i])
		}
	}
	if len(pos) > len(d.params) {
		extra = pos[len(d.params):]
	}
	kwargs := NewDict()
	for _, k := range a.kw {
		idx := -1
		for i, p := range d.params {
			if p == k.name {
				idx = i
				break
			}
		}
		switch {
		case idx >= 0 && idx < len(pos):
			return nil, typeErr("macro '%s' got multiple values for argument '%s'", m.name, k.name)
		case idx >= 0:
			sc.set(k.name, k.val)
		case k.name == "caller" && d.usesCaller:
			sc.set("caller", k.val)
		case d.usesKwargs:
			kwargs.SetString(k.name, k.val)
		default:
			return nil, typeErr("macro '%s' takes no keyword argument '%s'", m.name, k.name)
		}
	}
	// Defaults are evaluated at call time, in the macro's frame, so they
	// may refer to earlier parameters.
	firstDefault := len(d.params) - len(d.defaults)
	for i, p := range d.params {
		if _, ok := sc.get(p); ok {
			continue
		}
		if i >= firstDefault {
			v, err := st.eval(d.defaults[i-firstDefault], sc)
			if err != nil {
				return nil, err
			}
			sc.set(p, v)
		} else {
			sc.set(p, &Undefined{name: p, hint: "parameter '" + p + "' was not provided"})
		}
	}
	if d.usesVarargs {
		sc.set("varargs", NewTuple(extra...))
	}
	if d.usesKwargs {
		sc.set("kwargs", kwargs)
	}
	if d.usesCaller {
		if _, ok := sc.get("caller"); !ok {
			sc.set("caller", &Undefined{name: "caller", hint: "No caller defined"})
		}
	}
	return st.capture(d.body, sc, "a macro's output")
}

// callSteps is what a macro or loop() call costs beyond its arguments and
// body: a scope, a buffer and the arguments' binding.
const callSteps = 8

// enterCall enters a call of macro (the name of the macro; "" for a
// recursive loop() call), within MaxDepth.
func (st *state) enterCall(macro string) {
	st.charge(callSteps)
	if st.depth >= st.lim.MaxDepth {
		what := "loop()"
		if macro != "" {
			what = "macro " + strRepr(macro)
		}
		st.fail("MaxDepth", int64(st.lim.MaxDepth), "%s nested more than %d deep (maximum recursion depth exceeded)", what, st.lim.MaxDepth)
	}
	st.depth++
}

// kwarg is one keyword argument of a call.
type kwarg struct {
	name string
	val  Value
}

// callArgs are evaluated call arguments.
type callArgs struct {
	pos []Value
	kw  []kwarg
}

func (st *state) evalArgs(s callSpec, sc *scope) (*callArgs, error) {
	a := &callArgs{}
	for _, e := range s.args {
		v, err := st.eval(e, sc)
		if err != nil {
			return nil, err
		}
		a.pos = append(a.pos, v)
	}
	if s.dynArgs != nil {
		v, err := st.eval(s.dynArgs, sc)
		if err != nil {
			return nil, err
		}
		items, err := iterate(st, v)
		if err != nil {
			return nil, err
		}
		st.buildItems(int64(len(items)), "*args")
		a.pos = append(a.pos, items...)
	}
	for _, k := range s.kwargs {
		v, err := st.eval(k.val, sc)
		if err != nil {
			return nil, err
		}
		a.kw = append(a.kw, kwarg{name: k.name, val: v})
	}
	if s.dynKwargs != nil {
		v, err := st.eval(s.dynKwargs, sc)
		if err != nil {
			return nil, err
		}
		d, ok := v.(*Dict)
		if !ok {
			return nil, typeErr("argument after ** must be a mapping, not %s", typeName(v))
		}
		st.buildItems(int64(len(d.keys)), "**kwargs")
		for i, k := range d.keys {
			ks, ok := k.(string)
			if !ok {
				return nil, typeErr("keywords must be strings")
			}
			a.kw = append(a.kw, kwarg{name: ks, val: d.vals[i]})
		}
	}
	return a, nil
}

func (st *state) evalCall(c *callExpr, sc *scope, extra []kwarg) (Value, error) {
	var fn Value
	if ga, ok := c.fn.(*getattrExpr); ok {
		// obj.method(...): call the str, dict or list method without
		// binding it first (what getattr would return, bound).
		obj, err := st.eval(ga.obj, sc)
		if err != nil {
			return nil, err
		}
		if m := builtinMethod(obj, ga.attr); m != nil {
			a, err := st.evalArgs(c.callSpec, sc)
			if err != nil {
				return nil, err
			}
			a.kw = append(a.kw, extra...)
			st.charge(cost(obj))
			st.chargeArgs(nil, a)
			v, err := m(st, obj, a)
			st.result(v, ga.attr)
			return v, err
		}
		if fn, err = getattr(st, obj, ga.attr); err != nil {
			return nil, st.annotate(err, ga)
		}
	} else {
		var err error
		if fn, err = st.eval(c.fn, sc); err != nil {
			return nil, err
		}
	}
	a, err := st.evalArgs(c.callSpec, sc)
	if err != nil {
		return nil, err
	}
	a.kw = append(a.kw, extra...)
	return st.call(fn, a)
}

func (st *state) call(fn Value, a *callArgs) (Value, error) {
	switch f := fn.(type) {
	case *Func:
		st.chargeArgs(nil, a)
		v, err := f.fn(st, a)
		st.result(v, f.Name)
		return v, err
	case *Macro:
		return st.callMacro(f, a)
	case *loopContext:
		// loop(items) in a recursive loop renders the body again one level
		// deeper and returns the text.
		if !f.node.recursive {
			return nil, typeErr("The loop must be marked recursive to be called.")
		}
		if len(a.pos) != 1 || len(a.kw) != 0 {
			return nil, typeErr("loop() takes exactly one argument")
		}
		st.enterCall("")
		defer func() { st.depth-- }()
		saved := st.out
		st.out = st.newBuf("a recursive loop")
		err := st.runLoop(f.node, a.pos[0], f.scope, f.depth+1)
		out := st.out.String()
		st.out = saved
		return out, err
	case *joiner:
		return f.call(), nil
	case *Undefined:
		return nil, f.err()
	}
	return nil, typeErr("'%s' object is not callable", typeName(fn))
}

func (st *state) eval(e expr, sc *scope) (Value, error) {
	st.step()
	saved := st.curExpr
	st.curExpr = e
	v, err := st.eval1(e, sc)
	st.curExpr = saved
	if err != nil {
		return nil, st.annotate(err, e)
	}
	return v, nil
}

func (st *state) eval1(e expr, sc *scope) (Value, error) {
	switch n := e.(type) {
	case *constExpr:
		return n.val, nil
	case *nameExpr:
		if v, ok := sc.lookup(n.name); ok {
			return v, nil
		}
		return undefinedName(n.name), nil
	case *listExpr:
		l := &List{Items: make([]Value, len(n.items)), Tuple: n.tuple}
		for i, it := range n.items {
			v, err := st.eval(it, sc)
			if err != nil {
				return nil, err
			}
			l.Items[i] = v
		}
		return l, nil
	case *dictExpr:
		d := NewDict()
		for i := range n.keys {
			k, err := st.eval(n.keys[i], sc)
			if err != nil {
				return nil, err
			}
			v, err := st.eval(n.vals[i], sc)
			if err != nil {
				return nil, err
			}
			if err := d.put(st, k, v); err != nil {
				return nil, err
			}
		}
		return d, nil
	case *getattrExpr:
		obj, err := st.eval(n.obj, sc)
		if err != nil {
			return nil, err
		}
		return getattr(st, obj, n.attr)
	case *getitemExpr:
		obj, err := st.eval(n.obj, sc)
		if err != nil {
			return nil, err
		}
		key, err := st.eval(n.arg, sc)
		if err != nil {
			return nil, err
		}
		st.charge(cost(key))
		return getitem(st, obj, key)
	case *sliceExpr:
		s := &sliceVal{}
		for i, part := range []expr{n.start, n.stop, n.step} {
			if part == nil {
				continue
			}
			v, err := st.eval(part, sc)
			if err != nil {
				return nil, err
			}
			s.parts[i] = v
		}
		return s, nil
	case *callExpr:
		return st.evalCall(n, sc, nil)
	case *filterExpr:
		arg, err := st.eval(n.arg, sc)
		if err != nil {
			return nil, err
		}
		return st.applyFilter(n, arg, sc)
	case *testExpr:
		return st.applyTest(n, sc)
	case *condExpr:
		c, err := st.eval(n.test, sc)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return st.eval(n.then, sc)
		}
		if n.els == nil {
			return &Undefined{name: "", hint: "the inline if-expression on line " + strconv.Itoa(st.t.line(n.position())) + " evaluated to false and no else section was defined."}, nil
		}
		return st.eval(n.els, sc)
	case *binExpr:
		l, err := st.eval(n.l, sc)
		if err != nil {
			return nil, err
		}
		r, err := st.eval(n.r, sc)
		if err != nil {
			return nil, err
		}
		if n.foldNeg {
			if neg, ok := negateConst(l); ok {
				// jinja2's optimizer folds a constant left operand such as
				// -3 and emits it unparenthesised, so Python computes
				// `-3 ** x` as -(3 ** x). Reproduced for fidelity.
				p, err := binop(st, "**", neg, r)
				if err != nil {
					return nil, err
				}
				return binop(st, "*", int64(-1), p)
			}
		}
		st.charge(cost(l) + cost(r))
		return binop(st, n.op, l, r)
	case *concatExpr:
		parts := make([]string, len(n.items))
		size := int64(0)
		for i, it := range n.items {
			v, err := st.eval(it, sc)
			if err != nil {
				return nil, err
			}
			parts[i] = toStr(st, v)
			size += int64(len(parts[i]))
		}
		st.buildStr(size, "a ~ concatenation")
		return strings.Join(parts, ""), nil
	case *compareExpr:
		// Chained like Python: a < b < c is a < b and b < c, with b
		// evaluated once.
		l, err := st.eval(n.first, sc)
		if err != nil {
			return nil, err
		}
		for _, op := range n.ops {
			r, err := st.eval(op.e, sc)
			if err != nil {
				return nil, err
			}
			ok, err := compare(st, op.op, l, r)
			if err != nil {
				return nil, err
			}
			if !ok {
				return false, nil
			}
			l = r
		}
		return true, nil
	case *andExpr:
		// Python's and/or return an operand, not a bool.
		l, err := st.eval(n.l, sc)
		if err != nil || !truthy(l) {
			return l, err
		}
		return st.eval(n.r, sc)
	case *orExpr:
		l, err := st.eval(n.l, sc)
		if err != nil || truthy(l) {
			return l, err
		}
		return st.eval(n.r, sc)
	case *notExpr:
		v, err := st.eval(n.x, sc)
		if err != nil {
			return nil, err
		}
		return !truthy(v), nil
	case *negExpr, *posExpr:
		var x expr
		neg := false
		if ne, ok := n.(*negExpr); ok {
			x, neg = ne.x, true
		} else {
			x = n.(*posExpr).x
		}
		v, err := st.eval(x, sc)
		if err != nil {
			return nil, err
		}
		if u, ok := v.(*Undefined); ok {
			return nil, u.err()
		}
		i, f, isF, ok := number(v)
		if !ok {
			op := "+"
			if neg {
				op = "-"
			}
			return nil, typeErr("bad operand type for unary %s: '%s'", op, typeName(v))
		}
		switch {
		case isF && neg:
			return -f, nil
		case isF:
			return f, nil
		case neg:
			return -i, nil
		}
		return i, nil
	}
	return nil, runtimeErr("unsupported expression %T", e)
}

// negateConst returns -c for a negative number c.
func negateConst(c Value) (Value, bool) {
	switch x := c.(type) {
	case int64:
		if x < 0 {
			return -x, true
		}
	case float64:
		if x < 0 || (x == 0 && math.Signbit(x)) {
			return -x, true
		}
	}
	return nil, false
}

func compare(st *state, op string, l, r Value) (bool, error) {
	switch op {
	case "==":
		return equal(st, l, r, 0), nil
	case "!=":
		return !equal(st, l, r, 0), nil
	case "in":
		return contains(st, r, l)
	case "notin":
		ok, err := contains(st, r, l)
		return !ok, err
	}
	return pyCompare(st, op, l, r)
}
