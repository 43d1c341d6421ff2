package jinja

// Jinja tests (`x is string`, `x is not none`, ...), following jinja2's
// tests.py with Python's type rules: bool is a number but not an integer,
// a dict is a sequence, Undefined is iterable (and empty).

type testFn func(st *state, v Value, a *callArgs) (bool, error)

var tests map[string]testFn

// simpleTest adapts a one-argument predicate.
func simpleTest(name string, f func(Value) bool) testFn {
	return func(_ *state, v Value, a *callArgs) (bool, error) {
		if _, err := bind(name, a, nil, 0); err != nil {
			return false, err
		}
		return f(v), nil
	}
}

// cmpTest adapts a comparison with one operand.
func cmpTest(op string) testFn {
	return func(st *state, v Value, a *callArgs) (bool, error) {
		args, err := bind(op, a, []string{"other"}, 1)
		if err != nil {
			return false, err
		}
		return compare(st, op, v, args[0])
	}
}

func init() {
	tests = map[string]testFn{
		"defined":   simpleTest("defined", func(v Value) bool { _, u := v.(*Undefined); return !u }),
		"undefined": simpleTest("undefined", func(v Value) bool { _, u := v.(*Undefined); return u }),
		"none":      simpleTest("none", func(v Value) bool { return v == nil }),
		"true":      simpleTest("true", func(v Value) bool { b, ok := v.(bool); return ok && b }),
		"false":     simpleTest("false", func(v Value) bool { b, ok := v.(bool); return ok && !b }),
		"boolean":   simpleTest("boolean", func(v Value) bool { _, ok := v.(bool); return ok }),
		"integer":   simpleTest("integer", func(v Value) bool { _, ok := v.(int64); return ok }),
		"float":     simpleTest("float", func(v Value) bool { _, ok := v.(float64); return ok }),
		"number":    simpleTest("number", func(v Value) bool { _, _, _, ok := number(v); return ok }),
		"string":    simpleTest("string", func(v Value) bool { _, ok := v.(string); return ok }),
		"mapping":   simpleTest("mapping", func(v Value) bool { _, ok := v.(*Dict); return ok }),
		"sequence": simpleTest("sequence", func(v Value) bool {
			switch x := v.(type) {
			case string, *Dict, *Undefined:
				return true
			case *List:
				return x.view == "" || x.view == "range" // dict views have no __getitem__
			}
			return false
		}),
		"iterable": simpleTest("iterable", func(v Value) bool {
			switch v.(type) {
			case string, *List, *Dict, *Undefined, *generator:
				return true
			}
			return false
		}),
		"callable": simpleTest("callable", func(v Value) bool {
			switch x := v.(type) {
			case *Func, *Macro, *joiner, *Undefined:
				return true // Undefined has a __call__ (that raises)
			case *loopContext:
				return x.node.recursive
			}
			return false
		}),
		"escaped": simpleTest("escaped", func(Value) bool { return false }),
		"lower": func(st *state, v Value, a *callArgs) (bool, error) {
			if _, err := bind("lower", a, nil, 0); err != nil {
				return false, err
			}
			ok, _ := strMethods["islower"](st, toStr(st, v), &callArgs{})
			return ok.(bool), nil
		},
		"upper": func(st *state, v Value, a *callArgs) (bool, error) {
			if _, err := bind("upper", a, nil, 0); err != nil {
				return false, err
			}
			ok, _ := strMethods["isupper"](st, toStr(st, v), &callArgs{})
			return ok.(bool), nil
		},
		"odd":         parityTest("odd", 1),
		"even":        parityTest("even", 0),
		"divisibleby": divisibleBy,
		"sameas": func(_ *state, v Value, a *callArgs) (bool, error) {
			args, err := bind("sameas", a, []string{"other"}, 1)
			if err != nil {
				return false, err
			}
			return sameAs(v, args[0]), nil
		},
		"in": func(st *state, v Value, a *callArgs) (bool, error) {
			args, err := bind("in", a, []string{"seq"}, 1)
			if err != nil {
				return false, err
			}
			return contains(st, args[0], v)
		},
		"filter": func(_ *state, v Value, a *callArgs) (bool, error) {
			s, ok := v.(string)
			_, known := filters[s]
			return ok && known, nil
		},
		"test": func(_ *state, v Value, a *callArgs) (bool, error) {
			s, ok := v.(string)
			_, known := tests[s]
			return ok && known, nil
		},
	}
	for name, op := range map[string]string{
		"==": "==", "eq": "==", "equalto": "==",
		"!=": "!=", "ne": "!=",
		"<": "<", "lt": "<", "lessthan": "<",
		"<=": "<=", "le": "<=",
		">": ">", "gt": ">", "greaterthan": ">",
		">=": ">=", "ge": ">=",
	} {
		tests[name] = cmpTest(op)
	}
}

func parityTest(name string, want int64) testFn {
	return func(st *state, v Value, a *callArgs) (bool, error) {
		if _, err := bind(name, a, nil, 0); err != nil {
			return false, err
		}
		r, err := binop(st, "%", v, int64(2))
		if err != nil {
			return false, err
		}
		return pyEqual(r, want), nil
	}
}

func divisibleBy(st *state, v Value, a *callArgs) (bool, error) {
	args, err := bind("divisibleby", a, []string{"num"}, 1)
	if err != nil {
		return false, err
	}
	r, err := binop(st, "%", v, args[0])
	if err != nil {
		return false, err
	}
	return pyEqual(r, int64(0)), nil
}

// sameAs approximates Python's `is`: identity for objects, equality for
// the singletons None, True and False.
func sameAs(a, b Value) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int64, float64, string:
		return a == b
	}
	return a == b
}

// applyTest evaluates `arg is name(args)`.
func (st *state) applyTest(t *testExpr, sc *scope) (Value, error) {
	fn, ok := tests[t.name]
	if !ok {
		return nil, &RuntimeError{Kind: "TemplateAssertionError", Msg: "No test named '" + t.name + "'."}
	}
	v, err := st.eval(t.arg, sc)
	if err != nil {
		return nil, err
	}
	a, err := st.evalArgs(t.callSpec, sc)
	if err != nil {
		return nil, err
	}
	st.chargeArgs(v, a)
	return fn(st, v, a)
}
