// Package generate turns a loaded zoo model into text: streaming token
// generation with sampling, stop conditions and timings, and the glue to
// the checkpoint's tokenizer, chat template and generation_config.json.
// It also scores continuations (ScorePairs) and pools hidden states into
// embeddings (Embed), many sequences at once through a graphs.Batch.
//
// Generation drives a Runner (append an input, position, capacity,
// reset): a graphs.Session by default, or anything else that computes
// logits. A Generator is safe for concurrent use: each generation takes a
// runner from a pool, and the default sessions share the model's weights.
package generate

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/grammar"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/tokenizer"
	"github.com/gozoo/gozoo/zoo"
)

// Tokenizer is what generation needs of a tokenizer.
type Tokenizer interface {
	Encode(text string, addSpecial bool) ([]int, error)
	Decode(ids []int, skipSpecial bool) (string, error)
}

// Options control one generation.
type Options struct {
	// MaxTokens caps the generated tokens (0: until a stop condition or a
	// full context).
	MaxTokens int
	Sampling  Sampling
	// Stop ends generation when the text contains one of these strings;
	// the text stops before it.
	Stop []string
	// IgnoreEOS keeps generating past end-of-sequence tokens.
	IgnoreEOS bool
	// Progress, when set, is called after each chunk of the prompt is
	// prefilled, with the prompt rows done so far and the total.
	Progress func(done, total int)
	// Logprobs sets each Token's Logprob; TopLogprobs > 0 also lists
	// that many most likely tokens.
	Logprobs    bool
	TopLogprobs int
	// N is the number of samples an Engine draws for the prompt (0: one),
	// sharing its prefill; sample i samples with Seed + i.
	N int
	// ContextShift, when set, makes room when the context is full instead
	// of stopping: the first Keep positions stay, half of the rest is
	// dropped and the later keys move down (llama.cpp's context shift).
	// The Runner must be a Shifter (a *graphs.Session is).
	ContextShift *ContextShift
}

// ContextShift is what a full context keeps: its first Keep positions
// (a system prompt, say). Each shift drops n_discard = (n_past − Keep)/2
// positions after them, as llama.cpp's server does, and the keys after
// those are re-rotated to their new positions; what the model attended to
// before is gone, so generation goes on over a shorter context.
type ContextShift struct {
	Keep int
}

// Shifter is a Runner that can drop positions keep..keep+discard-1 and
// move the later ones down (graphs.Session.Shift).
type Shifter interface {
	Shift(keep, discard int) error
}

// Runner computes next-token logits over a growing context: what
// generation needs of a model. *graphs.Session is one.
type Runner interface {
	// AppendInput runs an input at the current position and returns the
	// logits of its last row.
	AppendInput(in graphs.Input) ([]float32, error)
	// Pos is the number of positions in context.
	Pos() int
	// Capacity is the number of positions the runner holds.
	Capacity() int
	// Reset empties the context.
	Reset()
}

// ContextRunner is a Runner whose appends stop when a context is done,
// with an error wrapping ctx.Err(): inside a long step rather than only
// between steps. *graphs.Session is one (it checks between decoder
// layers). Generation uses it when the Runner has it.
type ContextRunner interface {
	Runner
	AppendInputContext(ctx context.Context, in graphs.Input) ([]float32, error)
}

// appendInput runs in on r, through its context variant when it has one.
func appendInput(ctx context.Context, r Runner, in graphs.Input) ([]float32, error) {
	if cr, ok := r.(ContextRunner); ok {
		return cr.AppendInputContext(ctx, in)
	}
	return r.AppendInput(in)
}

// cancelled reports whether err is the stream's context ending (checked
// after a runner failed: a runner stopped by the context says so).
func (s *Stream) cancelled(err error) bool {
	cerr := s.ctx.Err()
	return cerr != nil && errors.Is(err, cerr)
}

// preparer is a Runner that can build what a prompt of n tokens will need
// ahead of time, so that the prefill timing measures running it.
type preparer interface{ Prepare(n int) error }

// prefillChunk is how many prompt rows go to the runner at once: the unit
// of Options.Progress.
const prefillChunk = 256

// Token is one step of a stream: the token chosen and the text it
// completes. Text can be empty while bytes of a UTF-8 character, or the
// start of a possible stop string, are held back; a last Token with ID -1
// carries held-back text when generation ends.
type Token struct {
	ID   int
	Text string
	// Logprob is the token's log-probability under the model
	// (log_softmax of the logits, before any sampling processor), and
	// TopLogprobs the most likely tokens with theirs, most likely first:
	// set when Options.Logprobs or TopLogprobs asks for them.
	Logprob     float64
	TopLogprobs []TokenLogprob
}

// TokenLogprob is a token with its log-probability.
type TokenLogprob struct {
	ID      int     `json:"id"`
	Logprob float64 `json:"logprob"`
}

// StopReason says why a generation ended.
type StopReason string

const (
	StopEOS         StopReason = "eos"
	StopMaxTokens   StopReason = "max_tokens"
	StopString      StopReason = "stop_string"
	StopContextFull StopReason = "context_full"
	StopCancelled   StopReason = "cancelled" // the context was cancelled
	StopCaller      StopReason = "caller"    // the caller stopped reading the stream
)

// Result is a finished generation.
type Result struct {
	Prompt     []int
	PromptLen  int
	Tokens     []int
	Text       string
	StopReason StopReason
	// SetupTime is spent building and compiling graphs (once per pooled
	// session and prompt shape); PrefillTime covers the prompt; DecodeTime
	// the steps after it, sampling included. Prompt holds the prompt's
	// ids (nil for an embeddings prompt).
	SetupTime, PrefillTime, DecodeTime time.Duration
	DecodeSteps                        int
	// Shifts counts the context shifts (Options.ContextShift) that made
	// room during generation, and Discarded the positions they dropped.
	Shifts, Discarded int
}

// PrefillTokS is the prompt throughput in tokens per second.
func (r Result) PrefillTokS() float64 { return rate(r.PromptLen, r.PrefillTime) }

// DecodeTokS is the generation throughput in tokens per second.
func (r Result) DecodeTokS() float64 { return rate(r.DecodeSteps, r.DecodeTime) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generator generates with one model.
type Generator struct {
	Model zoo.Model
	// Tokenizer turns ids into text; nil streams ids with empty text.
	Tokenizer Tokenizer
	// Defaults are the options of a generation that sets none (from
	// generation_config.json when loaded with Load).
	Defaults Options
	// EOS are the end-of-sequence ids.
	EOS []int
	// Template is the checkpoint's chat template (nil if it ships none).
	Template *chat.Template
	// SessionOptions configure the pooled sessions of the default runner.
	SessionOptions graphs.Options
	// NewRunner, when set, makes the runners instead of graphs.NewSession.
	NewRunner func() (Runner, error)

	templateErr error

	mu   sync.Mutex
	free []Runner

	// vocab is the vocabulary for constrained decoding (GrammarVocab);
	// constraints the last ones made, most recent first (grammar.go).
	vocabMu     sync.Mutex
	vocab       *grammar.Vocab
	constraints []cachedConstraint
}

// New makes a Generator for model with the EOS ids its config names.
func New(model zoo.Model, tok Tokenizer) *Generator {
	return &Generator{Model: model, Tokenizer: tok, EOS: slices.Clone(model.EOSTokenIDs()), Defaults: Options{Sampling: Sampling{Temperature: 1, TopP: 1, RepetitionPenalty: 1}}}
}

func (g *Generator) runner() (Runner, error) {
	g.mu.Lock()
	if n := len(g.free); n > 0 {
		s := g.free[n-1]
		g.free = g.free[:n-1]
		g.mu.Unlock()
		s.Reset()
		return s, nil
	}
	g.mu.Unlock()
	if g.NewRunner != nil {
		return g.NewRunner()
	}
	// A generation samples each step's logits before the next step, so
	// its sessions may hand them out in one reused buffer.
	opts := g.SessionOptions
	opts.ReuseLogits = true
	return graphs.NewSession(g.Model, opts)
}

func (g *Generator) release(s Runner) {
	g.mu.Lock()
	g.free = append(g.free, s)
	g.mu.Unlock()
}

// Close releases the pooled sessions.
func (g *Generator) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for _, s := range g.free {
		if c, ok := s.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	g.free = nil
	return errors.Join(errs...)
}

// Encode tokenizes text with the tokenizer's special tokens (BOS and the
// like) added.
func (g *Generator) Encode(text string) ([]int, error) {
	if g.Tokenizer == nil {
		return nil, errors.New("generator has no tokenizer")
	}
	return g.Tokenizer.Encode(text, true)
}

// Generate runs one generation to its end.
func (g *Generator) Generate(ctx context.Context, prompt []int, opts Options) (Result, error) {
	s := g.Stream(ctx, prompt, opts)
	for range s.Tokens() {
	}
	return s.Result()
}

// Stream prepares a generation; range over Tokens() to run it, then read
// Result(). It runs in the caller's goroutine, starts none, and stops
// within one token of ctx being cancelled or the loop being left; during
// the prompt, between chunks and, with a ContextRunner such as the
// default graphs.Session, between decoder layers. A cancelled generation
// is not an error: its Result has StopReason StopCancelled and the tokens
// made before it.
func (g *Generator) Stream(ctx context.Context, prompt []int, opts Options) *Stream {
	return g.StreamInput(ctx, graphs.Input{IDs: prompt}, opts)
}

// StreamInput is Stream from any input: ids, embeddings, or ids with rows
// replaced by embeddings (a vision-language prompt).
func (g *Generator) StreamInput(ctx context.Context, prompt graphs.Input, opts Options) *Stream {
	return &Stream{g: g, ctx: ctx, prompt: prompt, opts: opts}
}

// Stream is one generation.
type Stream struct {
	g      *Generator
	ctx    context.Context
	prompt graphs.Input
	opts   Options
	res    Result
	err    error
	ran    bool
}

// Result returns the finished generation (after Tokens has been ranged over).
func (s *Stream) Result() (Result, error) {
	if !s.ran {
		return Result{}, errors.New("generation has not run: range over Tokens() first")
	}
	return s.res, s.err
}

// Tokens runs the generation, yielding tokens as they are produced.
func (s *Stream) Tokens() iter.Seq[Token] {
	return func(yield func(Token) bool) {
		if s.ran {
			s.err = errors.New("a Stream runs once")
			return
		}
		s.ran = true
		s.err = s.run(yield)
	}
}

func (s *Stream) run(yield func(Token) bool) error {
	g, opts := s.g, s.opts
	s.res.Prompt = slices.Clone(s.prompt.IDs)
	n := s.prompt.Len(g.Model.HiddenSize())
	s.res.PromptLen = n
	if n == 0 {
		return errors.New("empty prompt: give at least one token")
	}
	sess, err := g.runner()
	if err != nil {
		return err
	}
	defer g.release(sess)
	if n >= sess.Capacity() {
		return fmt.Errorf("prompt of %d tokens does not fit the context of %d positions (it needs room for at least one more)", n, sess.Capacity())
	}
	if cs := opts.ContextShift; cs != nil {
		if _, ok := sess.(Shifter); !ok {
			return fmt.Errorf("Options.ContextShift: the runner %T cannot shift its context", sess)
		}
		if cs.Keep < 0 || cs.Keep > sess.Capacity()-2 {
			return fmt.Errorf("Options.ContextShift.Keep %d: want 0..%d, leaving room to drop a position of the context of %d", cs.Keep, sess.Capacity()-2, sess.Capacity())
		}
	}
	if err := s.ctx.Err(); err != nil {
		s.res.StopReason = StopCancelled
		return nil
	}

	t0 := time.Now()
	if p, ok := sess.(preparer); ok {
		if err := p.Prepare(min(n, prefillChunk)); err != nil {
			return err
		}
	}
	s.res.SetupTime = time.Since(t0)
	if s.ctx.Err() != nil { // building graphs can take a while
		s.res.StopReason = StopCancelled
		return nil
	}
	t0 = time.Now()
	var logits []float32
	for done := 0; done < n; {
		if s.ctx.Err() != nil {
			s.res.StopReason = StopCancelled
			return nil
		}
		end := min(n, done+prefillChunk)
		if logits, err = appendInput(s.ctx, sess, s.prompt.Slice(done, end, g.Model.HiddenSize())); err != nil {
			if s.cancelled(err) {
				s.res.StopReason = StopCancelled
				return nil
			}
			if n > prefillChunk {
				return fmt.Errorf("prompt rows %d..%d: %w", done, end-1, err)
			}
			return err
		}
		done = end
		if opts.Progress != nil {
			opts.Progress(done, n)
		}
	}
	s.res.PrefillTime = time.Since(t0)

	f := newFollow(g, opts, s.prompt.IDs, &s.res)
	t0 = time.Now()
	defer func() { s.res.DecodeTime = time.Since(t0) }()
	for {
		if s.ctx.Err() != nil {
			s.res.StopReason = StopCancelled
			break
		}
		tok, err := f.next(logits)
		if err != nil {
			return err
		}
		if !yield(tok) {
			s.res.StopReason = StopCaller
			break
		}
		if s.res.StopReason != "" {
			break
		}
		if sess.Pos() >= sess.Capacity() {
			cs := opts.ContextShift
			if cs == nil {
				s.res.StopReason = StopContextFull
				break
			}
			// llama.cpp's server: n_discard = (n_past - n_keep) / 2.
			past := sess.Pos()
			discard := (past - cs.Keep) / 2
			if err := sess.(Shifter).Shift(cs.Keep, discard); err != nil {
				return fmt.Errorf("context shift at %d positions (keep %d, discard %d): %w", past, cs.Keep, discard, err)
			}
			s.res.Shifts++
			s.res.Discarded += discard
		}
		if logits, err = appendInput(s.ctx, sess, graphs.Input{IDs: []int{tok.ID}}); err != nil {
			if s.cancelled(err) {
				s.res.StopReason = StopCancelled
				break
			}
			return err
		}
		s.res.DecodeSteps++
	}
	f.finish(yield)
	return nil
}

// follow is one generation's choice of tokens: the sampler, the text
// stream with its stop strings, and the result it fills in.
type follow struct {
	g    *Generator
	opts Options
	sm   *sampler
	text *textStream
	res  *Result
	raw  []float32 // the logits before the processors, for log-probabilities
}

func newFollow(g *Generator, opts Options, prompt []int, res *Result) *follow {
	return &follow{g: g, opts: opts, sm: newSampler(opts.Sampling, prompt), text: newTextStream(g.Tokenizer, opts.Stop), res: res}
}

// next picks a token from logits (which the processors change in place)
// and records it. When generation ends with it, res.StopReason says why:
// an EOS token (handed out with no text), a stop string, or MaxTokens.
func (f *follow) next(logits []float32) (Token, error) {
	var lp *tokenLogprobs
	if f.opts.Logprobs || f.opts.TopLogprobs > 0 {
		f.raw = append(f.raw[:0], logits...)
	}
	id := f.sm.next(logits)
	f.sm.observe(id)
	f.res.Tokens = append(f.res.Tokens, id)
	tok := Token{ID: id}
	if f.raw != nil {
		lp = logprobsOf(f.raw, id, f.opts.TopLogprobs)
		tok.Logprob, tok.TopLogprobs = lp.chosen, lp.top
	}
	if !f.opts.IgnoreEOS && slices.Contains(f.g.EOS, id) {
		f.res.StopReason = StopEOS
		return tok, nil
	}
	piece, stopped, err := f.text.push(id)
	if err != nil {
		return Token{}, err
	}
	tok.Text = piece
	switch {
	case stopped:
		f.res.StopReason = StopString
	case f.opts.MaxTokens > 0 && len(f.res.Tokens) >= f.opts.MaxTokens:
		f.res.StopReason = StopMaxTokens
	}
	return tok, nil
}

// finish hands out held-back text and sets the result's text.
func (f *follow) finish(yield func(Token) bool) {
	if rest := f.text.flush(); rest != "" && f.res.StopReason != StopCaller {
		yield(Token{ID: -1, Text: rest})
	}
	f.res.Text = f.text.text()
}

// textStream turns generated ids into text as they come, and holds back
// any suffix that could be the start of a stop string.
type textStream struct {
	dec     pieceDecoder // nil: no tokenizer, no text
	stops   []string
	all     string // text of the ids so far
	emitted int    // bytes of all already handed out
	cut     int    // -1, or where a stop string starts
}

// pieceDecoder yields the text each new id completes, never half a UTF-8
// character; flush returns what is still held back at the end.
type pieceDecoder interface {
	Push(id int) (string, error)
	Flush() (string, error)
}

// streamingTokenizer is a Tokenizer with its own incremental decoder (the
// zoo's tokenizer has one); others are decoded whole on every step.
type streamingTokenizer interface {
	NewStreamDecoder(skipSpecial bool) *tokenizer.StreamDecoder
}

func newTextStream(tok Tokenizer, stops []string) *textStream {
	t := &textStream{cut: -1}
	for _, s := range stops {
		if s != "" {
			t.stops = append(t.stops, s)
		}
	}
	switch tk := tok.(type) {
	case nil:
	case streamingTokenizer:
		t.dec = tk.NewStreamDecoder(true)
	default:
		t.dec = &wholeDecoder{tok: tok}
	}
	return t
}

func (t *textStream) push(id int) (piece string, stopped bool, err error) {
	if t.dec == nil {
		return "", false, nil
	}
	more, err := t.dec.Push(id)
	if err != nil {
		return "", false, err
	}
	return t.add(more)
}

// add appends decoded text and returns what may be handed out now.
func (t *textStream) add(more string) (piece string, stopped bool, err error) {
	from := max(0, len(t.all)-t.maxStop()) // a stop string may span the seam
	t.all += more
	for _, s := range t.stops {
		if i := strings.Index(t.all[from:], s); i >= 0 && (t.cut < 0 || from+i < t.cut) {
			t.cut = from + i
		}
	}
	if t.cut >= 0 {
		piece = t.all[t.emitted:max(t.emitted, t.cut)]
		t.emitted = max(t.emitted, t.cut)
		return piece, true, nil
	}
	end := len(t.all) - t.holdBack()
	if end > t.emitted {
		piece = t.all[t.emitted:end]
		t.emitted = end
	}
	return piece, false, nil
}

func (t *textStream) maxStop() int {
	n := 0
	for _, s := range t.stops {
		n = max(n, len(s))
	}
	return n
}

// holdBack is how many trailing bytes must wait because they could begin
// a stop string.
func (t *textStream) holdBack() int {
	hold := 0
	for _, s := range t.stops {
		for k := min(len(s)-1, len(t.all)); k > hold; k-- {
			if strings.HasSuffix(t.all, s[:k]) {
				hold = k
				break
			}
		}
	}
	// Never split a UTF-8 character.
	for hold > 0 && hold < len(t.all) && !utf8.RuneStart(t.all[len(t.all)-hold]) {
		hold++
	}
	return hold
}

// flush returns the held-back text when generation ends.
func (t *textStream) flush() string {
	if t.dec != nil && t.cut < 0 {
		if rest, err := t.dec.Flush(); err == nil {
			t.all += rest
		}
	}
	end := len(t.all)
	if t.cut >= 0 {
		end = t.cut
	}
	if end <= t.emitted {
		return ""
	}
	rest := t.all[t.emitted:end]
	t.emitted = end
	return rest
}

func (t *textStream) text() string {
	if t.cut >= 0 {
		return t.all[:t.cut]
	}
	return t.all
}

// wholeDecoder decodes every id so far on each step and hands out the new
// text, holding back a trailing U+FFFD (a character still incomplete): for
// tokenizers without an incremental decoder of their own.
type wholeDecoder struct {
	tok  Tokenizer
	ids  []int
	done int // bytes handed out
}

func (w *wholeDecoder) Push(id int) (string, error) {
	w.ids = append(w.ids, id)
	s, err := w.tok.Decode(w.ids, true)
	if err != nil {
		return "", err
	}
	end := len(s)
	for strings.HasSuffix(s[:end], "\uFFFD") {
		end -= len("\uFFFD")
	}
	if end <= w.done {
		return "", nil
	}
	out := s[w.done:end]
	w.done = end
	return out, nil
}

func (w *wholeDecoder) Flush() (string, error) {
	s, err := w.tok.Decode(w.ids, true)
	if err != nil || len(s) <= w.done {
		return "", err
	}
	out := s[w.done:]
	w.done = len(s)
	return out, nil
}
