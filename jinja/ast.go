package jinja

// The AST mirrors jinja2's nodes.py, reduced to what the engine supports.
// Every node records the byte offset of its first token so runtime errors
// can name a line. Nodes are never modified after parsing, which is what
// makes concurrent renders of one Template safe.

type stmt interface{ position() int }

type expr interface{ position() int }

type pos int

func (p pos) position() int { return int(p) }

// Statements.

type textNode struct {
	pos
	text string
}

type outputNode struct {
	pos
	e expr
}

type ifNode struct {
	pos
	cond expr
	body []stmt
	els  []stmt // an elif is an ifNode alone in els
}

type forNode struct {
	pos
	target    assignTarget
	iter      expr
	filter    expr // `for x in xs if cond`, or nil
	body      []stmt
	els       []stmt
	recursive bool
}

type setNode struct {
	pos
	target assignTarget
	value  expr
}

// setAttrNode is `{% set ns.attr = value %}`.
type setAttrNode struct {
	pos
	name, attr string
	value      expr
}

// setBlockNode is `{% set x %}...{% endset %}`, optionally filtered.
type setBlockNode struct {
	pos
	target  assignTarget
	nsAttr  string // when target is ns.attr: the attribute, target.name the namespace
	filters []*filterExpr
	body    []stmt
}

type macroNode struct {
	pos
	def *macroDef
}

type macroDef struct {
	name     string
	params   []string
	defaults []expr // for the last len(defaults) params
	body     []stmt
	// Whether the body mentions these names; jinja2 only accepts extra
	// positional / keyword arguments or a caller when it does.
	usesVarargs, usesKwargs, usesCaller bool
}

type callBlockNode struct {
	pos
	call   *callExpr
	caller *macroDef
}

type filterBlockNode struct {
	pos
	filters []*filterExpr // arg is nil: the body is the argument
	body    []stmt
}

type withNode struct {
	pos
	targets []assignTarget
	values  []expr
	body    []stmt
}

type breakNode struct{ pos }

type continueNode struct{ pos }

// generationNode is transformers' {% generation %} tag; it renders its
// body (the assistant-mask bookkeeping it exists for is not needed for
// text output).
type generationNode struct {
	pos
	body []stmt
}

// assignTarget is a name or a (possibly nested) tuple of names.
type assignTarget struct {
	name  string
	tuple []assignTarget
	isTup bool
}

// Expressions.

type constExpr struct {
	pos
	val Value
}

type nameExpr struct {
	pos
	name string
}

type listExpr struct {
	pos
	items []expr
	tuple bool
}

type dictExpr struct {
	pos
	keys, vals []expr
}

type getattrExpr struct {
	pos
	obj  expr
	attr string
}

type getitemExpr struct {
	pos
	obj, arg expr
}

type sliceExpr struct {
	pos
	start, stop, step expr // nil when omitted
}

type kwExpr struct {
	name string
	val  expr
}

type callSpec struct {
	args      []expr
	kwargs    []kwExpr
	dynArgs   expr
	dynKwargs expr
}

type callExpr struct {
	pos
	fn expr
	callSpec
}

type filterExpr struct {
	pos
	arg  expr // nil inside {% filter %} and {% set %} blocks
	name string
	callSpec
}

type testExpr struct {
	pos
	arg  expr
	name string
	callSpec
}

type condExpr struct {
	pos
	test, then, els expr // els may be nil: Undefined
}

type binExpr struct {
	pos
	op   string // + - * / // % **
	l, r expr
	// foldNeg: a ** whose left operand jinja2's optimizer folds to a
	// constant while the right one is not (see finish)
	foldNeg bool
}

type concatExpr struct {
	pos
	items []expr
}

type cmpOp struct {
	op string // == != < <= > >= in notin
	e  expr
}

type compareExpr struct {
	pos
	first expr
	ops   []cmpOp
}

type andExpr struct {
	pos
	l, r expr
}

type orExpr struct {
	pos
	l, r expr
}

type notExpr struct {
	pos
	x expr
}

type negExpr struct {
	pos
	x expr
}

type posExpr struct {
	pos
	x expr
}

// stmtChildren calls fs for the statements directly inside s and fe for
// its expressions. Macro and caller bodies count as inside.
func stmtChildren(s stmt, fs func(stmt), fe func(expr)) {
	body := func(b []stmt) {
		for _, x := range b {
			fs(x)
		}
	}
	switch n := s.(type) {
	case *outputNode:
		fe(n.e)
	case *ifNode:
		fe(n.cond)
		body(n.body)
		body(n.els)
	case *forNode:
		fe(n.iter)
		if n.filter != nil {
			fe(n.filter)
		}
		body(n.body)
		body(n.els)
	case *setNode:
		fe(n.value)
	case *setAttrNode:
		fe(n.value)
	case *setBlockNode:
		for _, f := range n.filters {
			fe(f)
		}
		body(n.body)
	case *macroNode:
		for _, d := range n.def.defaults {
			fe(d)
		}
		body(n.def.body)
	case *callBlockNode:
		fe(n.call)
		for _, d := range n.caller.defaults {
			fe(d)
		}
		body(n.caller.body)
	case *filterBlockNode:
		for _, f := range n.filters {
			fe(f)
		}
		body(n.body)
	case *withNode:
		for _, v := range n.values {
			fe(v)
		}
		body(n.body)
	case *generationNode:
		body(n.body)
	}
}

// exprChildren calls f for the expressions directly inside e.
func exprChildren(e expr, f func(expr)) {
	opt := func(x expr) {
		if x != nil {
			f(x)
		}
	}
	spec := func(s callSpec) {
		for _, a := range s.args {
			f(a)
		}
		for _, k := range s.kwargs {
			f(k.val)
		}
		opt(s.dynArgs)
		opt(s.dynKwargs)
	}
	switch n := e.(type) {
	case *listExpr:
		for _, it := range n.items {
			f(it)
		}
	case *dictExpr:
		for i := range n.keys {
			f(n.keys[i])
			f(n.vals[i])
		}
	case *getattrExpr:
		f(n.obj)
	case *getitemExpr:
		f(n.obj)
		f(n.arg)
	case *sliceExpr:
		opt(n.start)
		opt(n.stop)
		opt(n.step)
	case *callExpr:
		f(n.fn)
		spec(n.callSpec)
	case *filterExpr:
		opt(n.arg)
		spec(n.callSpec)
	case *testExpr:
		f(n.arg)
		spec(n.callSpec)
	case *condExpr:
		f(n.test)
		f(n.then)
		opt(n.els)
	case *binExpr:
		f(n.l)
		f(n.r)
	case *concatExpr:
		for _, it := range n.items {
			f(it)
		}
	case *compareExpr:
		f(n.first)
		for _, o := range n.ops {
			f(o.e)
		}
	case *andExpr:
		f(n.l)
		f(n.r)
	case *orExpr:
		f(n.l)
		f(n.r)
	case *notExpr:
		f(n.x)
	case *negExpr:
		f(n.x)
	case *posExpr:
		f(n.x)
	}
}
