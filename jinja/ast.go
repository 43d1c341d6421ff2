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
