package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// synthVocab is a small vocabulary with what a real one has: every
// single byte (byte-level BPE), whole and split multi-byte characters,
// JSON punctuation fused with quotes and spaces, escapes, words, digits,
// whitespace runs, and a special EOS.
func synthVocab(t testing.TB) *Vocab {
	var toks []string
	for b := 0; b < 256; b++ {
		toks = append(toks, string([]byte{byte(b)}))
	}
	toks = append(toks,
		`{"`, `":`, `",`, `"}`, `"]`, `{}`, `[]`, `[{`, `}]`, `},`, `],`, `":"`, `","`, `" `, ` "`, `":[`, `":{`, `"]}`, `":"`, `"}}`,
		"true", "false", "null", "tr", "ue", "nu", "fal",
		`\u00`, `\u`, `\"`, `\\`, `\n`, `\ud83d`, `\ude00`, `\/`, `"\u`,
		"name", "age", "red", "green", "blue", "admin", "kind", "value", "children", "next", "x", "ab", "abc", "Hello", " world", "-", "--",
		"12", "0", "00", "-1", ".5", "e+", "E-", "1e", "99", "255", "2024", "-0", "10", "5.", "192",
		"é", "€", "😀", "中文", "\xc3", "\xa9", "\xe2\x82", "\xac", "\xf0\x9f", "\x98\x80",
		"  ", "    ", "\n  ", "\n    ", ",\n", ",\n  ", "\t", "\n\n", ": ", ", ", "\r\n",
		"T10", ":20:", "Z", "-01-", "-02-29", "1.", "ff", "e89b", "-4", "a4",
	)
	tokens := make([][]byte, len(toks)+1)
	for i, s := range toks {
		tokens[i] = []byte(s)
	}
	eos := len(toks) // a special token: no bytes
	v, err := NewVocab(tokens, []int{eos}, len(tokens)+3)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// bruteMask is the mask by reading every token's bytes.
func bruteMask(tm *TokenMatcher) []uint64 {
	v := tm.c.v
	out := make([]uint64, (v.size+63)/64)
	m := tm.m
	for id, b := range v.tokens {
		if b == nil {
			continue
		}
		saved := m.cores
		if m.Accept(b) {
			out[id>>6] |= 1 << (id & 63)
		}
		m.cores = saved
	}
	if tm.CanEnd() {
		for _, e := range v.eos {
			out[e>>6] |= 1 << (e & 63)
		}
	}
	return out
}

func allowedIDs(mask []uint64) []int {
	var ids []int
	for k, w := range mask {
		for ; w != 0; w &= w - 1 {
			ids = append(ids, k<<6+bits.TrailingZeros64(w))
		}
	}
	return ids
}

// pick chooses a random allowed token: EOS when allowed, half the time;
// else, a third of the time, one that closes something, so that walks
// end.
func pick(rng *rand.Rand, v *Vocab, ids []int) int {
	var eos, closers []int
	for _, id := range ids {
		if v.isEOS(id) {
			eos = append(eos, id)
		} else if bytes.ContainsAny(v.tokens[id], `"]}`) {
			closers = append(closers, id)
		}
	}
	switch {
	case len(eos) > 0 && rng.IntN(2) == 0:
		return eos[rng.IntN(len(eos))]
	case len(closers) > 0 && rng.IntN(3) == 0:
		return closers[rng.IntN(len(closers))]
	}
	return ids[rng.IntN(len(ids))]
}

type walkSchema struct{ name, schema string }

func walkSchemas() []walkSchema {
	var out []walkSchema
	for _, s := range validSchemas {
		out = append(out, walkSchema{s.name, s.schema})
	}
	return append(out, walkSchema{"json_object", ""})
}

func compileWalk(t testing.TB, s walkSchema) *Grammar {
	var g *Grammar
	var err error
	if s.schema == "" {
		g, err = JSONObject(nil)
	} else {
		g, err = CompileSchema([]byte(s.schema), nil)
	}
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	return g
}

// TestMaskMatchesBytes checks every mask along random walks against
// reading each token's bytes: the walk's shortcuts (free text, pops,
// caches) must change nothing.
func TestMaskMatchesBytes(t *testing.T) {
	v := synthVocab(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range walkSchemas() {
		g := compileWalk(t, s)
		c := NewConstraint(g, v)
		for walk := 0; walk < 6; walk++ {
			tm := c.NewMatcher()
			for step := 0; step < 60 && !tm.Done(); step++ {
				got, want := tm.Mask(), bruteMask(tm)
				if !slicesEqual(got, want) {
					var extra, missing []uint64
					for i := range got {
						extra = append(extra, got[i]&^want[i])
						missing = append(missing, want[i]&^got[i])
					}
					t.Fatalf("%s: step %d (%v): mask also allows %v, misses %v", s.name, step, tm.m, tokStrings(v, allowedIDs(extra)), tokStrings(v, allowedIDs(missing)))
				}
				ids := allowedIDs(got)
				if len(ids) == 0 {
					t.Fatalf("%s: step %d: no token allowed", s.name, step)
				}
				logits := make([]float32, v.size+70)
				for i := range logits {
					logits[i] = float32(i)
				}
				tm.Apply(logits)
				for i, l := range logits {
					allowed := i < v.size && got[i>>6]>>(i&63)&1 != 0
					if allowed != (l == float32(i)) || !allowed && l != negInf {
						t.Fatalf("%s: step %d: Apply gives logit %d %v (allowed %v)", s.name, step, i, l, allowed)
					}
				}
				if !tm.Accept(pick(rng, v, ids)) {
					t.Fatalf("%s: an allowed token is refused", s.name)
				}
			}
		}
	}
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func tokStrings(v *Vocab, ids []int) string {
	var sb strings.Builder
	for i, id := range ids {
		if i == 40 {
			fmt.Fprintf(&sb, " ... (%d)", len(ids))
			break
		}
		fmt.Fprintf(&sb, "%q ", v.tokens[min(id, len(v.tokens)-1)])
	}
	return sb.String()
}

// independent compiles s with another validator (santhosh-tekuri's,
// which passes the JSON-Schema-Test-Suite), formats asserted.
func independent(t testing.TB, schema string) *jsonschema.Schema {
	if schema == "" {
		schema = `{"type":"object"}`
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if strings.Contains(schema, `"additionalItems"`) || strings.Contains(schema, `"exclusiveMinimum":true`) || strings.Contains(schema, `"definitions"`) && !strings.Contains(schema, `"$defs"`) {
		c.DefaultDraft(jsonschema.Draft4)
		if strings.Contains(schema, `"additionalItems"`) {
			c.DefaultDraft(jsonschema.Draft2019)
		}
		if strings.Contains(schema, `"exclusiveMinimum":true`) {
			c.DefaultDraft(jsonschema.Draft4)
		}
	}
	c.AssertFormat()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// TestRandomWalks is the property test: random tokens among those
// allowed, until EOS, give JSON that encoding/json parses and that
// validates (for another validator, and for ours); a walk cut early is a
// valid JSON prefix.
func TestRandomWalks(t *testing.T) {
	v := synthVocab(t)
	walks := 40
	if testing.Short() {
		walks = 10
	}
	for _, s := range walkSchemas() {
		runWalks(t, s, v, walks, 400, 7)
	}
}

func runWalks(t *testing.T, s walkSchema, v *Vocab, walks, maxSteps int, seed uint64) {
	t.Helper()
	g := compileWalk(t, s)
	c := NewConstraint(g, v)
	sch := independent(t, s.schema)
	var own *compiler
	var root *value
	if s.schema != "" {
		root, _ = parseValue([]byte(s.schema), 1<<20, 64)
		own = &compiler{root: root, opts: withDefaults(nil), recursive: map[*value]bool{}}
	}
	rng := rand.New(rand.NewPCG(seed, uint64(len(s.name))))
	ended := 0
	for w := 0; w < walks; w++ {
		tm := c.NewMatcher()
		var text []byte
		for step := 0; step < maxSteps && !tm.Done(); step++ {
			ids := allowedIDs(tm.Mask())
			if len(ids) == 0 {
				t.Fatalf("%s: no token allowed after %q", s.name, text)
			}
			id := pick(rng, v, ids)
			if !tm.Accept(id) {
				t.Fatalf("%s: allowed token %q refused after %q", s.name, v.Token(id), text)
			}
			text = append(text, v.Token(id)...)
			if err := jsonPrefix(text); err != nil {
				t.Fatalf("%s: %q is not a JSON prefix: %v", s.name, text, err)
			}
		}
		if !tm.Done() {
			if w == 0 && testing.Verbose() {
				t.Logf("%s: cut: %q", s.name, text)
			}
			continue
		}
		ended++
		if !utf8.Valid(text) {
			t.Errorf("%s: %q is not UTF-8", s.name, text)
		}
		var x any
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&x); err != nil {
			t.Errorf("%s: %q: encoding/json: %v", s.name, text, err)
			continue
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s: %s: invalid: %v", s.name, text, err)
		}
		if own != nil {
			val, err := parseValue(text, 1<<20, 1000)
			if err != nil || !own.valid(root, val, 0) {
				t.Errorf("%s: %s: invalid for our validator (%v)", s.name, text, err)
			}
		} else if _, ok := x.(map[string]any); !ok {
			t.Errorf("%s: %s is not an object", s.name, text)
		}
	}
	if ended < max(walks/8, 1) {
		t.Errorf("%s: only %d of %d walks ended", s.name, ended, walks)
	}
}

// jsonPrefix reports whether b can be continued into a JSON text (an
// independent scanner, not the grammar).
func jsonPrefix(b []byte) error {
	p := &prefixScanner{s: b}
	err := p.value()
	if errors.Is(err, errMore) {
		return nil
	}
	if err != nil {
		return err
	}
	p.ws()
	if p.i < len(p.s) {
		return fmt.Errorf("data after the value at %d", p.i)
	}
	return nil
}

var errMore = errors.New("more input needed")

type prefixScanner struct {
	s []byte
	i int
}

func (p *prefixScanner) ws() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *prefixScanner) peek() (byte, error) {
	p.ws()
	if p.i >= len(p.s) {
		return 0, errMore
	}
	return p.s[p.i], nil
}

func (p *prefixScanner) expect(c byte) error {
	d, err := p.peek()
	if err != nil {
		return err
	}
	if d != c {
		return fmt.Errorf("want %q at %d, got %q", c, p.i, d)
	}
	p.i++
	return nil
}

func (p *prefixScanner) value() error {
	c, err := p.peek()
	if err != nil {
		return err
	}
	switch {
	case c == '{':
		p.i++
		if c, err := p.peek(); err != nil || c == '}' {
			p.i++
			return err
		}
		for {
			if err := p.expect('"'); err != nil {
				return err
			}
			p.i--
			if err := p.str(); err != nil {
				return err
			}
			if err := p.expect(':'); err != nil {
				return err
			}
			if err := p.value(); err != nil {
				return err
			}
			c, err := p.peek()
			if err != nil {
				return err
			}
			p.i++
			if c == '}' {
				return nil
			}
			if c != ',' {
				return fmt.Errorf("want , or } at %d", p.i-1)
			}
		}
	case c == '[':
		p.i++
		if c, err := p.peek(); err != nil || c == ']' {
			p.i++
			return err
		}
		for {
			if err := p.value(); err != nil {
				return err
			}
			c, err := p.peek()
			if err != nil {
				return err
			}
			p.i++
			if c == ']' {
				return nil
			}
			if c != ',' {
				return fmt.Errorf("want , or ] at %d", p.i-1)
			}
		}
	case c == '"':
		return p.str()
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return fmt.Errorf("unexpected %q at %d", c, p.i)
}

func (p *prefixScanner) lit(w string) error {
	for k := 0; k < len(w); k++ {
		if p.i >= len(p.s) {
			return errMore
		}
		if p.s[p.i] != w[k] {
			return fmt.Errorf("bad literal at %d", p.i)
		}
		p.i++
	}
	return nil
}

func (p *prefixScanner) str() error {
	p.i++ // the quote
	for {
		if p.i >= len(p.s) {
			return errMore
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return nil
		case c < 0x20:
			return fmt.Errorf("control byte in a string at %d", p.i)
		case c == '\\':
			p.i++
			if p.i >= len(p.s) {
				return errMore
			}
			e := p.s[p.i]
			p.i++
			if e == 'u' {
				for k := 0; k < 4; k++ {
					if p.i >= len(p.s) {
						return errMore
					}
					if !strings.ContainsRune("0123456789abcdefABCDEF", rune(p.s[p.i])) {
						return fmt.Errorf("bad \\u escape at %d", p.i)
					}
					p.i++
				}
			} else if !strings.ContainsRune(`"\/bfnrt`, rune(e)) {
				return fmt.Errorf("bad escape at %d", p.i)
			}
		case c < 0x80:
			p.i++
		default:
			r, n := utf8.DecodeRune(p.s[p.i:])
			if r == utf8.RuneError && n <= 1 {
				if !utf8.FullRune(p.s[p.i:]) {
					return errMore // a character cut by the end
				}
				return fmt.Errorf("invalid UTF-8 at %d", p.i)
			}
			p.i += n
		}
	}
}

func (p *prefixScanner) number() error {
	digits := func() (int, error) {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		if p.i >= len(p.s) {
			return n, errMore
		}
		return n, nil
	}
	if p.s[p.i] == '-' {
		p.i++
		if p.i >= len(p.s) {
			return errMore
		}
	}
	if p.s[p.i] == '0' {
		p.i++
		if p.i >= len(p.s) {
			return errMore
		}
	} else if n, err := digits(); err != nil || n == 0 {
		if n == 0 && err == nil {
			return fmt.Errorf("bad number at %d", p.i)
		}
		return err
	}
	if p.s[p.i] == '.' {
		p.i++
		if n, err := digits(); err != nil || n == 0 {
			if err == nil {
				return fmt.Errorf("bad fraction at %d", p.i)
			}
			return err
		}
	}
	if p.s[p.i] == 'e' || p.s[p.i] == 'E' {
		p.i++
		if p.i >= len(p.s) {
			return errMore
		}
		if p.s[p.i] == '+' || p.s[p.i] == '-' {
			p.i++
		}
		if n, err := digits(); err != nil || n == 0 {
			if err == nil {
				return fmt.Errorf("bad exponent at %d", p.i)
			}
			return err
		}
	}
	return nil
}

func TestJSONPrefixScanner(t *testing.T) {
	for _, s := range []string{``, `{`, `{"a`, `{"a":`, `[1,`, `-`, `1.`, `1e+`, `"\u00`, "\"\xe2\x82", `tr`, `{"a":1}`, ` [ ] `} {
		if err := jsonPrefix([]byte(s)); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{`}`, `{1`, `[1,]`, `01`, `1.e`, `"\x"`, "\"\xff", `tx`, `{"a":1}}`, `{"a" 1`, "\"\x01"} {
		if err := jsonPrefix([]byte(s)); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

// TestConcurrentMatchers runs sequences on one Constraint at once (a
// server's requests share it): the same tokens give the same masks.
func TestConcurrentMatchers(t *testing.T) {
	v := synthVocab(t)
	g := compileWalk(t, walkSchema{"recursive", `{"type":"object","properties":{"name":{"type":"string","maxLength":4},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["name","next"]}`})
	c := NewConstraint(g, v)
	ref := NewConstraint(g, v)
	done := make(chan error, 8)
	for w := 0; w < 8; w++ {
		go func(seed uint64) {
			rng := rand.New(rand.NewPCG(seed, 9))
			tm, tr := c.NewMatcher(), ref.NewMatcher()
			for step := 0; step < 80 && !tm.Done(); step++ {
				got := allowedIDs(tm.Mask())
				want := allowedIDs(bruteMask(tr))
				if fmt.Sprint(got) != fmt.Sprint(want) {
					done <- fmt.Errorf("step %d: masks differ", step)
					return
				}
				id := pick(rng, v, got)
				tm.Accept(id)
				tr.Accept(id)
			}
			done <- nil
		}(uint64(w))
	}
	for w := 0; w < 8; w++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
