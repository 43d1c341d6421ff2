// Package grammar constrains generation to JSON that validates against a
// JSON Schema: it compiles a schema to a grammar over bytes, and computes
// per step which tokens of a tokenizer's vocabulary keep the text inside
// the grammar, so that even a model with random weights returns valid
// JSON (OpenAI's response_format json_schema and json_object, and
// `gozoo run --json-schema`).
//
//	g, err := grammar.CompileSchema(schemaJSON, nil) // or grammar.JSONObject(nil)
//	v, err := grammar.VocabFromTokenizer(tok, eosIDs, logitsLen) // once per tokenizer
//	c := grammar.NewConstraint(g, v)                             // once per schema: holds the mask cache
//	m := c.NewMatcher()                                          // per sequence
//	mask := m.Mask()   // allowed ids, bit id%64 of word id/64 (EOS once complete)
//	m.Accept(id)       // the token chosen
//
// A Processor (c.NewProcessor) is a generate.LogitsProcessor for one
// sequence; zoo/generate's Grammar wraps it (one per sequence) and
// Generator.JSONSchema builds the Constraint.
//
// # The schema subset
//
// Supported, exactly (every JSON text the grammar accepts validates; the
// exceptions are listed under "Narrower than the schema"):
//
//   - type: null, boolean, integer, number, string, array, object, and
//     arrays of them; a schema without type allows every type its
//     keywords allow ({} and true: any JSON value);
//   - enum and const, of any JSON values (those the schema's other
//     keywords refuse are dropped);
//   - integers and numbers with minimum, maximum, exclusiveMinimum and
//     exclusiveMaximum (numbers, or draft 4's booleans): the bounds are
//     decimals compared digit by digit, never floats, so integer and
//     decimal bounds hold exactly, however many digits they have;
//   - strings with minLength and maxLength (in code points, as JSON
//     Schema counts), pattern, and format date, time, date-time, uuid,
//     ipv4 (a real calendar date, leap years included); every spelling
//     of a character is accepted: raw UTF-8, the two-character escapes,
//     \uXXXX in either case and surrogate pairs (lone surrogates are not:
//     they are no character);
//   - pattern: ECMA-262 regular expressions over code points, with
//     JSON Schema's search semantics (unanchored unless ^ or $): literals,
//     escapes \d \D \w \W \s \S \t \n \r \f \v \0 \xHH \uHHHH \cX and
//     escaped metacharacters, classes [...] [^...] with ranges, ".",
//     groups (...) (?:...) (?<name>...), alternation, * + ? {n} {n,}
//     {n,m} (greedy or lazy: the same language; counts up to 1000), and
//     ^ and $ at the start and end of the pattern or of a top-level
//     alternative;
//   - arrays with items, prefixItems (and draft 4's array items with
//     additionalItems), minItems, maxItems, uniqueItems false;
//   - objects with properties, required, additionalProperties;
//   - anyOf; oneOf when its schemas provably exclude each other (their
//     types differ, one lists values the other refuses, or objects whose
//     common required property has disjoint schemas), so that the output
//     matches exactly one; allOf with a single schema;
//   - $ref to local JSON pointers (#, #/$defs/..., #/definitions/...,
//     #/properties/...), recursion included (a tree, a linked list);
//   - annotations, which assert nothing: title, description, default,
//     examples, $comment, $schema, $id (at the root), deprecated,
//     readOnly, writeOnly.
//
// Everything else is refused with an *Error naming the keyword and its
// JSON pointer (as the OpenAI API answers 400), never ignored: not,
// if/then/else, dependentRequired, dependentSchemas, patternProperties,
// propertyNames, minProperties, maxProperties, multipleOf, contains,
// minContains, maxContains, unevaluated*, $anchor, $dynamicRef,
// $recursiveRef, OpenAPI's nullable and discriminator, contentEncoding,
// unknown keywords; uniqueItems true; other formats (email, uri, ...);
// allOf of several schemas; oneOf whose schemas may overlap; assertions
// beside $ref, anyOf, oneOf or allOf; remote $refs and anchors; regex
// lookaround, backreferences, \b, \p{...}, anchors elsewhere. So is a
// schema that no value satisfies, one that refers to itself before any
// text (left recursion), and one past a limit (Limits: the schema's size
// and depth, automaton states, work), each naming the limit.
//
// # Narrower than the schema
//
// The grammar accepts a subset of the valid texts where the full set
// would be impractical; what it accepts still validates:
//
//   - Object properties come in the schema's order; those not required
//     may be left out. Properties the schema does not list are never
//     written, whatever additionalProperties says (strict and non-strict
//     schemas give the same grammar); an object without properties whose
//     additionalProperties is a schema is a map with any keys.
//   - Integers are written as integers (no fraction, no exponent), and a
//     number with bounds without an exponent (1000, not 1e3); enum and
//     const numbers as the schema spells them; enum objects with their
//     members in the schema's order.
//   - Whitespace: between two tokens and around the text, nothing, one
//     space, or a newline and at most Options.MaxIndent (default 20)
//     spaces and tabs; Options.Compact allows none. A model that keeps
//     writing whitespace cannot stall.
//
// # Token masks
//
// Every rule of the grammar is a deterministic automaton over bytes;
// strings, recursive $refs, "any JSON value" and large repeated items are
// rules of their own that the others call, everything else is inlined.
// A run is a set of stacks of automaton states (usually one). The tokens
// allowed after a stack are those its top state reads without ending its
// rule, plus, where the rule ends inside a token, the rest of the token
// read by the caller. A walk of the vocabulary's byte trie computes the
// first part, once per state (cached): the automaton steps through the
// trie and skips every subtree at the first byte it refuses. Two
// summaries let it take whole subtrees at once: inside a string, the
// vocabulary's tokens of plain text (valid UTF-8 without quote,
// backslash or control bytes, at most 16 characters) are allowed as one
// precomputed set and only a small trie of the others is walked
// (text.go); and a subtree whose bytes all lead a state back to itself
// (a pattern's [a-z0-9.]+) is allowed whole. The second part is a walk
// below the trie node where the rule ended, cached per (node, caller
// state). For a stack that depends on its top two states only (a string
// inside an object) the whole mask is cached too. So a state seen
// before costs a lookup, about a microsecond a step with Mask and Accept
// at Qwen3's 151,936 ids; a new state costs one walk: about 10 µs for
// JSON punctuation, 50 µs inside a string, 0.3 ms inside a restrictive
// pattern (go test -bench Mask ./grammar, on a shared 2-core machine).
// Constraint.Precompute walks every state up front. Apply, which sets
// the refused logits to -Inf, costs 15 to 30 µs at that size.
//
// Special tokens are never allowed; EOS tokens only once the text is
// complete. The mask machinery is written by hand after llama.cpp's
// grammar sampler and XGrammar's split of context-independent tokens:
// no Go library does it. The tests check masks against reading every
// token's bytes, and random walks over allowed tokens against
// encoding/json and an independent validator
// (github.com/santhosh-tekuri/jsonschema/v6, test-only).
package grammar
