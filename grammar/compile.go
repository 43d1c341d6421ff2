package grammar

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Options configure a compilation.
type Options struct {
	// MaxIndent bounds whitespace: between two JSON tokens, and around
	// the whole text, the grammar allows nothing, one space, or a newline
	// followed by at most MaxIndent spaces and tabs (0: DefaultMaxIndent).
	// A model that keeps writing whitespace therefore cannot stall.
	MaxIndent int
	// Compact allows no whitespace at all.
	Compact bool
	// Prefix and Suffix are literal text the output starts and ends with,
	// around the JSON value (and its whitespace): a tool call's tags, as
	// "<tool_call>\n" and "\n</tool_call>".
	Prefix, Suffix string
	// Limits bound the work and memory of a compilation (the zero value
	// of a field: its default).
	Limits Limits
}

// DefaultMaxIndent is the indentation allowed after a newline.
const DefaultMaxIndent = 20

// Limits bound what a compilation may take. A schema that needs more is
// refused with an error that names the limit.
type Limits struct {
	SchemaBytes int // the schema's JSON text (default 1 MiB)
	SchemaDepth int // nesting of the schema's JSON (default 64)
	States      int // nondeterministic automaton states (default 1<<20)
	DFAStates   int // deterministic automaton states (default 1<<16)
	Work        int // steps of determinization (default 1<<27)
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.SchemaBytes, 1<<20)
	def(&l.SchemaDepth, 64)
	def(&l.States, 1<<20)
	def(&l.DFAStates, 1<<16)
	def(&l.Work, 1<<27)
	return l
}

// Error is a schema the compiler refuses.
type Error struct {
	// Path is the JSON pointer of the schema or keyword refused ("" is
	// the whole schema).
	Path string
	// Keyword is the keyword refused, when one is.
	Keyword string
	Msg     string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "grammar: schema: " + e.Msg
	}
	return "grammar: schema at " + e.Path + ": " + e.Msg
}

// keywords are the keywords the compiler enforces.
var keywords = map[string]bool{
	"type": true, "enum": true, "const": true,
	"properties": true, "required": true, "additionalProperties": true,
	"items": true, "prefixItems": true, "additionalItems": true, "minItems": true, "maxItems": true, "uniqueItems": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"anyOf": true, "oneOf": true, "allOf": true,
	"$ref": true, "$defs": true, "definitions": true,
}

// annotations are keywords that assert nothing; they are accepted and
// have no effect.
var annotations = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "$comment": true,
	"$schema": true, "$id": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// assertion reports whether key constrains values (as opposed to an
// annotation or a container of definitions).
func assertion(key string) bool {
	return !annotations[key] && key != "$defs" && key != "definitions"
}

var typeNames = []string{"null", "boolean", "object", "array", "number", "integer", "string"}

// typeSet is a set of JSON Schema types, as bits in typeNames' order.
type typeSet uint8

const (
	tNull typeSet = 1 << iota
	tBoolean
	tObject
	tArray
	tNumber // every number (integers included)
	tInteger
	tString
	tAll = tNull | tBoolean | tObject | tArray | tNumber | tInteger | tString
)

// CompileSchema compiles a JSON Schema (its JSON text) into a grammar of
// the JSON texts that validate against it. The supported subset is
// described in the package documentation; anything else is an *Error
// that names the keyword and its JSON pointer.
func CompileSchema(schema []byte, opts *Options) (*Grammar, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Limits = o.Limits.withDefaults()
	root, err := parseValue(schema, o.Limits.SchemaBytes, o.Limits.SchemaDepth)
	if err != nil {
		return nil, err
	}
	return compileRoot(root, o, "schema")
}

// JSONObject compiles the grammar of any JSON object (OpenAI's
// response_format {"type": "json_object"}).
func JSONObject(opts *Options) (*Grammar, error) {
	return compileRoot(nil, withDefaults(opts), "json_object")
}

// AnyJSON compiles the grammar of any JSON value.
func AnyJSON(opts *Options) (*Grammar, error) {
	return compileRoot(&value{kind: kBool, b: true}, withDefaults(opts), "any JSON")
}

func withDefaults(opts *Options) Options {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Limits = o.Limits.withDefaults()
	return o
}

// compileRoot compiles root (nil: any object). A $ref cycle found while
// inlining restarts the compilation with its target made a rule.
func compileRoot(root *value, o Options, desc string) (*Grammar, error) {
	recursive := map[*value]bool{}
	for attempt := 0; ; attempt++ {
		c := &compiler{
			n:           &nfa{limit: o.Limits.States},
			opts:        o,
			root:        root,
			recursive:   recursive,
			ruleOf:      map[*value]int32{},
			inlining:    map[*value]bool{},
			anyRule:     -1,
			stringRules: map[string]int32{},
		}
		g, err := c.run()
		var again restart
		if errors.As(err, &again) && attempt < 1000 {
			recursive[again.target] = true
			continue
		}
		if err != nil {
			return nil, err
		}
		g.description = desc
		return g, nil
	}
}

// restart asks for another compilation: target is a $ref cycle's target.
type restart struct{ target *value }

func (restart) Error() string { return "restart" }

type compiler struct {
	n         *nfa
	opts      Options
	root      *value
	rules     []ruleSpec
	recursive map[*value]bool
	ruleOf    map[*value]int32
	inlining  map[*value]bool
	anyRule   int32
	// stringRules are the rules of strings, by constraint.
	stringRules map[string]int32
	// at is the JSON pointer of the schema being compiled, for errors
	// raised deep inside (limits).
	at string
}

type compileError struct{ err error }

func (c *compiler) fail(path, keyword, format string, args ...any) {
	panic(compileError{&Error{Path: path, Keyword: keyword, Msg: fmt.Sprintf(format, args...)}})
}

func (c *compiler) run() (g *Grammar, err error) {
	defer func() {
		if r := recover(); r != nil {
			switch e := r.(type) {
			case compileError:
				err = e.err
			case limitHit:
				err = &Error{Path: c.at, Msg: "the schema needs " + e.what}
			case restart:
				err = e
			default:
				panic(r)
			}
		}
	}()
	start := c.n.newState()
	end := c.n.newState()
	c.rules = append(c.rules, ruleSpec{start, end, "root"})
	s := c.ws(c.n.lit(start, c.opts.Prefix))
	if c.root == nil {
		s = c.anyObject(s)
	} else {
		s = c.schema(s, c.root, "")
	}
	c.n.eps(c.n.lit(c.ws(s), c.opts.Suffix), end)
	g, err = build(c.n, c.rules, c.opts.Limits)
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	return g, nil
}

// ws emits the whitespace allowed between two tokens.
func (c *compiler) ws(from int32) int32 {
	if c.opts.Compact {
		return from
	}
	k := c.opts.MaxIndent
	if k <= 0 {
		k = DefaultMaxIndent
	}
	n := c.n
	out := n.newState()
	n.eps(from, out)
	n.eps(n.lit(from, " "), out)
	s := n.lit(from, "\n")
	for i := 0; i < k; i++ {
		n.eps(s, out)
		t := n.newState()
		n.edge(s, ' ', ' ', t)
		n.edge(s, '\t', '\t', t)
		s = t
	}
	n.eps(s, out)
	return out
}

func pointer(path string, tokens ...any) string {
	for _, t := range tokens {
		s := fmt.Sprint(t)
		s = strings.ReplaceAll(s, "~", "~0")
		s = strings.ReplaceAll(s, "/", "~1")
		path += "/" + s
	}
	return path
}

// newRule starts a rule; its body is written from the returned state to
// the rule's end.
func (c *compiler) newRule(name string) (rule, start, end int32) {
	start, end = c.n.newState(), c.n.newState()
	c.rules = append(c.rules, ruleSpec{start, end, name})
	return int32(len(c.rules) - 1), start, end
}

// callRule emits a call of rule r.
func (c *compiler) callRule(from, r int32) int32 {
	to := c.n.newState()
	c.n.call(from, r, to)
	return to
}

// anyValueRule is the rule of any JSON value.
func (c *compiler) anyValueRule() int32 {
	if c.anyRule >= 0 {
		return c.anyRule
	}
	r, start, end := c.newRule("any JSON value")
	c.anyRule = r
	c.n.eps(c.anyValueBody(start), end)
	return r
}

func (c *compiler) anyValueBody(from int32) int32 {
	n := c.n
	return n.alt(from,
		c.anyObject,
		func(s int32) int32 {
			return c.arrayN(s, func(s int32, _ int) int32 { return c.callRule(s, c.anyValueRule()) }, 0, 0, -1)
		},
		func(s int32) int32 { return c.stringValue(s, nil, "") },
		func(s int32) int32 { return n.emitPlainNumber(s, false) },
		func(s int32) int32 { return n.lit(s, "true") },
		func(s int32) int32 { return n.lit(s, "false") },
		func(s int32) int32 { return n.lit(s, "null") },
	)
}

// anyObject emits any JSON object.
func (c *compiler) anyObject(from int32) int32 {
	return c.mapObject(from, func(s int32) int32 { return c.callRule(s, c.anyValueRule()) })
}

// mapObject emits an object with any keys and values that value emits.
func (c *compiler) mapObject(from int32, val emitter) int32 {
	n := c.n
	s := c.ws(n.lit(from, "{"))
	member := func(s int32) int32 {
		s = c.ws(c.stringValue(s, nil, ""))
		s = c.ws(n.lit(s, ":"))
		return c.ws(val(s))
	}
	s = n.opt(s, func(s int32) int32 {
		s = member(s)
		return n.star(s, func(s int32) int32 { return member(c.ws(n.lit(s, ","))) })
	})
	return n.lit(s, "}")
}

// arrayN emits [ items ] with min..max items (max < 0: no bound); item
// i is written by item (the first prefix positions are told apart; the
// later ones are all alike).
func (c *compiler) arrayN(from int32, item func(s int32, i int) int32, prefix, min, max int) int32 {
	n := c.n
	cur := c.ws(n.lit(from, "["))
	closing := n.newState()
	for i := 0; ; i++ {
		if i >= min {
			n.eps(cur, closing)
		}
		if max >= 0 && i >= max {
			break
		}
		if max < 0 && i >= prefix && i >= min && i >= 1 {
			// The rest repeat freely.
			loop := n.newState()
			n.eps(cur, loop)
			n.eps(loop, closing)
			s := c.ws(n.lit(loop, ","))
			s = c.ws(item(s, i))
			n.eps(s, loop)
			break
		}
		if i > 0 {
			cur = c.ws(n.lit(cur, ","))
		}
		cur = c.ws(item(cur, i))
	}
	return n.lit(closing, "]")
}

// resolve follows a local $ref.
func (c *compiler) resolve(ref, path string) (*value, string) {
	if c.root == nil || !strings.HasPrefix(ref, "#") {
		c.fail(path, "$ref", "$ref %q is not supported: only references inside the schema (#/...) are", ref)
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		c.fail(path, "$ref", "$ref %q: %v", ref, err)
	}
	if frag != "" && !strings.HasPrefix(frag, "/") {
		c.fail(path, "$ref", "$ref %q is not supported: anchors are not, only JSON pointers (#/$defs/Name)", ref)
	}
	v := c.root
	target := ""
	if frag != "" {
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			target = pointer(target, tok)
			switch v.kind {
			case kObject:
				v = v.get(tok)
			case kArray:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(v.arr) {
					v = nil
				} else {
					v = v.arr[i]
				}
			default:
				v = nil
			}
			if v == nil {
				c.fail(path, "$ref", "$ref %q points at nothing", ref)
			}
		}
	}
	return v, target
}

// types is the set of types a schema's "type" keyword allows.
func (c *compiler) types(s *value, path string) typeSet {
	t := s.get("type")
	if t == nil {
		return tAll
	}
	one := func(v *value) typeSet {
		if v.kind != kString {
			c.fail(pointer(path, "type"), "type", "type must be a type name or an array of them")
		}
		i := slices.Index(typeNames, v.str)
		if i < 0 {
			c.fail(pointer(path, "type"), "type", "unknown type %q", v.str)
		}
		return typeSet(1) << i
	}
	if t.kind == kArray {
		if len(t.arr) == 0 {
			c.fail(pointer(path, "type"), "type", "type is an empty array")
		}
		var ts typeSet
		for _, e := range t.arr {
			ts |= one(e)
		}
		return ts
	}
	return one(t)
}

// count reads a keyword that must be a non-negative integer (-1: absent).
func (c *compiler) count(s *value, key, path string) int {
	v := s.get(key)
	if v == nil {
		return -1
	}
	if v.kind == kNumber {
		if d, err := parseDecimal(v.num); err == nil && !d.neg && d.frac == "" {
			if len(d.ip) > 9 {
				return math.MaxInt32
			}
			k, _ := strconv.Atoi(d.ip)
			return k
		}
	}
	c.fail(pointer(path, key), key, "%s must be a non-negative integer", key)
	return 0
}

func (c *compiler) checkKeywords(s *value, path string) {
	for _, m := range s.obj {
		if !keywords[m.key] && !annotations[m.key] {
			c.fail(pointer(path, m.key), m.key, "keyword %q is not supported", m.key)
		}
		if m.key == "$id" && path != "" {
			c.fail(pointer(path, m.key), m.key, "keyword \"$id\" is only supported at the schema's root")
		}
	}
	if u := s.get("uniqueItems"); u != nil {
		if u.kind != kBool {
			c.fail(pointer(path, "uniqueItems"), "uniqueItems", "uniqueItems must be a boolean")
		}
		if u.b {
			c.fail(pointer(path, "uniqueItems"), "uniqueItems", "keyword \"uniqueItems\": true is not supported")
		}
	}
}

// schema emits a JSON value valid against s, at path.
func (c *compiler) schema(from int32, s *value, path string) int32 {
	saved := c.at
	c.at = path
	defer func() { c.at = saved }()
	if s.kind == kBool {
		if !s.b {
			c.fail(path, "", "schema false accepts no value")
		}
		return c.callRule(from, c.anyValueRule())
	}
	if s.kind != kObject {
		c.fail(path, "", "a schema must be an object or a boolean, not %s", s.kind)
	}
	c.checkKeywords(s, path)

	if ref := s.get("$ref"); ref != nil {
		if ref.kind != kString {
			c.fail(pointer(path, "$ref"), "$ref", "$ref must be a string")
		}
		for _, m := range s.obj {
			if m.key != "$ref" && assertion(m.key) {
				c.fail(pointer(path, m.key), m.key, "keyword %q beside $ref is not supported", m.key)
			}
		}
		target, tpath := c.resolve(ref.str, pointer(path, "$ref"))
		return c.subschema(from, target, tpath)
	}
	for _, key := range []string{"allOf", "anyOf", "oneOf"} {
		list := s.get(key)
		if list == nil {
			continue
		}
		if list.kind != kArray || len(list.arr) == 0 {
			c.fail(pointer(path, key), key, "%s must be a non-empty array of schemas", key)
		}
		for _, m := range s.obj {
			if m.key != key && assertion(m.key) {
				c.fail(pointer(path, m.key), m.key, "keyword %q beside %s is not supported (move it into the subschemas)", m.key, key)
			}
		}
		switch key {
		case "allOf":
			if len(list.arr) != 1 {
				c.fail(pointer(path, key), key, "allOf with more than one schema is not supported")
			}
			return c.subschema(from, list.arr[0], pointer(path, key, 0))
		case "oneOf":
			for i := range list.arr {
				for j := i + 1; j < len(list.arr); j++ {
					if !c.disjoint(list.arr[i], list.arr[j], 8) {
						c.fail(pointer(path, key), key, "oneOf is only supported when its schemas cannot both match; schemas %d and %d may (use anyOf)", i, j)
					}
				}
			}
		}
		var branches []emitter
		for i, b := range list.arr {
			if b.kind == kBool && !b.b {
				continue
			}
			bpath := pointer(path, key, i)
			branches = append(branches, func(s int32) int32 { return c.subschema(s, b, bpath) })
		}
		if len(branches) == 0 {
			c.fail(pointer(path, key), key, "every schema of %s is false: no value is valid", key)
		}
		return c.n.alt(from, branches...)
	}
	if v := s.get("const"); v != nil {
		return c.literals(from, s, []*value{v}, pointer(path, "const"))
	}
	if v := s.get("enum"); v != nil {
		if v.kind != kArray || len(v.arr) == 0 {
			c.fail(pointer(path, "enum"), "enum", "enum must be a non-empty array")
		}
		return c.literals(from, s, v.arr, pointer(path, "enum"))
	}

	ts := c.types(s, path)
	if ts == tAll && !hasTypeKeywords(s) {
		return c.callRule(from, c.anyValueRule())
	}
	var branches []emitter
	if ts&tNull != 0 {
		branches = append(branches, func(f int32) int32 { return c.n.lit(f, "null") })
	}
	if ts&tBoolean != 0 {
		branches = append(branches, func(f int32) int32 {
			return c.n.alt(f, func(f int32) int32 { return c.n.lit(f, "true") }, func(f int32) int32 { return c.n.lit(f, "false") })
		})
	}
	if ts&(tNumber|tInteger) != 0 {
		integer := ts&tNumber == 0
		e, ok := c.n.numberEmitter(c.interval(s, path), integer)
		switch {
		case ok:
			branches = append(branches, e)
		case ts&^(tNumber|tInteger) == 0:
			c.fail(path, "", "no number is within the bounds")
		}
	}
	if ts&tString != 0 {
		d, key := c.stringConstraints(s, path)
		branches = append(branches, func(f int32) int32 { return c.stringValue(f, d, key) })
	}
	if ts&tArray != 0 {
		branches = append(branches, func(f int32) int32 { return c.arraySchema(f, s, path) })
	}
	if ts&tObject != 0 {
		branches = append(branches, func(f int32) int32 { return c.objectSchema(f, s, path) })
	}
	if len(branches) == 1 {
		return branches[0](from)
	}
	return c.n.alt(from, branches...)
}

// hasTypeKeywords reports whether s has keywords that constrain some
// type (an untyped schema with none is any value).
func hasTypeKeywords(s *value) bool {
	for _, m := range s.obj {
		if keywords[m.key] && m.key != "$defs" && m.key != "definitions" && m.key != "uniqueItems" {
			return true
		}
	}
	return false
}

// subschema emits a referenced or nested schema: a call when it is a
// recursive $ref target, inline otherwise.
func (c *compiler) subschema(from int32, s *value, path string) int32 {
	if c.recursive[s] {
		r, ok := c.ruleOf[s]
		if !ok {
			var start, end int32
			name := path
			if name == "" {
				name = "#"
			}
			r, start, end = c.newRule(name)
			c.ruleOf[s] = r
			c.n.eps(c.schema(start, s, path), end)
		}
		return c.callRule(from, r)
	}
	if c.inlining[s] {
		panic(restart{s})
	}
	c.inlining[s] = true
	defer delete(c.inlining, s)
	return c.schema(from, s, path)
}

// value emitter for repeated items: inline while the copies stay small,
// else a rule called at each position.
func (c *compiler) repeated(s *value, path string, copies int) func(from int32) int32 {
	if copies > 1 && !c.recursive[s] {
		before := len(c.n.states)
		c.subschema(c.n.newState(), s, path) // measure
		size := len(c.n.states) - before
		if size*copies > 1<<14 {
			r, ok := c.ruleOf[s]
			if !ok {
				var start, end int32
				r, start, end = c.newRule(path)
				c.ruleOf[s] = r
				c.n.eps(c.subschema(start, s, path), end)
			}
			return func(from int32) int32 { return c.callRule(from, r) }
		}
	}
	return func(from int32) int32 { return c.subschema(from, s, path) }
}

// interval reads the numeric bounds of s.
func (c *compiler) interval(s *value, path string) interval {
	var iv interval
	num := func(key string) (decimal, bool) {
		v := s.get(key)
		if v == nil {
			return decimal{}, false
		}
		if v.kind != kNumber {
			c.fail(pointer(path, key), key, "%s must be a number", key)
		}
		d, err := parseDecimal(v.num)
		if err != nil {
			c.fail(pointer(path, key), key, "%v", err)
		}
		return d, true
	}
	// Draft 4 spelled exclusiveness as a boolean beside minimum/maximum.
	exclBool := func(key string) bool {
		v := s.get(key)
		return v != nil && v.kind == kBool && v.b
	}
	if d, ok := num("minimum"); ok {
		iv.lo = bound{set: true, incl: !exclBool("exclusiveMinimum"), d: d}
	}
	if d, ok := num("maximum"); ok {
		iv.hi = bound{set: true, incl: !exclBool("exclusiveMaximum"), d: d}
	}
	for _, key := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
		v := s.get(key)
		if v == nil || v.kind == kBool {
			if v != nil && v.b && s.get(strings.ToLower(key[9:10])+key[10:]) == nil {
				c.fail(pointer(path, key), key, "%s: true needs %s beside it", key, strings.ToLower(key[9:10])+key[10:])
			}
			continue
		}
		d, _ := num(key)
		b := bound{set: true, d: d}
		if key == "exclusiveMinimum" {
			iv.lo = tighterLo(iv.lo, b)
		} else {
			iv.hi = tighterHi(iv.hi, b)
		}
	}
	return iv
}

// stringConstraints is the automaton of the characters s allows in a
// string (nil: any string).
func (c *compiler) stringConstraints(s *value, path string) (*rdfa, string) {
	lim := c.opts.Limits.DFAStates
	var d *rdfa
	and := func(e *rdfa, key string) {
		if d == nil {
			d = e
			return
		}
		var err error
		if d, err = d.intersect(e, lim); err != nil {
			c.fail(pointer(path, key), key, "%v", err)
		}
	}
	if p := s.get("pattern"); p != nil {
		if p.kind != kString {
			c.fail(pointer(path, "pattern"), "pattern", "pattern must be a string")
		}
		e, err := compilePattern(p.str, lim)
		if err != nil {
			c.fail(pointer(path, "pattern"), "pattern", "pattern %q: %v", p.str, err)
		}
		and(e, "pattern")
	}
	if f := s.get("format"); f != nil {
		if f.kind != kString {
			c.fail(pointer(path, "format"), "format", "format must be a string")
		}
		src, ok := formats[f.str]
		if !ok {
			c.fail(pointer(path, "format"), "format", "format %q is not supported (supported: %s)", f.str, strings.Join(formatNames(), ", "))
		}
		e, err := compilePattern(src, lim)
		if err != nil {
			panic(err) // the built-in formats compile
		}
		and(e, "format")
	}
	minL, maxL := c.count(s, "minLength", path), c.count(s, "maxLength", path)
	if minL > 0 || maxL >= 0 {
		if max(minL, maxL) >= lim {
			key := "maxLength"
			if maxL < 0 || minL > maxL {
				key = "minLength"
			}
			c.fail(pointer(path, key), key, "%s %d exceeds the limit of %d characters (Limits.DFAStates)", key, max(minL, maxL), lim-1)
		}
		and(lengthDFA(max(minL, 0), maxL), "maxLength")
	}
	if d != nil && !d.trim() {
		c.fail(path, "", "no string meets the constraints of pattern, format, minLength and maxLength together")
	}
	var key strings.Builder
	for _, k := range []string{"pattern", "format", "minLength", "maxLength"} {
		if v := s.get(k); v != nil {
			fmt.Fprintf(&key, "%s=%s ", k, v)
		}
	}
	return d, strings.TrimSpace(key.String())
}

// stringValue emits a call of the rule of the JSON strings whose
// characters d accepts (nil: any), one rule per distinct constraint
// (key). Strings are rules, not inlined, so that every string of a
// schema shares the masks of its contents: the tokens allowed inside a
// string do not depend on what follows it, except those that close it,
// which the caller's state reads (see mask.go).
func (c *compiler) stringValue(from int32, d *rdfa, key string) int32 {
	if d == nil || d.isAll() {
		key = ""
	}
	r, ok := c.stringRules[key]
	if !ok {
		var start, end int32
		name := "string"
		if key != "" {
			name = "string " + key
		}
		r, start, end = c.newRule(name)
		c.stringRules[key] = r
		c.n.eps(c.stringDFA(start, d), end)
	}
	return c.callRule(from, r)
}

// stringDFA emits a JSON string whose characters d accepts (nil: any).
func (c *compiler) stringDFA(from int32, d *rdfa) int32 {
	n := c.n
	s := n.lit(from, `"`)
	if d == nil || d.isAll() {
		loop := n.newState()
		n.eps(s, loop)
		n.eps(n.emitJSONChars(loop, anyRune), loop)
		return n.lit(loop, `"`)
	}
	states := make([]int32, len(d.edges))
	for i := range states {
		states[i] = n.newState()
	}
	n.eps(s, states[0])
	closing := n.newState()
	for i, edges := range d.edges {
		// One spelling automaton per target state: merge the sets.
		var order []int32
		sets := map[int32]runeSet{}
		for _, e := range edges {
			if _, ok := sets[e.to]; !ok {
				order = append(order, e.to)
			}
			sets[e.to] = sets[e.to].union(e.set)
		}
		for _, t := range order {
			n.eps(n.emitJSONChars(states[i], sets[t]), states[t])
		}
		if d.accept[i] {
			n.eps(states[i], closing)
		}
	}
	return n.lit(closing, `"`)
}

// literals emits one of the JSON values vals (enum or const), keeping
// those the rest of s allows.
func (c *compiler) literals(from int32, s *value, vals []*value, path string) int32 {
	var keep []*value
	for _, v := range vals {
		if c.validRest(s, v) {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 {
		c.fail(path, "", "no value of %s meets the schema's other keywords", path[strings.LastIndex(path, "/")+1:])
	}
	var branches []emitter
	for _, v := range keep {
		branches = append(branches, func(f int32) int32 { return c.literal(f, v) })
	}
	return c.n.alt(from, branches...)
}

// literal emits the JSON value v: its strings in any spelling, its
// numbers as written, its object members in order.
func (c *compiler) literal(from int32, v *value) int32 {
	n := c.n
	switch v.kind {
	case kNull:
		return n.lit(from, "null")
	case kBool:
		if v.b {
			return n.lit(from, "true")
		}
		return n.lit(from, "false")
	case kNumber:
		return n.lit(from, v.num)
	case kString:
		return c.stringDFA(from, literalDFA(v.str))
	case kArray:
		s := c.ws(n.lit(from, "["))
		for i, e := range v.arr {
			if i > 0 {
				s = c.ws(n.lit(s, ","))
			}
			s = c.ws(c.literal(s, e))
		}
		return n.lit(s, "]")
	}
	s := c.ws(n.lit(from, "{"))
	for i, m := range v.obj {
		if i > 0 {
			s = c.ws(n.lit(s, ","))
		}
		s = c.ws(c.stringDFA(s, literalDFA(m.key)))
		s = c.ws(n.lit(s, ":"))
		s = c.ws(c.literal(s, m.val))
	}
	return n.lit(s, "}")
}

// arraySchema emits an array valid against s's array keywords.
func (c *compiler) arraySchema(from int32, s *value, path string) int32 {
	minI, maxI := c.count(s, "minItems", path), c.count(s, "maxItems", path)
	minI = max(minI, 0)
	if maxI >= 0 && minI > maxI {
		c.fail(path, "", "minItems %d exceeds maxItems %d", minI, maxI)
	}
	var prefix []*value
	prefixPath := ""
	var rest *value // nil: any value
	restPath := ""
	restFalse := false
	items := s.get("items")
	if p := s.get("prefixItems"); p != nil {
		if p.kind != kArray {
			c.fail(pointer(path, "prefixItems"), "prefixItems", "prefixItems must be an array of schemas")
		}
		prefix, prefixPath = p.arr, pointer(path, "prefixItems")
		if items != nil && items.kind == kArray {
			c.fail(pointer(path, "items"), "items", "items must be a schema beside prefixItems")
		}
	}
	if items != nil && items.kind == kArray { // draft 4-2019 tuples
		prefix, prefixPath = items.arr, pointer(path, "items")
		items = s.get("additionalItems")
		restPath = pointer(path, "additionalItems")
	} else {
		if s.get("additionalItems") != nil {
			c.fail(pointer(path, "additionalItems"), "additionalItems", "additionalItems needs items to be an array")
		}
		restPath = pointer(path, "items")
	}
	if items != nil {
		if items.kind == kBool && !items.b {
			restFalse = true
		} else if !(items.kind == kBool && items.b) {
			rest = items
		}
	}
	// A false prefix item ends the array before it.
	for i, p := range prefix {
		if p.kind == kBool && !p.b {
			prefix = prefix[:i]
			restFalse = true
			break
		}
	}
	if restFalse && (maxI < 0 || maxI > len(prefix)) {
		maxI = len(prefix)
	}
	if minI > max(maxI, 0) && maxI >= 0 {
		c.fail(path, "", "minItems %d is more than the %d items the array may have", minI, maxI)
	}
	copies := maxI - len(prefix)
	if maxI < 0 {
		copies = max(minI-len(prefix), 0) + 1
	}
	var restItem func(int32) int32
	if rest == nil {
		restItem = func(from int32) int32 { return c.callRule(from, c.anyValueRule()) }
	} else if rest.kind == kBool || rest.kind == kObject {
		restItem = c.repeated(rest, restPath, copies)
	} else {
		c.fail(restPath, "", "items must be a schema")
	}
	item := func(from int32, i int) int32 {
		if i < len(prefix) {
			return c.subschema(from, prefix[i], pointer(prefixPath, i))
		}
		return restItem(from)
	}
	return c.arrayN(from, item, len(prefix), minI, maxI)
}

type prop struct {
	name     string
	schema   *value
	path     string
	required bool
}

// objectSchema emits an object valid against s's object keywords. The
// properties come in the schema's order; those not required may be left
// out. Properties the schema does not list are never written, whatever
// additionalProperties says (so strict and non-strict schemas give the
// same grammar); an object schema without properties whose
// additionalProperties is a schema is a map with any keys.
func (c *compiler) objectSchema(from int32, s *value, path string) int32 {
	props := s.get("properties")
	if props != nil && props.kind != kObject {
		c.fail(pointer(path, "properties"), "properties", "properties must be an object of schemas")
	}
	required := map[string]bool{}
	var reqOrder []string
	if r := s.get("required"); r != nil {
		if r.kind != kArray {
			c.fail(pointer(path, "required"), "required", "required must be an array of strings")
		}
		for _, e := range r.arr {
			if e.kind != kString {
				c.fail(pointer(path, "required"), "required", "required must be an array of strings")
			}
			if !required[e.str] {
				reqOrder = append(reqOrder, e.str)
			}
			required[e.str] = true
		}
	}
	add := s.get("additionalProperties")
	addFalse := add != nil && add.kind == kBool && !add.b
	if add != nil && add.kind != kBool && add.kind != kObject {
		c.fail(pointer(path, "additionalProperties"), "additionalProperties", "additionalProperties must be a schema")
	}
	if props == nil || len(props.obj) == 0 {
		if len(required) == 0 && !addFalse {
			// A map: any keys, values of additionalProperties.
			if add == nil || add.kind == kBool {
				return c.anyObject(from)
			}
			val := c.repeated(add, pointer(path, "additionalProperties"), 2)
			return c.mapObject(from, val)
		}
	}
	var list []prop
	if props != nil {
		for _, m := range props.obj {
			list = append(list, prop{m.key, m.val, pointer(path, "properties", m.key), required[m.key]})
		}
	}
	for _, name := range reqOrder {
		if props.get(name) != nil {
			continue
		}
		if addFalse {
			c.fail(pointer(path, "required"), "required", "required property %q is not in properties and additionalProperties is false", name)
		}
		var sch *value = &value{kind: kBool, b: true}
		spath := pointer(path, "additionalProperties")
		if add != nil {
			sch = add
		}
		list = append(list, prop{name, sch, spath, true})
	}
	n := c.n
	s0 := c.ws(n.lit(from, "{"))
	first, rest := s0, int32(-1)
	for _, p := range list {
		if p.schema.kind == kBool && !p.schema.b {
			if p.required {
				c.fail(p.path, "", "required property %q has the schema false", p.name)
			}
			continue
		}
		key := n.newState()
		if first >= 0 {
			n.eps(first, key)
		}
		if rest >= 0 {
			n.eps(c.ws(n.lit(rest, ",")), key)
		}
		e := c.ws(c.stringDFA(key, literalDFA(p.name)))
		e = c.ws(n.lit(e, ":"))
		e = c.ws(c.subschema(e, p.schema, p.path))
		if p.required {
			first, rest = -1, e
			continue
		}
		r := n.newState()
		n.eps(e, r)
		if rest >= 0 {
			n.eps(rest, r)
		}
		rest = r
	}
	closing := n.newState()
	if first >= 0 {
		n.eps(first, closing)
	}
	if rest >= 0 {
		n.eps(rest, closing)
	}
	return n.lit(closing, "}")
}
