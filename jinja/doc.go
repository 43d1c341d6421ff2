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
// Not supported: template inheritance and inclusion (extends, block,
// include, import), autoescaping and Markup, the {% do %} extension, and a
// few rarely used filters (groupby, batch, slice, truncate, wordwrap,
// urlize, xmlattr, random, filesizeformat). Using one is a parse or render
// error, never silently wrong output.
package jinja
