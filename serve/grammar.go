package serve

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gozoo/gozoo/grammar"

	"github.com/gozoo/gozoo/zoo/generate"
)

// Grammar is the seam for constrained decoding (issue 33, section 3):
// a JSON schema compiled to a grammar over the model's vocabulary, whose
// token mask a logits processor applies at every step. Package grammar
// will implement it for the model's tokenizer; Options.Grammar plugs it
// in. Without one, the requests that need it are refused with a 400
// naming the field: response_format of type json_object or json_schema,
// and tool_choice "required" or a named function.
type Grammar interface {
	// Compile turns a constraint into a maker of logits processors, one
	// per sample (a processor may keep its sample's parser state). A
	// schema it cannot enforce is an error naming the keyword; the
	// server answers it as a 400 naming the constraint's field.
	Compile(c Constraint) (NewProcessor func(promptLen int) generate.LogitsProcessor, err error)
}

// Constraint is what a request asks constrained decoding for.
type Constraint struct {
	// Field is the request field that asks for it: "response_format" or
	// "tool_choice".
	Field string
	// Kind is "json_object" (any JSON object), "json_schema" (a value
	// that validates against Schema) or "tool_call" (a tool call in the
	// template family's format: Prefix, then a JSON object that
	// validates against Schema, then Suffix, then end of sequence).
	Kind string
	// Schema is the JSON schema: response_format's json_schema.schema,
	// or for a tool call {"anyOf": [{"type": "object", "properties":
	// {"name": {"const": NAME}, "arguments": PARAMETERS}, "required":
	// ["name", "arguments"]}, ...]} over the tools allowed, name first.
	Schema json.RawMessage
	// Name is the json_schema's name, or the function's for a named
	// tool_choice; Strict is json_schema.strict.
	Name   string
	Strict bool
	// Prefix and Suffix surround a tool call ("<tool_call>\n" and
	// "\n</tool_call>" for Qwen3 and SmolLM3).
	Prefix, Suffix string
}

// constraintFor is the constraint a chat request asks for, or nil.
func constraintFor(rf responseFormat, tc toolChoice, tools []tool, format *toolFormat) (*Constraint, *apiError) {
	switch rf.Type {
	case "json_object":
		return &Constraint{Field: "response_format", Kind: "json_object"}, nil
	case "json_schema":
		return &Constraint{Field: "response_format", Kind: "json_schema", Schema: rf.Schema, Name: rf.Name, Strict: rf.Strict}, nil
	}
	if tc.Mode != "required" && tc.Mode != "function" {
		return nil, nil
	}
	if format == nil {
		return nil, unsupported("tool_choice", "tool_choice %q needs a tool-call format, and the model's chat template has none this server knows", tc.Mode)
	}
	var alts []string
	for _, t := range tools {
		if tc.Mode == "function" && t.Name != tc.Name {
			continue
		}
		params := t.Parameters
		if params == nil {
			params = json.RawMessage(`{"type": "object"}`)
		}
		name, _ := json.Marshal(t.Name)
		alts = append(alts, fmt.Sprintf(`{"type": "object", "properties": {"name": {"const": %s}, "arguments": %s}, "required": ["name", "arguments"]}`, name, params))
	}
	schema := json.RawMessage(`{"anyOf": [` + strings.Join(alts, ", ") + `]}`)
	return &Constraint{Field: "tool_choice", Kind: "tool_call", Schema: schema, Name: tc.Name, Prefix: format.Open + "\n", Suffix: "\n" + format.Close}, nil
}

// compile asks the grammar for c's processors; no grammar is a 400
// naming the field.
func (s *Server) compile(c *Constraint) (func(promptLen int) generate.LogitsProcessor, *apiError) {
	if s.opts.Grammar == nil {
		what := c.Kind
		if c.Field == "tool_choice" {
			what = "required or named tool_choice"
		}
		return nil, unsupported(c.Field, "'%s' %s needs constrained decoding, which this server does not have yet", c.Field, what)
	}
	mk, err := s.opts.Grammar.Compile(*c)
	if err != nil {
		return nil, invalid(c.Field, "'%s': %v", c.Field, err)
	}
	return mk, nil
}

// SchemaGrammar is Grammar by package grammar over g's vocabulary: the
// constraint compiles to a token automaton (cached by the generator per
// schema), and each sample gets its own matcher. gozoo serve uses it.
func SchemaGrammar(g *generate.Generator) Grammar { return schemaGrammar{g} }

type schemaGrammar struct{ g *generate.Generator }

func (s schemaGrammar) Compile(c Constraint) (func(promptLen int) generate.LogitsProcessor, error) {
	var con *grammar.Constraint
	var err error
	switch c.Kind {
	case "json_object":
		con, err = s.g.JSONObject(nil)
	case "json_schema":
		con, err = s.g.JSONSchema(c.Schema, nil)
	case "tool_call":
		con, err = s.g.JSONSchema(c.Schema, &grammar.Options{Prefix: c.Prefix, Suffix: c.Suffix})
	default:
		return nil, fmt.Errorf("constraint kind %q", c.Kind)
	}
	if err != nil {
		return nil, err
	}
	return func(int) generate.LogitsProcessor { return con.NewProcessor() }, nil
}
