#!/usr/bin/env python3
"""Regenerates python_fuzz.jsonl.zst: randomly generated expressions and
whitespace-control templates rendered by Python's jinja2 in transformers'
chat-template environment (the environment of gen_python_ref.py). The Go
test TestPythonReference checks the engine against them, like the
hand-written cases. Cases whose output cannot be reproduced by design are
left out: object addresses in the repr of generators, and fractional float
powers (Go's math.Pow and C's pow may differ in the last bit).

Run: python3 gen_python_fuzz.py | zstd -19 > python_fuzz.jsonl.zst
"""
import json
import random
import re

exec(open(__file__.replace("gen_python_fuzz.py", "gen_python_ref.py")).read().split("USERS = [")[0])

# --- random expressions over a few values, operators, filters, tests, methods

atoms = ["1", "0", "-3", "2.5", "0.1", "1e3", "true", "false", "none", "'ab'", "''", "'A b'", "' x '", "[1, 2]", "[]", "(1,)", "{'k': 1}", "{}", "s", "n", "l", "d", "f", "u", "'é😀'", "i", "t"]
binops = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]
filters = ["trim", "length", "string", "tojson", "first", "last", "list", "upper", "lower", "capitalize", "title", "reverse", "sort", "unique", "int", "float", "abs", "round", "default('z')", "join('-')", "items", "max", "min", "sum", "wordcount", "center(6)", "indent(2)", "replace('a', 'X')", "select", "reject", "map('string')", "dictsort", "count", "e"]
tests = ["defined", "none", "string", "number", "integer", "float", "mapping", "sequence", "iterable", "odd", "even", "true", "false", "boolean", "lower", "upper", "callable", "divisibleby 2", "in [1, 'ab']", "eq 1", "gt 0"]
methods = ["strip()", "split()", "split('b')", "upper()", "lower()", "startswith('a')", "endswith('b')", "replace('a', 'Z')", "capitalize()", "title()", "find('b')", "count('a')", "lstrip('a')", "rstrip(' ')", "keys()", "values()", "items()", "get('k')", "get('z', 0)", "index(1)", "isalpha()", "zfill(4)", "center(5, '*')", "format(1)", "join(['x', 'y'])", "splitlines()"]

def expr(d=0):
    r = random.random()
    if d > 2 or r < 0.3:
        return random.choice(atoms)
    if r < 0.5:
        return "(%s %s %s)" % (expr(d+1), random.choice(binops), expr(d+1))
    if r < 0.62:
        return "(%s | %s)" % (expr(d+1), random.choice(filters))
    if r < 0.72:
        return "(%s is %s%s)" % (expr(d+1), random.choice(["", "not "]), random.choice(tests))
    if r < 0.82:
        return "%s.%s" % (expr(d+1) if random.random() < 0.3 else random.choice(["s", "l", "d", "'aXb '", "t", "n"]), random.choice(methods))
    if r < 0.9:
        return "%s[%s]" % (random.choice(["s", "l", "d", "'hello'", "t", "[1,2,3]"]), random.choice(["0", "-1", "1:", "::-1", "'k'", ":2", "5", "1:3:2"]))
    if r < 0.95:
        return "(%s if %s else %s)" % (expr(d+1), expr(d+1), expr(d+1))
    return "(not %s)" % expr(d+1)


# --- random nestings of if/for/set/raw/comments with every whitespace-control variant
ws = ["", " ", "  ", "\n", "\n  ", "  \n", "\t", "\n\n", " \n \n ", "\r\n", "\u00a0", "x", "a b", "\n\t "]
def tag(body, kind="%"):
    l = random.choice(["", "", "-", "+"]) if kind != "{" else random.choice(["", "", "-"])
    r = random.choice(["", "", "-", "+"]) if kind == "%" else random.choice(["", "", "-"])
    sp1 = random.choice([" ", "", "  "]); sp2 = random.choice([" ", "", "\n"])
    if kind == "{":
        return "{{" + l + sp1 + body + sp2 + r + "}}"
    if kind == "#":
        return "{#" + l + sp1 + body + sp2 + r + "#}"
    return "{%" + l + sp1 + body + sp2 + r + "%}"
def block(d):
    out = []
    for _ in range(random.randint(1, 5)):
        r = random.random()
        if r < 0.35: out.append(random.choice(ws))
        elif r < 0.5: out.append(tag(random.choice(["x", "'s'", "i", "loop.index if loop is defined else '-'"]), "{"))
        elif r < 0.58: out.append(tag("note", "#"))
        elif r < 0.7 and d < 3: out.append(tag("if c") + block(d+1) + (tag("else") + block(d+1) if random.random() < 0.3 else "") + tag("endif"))
        elif r < 0.82 and d < 3: out.append(tag("for i in l") + block(d+1) + tag("endfor"))
        elif r < 0.9: out.append(tag("set y = 1"))
        elif r < 0.95: out.append(tag("raw") + random.choice(ws) + "{{ z }}" + random.choice(ws) + tag("endraw"))
        else: out.append(tag("generation") + block(d+1) + tag("endgeneration"))
        out.append(random.choice(ws))
    return "".join(out)


def emit(name, template, variables):
    out = {"name": name, "template": template, "vars": variables}
    try:
        out["rendered"] = env.from_string(template).render(**variables)
    except Exception as e:  # noqa: BLE001 - failures are recorded outcomes
        out["error_type"] = type(e).__name__
        out["error"] = str(e)
    text = out.get("rendered", "") + out.get("error", "")
    if re.search(r"object at 0x|at 0x[0-9a-f]+>", text, re.I):
        return
    if "**" in template and re.search(r"[.e]", out.get("rendered", "")):
        return
    print(json.dumps(out, ensure_ascii=False))


random.seed(1)
expr_vars = {"s": "aXb ab", "n": None, "l": [3, 1, 2], "d": {"k": 1, "b": [1, "x"]}, "f": 1.5, "i": 7, "t": "Tab\tline\nx"}
for k in range(1000):
    emit("expr%d" % k, "{{ %s }}" % expr(), expr_vars)

random.seed(2)
ws_vars = {"x": "X", "c": True, "l": [1, 2]}
for k in range(1000):
    if random.random() < 0.3:
        ws_vars["c"] = not ws_vars["c"]
    emit("ws%d" % k, block(0), dict(ws_vars))
