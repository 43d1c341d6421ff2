package jinja

import "fmt"

// generator is a one-shot lazy iterator: what Python returns from
// generator filters (map, select, reject, selectattr, rejectattr, unique,
// items) and from reversed(). It matters beyond printing because Python
// semantics leak through: a generator is always true (even when it would
// yield nothing), has no len(), cannot be indexed, is exhausted after one
// pass, and its errors only surface when it is consumed. Templates that
// follow such a filter with `| list`, `| join` or a for loop never notice.
type generator struct {
	pyType  string // "generator", "list_reverseiterator", ...
	name    string // the generator function, for repr
	produce func() ([]Value, error)
	items   []Value
	started bool
	pos     int
}

func newGenerator(name string, produce func() ([]Value, error)) *generator {
	return &generator{pyType: "generator", name: name, produce: produce}
}

func (g *generator) fill() error {
	if g.started {
		return nil
	}
	g.started = true
	items, err := g.produce()
	if err != nil {
		return err
	}
	g.items = items
	return nil
}

// rest consumes and returns everything not yet consumed.
func (g *generator) rest() ([]Value, error) {
	if err := g.fill(); err != nil {
		return nil, err
	}
	out := g.items[g.pos:]
	g.pos = len(g.items)
	return out, nil
}

// next consumes one item.
func (g *generator) next() (Value, bool, error) {
	if err := g.fill(); err != nil {
		return nil, false, err
	}
	if g.pos >= len(g.items) {
		return nil, false, nil
	}
	g.pos++
	return g.items[g.pos-1], true, nil
}

// containsItem is `x in generator`: it consumes up to the first match.
func (g *generator) containsItem(st *state, x Value) (bool, error) {
	for {
		it, ok, err := g.next()
		if err != nil || !ok {
			return false, err
		}
		if sameObject(it, x) || equal(st, it, x, 0) {
			return true, nil
		}
	}
}

func (g *generator) repr() string {
	addr := fmt.Sprintf(" at %p>", g)
	if g.pyType == "generator" {
		return "<generator object " + g.name + addr
	}
	return "<" + g.pyType + " object" + addr
}

// reversedIter is Python's reversed(seq) for the sequences that support
// it; st accounts for the reversed copy (nil: unmetered).
func reversedIter(st *state, v Value) (*generator, bool) {
	var items []Value
	pyType := ""
	switch x := v.(type) {
	case *List:
		items = x.Items
		switch {
		case x.Tuple:
			pyType = "reversed"
		case x.view == "":
			pyType = "list_reverseiterator"
		default:
			pyType = map[string]string{
				"range":       "range_iterator",
				"dict_keys":   "dict_reversekeyiterator",
				"dict_values": "dict_reversevalueiterator",
				"dict_items":  "dict_reverseitemiterator",
			}[x.view]
		}
	case *Dict:
		st.buildItems(int64(x.Len()), "reversed()")
		items, pyType = x.Keys(), "dict_reversekeyiterator"
	case *Undefined:
		pyType = "reversed"
	default:
		return nil, false
	}
	return &generator{pyType: pyType, produce: func() ([]Value, error) {
		st.buildItems(int64(len(items)), "reversed()")
		out := make([]Value, len(items))
		for i, it := range items {
			out[len(items)-1-i] = it
		}
		return out, nil
	}}, true
}
