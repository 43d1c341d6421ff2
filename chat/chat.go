// Package chat renders a checkpoint's own chat template, the way Hugging
// Face transformers' apply_chat_template(..., tokenize=False) does.
//
// The template is never hand-written per model: LoadTemplate (or
// TemplateFromFolder, from a loaders.Folder already read) finds the one
// the checkpoint ships (chat_template.jinja, chat_template.json or the
// chat_template key of tokenizer_config.json) and reads the tokenizer's
// special tokens, which templates refer to as bos_token, eos_token and so
// on. Rendering uses package jinja, which reproduces Python's jinja2 with
// transformers' settings byte for byte.
package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/gozoo/gozoo/jinja"
	"github.com/gozoo/gozoo/loaders"
)

// Template is a parsed chat template plus the special tokens it is
// rendered with. It is safe for concurrent use.
type Template struct {
	// Source is the template text; Path names where it came from (a file,
	// or "file (key)" for a template inside a JSON file).
	Source string
	Path   string
	// SpecialTokens are passed as template variables: bos_token,
	// eos_token, unk_token, sep_token, pad_token, cls_token, mask_token
	// (strings) and additional_special_tokens (a list of strings), for
	// those the tokenizer defines. Empty when the template did not come
	// from a checkpoint folder.
	SpecialTokens map[string]any
	// Now is the default clock for strftime_now; nil means time.Now.
	Now func() time.Time

	tmpl *jinja.Template
}

// Message is one chat turn in the usual shape. Fields after Content are
// included only when set, so templates that test `message.tool_calls is
// defined` see them as undefined otherwise. Content is usually a string,
// but may be nil (None) or a list of parts such as
// []map[string]any{{"type": "image"}, {"type": "text", "text": "..."}};
// map keys are sorted, so use jinja.DecodeJSON or a struct when the key
// order of a part matters to the template.
type Message struct {
	Role             string `json:"role"`
	Content          any    `json:"content"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
	ToolCalls        []any  `json:"tool_calls,omitempty"`
	ToolCallID       string `json:"tool_call_id,omitempty"`
	Name             string `json:"name,omitempty"`
}

// RenderOptions are the arguments of apply_chat_template besides the
// messages.
type RenderOptions struct {
	// AddGenerationPrompt asks the template to open an assistant turn.
	AddGenerationPrompt bool
	// Tools and Documents are passed as `tools` and `documents` (None when
	// nil). Tools are JSON-schema dicts, e.g. decoded with jinja.DecodeJSON.
	Tools     any
	Documents any
	// Kwargs are extra template variables (enable_thinking, xml_tools,
	// ...). They are applied last and override everything above, special
	// tokens included, as keyword arguments do in transformers. Values are
	// converted with jinja.ValueOf (Go maps get sorted keys; pass
	// jinja.DecodeJSON output where a template prints dict order).
	Kwargs map[string]any
	// Now overrides the template's clock for this render.
	Now func() time.Time
	// Limits bound the render's time and memory (see jinja.Limits); nil
	// means jinja.DefaultLimits, which no real chat template comes near.
	// A template that hits one fails with a *jinja.LimitError.
	Limits *jinja.Limits
}

// File names LoadTemplate looks at, in order of precedence.
const (
	jinjaFile     = loaders.ChatTemplateJinjaFile
	jsonFile      = loaders.ChatTemplateJSONFile
	tokConfigFile = loaders.TokenizerConfigFile
)

// specialTokenKeys are transformers' SPECIAL_TOKENS_ATTRIBUTES, the keys
// of the special_tokens_map that apply_chat_template passes to the
// template.
var specialTokenKeys = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// New parses a template from source; name labels errors (a file name).
func New(name, source string) (*Template, error) {
	t, err := jinja.Parse(name, source)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return &Template{Source: source, Path: name, SpecialTokens: map[string]any{}, tmpl: t}, nil
}

// ParseFile reads and parses a template file (Jinja source). It has no
// special tokens; pass them in RenderOptions.Kwargs if the template needs
// them.
func ParseFile(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return New(path, string(data))
}

// LoadTemplate loads the chat template a checkpoint folder ships, looking,
// as transformers does, at chat_template.jinja, then chat_template.json
// ({"chat_template": "..."}), then the chat_template of
// tokenizer_config.json (a string, or a list of {"name", "template"} from
// which "default" is taken). Special tokens come from
// tokenizer_config.json when the folder has one. Errors name the file at
// fault.
func LoadTemplate(dir string) (*Template, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("chat: %s is not a directory", dir)
	}
	f, err := loaders.ReadFolder(dir, jinjaFile, jsonFile, tokConfigFile)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return TemplateFromFolder(f)
}

// TemplateFromFolder does what LoadTemplate does from the files of a
// checkpoint folder already read (chat_template.jinja, chat_template.json,
// tokenizer_config.json), without touching the disk. Errors name the file
// at fault.
func TemplateFromFolder(f *loaders.Folder) (*Template, error) {
	var tokConfig map[string]json.RawMessage
	tokPath := f.Path(tokConfigFile)
	if f.TokenizerConfig != nil {
		if err := json.Unmarshal(f.TokenizerConfig, &tokConfig); err != nil {
			return nil, fmt.Errorf("chat: %s: invalid JSON: %w", tokPath, err)
		}
	}

	source, name, err := findSource(f, tokConfig)
	if err != nil {
		return nil, err
	}
	t, err := New(name, source)
	if err != nil {
		return nil, err
	}
	if tokConfig != nil {
		if t.SpecialTokens, err = specialTokens(tokPath, tokConfig); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func findSource(f *loaders.Folder, tokConfig map[string]json.RawMessage) (source, name string, err error) {
	if f.ChatTemplateJinja != nil {
		return string(f.ChatTemplateJinja), f.Path(jinjaFile), nil
	}
	if f.ChatTemplateJSON != nil {
		path := f.Path(jsonFile)
		var v struct {
			ChatTemplate *string `json:"chat_template"`
		}
		if err := json.Unmarshal(f.ChatTemplateJSON, &v); err != nil {
			return "", "", fmt.Errorf("chat: %s: want {\"chat_template\": \"...\"}: %w", path, err)
		}
		if v.ChatTemplate == nil {
			return "", "", fmt.Errorf("chat: %s: no \"chat_template\" string in it", path)
		}
		return *v.ChatTemplate, path + " (chat_template)", nil
	}
	if raw, ok := tokConfig["chat_template"]; ok && string(raw) != "null" {
		return templateFromConfig(f.Path(tokConfigFile), raw)
	}
	return "", "", fmt.Errorf("chat: no chat template in %s: looked for %s, %s and the \"chat_template\" key of %s",
		f.Dir, jinjaFile, jsonFile, tokConfigFile)
}

// templateFromConfig reads tokenizer_config.json's chat_template: a
// string, or a list of named templates of which "default" is used.
func templateFromConfig(path string, raw json.RawMessage) (string, string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, path + " (chat_template)", nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", "", fmt.Errorf("chat: %s: \"chat_template\" must be a string or a list of {\"name\", \"template\"}: %w", path, err)
	}
	var names []string
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, path + " (chat_template \"default\")", nil
		}
		names = append(names, n.Name)
	}
	return "", "", fmt.Errorf("chat: %s: \"chat_template\" lists %q but no \"default\" template", path, names)
}

// specialTokens extracts the special-token map. A token is a string or an
// AddedToken object {"content": "...", ...}; null means unset.
func specialTokens(path string, cfg map[string]json.RawMessage) (map[string]any, error) {
	out := map[string]any{}
	for _, key := range specialTokenKeys {
		raw, ok := cfg[key]
		if !ok {
			continue
		}
		tok, set, err := tokenContent(raw)
		if err != nil {
			return nil, fmt.Errorf("chat: %s: %s: %w", path, key, err)
		}
		if set {
			out[key] = tok
		}
	}
	if raw, ok := cfg["additional_special_tokens"]; ok && string(raw) != "null" {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("chat: %s: additional_special_tokens: want a list: %w", path, err)
		}
		toks := make([]any, 0, len(list))
		for i, r := range list {
			tok, set, err := tokenContent(r)
			if err != nil {
				return nil, fmt.Errorf("chat: %s: additional_special_tokens[%d]: %w", path, i, err)
			}
			if set {
				toks = append(toks, tok)
			}
		}
		out["additional_special_tokens"] = toks
	}
	return out, nil
}

func tokenContent(raw json.RawMessage) (string, bool, error) {
	if string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", false, fmt.Errorf("want a string or an object with a \"content\" string, got %s", truncate(string(raw), 60))
	}
	return *obj.Content, true, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Render renders messages as apply_chat_template(messages, tokenize=False,
// ...) does. messages may be []Message, a *jinja.List (e.g. from
// jinja.DecodeJSON, which keeps key order), json.RawMessage, or any slice
// jinja.ValueOf converts.
//
// The template sees messages, tools and documents (None unless given),
// add_generation_prompt, the special tokens and then opts.Kwargs, later
// ones overriding earlier ones. A template's own raise_exception comes
// back as a *jinja.TemplateError whose Error() is exactly its message; a
// template that exceeds opts.Limits fails with a *jinja.LimitError.
func (t *Template) Render(messages any, opts RenderOptions) (string, error) {
	return t.RenderContext(context.Background(), messages, opts)
}

// RenderContext is Render that stops, with an error wrapping ctx's, soon
// after ctx is done (see jinja.Template.RenderContext).
func (t *Template) RenderContext(ctx context.Context, messages any, opts RenderOptions) (string, error) {
	msgs, err := jinja.ValueOf(messages)
	if err != nil {
		return "", fmt.Errorf("chat: messages: %w", err)
	}
	if msgs == nil {
		msgs = jinja.NewList() // no messages (a nil slice) is an empty conversation
	}
	vars := map[string]jinja.Value{
		"messages":              msgs,
		"tools":                 nil,
		"documents":             nil,
		"add_generation_prompt": opts.AddGenerationPrompt,
	}
	if vars["tools"], err = jinja.ValueOf(opts.Tools); err != nil {
		return "", fmt.Errorf("chat: tools: %w", err)
	}
	if vars["documents"], err = jinja.ValueOf(opts.Documents); err != nil {
		return "", fmt.Errorf("chat: documents: %w", err)
	}
	for k, v := range t.SpecialTokens {
		vars[k] = v
	}
	for k, v := range opts.Kwargs {
		vars[k] = v
	}
	now := opts.Now
	if now == nil {
		now = t.Now
	}
	return t.tmpl.RenderContext(ctx, vars, &jinja.RenderOptions{Now: now, Limits: opts.Limits})
}
