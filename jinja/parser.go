package jinja

import (
	"fmt"
	"strings"
)

// The parser is a port of jinja2's parser.py: same precedence climbing,
// same statement set, so templates parse exactly as they do in Python.
// Precedence, loosest first:
//
//	x if c else y  >  or  >  and  >  not  >  comparisons, in, not in
//	>  + -  >  ~  >  * / // %  >  **  >  unary - +  >  | filter, is test
//	>  .attr [item] (call)
//
// Note that filters bind tighter than arithmetic: `a + b | trim` trims only
// b, which templates such as Llama 3's rely on.

type parser struct {
	name string
	src  string
	toks []token
	i    int
	// open block tags, innermost last, for "unexpected end" messages
	tagStack []string
	// nesting of the recursive descent, bounded by maxNest so that a
	// hostile template cannot exhaust the stack
	nest, maxNest int
}

// enter goes one level deeper into the recursive descent.
func (p *parser) enter() error {
	p.nest++
	if p.nest > p.maxNest {
		line, _ := lineCol(p.src, p.cur().pos)
		return &LimitError{Limit: "MaxNesting", Max: int64(p.maxNest), Name: p.name, Line: line,
			Detail: fmt.Sprintf("the template nests blocks and expressions more than %d deep", p.maxNest)}
	}
	return nil
}

func (p *parser) leave() { p.nest-- }

func (p *parser) cur() token { return p.toks[p.i] }

func (p *parser) look() token {
	if p.i+1 < len(p.toks) {
		return p.toks[p.i+1]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.typ != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isOp(op string) bool {
	t := p.cur()
	return t.typ == tOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.cur()
	return t.typ == tName && t.val == name
}

func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.i++
		return true
	}
	return false
}

func (p *parser) skipName(name string) bool {
	if p.isName(name) {
		p.i++
		return true
	}
	return false
}

func (p *parser) failAt(at int, format string, args ...any) error {
	line, col := lineCol(p.src, at)
	return &SyntaxError{Name: p.name, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) fail(format string, args ...any) error {
	return p.failAt(p.cur().pos, format, args...)
}

// expect consumes a token of the given type (and value, for names and
// operators), or fails as jinja2 does.
func (p *parser) expect(typ tokType, val string) (token, error) {
	t := p.cur()
	if t.typ == typ && (val == "" || t.val == val) {
		return p.next(), nil
	}
	want := val
	if want == "" {
		want = token{typ: typ}.describe()
	}
	if t.typ == tEOF {
		return t, p.fail("unexpected end of template, expected '%s'.", want)
	}
	return t, p.fail("expected token '%s', got '%s'", want, t.describe())
}

func (p *parser) expectOp(op string) error {
	_, err := p.expect(tOp, op)
	return err
}

func (p *parser) expectName() (string, error) {
	t, err := p.expect(tName, "")
	return t.val, err
}

// parseTemplate is subparse at the top level.
func (p *parser) parseTemplate() ([]stmt, error) {
	body, err := p.subparse(nil)
	if err != nil {
		return nil, err
	}
	if p.cur().typ != tEOF {
		return nil, p.fail("unexpected '%s'", p.cur().describe())
	}
	return body, nil
}

// subparse parses template data, {{ }} and {% %} until one of the end
// tags (left as the current token) or the end of the template.
func (p *parser) subparse(endTags []string) ([]stmt, error) {
	var body []stmt
	for {
		t := p.cur()
		switch t.typ {
		case tEOF:
			return body, nil
		case tData:
			p.next()
			body = append(body, &textNode{pos: pos(t.pos), text: t.val})
		case tVarBegin:
			p.next()
			e, err := p.parseTuple(false, true, nil, false)
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(tVarEnd, ""); err != nil {
				return nil, err
			}
			body = append(body, &outputNode{pos: pos(t.pos), e: e})
		case tBlockBegin:
			p.next()
			if endTags != nil && p.cur().typ == tName && contains1(endTags, p.cur().val) {
				return body, nil
			}
			s, err := p.parseStatement()
			if err != nil {
				return nil, err
			}
			body = append(body, s)
			if _, err := p.expect(tBlockEnd, ""); err != nil {
				return nil, err
			}
		default:
			return nil, p.fail("unexpected '%s'", t.describe())
		}
	}
}

func contains1(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseStatements parses a block body up to one of endTags. The end tag
// is consumed when drop is set; otherwise it stays current for the caller
// to inspect (if/elif/else, for/else).
func (p *parser) parseStatements(endTags []string, drop bool) ([]stmt, error) {
	p.skipOp(":") // jinja2 tolerates `{% for x in y: %}`
	if _, err := p.expect(tBlockEnd, ""); err != nil {
		return nil, err
	}
	body, err := p.subparse(endTags)
	if err != nil {
		return nil, err
	}
	if p.cur().typ == tEOF {
		return nil, p.failEOF(endTags)
	}
	if drop {
		p.next()
	}
	return body, nil
}

func (p *parser) failEOF(endTags []string) error {
	var quoted []string
	for _, t := range endTags {
		quoted = append(quoted, "'"+t+"'")
	}
	msg := "Unexpected end of template."
	if len(quoted) > 0 {
		msg += " Jinja was looking for the following tags: " + strings.Join(quoted, " or ") + "."
	}
	if n := len(p.tagStack); n > 0 {
		msg += fmt.Sprintf(" The innermost block that needs to be closed is '%s'.", p.tagStack[n-1])
	}
	return p.fail("%s", msg)
}

func (p *parser) parseStatement() (stmt, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.cur()
	if t.typ != tName {
		return nil, p.fail("tag name expected")
	}
	p.tagStack = append(p.tagStack, t.val)
	defer func() { p.tagStack = p.tagStack[:len(p.tagStack)-1] }()
	switch t.val {
	case "for":
		return p.parseFor()
	case "if":
		return p.parseIf()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "call":
		return p.parseCallBlock()
	case "filter":
		return p.parseFilterBlock()
	case "with":
		return p.parseWith()
	case "print":
		p.next()
		e, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		return &outputNode{pos: pos(t.pos), e: e}, nil
	case "break":
		p.next()
		if !p.inLoop() {
			return nil, p.failAt(t.pos, "'break' outside of a loop")
		}
		return &breakNode{pos: pos(t.pos)}, nil
	case "continue":
		p.next()
		if !p.inLoop() {
			return nil, p.failAt(t.pos, "'continue' outside of a loop")
		}
		return &continueNode{pos: pos(t.pos)}, nil
	case "generation":
		p.next()
		body, err := p.parseStatements([]string{"endgeneration"}, true)
		if err != nil {
			return nil, err
		}
		return &generationNode{pos: pos(t.pos), body: body}, nil
	case "raw":
		// Only reachable when the lexer did not see a well-formed raw tag.
		return nil, p.fail("malformed raw block")
	case "block", "extends", "include", "import", "from", "autoescape":
		return nil, p.fail("the '%s' tag is not supported by this engine (chat templates are self-contained)", t.val)
	}
	if n := len(p.tagStack); n > 1 && strings.HasPrefix(t.val, "end") {
		return nil, p.fail("Encountered unknown tag '%s'. You probably made a nesting mistake. The innermost block that needs to be closed is '%s'.", t.val, p.tagStack[n-2])
	}
	return nil, p.fail("Encountered unknown tag '%s'.", t.val)
}

func (p *parser) inLoop() bool {
	for i := len(p.tagStack) - 2; i >= 0; i-- {
		switch p.tagStack[i] {
		case "for":
			return true
		case "macro", "call":
			return false
		}
	}
	return false
}

func (p *parser) parseFor() (stmt, error) {
	start := p.next()
	target, err := p.parseAssignTarget([]string{"in"})
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(tName, "in"); err != nil {
		return nil, err
	}
	iter, err := p.parseTuple(false, false, []string{"recursive"}, false)
	if err != nil {
		return nil, err
	}
	n := &forNode{pos: pos(start.pos), target: target, iter: iter}
	if p.skipName("if") {
		if n.filter, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	n.recursive = p.skipName("recursive")
	if n.body, err = p.parseStatements([]string{"endfor", "else"}, false); err != nil {
		return nil, err
	}
	if p.next().val == "else" {
		if n.els, err = p.parseStatements([]string{"endfor"}, true); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (p *parser) parseIf() (stmt, error) {
	start := p.next()
	root := &ifNode{pos: pos(start.pos)}
	n := root
	for {
		cond, err := p.parseTuple(false, false, nil, false)
		if err != nil {
			return nil, err
		}
		n.cond = cond
		if n.body, err = p.parseStatements([]string{"elif", "else", "endif"}, false); err != nil {
			return nil, err
		}
		t := p.next()
		switch t.val {
		case "elif":
			elif := &ifNode{pos: pos(t.pos)}
			n.els = []stmt{elif}
			n = elif
			continue
		case "else":
			if n.els, err = p.parseStatements([]string{"endif"}, true); err != nil {
				return nil, err
			}
		}
		return root, nil
	}
}

func (p *parser) parseSet() (stmt, error) {
	start := p.next()
	// {% set ns.attr = ... %}
	if p.cur().typ == tName && p.look().typ == tOp && p.look().val == "." {
		name := p.next().val
		p.next()
		attr, err := p.expectName()
		if err != nil {
			return nil, err
		}
		if p.skipOp("=") {
			v, err := p.parseTuple(false, true, nil, false)
			if err != nil {
				return nil, err
			}
			return &setAttrNode{pos: pos(start.pos), name: name, attr: attr, value: v}, nil
		}
		return p.parseSetBlock(start, assignTarget{name: name}, attr)
	}
	target, err := p.parseAssignTarget(nil)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		v, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		return &setNode{pos: pos(start.pos), target: target, value: v}, nil
	}
	return p.parseSetBlock(start, target, "")
}

func (p *parser) parseSetBlock(start token, target assignTarget, nsAttr string) (stmt, error) {
	filters, err := p.parseFilterChain(nil, false)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endset"}, true)
	if err != nil {
		return nil, err
	}
	return &setBlockNode{pos: pos(start.pos), target: target, nsAttr: nsAttr, filters: filters, body: body}, nil
}

func (p *parser) parseMacro() (stmt, error) {
	start := p.next()
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	def := &macroDef{name: name}
	if err := p.parseSignature(def); err != nil {
		return nil, err
	}
	if def.body, err = p.parseStatements([]string{"endmacro"}, true); err != nil {
		return nil, err
	}
	return &macroNode{pos: pos(start.pos), def: def}, nil
}

func (p *parser) parseSignature(def *macroDef) error {
	if err := p.expectOp("("); err != nil {
		return err
	}
	for !p.isOp(")") {
		if len(def.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return err
			}
		}
		name, err := p.expectName()
		if err != nil {
			return err
		}
		if p.skipOp("=") {
			d, err := p.parseExpression(true)
			if err != nil {
				return err
			}
			def.defaults = append(def.defaults, d)
		} else if len(def.defaults) > 0 {
			return p.fail("non-default argument follows default argument")
		}
		def.params = append(def.params, name)
	}
	return p.expectOp(")")
}

func (p *parser) parseCallBlock() (stmt, error) {
	start := p.next()
	def := &macroDef{name: "caller"}
	if p.isOp("(") {
		if err := p.parseSignature(def); err != nil {
			return nil, err
		}
	}
	e, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	call, ok := e.(*callExpr)
	if !ok {
		return nil, p.failAt(start.pos, "expected call")
	}
	if def.body, err = p.parseStatements([]string{"endcall"}, true); err != nil {
		return nil, err
	}
	return &callBlockNode{pos: pos(start.pos), call: call, caller: def}, nil
}

func (p *parser) parseFilterBlock() (stmt, error) {
	start := p.next()
	filters, err := p.parseFilterChain(nil, true)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endfilter"}, true)
	if err != nil {
		return nil, err
	}
	return &filterBlockNode{pos: pos(start.pos), filters: filters, body: body}, nil
}

func (p *parser) parseWith() (stmt, error) {
	start := p.next()
	n := &withNode{pos: pos(start.pos)}
	for p.cur().typ != tBlockEnd {
		if len(n.targets) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		t, err := p.parseAssignTarget(nil)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, t)
		n.values = append(n.values, v)
	}
	var err error
	if n.body, err = p.parseStatements([]string{"endwith"}, true); err != nil {
		return nil, err
	}
	return n, nil
}

// parseAssignTarget parses a name or a tuple of names (for loop targets
// and set).
func (p *parser) parseAssignTarget(extraEnd []string) (assignTarget, error) {
	e, err := p.parseTuple(true, true, extraEnd, false)
	if err != nil {
		return assignTarget{}, err
	}
	return p.toTarget(e)
}

func (p *parser) toTarget(e expr) (assignTarget, error) {
	switch x := e.(type) {
	case *nameExpr:
		return assignTarget{name: x.name}, nil
	case *listExpr:
		if x.tuple {
			t := assignTarget{isTup: true}
			for _, it := range x.items {
				sub, err := p.toTarget(it)
				if err != nil {
					return t, err
				}
				t.tuple = append(t.tuple, sub)
			}
			return t, nil
		}
	}
	return assignTarget{}, p.failAt(e.position(), "can't assign to %s", describeExpr(e))
}

func describeExpr(e expr) string {
	switch e.(type) {
	case *constExpr:
		return "'Const'"
	case *listExpr:
		return "'List'"
	case *callExpr:
		return "'Call'"
	}
	return "expression"
}

// parseTuple is jinja2's parse_tuple: one expression, or several separated
// by commas (a tuple). simplified limits items to primaries (assignment
// targets); withCond allows `x if c else y` in items.
func (p *parser) parseTuple(simplified, withCond bool, extraEnd []string, explicitParens bool) (expr, error) {
	start := p.cur().pos
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		var e expr
		var err error
		if simplified {
			e, err = p.parsePrimary()
		} else {
			e, err = p.parseExpression(withCond)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, e)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if !explicitParens {
			return nil, p.fail("Expected an expression, got '%s'", p.cur().describe())
		}
	}
	return &listExpr{pos: pos(start), items: items, tuple: true}, nil
}

func (p *parser) isTupleEnd(extraEnd []string) bool {
	t := p.cur()
	switch {
	case t.typ == tVarEnd, t.typ == tBlockEnd, t.typ == tOp && t.val == ")":
		return true
	case t.typ == tName && contains1(extraEnd, t.val):
		return true
	}
	return false
}

func (p *parser) parseExpression(withCond bool) (expr, error) {
	if withCond {
		return p.parseCondExpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondExpr() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	start := p.cur().pos
	e1, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.skipName("if") {
		e2, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var e3 expr
		if p.skipName("else") {
			if e3, err = p.parseCondExpr(); err != nil {
				return nil, err
			}
		}
		e1 = &condExpr{pos: pos(start), test: e2, then: e1, els: e3}
	}
	return e1, nil
}

func (p *parser) parseOr() (expr, error) {
	start := p.cur().pos
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.skipName("or") {
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &orExpr{pos: pos(start), l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (expr, error) {
	start := p.cur().pos
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.skipName("and") {
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &andExpr{pos: pos(start), l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		t := p.next()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &notExpr{pos: pos(t.pos), x: x}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	start := p.cur().pos
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var ops []cmpOp
	for {
		t := p.cur()
		var op string
		switch {
		case t.typ == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			p.next()
			op = t.val
		case t.typ == tName && t.val == "in":
			p.next()
			op = "in"
		case t.typ == tName && t.val == "not" && p.look().typ == tName && p.look().val == "in":
			p.i += 2
			op = "notin"
		default:
			if len(ops) == 0 {
				return first, nil
			}
			return &compareExpr{pos: pos(start), first: first, ops: ops}, nil
		}
		e, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		ops = append(ops, cmpOp{op: op, e: e})
	}
}

func (p *parser) parseMath1() (expr, error) {
	start := p.cur().pos
	l, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		op := p.next().val
		r, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		l = &binExpr{pos: pos(start), op: op, l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseConcat() (expr, error) {
	start := p.cur().pos
	first, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	items := []expr{first}
	for p.skipOp("~") {
		e, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	if len(items) == 1 {
		return first, nil
	}
	return &concatExpr{pos: pos(start), items: items}, nil
}

func (p *parser) parseMath2() (expr, error) {
	start := p.cur().pos
	l, err := p.parsePow()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		op := p.next().val
		r, err := p.parsePow()
		if err != nil {
			return nil, err
		}
		l = &binExpr{pos: pos(start), op: op, l: l, r: r}
	}
	return l, nil
}

func (p *parser) parsePow() (expr, error) {
	start := p.cur().pos
	l, err := p.parseUnary(true)
	if err != nil {
		return nil, err
	}
	for p.skipOp("**") {
		r, err := p.parseUnary(true)
		if err != nil {
			return nil, err
		}
		l = &binExpr{pos: pos(start), op: "**", l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.cur()
	var e expr
	var err error
	switch {
	case t.typ == tOp && t.val == "-":
		p.next()
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &negExpr{pos: pos(t.pos), x: x}
	case t.typ == tOp && t.val == "+":
		p.next()
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &posExpr{pos: pos(t.pos), x: x}
	default:
		if e, err = p.parsePrimary(); err != nil {
			return nil, err
		}
	}
	if e, err = p.parsePostfix(e); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(e)
	}
	return e, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.cur()
	at := pos(t.pos)
	switch t.typ {
	case tName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{pos: at, val: true}, nil
		case "false", "False":
			return &constExpr{pos: at, val: false}, nil
		case "none", "None":
			return &constExpr{pos: at, val: nil}, nil
		}
		return &nameExpr{pos: at, name: t.val}, nil
	case tString:
		// adjacent literals concatenate, as in Python
		p.next()
		if p.cur().typ != tString {
			return &constExpr{pos: at, val: t.val}, nil
		}
		var b strings.Builder
		b.WriteString(t.val)
		for p.cur().typ == tString {
			b.WriteString(p.next().val)
		}
		return &constExpr{pos: at, val: b.String()}, nil
	case tInt, tFloat:
		p.next()
		return &constExpr{pos: at, val: t.num}, nil
	case tOp:
		switch t.val {
		case "(":
			p.next()
			e, err := p.parseTuple(false, true, nil, true)
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return e, nil
		case "[":
			return p.parseList()
		case "{":
			return p.parseDict()
		}
	case tEOF:
		return nil, p.fail("unexpected end of template")
	}
	return nil, p.fail("unexpected '%s'", t.describe())
}

func (p *parser) parseList() (expr, error) {
	start := p.next()
	var items []expr
	for !p.isOp("]") {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isOp("]") {
			break
		}
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	if err := p.expectOp("]"); err != nil {
		return nil, err
	}
	return &listExpr{pos: pos(start.pos), items: items}, nil
}

func (p *parser) parseDict() (expr, error) {
	start := p.next()
	d := &dictExpr{pos: pos(start.pos)}
	for !p.isOp("}") {
		if len(d.keys) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isOp("}") {
			break
		}
		k, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(":"); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
	}
	if err := p.expectOp("}"); err != nil {
		return nil, err
	}
	return d, nil
}

func (p *parser) parsePostfix(e expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp(".") || p.isOp("["):
			e, err = p.parseSubscript(e)
		case p.isOp("("):
			e, err = p.parseCall(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseFilterExpr(e expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp("|"):
			var fs []*filterExpr
			fs, err = p.parseFilterChain(e, false)
			if err == nil {
				e = fs[len(fs)-1]
			}
		case p.isName("is"):
			e, err = p.parseTest(e)
		case p.isOp("("):
			e, err = p.parseCall(e)
		default:
			return e, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseSubscript(e expr) (expr, error) {
	t := p.next()
	if t.val == "." {
		a := p.next()
		switch a.typ {
		case tName:
			return &getattrExpr{pos: pos(t.pos), obj: e, attr: a.val}, nil
		case tInt:
			return &getitemExpr{pos: pos(t.pos), obj: e, arg: &constExpr{pos: pos(a.pos), val: a.num}}, nil
		}
		return nil, p.failAt(a.pos, "expected name or number")
	}
	var args []expr
	for !p.isOp("]") {
		if len(args) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		a, err := p.parseSubscribed()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	if err := p.expectOp("]"); err != nil {
		return nil, err
	}
	if len(args) == 1 {
		return &getitemExpr{pos: pos(t.pos), obj: e, arg: args[0]}, nil
	}
	return &getitemExpr{pos: pos(t.pos), obj: e, arg: &listExpr{pos: pos(t.pos), items: args, tuple: true}}, nil
}

// parseSubscribed parses one subscript: an expression or a slice
// start:stop:step with any part omitted.
func (p *parser) parseSubscribed() (expr, error) {
	start := p.cur().pos
	var parts [3]expr
	if p.isOp(":") {
		p.next()
	} else {
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return e, nil
		}
		p.next()
		parts[0] = e
	}
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[1] = e
	}
	if p.skipOp(":") {
		if !p.isOp("]") && !p.isOp(",") {
			e, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			parts[2] = e
		}
	}
	return &sliceExpr{pos: pos(start), start: parts[0], stop: parts[1], step: parts[2]}, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	at := p.cur().pos
	spec, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{pos: pos(at), fn: fn, callSpec: spec}, nil
}

func (p *parser) parseCallArgs() (callSpec, error) {
	var s callSpec
	open := p.cur().pos
	if err := p.expectOp("("); err != nil {
		return s, err
	}
	invalid := func() error { return p.failAt(open, "invalid syntax for function call expression") }
	needComma := false
	for !p.isOp(")") {
		if needComma {
			if err := p.expectOp(","); err != nil {
				return s, err
			}
			if p.isOp(")") {
				break
			}
		}
		switch {
		case p.isOp("*"):
			if s.dynArgs != nil || s.dynKwargs != nil {
				return s, invalid()
			}
			p.next()
			e, err := p.parseExpression(true)
			if err != nil {
				return s, err
			}
			s.dynArgs = e
		case p.isOp("**"):
			if s.dynKwargs != nil {
				return s, invalid()
			}
			p.next()
			e, err := p.parseExpression(true)
			if err != nil {
				return s, err
			}
			s.dynKwargs = e
		case p.cur().typ == tName && p.look().typ == tOp && p.look().val == "=":
			if s.dynKwargs != nil {
				return s, invalid()
			}
			name := p.next().val
			p.next()
			e, err := p.parseExpression(true)
			if err != nil {
				return s, err
			}
			s.kwargs = append(s.kwargs, kwExpr{name: name, val: e})
		default:
			if s.dynArgs != nil || s.dynKwargs != nil || len(s.kwargs) > 0 {
				return s, invalid()
			}
			e, err := p.parseExpression(true)
			if err != nil {
				return s, err
			}
			s.args = append(s.args, e)
		}
		needComma = true
	}
	return s, p.expectOp(")")
}

// parseFilterChain parses `| f1(args) | f2 ...` applied to arg. With
// startInline the first filter has no leading pipe ({% filter f %}).
func (p *parser) parseFilterChain(arg expr, startInline bool) ([]*filterExpr, error) {
	var out []*filterExpr
	for p.isOp("|") || startInline {
		if !startInline {
			p.next()
		}
		startInline = false
		t, err := p.expect(tName, "")
		if err != nil {
			return nil, err
		}
		name := t.val
		for p.skipOp(".") {
			n, err := p.expectName()
			if err != nil {
				return nil, err
			}
			name += "." + n
		}
		f := &filterExpr{pos: pos(t.pos), arg: arg, name: name}
		if p.isOp("(") {
			if f.callSpec, err = p.parseCallArgs(); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
		if arg != nil {
			arg = f
		}
	}
	return out, nil
}

func (p *parser) parseTest(e expr) (expr, error) {
	isTok := p.next()
	negated := p.skipName("not")
	t, err := p.expect(tName, "")
	if err != nil {
		return nil, err
	}
	name := t.val
	for p.skipOp(".") {
		n, err := p.expectName()
		if err != nil {
			return nil, err
		}
		name += "." + n
	}
	te := &testExpr{pos: pos(isTok.pos), arg: e, name: name}
	c := p.cur()
	switch {
	case p.isOp("("):
		if te.callSpec, err = p.parseCallArgs(); err != nil {
			return nil, err
		}
	case (c.typ == tName && c.val != "else" && c.val != "or" && c.val != "and") ||
		c.typ == tString || c.typ == tInt || c.typ == tFloat ||
		(c.typ == tOp && (c.val == "[" || c.val == "{")):
		// `x is divisibleby 3`: one argument without parentheses
		if c.typ == tName && c.val == "is" {
			return nil, p.fail("You cannot chain multiple tests with is")
		}
		a, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		te.args = []expr{a}
	}
	if negated {
		return &notExpr{pos: pos(isTok.pos), x: te}, nil
	}
	return te, nil
}

// Names whose mention in a macro body changes the macro's signature
// (jinja2 decides from the body whether the macro accepts extra positional
// or keyword arguments, or a caller).
const (
	mentionsVarargs uint8 = 1 << iota
	mentionsKwargs
	mentionsCaller
)

func mention(name string) uint8 {
	switch name {
	case "varargs":
		return mentionsVarargs
	case "kwargs":
		return mentionsKwargs
	case "caller":
		return mentionsCaller
	}
	return 0
}

func (d *macroDef) setUses(m uint8) {
	d.usesVarargs = m&mentionsVarargs != 0
	d.usesKwargs = m&mentionsKwargs != 0
	d.usesCaller = m&mentionsCaller != 0
}

// finisher walks a parsed template once; see finish.
type finisher struct {
	max     int
	tooDeep bool
	deepPos int
}

// finish runs once after parsing. It checks that the template nests no
// deeper than MaxNesting, so that evaluating it cannot exhaust the stack;
// marks the ** nodes that jinja2's optimizer constant-folds; and records
// which of varargs, kwargs and caller each macro body mentions, nested
// macros included (an over-approximation jinja2 shares). It visits every
// node once, never deeper than the limit.
func finish(t *Template) error {
	f := &finisher{max: t.limits.MaxNesting}
	for _, s := range t.body {
		f.stmt(s, 1)
	}
	if f.tooDeep {
		return &LimitError{Limit: "MaxNesting", Max: int64(f.max), Name: t.name, Line: t.line(f.deepPos),
			Detail: fmt.Sprintf("the template nests blocks and expressions more than %d deep", f.max)}
	}
	return nil
}

func (f *finisher) deep(n interface{ position() int }, depth int) bool {
	if f.tooDeep {
		return true
	}
	if depth > f.max {
		f.tooDeep, f.deepPos = true, n.position()
		return true
	}
	return false
}

// stmt returns the names of interest s mentions.
func (f *finisher) stmt(s stmt, depth int) uint8 {
	if f.deep(s, depth) {
		return 0
	}
	var m uint8
	switch n := s.(type) {
	case *setAttrNode:
		m = mention(n.name)
	case *macroNode:
		for _, d := range n.def.defaults {
			dm, _ := f.expr(d, depth+1)
			m |= dm
		}
		body := f.body(n.def.body, depth+1)
		n.def.setUses(body)
		return m | body
	case *callBlockNode:
		m, _ = f.expr(n.call, depth+1)
		for _, d := range n.caller.defaults {
			f.expr(d, depth+1)
		}
		body := f.body(n.caller.body, depth+1)
		n.caller.setUses(body)
		return m | body
	}
	stmtChildren(s, func(c stmt) { m |= f.stmt(c, depth+1) }, func(e expr) {
		em, _ := f.expr(e, depth+1)
		m |= em
	})
	return m
}

func (f *finisher) body(b []stmt, depth int) uint8 {
	var m uint8
	for _, s := range b {
		m |= f.stmt(s, depth)
	}
	return m
}

// expr returns the names of interest e mentions and whether jinja2's
// optimizer would fold e at compile time: literals and operators,
// filters and tests over literals (except the filters that need the
// render context).
func (f *finisher) expr(e expr, depth int) (uint8, bool) {
	if f.deep(e, depth) {
		return 0, false
	}
	if n, ok := e.(*binExpr); ok {
		lm, lc := f.expr(n.l, depth+1)
		rm, rc := f.expr(n.r, depth+1)
		n.foldNeg = n.op == "**" && lc && !rc
		return lm | rm, lc && rc
	}
	var m uint8
	all := true
	exprChildren(e, func(c expr) {
		cm, cc := f.expr(c, depth+1)
		m |= cm
		all = all && cc
	})
	switch n := e.(type) {
	case *constExpr:
		return m, true
	case *nameExpr:
		return mention(n.name), false
	case *callExpr:
		return m, false
	case *filterExpr:
		switch n.name {
		case "map", "select", "reject", "selectattr", "rejectattr":
			return m, false
		}
		_, known := filters[n.name]
		return m, all && known && n.arg != nil && n.dynArgs == nil && n.dynKwargs == nil
	case *testExpr:
		_, known := tests[n.name]
		return m, all && known && n.dynArgs == nil && n.dynKwargs == nil
	case *listExpr, *dictExpr, *getattrExpr, *getitemExpr, *sliceExpr, *condExpr,
		*concatExpr, *compareExpr, *andExpr, *orExpr, *notExpr, *negExpr, *posExpr:
		return m, all
	}
	return m, false
}
