package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"strings"
	"unicode"
)

// toolFormat is how a chat-template family has the model write a tool
// call in its output.
type toolFormat struct {
	Name string
	// Open and Close surround each call's JSON object.
	Open, Close string
}

// The formats this server parses, one per template family.
var (
	// hermesFormat is Qwen3's and SmolLM3's (and Hermes', Qwen2.5's):
	// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>.
	hermesFormat = &toolFormat{Name: "hermes", Open: "<tool_call>", Close: "</tool_call>"}
)

// detectToolFormat picks the tool-call format from the template's source:
// the template tells the model how to call, so it names the format.
func detectToolFormat(source string) *toolFormat {
	if strings.Contains(source, hermesFormat.Open) && strings.Contains(source, hermesFormat.Close) {
		return hermesFormat
	}
	return nil
}

// toolCall is a parsed call.
type toolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// toolParser splits a choice's text, as it streams, into content and tool
// calls. Text that may begin a call is held back until it is known; a
// call is handed out whole once its closing tag comes (or, at the end,
// when what is there parses). Whitespace around calls is not content.
// Text in a call's tags that does not parse as a call stays content.
type toolParser struct {
	f      *toolFormat
	buf    string // text not yet decided
	inCall bool
	ws     string // trailing whitespace held back
	called bool
	after  bool // right after a call: leading whitespace is dropped
}

func newToolParser(f *toolFormat) *toolParser { return &toolParser{f: f} }

// push adds text and returns the content and calls it completes.
func (p *toolParser) push(text string) (content string, calls []toolCall) {
	p.buf += text
	var out strings.Builder
	for {
		if !p.inCall {
			if i := strings.Index(p.buf, p.f.Open); i >= 0 {
				out.WriteString(p.content(p.buf[:i]))
				p.buf, p.inCall = p.buf[i+len(p.f.Open):], true
				p.ws = "" // whitespace before a call is not content
				continue
			}
			keep := partialSuffix(p.buf, p.f.Open)
			out.WriteString(p.content(p.buf[:len(p.buf)-keep]))
			p.buf = p.buf[len(p.buf)-keep:]
			return out.String(), calls
		}
		j := strings.Index(p.buf, p.f.Close)
		if j < 0 {
			return out.String(), calls
		}
		body := p.buf[:j]
		p.buf, p.inCall = p.buf[j+len(p.f.Close):], false
		if c, ok := parseHermesCall(body); ok {
			calls = append(calls, c)
			p.called, p.after = true, true
		} else {
			out.WriteString(p.content(p.f.Open + body + p.f.Close))
		}
	}
}

// finish returns what is left at the end of generation: an unclosed
// call that parses is a call, anything else content.
func (p *toolParser) finish() (content string, calls []toolCall) {
	rest := p.buf
	p.buf = ""
	if p.inCall {
		p.inCall = false
		if c, ok := parseHermesCall(rest); ok {
			p.called = true
			return "", []toolCall{c}
		}
		rest = p.f.Open + rest
	}
	out := p.content(rest)
	if !p.called {
		out += p.ws
	}
	p.ws = ""
	return out, nil
}

// content passes text on as content, holding back trailing whitespace
// (which a call may follow).
func (p *toolParser) content(s string) string {
	if p.after {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		p.after = s == ""
	}
	if s == "" {
		return ""
	}
	all := p.ws + s
	t := strings.TrimRightFunc(all, unicode.IsSpace)
	p.ws = all[len(t):]
	return t
}

// partialSuffix is the length of the longest proper prefix of tag that s
// ends with.
func partialSuffix(s, tag string) int {
	for k := min(len(tag)-1, len(s)); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			return k
		}
	}
	return 0
}

// parseHermesCall reads {"name": ..., "arguments": {...}} (or
// "parameters", as Llama 3.1 writes it). The arguments are kept as the
// model wrote them; a string of JSON is taken as that JSON.
func parseHermesCall(body string) (toolCall, bool) {
	var v struct {
		Name       *string         `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	b := bytes.TrimSpace([]byte(body))
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &v) != nil || v.Name == nil || *v.Name == "" {
		return toolCall{}, false
	}
	args := v.Arguments
	if args == nil || isNull(args) {
		args = v.Parameters
	}
	c := toolCall{ID: newCallID(), Name: *v.Name, Arguments: "{}"}
	switch {
	case args == nil || isNull(args):
	case kind(args) == "string":
		var s string
		json.Unmarshal(args, &s)
		c.Arguments = s
	default:
		c.Arguments = string(args)
	}
	return c, true
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// randomID is prefix and 24 random letters and digits.
func randomID(prefix string) string {
	b := make([]byte, 24)
	rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b)
}

func newCallID() string { return randomID("call_") }
