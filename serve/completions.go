package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo/generate"
)

// maxPrompts caps the prompts of one /v1/completions request.
const maxPrompts = 64

// readPrompts reads a prompt field: a string, an array of strings, an
// array of token ids, or an array of those; field names it.
func (s *Server) readPrompts(o object, field string, addSpecial bool) (ids [][]int, texts []string, err *apiError) {
	r, ok := o.raw(field)
	if !ok {
		return nil, nil, invalid(field, "'%s' is required", field)
	}
	var one string
	var many []string
	var tokens []int
	var tokenLists [][]int
	switch {
	case json.Unmarshal(r, &one) == nil:
		texts = []string{one}
	case json.Unmarshal(r, &many) == nil:
		texts = many
	case json.Unmarshal(r, &tokens) == nil:
		tokenLists = [][]int{tokens}
	case json.Unmarshal(r, &tokenLists) == nil:
	default:
		return nil, nil, o.wrongType(field, "a string, an array of strings, an array of token ids or an array of those", r)
	}
	if n := len(texts) + len(tokenLists); n == 0 || n > maxPrompts {
		return nil, nil, invalid(field, "'%s' must hold 1 to %d inputs, got %d", field, maxPrompts, n)
	}
	V := s.g.Model.VocabSize()
	for i, t := range texts {
		if t == "" {
			return nil, nil, invalid(field, "'%s' holds an empty string (input %d)", field, i)
		}
		var list []int
		var e error
		if addSpecial {
			list, e = s.g.Encode(t)
		} else if s.g.Tokenizer != nil {
			list, e = s.g.Tokenizer.Encode(t, false)
		}
		if e != nil {
			return nil, nil, invalid(field, "tokenizing input %d: %v", i, e)
		}
		ids = append(ids, list)
	}
	for i, list := range tokenLists {
		if len(list) == 0 {
			return nil, nil, invalid(field, "'%s' holds an empty list of tokens (input %d)", field, i)
		}
		for _, id := range list {
			if id < 0 || id >= V {
				return nil, nil, invalid(field, "'%s' input %d holds token %d, outside the vocabulary of %d tokens", field, i, id, V)
			}
		}
		ids = append(ids, list)
		text := ""
		if s.g.Tokenizer != nil {
			text, _ = s.g.Tokenizer.Decode(list, false)
		}
		texts = append(texts, text)
	}
	return ids, texts, nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.metrics.running.Add(1)
	defer s.metrics.running.Add(-1)
	o, aerr := s.readRequest(w, r)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	sp, aerr := readSampling(o, s.opts.Parallel, "max_tokens")
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	out := &completionOutput{s: s, w: w, id: randomID("cmpl-"), created: time.Now().Unix(), sp: sp}
	if v, ok, err := o.intIn("logprobs", 0, maxTopLogprobs); err != nil {
		s.fail(w, r, err)
		return
	} else if ok {
		out.logprobs = true
		sp.Logprobs, sp.TopLogprobs = true, int(v)
	}
	if out.echo, _, aerr = o.boolean("echo"); aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	if suffix, _, err := o.str("suffix"); err != nil {
		s.fail(w, r, err)
		return
	} else if suffix != "" {
		s.fail(w, r, unsupported("suffix", "'suffix' (insertion) is not supported"))
		return
	}
	if v, ok, err := o.intIn("best_of", 1, int64(s.opts.Parallel)); err != nil {
		s.fail(w, r, err)
		return
	} else if ok && int(v) != sp.N && v != 1 {
		s.fail(w, r, unsupported("best_of", "'best_of' other than n is not supported"))
		return
	}
	if out.echo && out.logprobs {
		s.fail(w, r, unsupported("echo", "'echo' with 'logprobs' (the prompt's log-probabilities) is not supported"))
		return
	}
	ids, texts, aerr := s.readPrompts(o, "prompt", true)
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	out.prompts = texts
	j := &job{}
	for _, list := range ids {
		if aerr := s.promptTooLong(len(list), "prompt"); aerr != nil {
			s.fail(w, r, aerr)
			return
		}
		j.prompts = append(j.prompts, graphs.IDs(list...))
		j.lens = append(j.lens, len(list))
		out.promptLen += len(list)
	}
	if j.opts, aerr = s.options(sp, j.lens[0]); aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	release, aerr := s.admit(sp.N * len(ids))
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	ss, aerr := s.submitEach(ctx, j, "prompt")
	if aerr != nil {
		s.fail(w, r, aerr)
		return
	}
	out.choices = make([]*completionChoice, len(ss.list))
	for i := range out.choices {
		out.choices[i] = &completionChoice{index: i}
		if out.echo {
			out.choices[i].text.WriteString(texts[i/max(sp.N, 1)])
		}
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
	s.metrics.promptTokens.Add(int64(out.promptLen))
}

// submitEach submits a job whose prompts differ in length: the penalties
// learn each prompt's length.
func (s *Server) submitEach(ctx context.Context, j *job, param string) (*samples, *apiError) {
	all := &samples{}
	for p := range j.prompts {
		one := &job{prompts: j.prompts[p : p+1], lens: j.lens[p : p+1], opts: j.opts, newProc: j.newProc}
		one.opts.Sampling.Extra = withPromptLen(j.opts.Sampling.Extra, j.lens[p])
		ss, err := s.submit(ctx, one, param)
		if err != nil {
			return nil, err
		}
		all.list = append(all.list, ss.list...)
	}
	return all, nil
}

// withPromptLen is procs with its penalties counting from promptLen.
func withPromptLen(procs []generate.LogitsProcessor, promptLen int) []generate.LogitsProcessor {
	out := make([]generate.LogitsProcessor, len(procs))
	for i, p := range procs {
		if pen, ok := p.(penalties); ok {
			pen.promptLen = promptLen
			p = pen
		}
		out[i] = p
	}
	return out
}

// completionChoice is one choice of a completion.
type completionChoice struct {
	index    int
	text     strings.Builder
	lp       completionLogprobs
	offset   int
	tokens   int
	finish   string
	sentText int
}

type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type completionChoiceJSON struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completionJSON struct {
	ID      string                 `json:"id"`
	Object  string                 `json:"object"`
	Created int64                  `json:"created"`
	Model   string                 `json:"model"`
	Choices []completionChoiceJSON `json:"choices"`
	Usage   any                    `json:"usage,omitempty"`
}

// completionOutput answers a completion request, whole or streamed.
type completionOutput struct {
	s         *Server
	w         http.ResponseWriter
	id        string
	created   int64
	sp        sampling
	logprobs  bool
	echo      bool
	prompts   []string
	promptLen int
	choices   []*completionChoice
	started   bool
	sse       *sseWriter
}

func (o *completionOutput) chunk(c completionChoiceJSON) error {
	ch := completionJSON{ID: o.id, Object: "text_completion", Created: o.created, Model: o.s.opts.Name, Choices: []completionChoiceJSON{c}}
	if o.sp.IncludeUsage {
		ch.Usage = json.RawMessage("null")
	}
	return o.sse.data(ch)
}

func (o *completionOutput) start() {
	if !o.started {
		o.started = true
		o.sse = newSSE(o.w)
	}
}

func (o *completionOutput) token(i int, tok generate.Token) error {
	c := o.choices[i]
	var lp *completionLogprobs
	if tok.ID >= 0 {
		c.tokens++
		if o.logprobs && !o.s.isEOS(tok) {
			b := o.s.bytes.bytes(tok.ID)
			top := map[string]float64{}
			for _, t := range tok.TopLogprobs {
				top[string(o.s.bytes.bytes(t.ID))] = finiteLogprob(t.Logprob)
			}
			if len(tok.TopLogprobs) == 0 {
				top[string(b)] = finiteLogprob(tok.Logprob)
			}
			c.lp.Tokens = append(c.lp.Tokens, string(b))
			c.lp.TokenLogprobs = append(c.lp.TokenLogprobs, finiteLogprob(tok.Logprob))
			c.lp.TopLogprobs = append(c.lp.TopLogprobs, top)
			c.lp.TextOffset = append(c.lp.TextOffset, c.offset)
			c.offset += len(b)
			lp = &c.lp
		}
	}
	c.text.WriteString(tok.Text)
	if !o.sp.Stream {
		return nil
	}
	o.start()
	if tok.Text == "" && lp == nil {
		return nil
	}
	text := c.text.String()[c.sentText:]
	c.sentText = c.text.Len()
	var send *completionLogprobs
	if lp != nil {
		n := len(lp.Tokens)
		send = &completionLogprobs{Tokens: lp.Tokens[n-1:], TokenLogprobs: lp.TokenLogprobs[n-1:], TopLogprobs: lp.TopLogprobs[n-1:], TextOffset: lp.TextOffset[n-1:]}
	}
	return o.chunk(completionChoiceJSON{Text: text, Index: c.index, Logprobs: send})
}

func (o *completionOutput) end(i int, res generate.Result, err error) error {
	c := o.choices[i]
	if err := sampleFailed(res, err, "prompt"); err != nil {
		return err
	}
	c.tokens = len(res.Tokens)
	c.finish = finishReason(res.StopReason, false)
	o.s.metrics.completionTokens.Add(int64(c.tokens))
	if !o.sp.Stream {
		return nil
	}
	o.start()
	text := c.text.String()[c.sentText:] // an echoed prompt with no token
	c.sentText = c.text.Len()
	return o.chunk(completionChoiceJSON{Text: text, Index: c.index, FinishReason: &c.finish})
}

func (o *completionOutput) finish() {
	total := 0
	for _, c := range o.choices {
		total += c.tokens
	}
	u := newUsage(o.promptLen, total)
	if o.sp.Stream {
		if o.sp.IncludeUsage {
			o.sse.data(completionJSON{ID: o.id, Object: "text_completion", Created: o.created, Model: o.s.opts.Name, Choices: []completionChoiceJSON{}, Usage: u})
		}
		o.sse.done()
		return
	}
	resp := completionJSON{ID: o.id, Object: "text_completion", Created: o.created, Model: o.s.opts.Name, Usage: u}
	for _, c := range o.choices {
		cj := completionChoiceJSON{Text: c.text.String(), Index: c.index, FinishReason: &c.finish}
		if o.logprobs {
			lp := c.lp
			if lp.Tokens == nil {
				lp = completionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
			}
			cj.Logprobs = &lp
		}
		resp.Choices = append(resp.Choices, cj)
	}
	writeJSON(o.w, http.StatusOK, resp)
}
