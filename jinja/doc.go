// Package jinja is a small Jinja2 engine for the subset of the language that
// Hugging Face chat templates use, with Python value semantics.
//
// It exists because chat templates are Python programs in disguise: their
// output depends on how Python prints None and True, how it quotes strings
// inside a repr'd dict, what str.split() with no arguments does, and on the
// exact whitespace rules of jinja2's lexer. A Go template engine that gets
// any of these slightly wrong produces prompts that differ from the ones the
// model was trained on, so this package follows jinja2 3.1 (the reference)
// and CPython closely rather than inventing its own rules.
//
// The environment is fixed to the one transformers uses for chat templates:
//
//   - trim_blocks and lstrip_blocks on, autoescape off, one trailing newline
//     of the template source dropped;
//   - default Undefined semantics (a missing attribute prints as the empty
//     string; using it in arithmetic or calling it is an error);
//   - the loopcontrols extension ({% break %}, {% continue %}) and
//     transformers' {% generation %} tag, which renders its body;
//   - the immutable sandbox: templates cannot mutate lists or dicts
//     (namespace() attributes are the only mutable state);
//   - the globals raise_exception(msg) (a *TemplateError carrying exactly
//     msg) and strftime_now(fmt) (formatted from an injectable clock), plus
//     jinja2's range, dict, namespace, cycler and joiner;
//   - the tojson filter as transformers defines it: json.dumps with ", " and
//     ": " separators, non-ASCII kept, keys in insertion order.
//
// Values are plain Go values (see Value): nil is None, bool, int64, float64
// and string are themselves, lists and tuples are *List and dicts are *Dict,
// which keeps insertion order as a Python dict does. DecodeJSON turns JSON
// into such values without losing key order or int-ness.
//
// A Template is parsed once and may be rendered concurrently from many
// goroutines; each Render call has its own state.
//
// Templates are programs that come with downloaded checkpoints, so every
// render is bounded in time and memory by Limits (DefaultLimits unless
// RenderOptions or ParseWithLimits say otherwise): total evaluation steps,
// loop iterations, the size of the output and of every string or list the
// template builds, the bytes built in all, macro recursion depth and
// nesting. Sizes are checked before anything is allocated, so
// `{{ 'x' * 10000000000 }}` fails at once, and a template that hits a
// limit fails with a *LimitError naming the template, the limit and its
// value. RenderContext also stops when its context is done. The defaults
// leave real chat templates a hundredfold margin (a 1,000-message
// conversation takes under 1% of the steps) while holding a hostile
// template to about a second of CPU and a few hundred megabytes.
//
// Differences from the reference, all outside what chat templates do:
//
//   - not supported: template inheritance and inclusion (extends, block,
//     include, import), autoescaping and Markup, the {% do %} extension,
//     the lipsum global and the filters groupby, batch, slice, truncate,
//     wordwrap, urlize, urlencode, striptags, xmlattr, random and
//     filesizeformat. Using one is a parse or render error, never silently
//     wrong output;
//   - ints are int64 (Python's grow without bound); JSON integers beyond
//     int64 become floats;
//   - str.upper/lower/title use Go's one-to-one case mappings, so the few
//     characters Python maps to several ("ß".upper() == "SS") differ;
//   - float ** with a fractional exponent may differ from C's pow in the
//     last digit;
//   - objects Python prints with a memory address (generators, as
//     `<generator object ... at 0x...>`) show a different address, and
//     pprint does not wrap long lines.
//
// Error messages follow CPython and jinja2 closely (RuntimeError.Kind is
// the Python exception's name), but only raise_exception's are exact by
// contract.
package jinja
