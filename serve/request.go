package serve

import (
	"encoding/json"
	"regexp"
	"strconv"
)

// Limits of a request's fields.
const (
	maxStops       = 16
	maxStopLen     = 1024
	maxTopLogprobs = 20
	maxLogitBias   = 1024
	maxTools       = 128
	maxEmbedInputs = 2048
)

// sampling is what a generation request says about sampling; unset
// fields take the model's generation_config.json.
type sampling struct {
	N                 int
	MaxTokens         int // 0: unset
	Temperature       *float64
	TopP              *float64
	TopK              *int
	MinP              *float64
	RepetitionPenalty *float64
	Seed              *uint64
	Stop              []string
	PresencePenalty   float64
	FrequencyPenalty  float64
	LogitBias         map[int]float64
	Logprobs          bool
	TopLogprobs       int
	Stream            bool
	IncludeUsage      bool
	// Model is the request's model id ("" when absent), which picks the
	// LoRA adapter (Server.adapterOf).
	Model string
}

// readSampling reads the sampling fields shared by chat and completions.
// maxTokensFields are the names the token budget goes by.
func readSampling(o object, maxN int, maxTokensFields ...string) (sampling, *apiError) {
	s := sampling{N: 1}
	if v, ok, err := o.str("model"); err != nil {
		return s, err
	} else if ok {
		s.Model = v
	}
	if v, ok, err := o.intIn("n", 1, int64(maxN)); err != nil {
		return s, err
	} else if ok {
		s.N = int(v)
	}
	for _, f := range maxTokensFields {
		if v, ok, err := o.intIn(f, 1, 1<<31-1); err != nil {
			return s, err
		} else if ok {
			s.MaxTokens = int(v)
		}
	}
	if v, ok, err := o.numberIn("temperature", 0, 2); err != nil {
		return s, err
	} else if ok {
		s.Temperature = &v
	}
	if v, ok, err := o.numberIn("top_p", 0, 1); err != nil {
		return s, err
	} else if ok {
		s.TopP = &v
	}
	// Beyond OpenAI's fields: what vLLM and llama.cpp's servers also take.
	if v, ok, err := o.intIn("top_k", -1, 1<<31-1); err != nil {
		return s, err
	} else if ok {
		k := int(max(v, 0))
		s.TopK = &k
	}
	if v, ok, err := o.numberIn("min_p", 0, 1); err != nil {
		return s, err
	} else if ok {
		s.MinP = &v
	}
	if v, ok, err := o.numberIn("repetition_penalty", 0, 100); err != nil {
		return s, err
	} else if ok {
		s.RepetitionPenalty = &v
	}
	if v, ok, err := o.integer("seed"); err != nil {
		return s, err
	} else if ok {
		u := uint64(v)
		s.Seed = &u
	}
	if ss, ok, err := o.strings("stop"); err != nil {
		return s, err
	} else if ok {
		if len(ss) > maxStops {
			return s, invalid("stop", "'stop' holds %d strings, at most %d are allowed", len(ss), maxStops)
		}
		for _, x := range ss {
			if len(x) > maxStopLen {
				return s, invalid("stop", "a stop string of %d bytes is longer than %d", len(x), maxStopLen)
			}
		}
		s.Stop = ss
	}
	var err *apiError
	if s.PresencePenalty, _, err = o.numberIn("presence_penalty", -2, 2); err != nil {
		return s, err
	}
	if s.FrequencyPenalty, _, err = o.numberIn("frequency_penalty", -2, 2); err != nil {
		return s, err
	}
	if lb, ok, err := o.obj("logit_bias"); err != nil {
		return s, err
	} else if ok {
		if len(lb.fields) > maxLogitBias {
			return s, invalid("logit_bias", "'logit_bias' holds %d tokens, at most %d are allowed", len(lb.fields), maxLogitBias)
		}
		s.LogitBias = map[int]float64{}
		for k := range lb.fields {
			id, perr := strconv.Atoi(k)
			if perr != nil || id < 0 {
				return s, invalid("logit_bias", "'logit_bias' keys must be token ids, got %q", k)
			}
			v, _, err := lb.numberIn(k, -100, 100)
			if err != nil {
				return s, err
			}
			s.LogitBias[id] = v
		}
	}
	if s.Stream, _, err = o.boolean("stream"); err != nil {
		return s, err
	}
	if so, ok, err := o.obj("stream_options"); err != nil {
		return s, err
	} else if ok {
		if s.IncludeUsage, _, err = so.boolean("include_usage"); err != nil {
			return s, err
		}
	}
	return s, nil
}

// contentPart is one part of a message's content: text or an image.
type contentPart struct {
	Text  string
	Image bool
	URL   string // an image's data URL
	Param string // names the part in errors
}

// message is one chat message as the request gave it.
type message struct {
	Role string
	// Text is the content as a string: a text-part array's concatenation.
	Text string
	// Parts are the content's parts in order (a string is one text part).
	Parts []contentPart
	// Null is true for content null (or absent).
	Null       bool
	ToolCalls  json.RawMessage // the raw array, checked
	ToolCallID *string
	Name       *string
	Param      string
}

var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// readMessages reads and checks the messages field.
func readMessages(o object) ([]message, *apiError) {
	items, ok, err := o.array("messages")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid("messages", "'messages' is required")
	}
	if len(items) == 0 {
		return nil, invalid("messages", "'messages' must hold at least one message, got []")
	}
	out := make([]message, 0, len(items))
	for i, raw := range items {
		param := o.elem("messages", i)
		mo, err := parseObject(raw, param)
		if err != nil {
			return nil, err
		}
		m := message{Param: param}
		role, ok, err := mo.str("role")
		if err != nil {
			return nil, err
		}
		if !ok || !roles[role] {
			return nil, invalid(mo.name("role"), "'%s' must be one of system, developer, user, assistant or tool, got %q", mo.name("role"), role)
		}
		m.Role = role
		if err := readContent(mo, &m); err != nil {
			return nil, err
		}
		if m.Null && role != "assistant" {
			return nil, invalid(mo.name("content"), "'%s' is required for a %s message", mo.name("content"), role)
		}
		if v, ok, err := mo.str("name"); err != nil {
			return nil, err
		} else if ok {
			m.Name = &v
		}
		if role == "tool" {
			v, ok, err := mo.str("tool_call_id")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, invalid(mo.name("tool_call_id"), "'%s' is required for a tool message", mo.name("tool_call_id"))
			}
			m.ToolCallID = &v
		}
		if role == "assistant" {
			if calls, ok, err := mo.array("tool_calls"); err != nil {
				return nil, err
			} else if ok {
				for j, c := range calls {
					if err := checkToolCall(c, mo.elem("tool_calls", j)); err != nil {
						return nil, err
					}
				}
				m.ToolCalls, _ = mo.raw("tool_calls")
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// readContent reads a message's content: a string, null, or an array of
// parts ({"type": "text", "text"}, and in user messages {"type":
// "image_url", "image_url": {"url"}}).
func readContent(mo object, m *message) *apiError {
	r, ok := mo.raw("content")
	if !ok {
		m.Null = true
		return nil
	}
	f := mo.name("content")
	switch kind(r) {
	case "string":
		json.Unmarshal(r, &m.Text)
		m.Parts = []contentPart{{Text: m.Text, Param: f}}
		return nil
	case "array":
	default:
		return mo.wrongType("content", "a string or an array of content parts", r)
	}
	parts, _, err := mo.array("content")
	if err != nil {
		return err
	}
	for j, raw := range parts {
		pp := mo.elem("content", j)
		po, err := parseObject(raw, pp)
		if err != nil {
			return err
		}
		typ, _, err := po.str("type")
		if err != nil {
			return err
		}
		switch typ {
		case "text":
			t, ok, err := po.str("text")
			if err != nil {
				return err
			}
			if !ok {
				return invalid(po.name("text"), "'%s' is required for a text part", po.name("text"))
			}
			m.Text += t
			m.Parts = append(m.Parts, contentPart{Text: t, Param: pp})
		case "image_url":
			if m.Role != "user" {
				return invalid(pp, "image parts are allowed in user messages only, not in a %s message", m.Role)
			}
			var url string
			if r, ok := po.raw("image_url"); ok && kind(r) == "string" {
				json.Unmarshal(r, &url) // a bare URL string, as some clients send
			} else {
				uo, ok, err := po.obj("image_url")
				if err != nil {
					return err
				}
				if !ok {
					return invalid(po.name("image_url"), "'%s' is required for an image_url part", po.name("image_url"))
				}
				if url, ok, err = uo.str("url"); err != nil {
					return err
				} else if !ok {
					return invalid(uo.name("url"), "'%s' is required", uo.name("url"))
				}
			}
			m.Parts = append(m.Parts, contentPart{Image: true, URL: url, Param: po.name("image_url") + ".url"})
		case "":
			return invalid(po.name("type"), "'%s' is required", po.name("type"))
		default:
			return unsupported(po.name("type"), "content parts of type %q are not supported (text and image_url are)", typ)
		}
	}
	return nil
}

// checkToolCall checks one of an assistant message's tool_calls:
// {"id", "type": "function", "function": {"name", "arguments"}}.
func checkToolCall(raw json.RawMessage, param string) *apiError {
	co, err := parseObject(raw, param)
	if err != nil {
		return err
	}
	if _, _, err := co.str("id"); err != nil {
		return err
	}
	if t, ok, err := co.str("type"); err != nil {
		return err
	} else if ok && t != "function" {
		return invalid(co.name("type"), "'%s' must be \"function\", got %q", co.name("type"), t)
	}
	fo, ok, err := co.obj("function")
	if err != nil {
		return err
	}
	if !ok {
		return invalid(co.name("function"), "'%s' is required", co.name("function"))
	}
	if _, ok, err := fo.str("name"); err != nil {
		return err
	} else if !ok {
		return invalid(fo.name("name"), "'%s' is required", fo.name("name"))
	}
	if r, ok := fo.raw("arguments"); ok && kind(r) != "string" && kind(r) != "object" {
		return fo.wrongType("arguments", "a JSON string", r)
	}
	return nil
}

// tool is a function the request offers the model.
type tool struct {
	Name       string
	Parameters json.RawMessage // the JSON schema, or nil
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_.\-]{1,64}$`)

// readTools reads the tools field: [{"type": "function", "function":
// {"name", "description", "parameters", "strict"}}]. raw is the array as
// sent, for the chat template.
func readTools(o object) (tools []tool, raw json.RawMessage, err *apiError) {
	items, ok, err := o.array("tools")
	if err != nil || !ok {
		return nil, nil, err
	}
	if len(items) > maxTools {
		return nil, nil, invalid("tools", "'tools' holds %d tools, at most %d are allowed", len(items), maxTools)
	}
	seen := map[string]bool{}
	for i, r := range items {
		to, err := parseObject(r, o.elem("tools", i))
		if err != nil {
			return nil, nil, err
		}
		if t, _, err := to.str("type"); err != nil {
			return nil, nil, err
		} else if t != "function" {
			return nil, nil, invalid(to.name("type"), "'%s' must be \"function\", got %q", to.name("type"), t)
		}
		fo, ok, err := to.obj("function")
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, invalid(to.name("function"), "'%s' is required", to.name("function"))
		}
		name, _, err := fo.str("name")
		if err != nil {
			return nil, nil, err
		}
		if !toolName.MatchString(name) {
			return nil, nil, invalid(fo.name("name"), "'%s' must be 1 to 64 letters, digits, underscores, dots or dashes, got %q", fo.name("name"), name)
		}
		if seen[name] {
			return nil, nil, invalid(fo.name("name"), "two tools are named %q", name)
		}
		seen[name] = true
		if _, _, err := fo.str("description"); err != nil {
			return nil, nil, err
		}
		if _, _, err := fo.boolean("strict"); err != nil {
			return nil, nil, err
		}
		t := tool{Name: name}
		if p, ok := fo.raw("parameters"); ok {
			if kind(p) != "object" {
				return nil, nil, fo.wrongType("parameters", "a JSON schema object", p)
			}
			t.Parameters = p
		}
		tools = append(tools, t)
	}
	raw, _ = o.raw("tools")
	return tools, raw, nil
}

// toolChoice is the tool_choice field: "none", "auto", "required", or a
// function by name.
type toolChoice struct {
	Mode string // none, auto, required, function
	Name string
}

func readToolChoice(o object, tools []tool) (toolChoice, *apiError) {
	c := toolChoice{Mode: "auto"}
	if len(tools) == 0 {
		c.Mode = "none"
	}
	r, ok := o.raw("tool_choice")
	if !ok {
		return c, nil
	}
	var s string
	if json.Unmarshal(r, &s) == nil {
		switch s {
		case "none", "auto", "required":
			c.Mode = s
		default:
			return c, invalid("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}, got %q", s)
		}
	} else {
		co, err := parseObject(r, "tool_choice")
		if err != nil {
			return c, o.wrongType("tool_choice", "a string or an object", r)
		}
		fo, ok, err := co.obj("function")
		if err != nil {
			return c, err
		}
		name := ""
		if ok {
			if name, _, err = fo.str("name"); err != nil {
				return c, err
			}
		}
		if name == "" {
			return c, invalid("tool_choice.function.name", "'tool_choice.function.name' is required")
		}
		c.Mode, c.Name = "function", name
	}
	if c.Mode != "none" && len(tools) == 0 {
		return c, invalid("tool_choice", "'tool_choice' %q needs 'tools'", c.Mode)
	}
	if c.Mode == "function" {
		found := false
		for _, t := range tools {
			found = found || t.Name == c.Name
		}
		if !found {
			return c, invalid("tool_choice.function.name", "no tool is named %q", c.Name)
		}
	}
	return c, nil
}

// responseFormat is the response_format field.
type responseFormat struct {
	Type   string // text, json_object, json_schema
	Name   string
	Schema json.RawMessage
	Strict bool
}

func readResponseFormat(o object) (responseFormat, *apiError) {
	f := responseFormat{Type: "text"}
	ro, ok, err := o.obj("response_format")
	if err != nil || !ok {
		return f, err
	}
	t, _, err := ro.str("type")
	if err != nil {
		return f, err
	}
	switch t {
	case "text", "json_object":
		f.Type = t
	case "json_schema":
		f.Type = t
		so, ok, err := ro.obj("json_schema")
		if err != nil {
			return f, err
		}
		if !ok {
			return f, invalid("response_format.json_schema", "'response_format.json_schema' is required for type json_schema")
		}
		if f.Name, ok, err = so.str("name"); err != nil {
			return f, err
		} else if !ok {
			return f, invalid("response_format.json_schema.name", "'response_format.json_schema.name' is required")
		}
		if f.Strict, _, err = so.boolean("strict"); err != nil {
			return f, err
		}
		if _, _, err := so.str("description"); err != nil {
			return f, err
		}
		if s, ok := so.raw("schema"); ok {
			if kind(s) != "object" && kind(s) != "boolean" {
				return f, so.wrongType("schema", "a JSON schema", s)
			}
			f.Schema = s
		}
	default:
		return f, invalid("response_format.type", "'response_format.type' must be text, json_object or json_schema, got %q", t)
	}
	return f, nil
}
