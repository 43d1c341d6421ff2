package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/images"
	"github.com/gozoo/gozoo/jinja"
	"github.com/gozoo/gozoo/zoo/generate"
)

// chatRequest is a /v1/chat/completions request.
type chatRequest struct {
	messages       []message
	tools          []tool
	toolsRaw       json.RawMessage
	toolChoice     toolChoice
	parallelCalls  bool
	responseFormat responseFormat
	sampling
}

func (s *Server) readChat(o object) (*chatRequest, *apiError) {
	req := &chatRequest{parallelCalls: true}
	var err *apiError
	if req.messages, err = readMessages(o); err != nil {
		return nil, err
	}
	if req.sampling, err = readSampling(o, s.opts.Parallel, "max_tokens", "max_completion_tokens"); err != nil {
		return nil, err
	}
	if req.Logprobs, _, err = o.boolean("logprobs"); err != nil {
		return nil, err
	}
	if v, ok, err := o.intIn("top_logprobs", 0, maxTopLogprobs); err != nil {
		return nil, err
	} else if ok {
		if !req.Logprobs && v > 0 {
			return nil, invalid("top_logprobs", "'top_logprobs' needs 'logprobs': true")
		}
		req.TopLogprobs = int(v)
	}
	if req.tools, req.toolsRaw, err = readTools(o); err != nil {
		return nil, err
	}
	if req.toolChoice, err = readToolChoice(o, req.tools); err != nil {
		return nil, err
	}
	if v, ok, err := o.boolean("parallel_tool_calls"); err != nil {
		return nil, err
	} else if ok {
		req.parallelCalls = v
	}
	if req.responseFormat, err = readResponseFormat(o); err != nil {
		return nil, err
	}
	return req, nil
}

// chatPrompt renders the messages (and tools) with the model's chat
// template, add_generation_prompt=True and nothing else, and tokenizes
// the result without adding special tokens. A SmolVLM prompt's images are
// decoded from their data URLs and encoded.
func (s *Server) chatPrompt(ctx context.Context, req *chatRequest) (graphs.Input, *apiError) {
	if s.g.Template == nil {
		return graphs.Input{}, invalid("messages", "the model %q has no chat template: use /v1/completions with a prompt", s.opts.Name)
	}
	if s.opts.Pipeline != nil {
		return s.imagePrompt(ctx, req)
	}
	msgs := jinja.NewList()
	for _, m := range req.messages {
		for _, p := range m.Parts {
			if p.Image {
				return graphs.Input{}, invalid(p.Param, "the model %q takes no images", s.opts.Name)
			}
		}
		d := jinja.NewDict()
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		d.SetString("role", role)
		d.SetString("content", m.Text) // null content (beside tool_calls) renders as ""
		if m.ToolCalls != nil {
			calls, err := jinja.DecodeJSON(m.ToolCalls)
			if err != nil {
				return graphs.Input{}, invalid(m.Param+".tool_calls", "%v", err)
			}
			d.SetString("tool_calls", calls)
		}
		if m.ToolCallID != nil {
			d.SetString("tool_call_id", *m.ToolCallID)
		}
		if m.Name != nil {
			d.SetString("name", *m.Name)
		}
		msgs.Items = append(msgs.Items, d)
	}
	ro := chat.RenderOptions{AddGenerationPrompt: true}
	if req.toolsRaw != nil && req.toolChoice.Mode != "none" {
		tools, err := jinja.DecodeJSON(req.toolsRaw)
		if err != nil {
			return graphs.Input{}, invalid("tools", "%v", err)
		}
		ro.Tools = tools
	}
	text, err := s.g.Template.RenderContext(ctx, msgs, ro)
	if err != nil {
		return graphs.Input{}, templateError(ctx, err)
	}
	ids, err := s.g.Tokenizer.Encode(text, false)
	if err != nil {
		return graphs.Input{}, invalid("messages", "tokenizing the prompt: %v", err)
	}
	return graphs.IDs(ids...), nil
}

// templateError is a 400 for a template that refused the messages (its
// own raise_exception, or a limit).
func templateError(ctx context.Context, err error) *apiError {
	if ctx.Err() != nil {
		return engineError(ctx.Err(), "")
	}
	var te *jinja.TemplateError
	if errors.As(err, &te) {
		return invalid("messages", "the chat template refused the messages: %s", te.Error())
	}
	return invalid("messages", "rendering the chat template: %v", err)
}

// imagePrompt prepares a SmolVLM prompt: each message's content as parts
// ({"type": "text"} and {"type": "image"}, as transformers passes them),
// the images from data URLs.
func (s *Server) imagePrompt(ctx context.Context, req *chatRequest) (graphs.Input, *apiError) {
	var msgs []chat.Message
	var imgs []*images.RGB
	maxPixels := s.opts.MaxPixels
	if maxPixels == 0 {
		maxPixels = defaultMaxPixels
	}
	for _, m := range req.messages {
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		parts := []any{}
		for _, p := range m.Parts {
			if !p.Image {
				parts = append(parts, map[string]any{"type": "text", "text": p.Text})
				continue
			}
			img, err := decodeDataURL(ctx, p.URL, p.Param, maxPixels)
			if err != nil {
				return graphs.Input{}, err
			}
			imgs = append(imgs, img)
			parts = append(parts, map[string]any{"type": "image"})
		}
		if len(parts) == 0 {
			parts = append(parts, map[string]any{"type": "text", "text": ""})
		}
		msgs = append(msgs, chat.Message{Role: role, Content: parts})
	}
	select { // one prompt's vision tower at a time
	case s.imageSem <- struct{}{}:
	case <-ctx.Done():
		return graphs.Input{}, engineError(ctx.Err(), "")
	}
	defer func() { <-s.imageSem }()
	pr, err := s.opts.Pipeline.PrepareChatContext(ctx, msgs, imgs)
	if err != nil {
		var te *jinja.TemplateError
		if ctx.Err() != nil || errors.As(err, &te) {
			return graphs.Input{}, templateError(ctx, err)
		}
		return graphs.Input{}, invalid("messages", "%v", err)
	}
	return pr.Input, nil
}

// defaultMaxPixels caps a request's image (32 megapixels): the processor
// resizes to tiles of a few hundred pixels anyway.
const defaultMaxPixels = 32 << 20

// decodeDataURL decodes an image given as a data URL (data:image/png;base64,...).
// Remote and file URLs are refused: a request never makes the server
// fetch or read anything.
func decodeDataURL(ctx context.Context, url, param string, maxPixels int64) (*images.RGB, *apiError) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		scheme, _, _ := strings.Cut(url, ":")
		if len(scheme) > 16 {
			scheme = scheme[:16]
		}
		return nil, invalid(param, "only data: URLs are accepted for images (got a %q URL): the server fetches nothing", scheme)
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") || !strings.HasPrefix(meta, "image/") {
		return nil, invalid(param, "want a data URL of the form data:image/TYPE;base64,DATA")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(data))
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(strings.TrimSpace(data)); err != nil {
			return nil, invalid(param, "the image's base64 data does not decode: %v", err)
		}
	}
	img, err := images.DecodeContext(ctx, bytes.NewReader(raw), param, maxPixels)
	if err != nil {
		if ctx.Err() != nil {
			return nil, engineError(ctx.Err(), "")
		}
		return nil, invalid(param, "%v", err)
	}
	return img, nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.metrics.running.Add(1)
	defer s.metrics.running.Add(-1)
	o, aerr := s.readRequest(w, r)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	req, aerr := s.readChat(o)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	parse := s.format != nil && req.toolChoice.Mode != "none" && len(req.tools) > 0
	if len(req.tools) > 0 && s.g.Template != nil && (!strings.Contains(s.g.Template.Source, "tools") || s.opts.Pipeline != nil) {
		s.fail(w, r, unsupported("tools", "the model's chat template does not render tools"))
		return
	}
	var newProc func(int) generate.LogitsProcessor
	if c, aerr := constraintFor(req.responseFormat, req.toolChoice, req.tools, s.format); aerr != nil {
		s.fail(w, r, aerr)
		return
	} else if c != nil {
		if newProc, aerr = s.compile(c); aerr != nil {
			s.fail(w, r, aerr)
			return
		}
	}
	// Admitted before the prompt is prepared: a SmolVLM prompt runs the
	// vision tower.
	release, aerr := s.admit(req.N)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	in, aerr := s.chatPrompt(ctx, req)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	promptLen := in.Len(s.g.Model.HiddenSize())
	if aerr := s.promptTooLong(promptLen, "messages"); aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	opts, aerr := s.options(req.sampling, promptLen)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	if req.toolChoice.Mode == "none" && s.openID >= 0 && len(req.tools) > 0 {
		// Keep calls out: the opening tag cannot be drawn.
		opts.Sampling.Extra = append([]generate.LogitsProcessor{logitBias{s.openID: -100}}, opts.Sampling.Extra...)
	}
	ss, aerr := s.submit(ctx, &job{prompts: []graphs.Input{in}, lens: []int{promptLen}, opts: opts, newProc: newProc}, "messages")
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	out := &chatOutput{s: s, w: w, req: req, id: randomID("chatcmpl-"), created: time.Now().Unix(), promptLen: promptLen}
	for i := range ss.list {
		c := &chatChoice{index: i}
		if parse {
			c.parser = newToolParser(s.format)
		}
		out.choices = append(out.choices, c)
	}
	err := s.consume(ctx, start, ss, out)
	var ae *apiError
	switch {
	case err == nil:
		out.finish()
	case errors.As(err, &ae) && !out.started:
		s.fail(w, r, ae)
	case errors.As(err, &ae):
		s.opts.Log.Printf("%s %s: stream failed after its first token: %s", r.Method, r.URL.Path, ae.Message)
		out.sse.error(ae)
	}
	s.metrics.promptTokens.Add(int64(promptLen))
}

// chatChoice is one choice being answered.
type chatChoice struct {
	index    int
	parser   *toolParser
	content  strings.Builder
	calls    []toolCall
	logprobs []chatLogprob // every token's, or the stream's not yet sent
	tokens   int
	finish   string
	ended    bool
}

// chatOutput answers a chat request, whole or streamed.
type chatOutput struct {
	s         *Server
	w         http.ResponseWriter
	req       *chatRequest
	id        string
	created   int64
	promptLen int
	choices   []*chatChoice
	started   bool // the stream's headers are out
	sse       *sseWriter
}

type chatDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []toolCallDelta `json:"tool_calls,omitempty"`
}

type toolCallDelta struct {
	Index    int                `json:"index"`
	ID       string             `json:"id,omitempty"`
	Type     string             `json:"type,omitempty"`
	Function toolCallDeltaFunct `json:"function"`
}

type toolCallDeltaFunct struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

type choiceLogprobs struct {
	Content []chatLogprob `json:"content"`
	Refusal *string       `json:"refusal"`
}

type chunkChoice struct {
	Index        int             `json:"index"`
	Delta        chatDelta       `json:"delta"`
	Logprobs     *choiceLogprobs `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   any           `json:"usage,omitempty"`
}

type toolCallJSON struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionJSON `json:"function"`
}

type functionJSON struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	Refusal   *string        `json:"refusal"`
	ToolCalls []toolCallJSON `json:"tool_calls,omitempty"`
}

type chatCompletionChoice struct {
	Index        int             `json:"index"`
	Message      chatMessage     `json:"message"`
	Logprobs     *choiceLogprobs `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type chatCompletion struct {
	ID      string                 `json:"id"`
	Object  string                 `json:"object"`
	Created int64                  `json:"created"`
	Model   string                 `json:"model"`
	Choices []chatCompletionChoice `json:"choices"`
	Usage   *usage                 `json:"usage"`
}

// chunk writes one stream event for a choice.
func (o *chatOutput) chunk(c chunkChoice) error {
	ch := chatChunk{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.s.opts.Name, Choices: []chunkChoice{c}}
	if o.req.IncludeUsage {
		ch.Usage = json.RawMessage("null")
	}
	return o.sse.data(ch)
}

// start sends the stream's headers and each choice's first delta.
func (o *chatOutput) start() error {
	if o.started {
		return nil
	}
	o.started = true
	o.sse = newSSE(o.w)
	empty := ""
	for _, c := range o.choices {
		if err := o.chunk(chunkChoice{Index: c.index, Delta: chatDelta{Role: "assistant", Content: &empty}}); err != nil {
			return err
		}
	}
	return nil
}

func (o *chatOutput) token(i int, tok generate.Token) error {
	c := o.choices[i]
	if tok.ID >= 0 {
		c.tokens++
		if o.req.Logprobs && !o.s.isEOS(tok) {
			c.logprobs = append(c.logprobs, o.s.chatLogprobOf(tok))
		}
	}
	if o.req.Stream {
		if err := o.start(); err != nil {
			return err
		}
	}
	text, calls := tok.Text, []toolCall(nil)
	if c.parser != nil {
		text, calls = c.parser.push(text)
	}
	return o.add(c, text, calls)
}

// add takes a choice's new content and calls, and streams them.
func (o *chatOutput) add(c *chatChoice, text string, calls []toolCall) error {
	if !o.req.parallelCalls && len(c.calls)+len(calls) > 1 {
		calls = calls[:max(0, 1-len(c.calls))]
	}
	c.content.WriteString(text)
	first := len(c.calls)
	c.calls = append(c.calls, calls...)
	if !o.req.Stream {
		return nil
	}
	if text != "" {
		cc := chunkChoice{Index: c.index, Delta: chatDelta{Content: &text}}
		if o.req.Logprobs {
			cc.Logprobs = &choiceLogprobs{Content: c.logprobs}
			c.logprobs = nil
		}
		if err := o.chunk(cc); err != nil {
			return err
		}
	}
	for k, call := range calls {
		idx := first + k
		empty, args := "", call.Arguments
		if err := o.chunk(chunkChoice{Index: c.index, Delta: chatDelta{ToolCalls: []toolCallDelta{{Index: idx, ID: call.ID, Type: "function", Function: toolCallDeltaFunct{Name: call.Name, Arguments: &empty}}}}}); err != nil {
			return err
		}
		if err := o.chunk(chunkChoice{Index: c.index, Delta: chatDelta{ToolCalls: []toolCallDelta{{Index: idx, Function: toolCallDeltaFunct{Arguments: &args}}}}}); err != nil {
			return err
		}
	}
	return nil
}

func (o *chatOutput) end(i int, res generate.Result, err error) error {
	c := o.choices[i]
	if err := sampleFailed(res, err, "messages"); err != nil {
		return err
	}
	if o.req.Stream {
		if err := o.start(); err != nil { // a choice without any token
			return err
		}
	}
	if c.parser != nil {
		text, calls := c.parser.finish()
		if err := o.add(c, text, calls); err != nil {
			return err
		}
	}
	c.tokens = len(res.Tokens)
	c.finish = finishReason(res.StopReason, len(c.calls) > 0)
	c.ended = true
	o.s.metrics.completionTokens.Add(int64(c.tokens))
	if !o.req.Stream {
		return nil
	}
	if o.req.Logprobs && len(c.logprobs) > 0 {
		empty := ""
		if err := o.chunk(chunkChoice{Index: c.index, Delta: chatDelta{Content: &empty}, Logprobs: &choiceLogprobs{Content: c.logprobs}}); err != nil {
			return err
		}
		c.logprobs = nil
	}
	return o.chunk(chunkChoice{Index: c.index, Delta: chatDelta{}, FinishReason: &c.finish})
}

// finish writes the answer once every choice ended: the whole completion,
// or the stream's usage and [DONE].
func (o *chatOutput) finish() {
	total := 0
	for _, c := range o.choices {
		total += c.tokens
	}
	u := newUsage(o.promptLen, total)
	if o.req.Stream {
		if o.req.IncludeUsage {
			o.sse.data(chatChunk{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.s.opts.Name, Choices: []chunkChoice{}, Usage: u})
		}
		o.sse.done()
		return
	}
	resp := chatCompletion{ID: o.id, Object: "chat.completion", Created: o.created, Model: o.s.opts.Name, Usage: u}
	for _, c := range o.choices {
		msg := chatMessage{Role: "assistant"}
		text := c.content.String()
		if text != "" || len(c.calls) == 0 {
			msg.Content = &text
		}
		for _, call := range c.calls {
			msg.ToolCalls = append(msg.ToolCalls, toolCallJSON{ID: call.ID, Type: "function", Function: functionJSON{Name: call.Name, Arguments: call.Arguments}})
		}
		cc := chatCompletionChoice{Index: c.index, Message: msg, FinishReason: c.finish}
		if o.req.Logprobs {
			cc.Logprobs = &choiceLogprobs{Content: c.logprobs}
			if cc.Logprobs.Content == nil {
				cc.Logprobs.Content = []chatLogprob{}
			}
		}
		resp.Choices = append(resp.Choices, cc)
	}
	writeJSON(o.w, http.StatusOK, resp)
}
