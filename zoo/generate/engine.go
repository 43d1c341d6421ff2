package generate

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gozoo/gozoo/graphs"
)

// EngineOptions tune an Engine.
type EngineOptions struct {
	// Batch configures the engine's graphs.Batch: its KV budget, block
	// size, prefix cache, fast mode and F16 cache. The sequences'
	// Capacity defaults to the model's context (capped as a Session's).
	Batch graphs.BatchOptions
	// MaxSeqs is the most sequences decoding at once (0: 64); further
	// requests wait.
	MaxSeqs int
	// MaxPrefillRows is the most prompt rows one step adds beside the
	// decode rows (0: 512): a long prompt is prefilled over several
	// steps, so that the others keep decoding.
	MaxPrefillRows int
}

// Engine generates for many requests at once: one goroutine runs steps
// of a graphs.Batch in which every running sequence decodes one token,
// and new prompts are prefilled beside them (continuous batching). Each
// request samples with its own options; a request with N samples forks
// its prompt's sequence N-1 times once it is prefilled. An Engine is safe
// for concurrent use.
type Engine struct {
	g      *Generator
	batch  *graphs.Batch
	opts   EngineOptions
	submit chan *job
	quit   chan struct{}
	done   chan struct{}
	closed atomic.Bool
	err    error // why the loop stopped, after done
	// full is set when the pool could not take a prompt: none is admitted
	// until a sequence ends.
	full        bool
	preemptions atomic.Int64

	statsMu sync.Mutex
	stats   EngineStats
}

// EngineStats is a snapshot of an engine's load, taken by its loop
// before each step and while it waits for work.
type EngineStats struct {
	// Waiting counts the requests submitted and not yet admitted (queued
	// for a sequence or for room in the KV pool, preempted samples
	// included); Prefilling the admitted requests whose prompts are being
	// prefilled; Running the samples decoding.
	Waiting, Prefilling, Running int
	// Steps counts the batch's steps so far.
	Steps int64
	// KVBudget, KVAllocated and KVInUse are the pool's budget, the bytes
	// of the blocks it has made, and those the sequences hold now (the
	// rest is free or held by the prefix cache).
	KVBudget, KVAllocated, KVInUse int64
	// Preemptions counts the samples that gave their blocks back to let
	// others grow; CachedTokens the prompt positions taken from the prefix
	// cache instead of computed.
	Preemptions, CachedTokens int64
}

// Stats returns the engine's load as of its loop's last look. It is safe
// to call from any goroutine.
func (e *Engine) Stats() EngineStats {
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	return e.stats
}

// record publishes the loop's state: called from the loop only, the one
// goroutine that uses the batch's pool.
func (e *Engine) record(pending, prefilling []*job, active []*running, steps, cached int64) {
	pool := e.batch.Pool()
	budget, made, inUse := pool.Budget(), pool.Bytes(), pool.InUse()
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	e.stats = EngineStats{
		Waiting: len(pending), Prefilling: len(prefilling), Running: len(active), Steps: steps,
		KVBudget: budget, KVAllocated: made, KVInUse: inUse,
		Preemptions: e.preemptions.Load(), CachedTokens: cached,
	}
}

// Preemptions counts the samples whose sequences gave their blocks back
// to let others grow, and were recomputed later.
func (e *Engine) Preemptions() int64 { return e.preemptions.Load() }

// NewEngine starts an engine on g's model. Close stops it.
func (g *Generator) NewEngine(opts EngineOptions) (*Engine, error) {
	if opts.MaxSeqs == 0 {
		opts.MaxSeqs = 64
	}
	if opts.MaxPrefillRows == 0 {
		opts.MaxPrefillRows = 512
	}
	if opts.MaxSeqs < 1 || opts.MaxPrefillRows < 1 {
		return nil, fmt.Errorf("engine: MaxSeqs %d and MaxPrefillRows %d must be positive", opts.MaxSeqs, opts.MaxPrefillRows)
	}
	// Each step's logits are sampled before the next step.
	opts.Batch.ReuseLogits = true
	b, err := graphs.NewBatch(g.Model, opts.Batch)
	if err != nil {
		return nil, err
	}
	e := &Engine{g: g, batch: b, opts: opts, submit: make(chan *job), quit: make(chan struct{}), done: make(chan struct{})}
	go e.loop()
	return e, nil
}

// Batch is the engine's graphs.Batch (for inspection: its pool).
func (e *Engine) Batch() *graphs.Batch { return e.batch }

// Close stops the engine: requests still running end with an error.
func (e *Engine) Close() error {
	if e.closed.CompareAndSwap(false, true) {
		close(e.quit)
	}
	<-e.done
	return e.batch.Close()
}

// Sample is one sequence a request generates: its tokens as they come,
// then its Result.
type Sample struct {
	ctx    context.Context
	mu     sync.Mutex
	queue  []Token
	notify chan struct{} // a token or the end is waiting
	ended  chan struct{}
	left   atomic.Bool // the reader stopped reading
	res    Result
	err    error
}

// Tokens yields the sample's tokens as the engine produces them; leaving
// the loop early ends the sample (StopCaller).
func (s *Sample) Tokens() iter.Seq[Token] {
	return func(yield func(Token) bool) {
		for {
			// Read whether it ended before draining: tokens queued before
			// the end are then all handed out.
			ended := false
			select {
			case <-s.ended:
				ended = true
			default:
			}
			if !s.drain(yield) {
				s.left.Store(true)
				return
			}
			if ended {
				return
			}
			select {
			case <-s.notify:
			case <-s.ended:
			}
		}
	}
}

// drain yields the queued tokens; false when the reader stopped.
func (s *Sample) drain(yield func(Token) bool) bool {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, t := range q {
		if !yield(t) {
			return false
		}
	}
	return true
}

// Result waits for the sample to end and returns it.
func (s *Sample) Result() (Result, error) {
	<-s.ended
	return s.res, s.err
}

func (s *Sample) emit(t Token) {
	s.mu.Lock()
	s.queue = append(s.queue, t)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *Sample) end(err error) {
	s.err = err
	close(s.ended)
}

// Submit queues a prompt and returns its samples (Options.N of them, at
// least one), which run as the engine gets to them. Cancelling ctx ends
// them (StopCancelled).
func (e *Engine) Submit(ctx context.Context, prompt graphs.Input, opts Options) ([]*Sample, error) {
	n := max(opts.N, 1)
	if opts.N < 0 {
		return nil, fmt.Errorf("N is %d: want 1 or more samples", opts.N)
	}
	if opts.ContextShift != nil {
		// The engine's sequences share a pool and stop at its capacity.
		return nil, errors.New("Options.ContextShift: the engine does not shift contexts; generate with Generator.Stream")
	}
	if n > e.opts.MaxSeqs {
		return nil, fmt.Errorf("%d samples exceed the engine's %d sequences at once (MaxSeqs)", n, e.opts.MaxSeqs)
	}
	rows := prompt.Len(e.g.Model.HiddenSize())
	if rows == 0 {
		return nil, errors.New("empty prompt: give at least one token")
	}
	if rows >= e.batch.Capacity() {
		return nil, fmt.Errorf("prompt of %d tokens does not fit the context of %d positions (it needs room for at least one more)", rows, e.batch.Capacity())
	}
	j := &job{ctx: ctx, prompt: prompt, opts: opts, rows: rows}
	for range n {
		j.samples = append(j.samples, &Sample{ctx: ctx, notify: make(chan struct{}, 1), ended: make(chan struct{}), res: Result{Prompt: slices.Clone(prompt.IDs), PromptLen: rows}})
	}
	select {
	case e.submit <- j:
		return j.samples, nil
	case <-e.done:
		return nil, fmt.Errorf("the engine stopped: %w", e.stopErr())
	case <-ctx.Done():
		for _, s := range j.samples {
			s.res.StopReason = StopCancelled
			s.end(nil)
		}
		return j.samples, nil
	}
}

func (e *Engine) stopErr() error {
	if e.err != nil {
		return e.err
	}
	return errors.New("closed")
}

// GenerateBatch runs every prompt to its end, each with its own options
// (one Options for all when opts has one entry), and returns each
// prompt's samples' results.
func (e *Engine) GenerateBatch(ctx context.Context, prompts []graphs.Input, opts []Options) ([][]Result, error) {
	if len(opts) != 1 && len(opts) != len(prompts) {
		return nil, fmt.Errorf("%d options for %d prompts: give one, or one per prompt", len(opts), len(prompts))
	}
	all := make([][]*Sample, len(prompts))
	for i, p := range prompts {
		o := opts[0]
		if len(opts) > 1 {
			o = opts[i]
		}
		s, err := e.Submit(ctx, p, o)
		if err != nil {
			return nil, fmt.Errorf("prompt %d: %w", i, err)
		}
		all[i] = s
	}
	out := make([][]Result, len(prompts))
	var errs []error
	for i, ss := range all {
		for _, s := range ss {
			r, err := s.Result()
			if err != nil {
				errs = append(errs, fmt.Errorf("prompt %d: %w", i, err))
			}
			out[i] = append(out[i], r)
		}
	}
	return out, errors.Join(errs...)
}

// job is a submitted prompt.
type job struct {
	ctx     context.Context
	prompt  graphs.Input
	opts    Options
	rows    int
	samples []*Sample
	seq     graphs.SeqID
	done    int // prompt rows prefilled
	started time.Time
	// resume is the preempted sample this job recomputes (prompt: its
	// prompt and tokens but the last, which it feeds next).
	resume *running
}

// resumeJob is the job that recomputes r's sequence once the pool has
// room again.
func (e *Engine) resumeJob(r *running) (*job, error) {
	p := r.job.prompt
	if p.IDs == nil {
		return nil, errors.New("the KV pool is full, and a prompt of embeddings cannot be recomputed after its sequence is preempted")
	}
	toks := r.s.res.Tokens
	in := graphs.Input{IDs: slices.Concat(p.IDs, toks[:len(toks)-1]), Embeds: p.Embeds, Replace: p.Replace}
	rows := in.Len(e.g.Model.HiddenSize())
	return &job{ctx: r.s.ctx, prompt: in, opts: r.job.opts, rows: rows, samples: []*Sample{r.s}, resume: r}, nil
}

// running is a sample being decoded.
type running struct {
	s       *Sample
	job     *job
	seq     graphs.SeqID
	f       *follow
	next    int // the token to feed
	started time.Time
}

// loop is the engine's goroutine.
func (e *Engine) loop() {
	defer close(e.done)
	var pending, prefilling []*job
	var active []*running
	var steps, cached int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.quit:
			cancel()
		case <-e.done:
		}
	}()
	defer func() {
		err := fmt.Errorf("the engine stopped: %w", e.stopErr())
		for _, j := range append(pending, prefilling...) {
			for _, s := range j.samples {
				s.end(err)
			}
		}
		for _, r := range active {
			r.s.end(err)
		}
	}()
	for {
		e.record(pending, prefilling, active, steps, cached)
		// Wait for work when there is none.
		if len(pending)+len(prefilling)+len(active) == 0 {
			select {
			case j := <-e.submit:
				pending = append(pending, j)
			case <-e.quit:
				return
			}
		}
		for more := true; more; {
			select {
			case j := <-e.submit:
				pending = append(pending, j)
			case <-e.quit:
				return
			default:
				more = false
			}
		}
		// Requests that were cancelled or abandoned end here.
		pending = slices.DeleteFunc(pending, func(j *job) bool { return e.dropJob(j, false) })
		prefilling = slices.DeleteFunc(prefilling, func(j *job) bool { return e.dropJob(j, true) })
		active = slices.DeleteFunc(active, e.dropRunning)

		// This step: every active sample's next token, the prompts being
		// prefilled, and new prompts while there is room.
		var feeds []graphs.Feed
		for _, r := range active {
			feeds = append(feeds, graphs.Feed{Seq: r.seq, Input: graphs.IDs(r.next)})
		}
		budget := e.opts.MaxPrefillRows
		seqs := len(active)
		for _, j := range prefilling {
			seqs += len(j.samples)
		}
		var admitted []*job
		for len(pending) > 0 && !e.full && seqs+len(pending[0].samples) <= e.opts.MaxSeqs && budget > 0 {
			j := pending[0]
			pending = pending[1:]
			j.seq, j.started = e.batch.Add(), time.Now()
			prefilling = append(prefilling, j)
			admitted = append(admitted, j)
			seqs += len(j.samples)
			budget -= min(budget, j.rows)
		}
		budget = e.opts.MaxPrefillRows
		var chunks []*job
		for _, j := range prefilling {
			if budget == 0 {
				break
			}
			n := min(budget, j.rows-j.done)
			budget -= n
			want := graphs.NoLogits
			if j.done+n == j.rows {
				want = graphs.LastLogits
			}
			feeds = append(feeds, graphs.Feed{Seq: j.seq, Input: j.prompt.Slice(j.done, j.done+n, e.g.Model.HiddenSize()), Logits: want})
			chunks = append(chunks, j)
		}
		if len(feeds) == 0 {
			continue
		}
		outs, err := e.batch.Run(ctx, feeds)
		if errors.Is(err, graphs.ErrPoolFull) {
			// Nothing ran. The newest prompt waits for a sequence to end
			// if others run; a prompt alone, or decode steps alone, that
			// do not fit fail.
			switch {
			case len(prefilling) > 0 && len(active)+len(prefilling) > 1:
				j := prefilling[len(prefilling)-1]
				prefilling = prefilling[:len(prefilling)-1]
				_ = e.batch.Remove(j.seq)
				j.done = 0
				pending = append([]*job{j}, pending...)
				e.full = true
			case len(prefilling) > 0:
				e.failJob(prefilling[0], err)
				prefilling = nil
			case len(active) > 1:
				// Preempt the newest sample: it gives its blocks back and
				// is recomputed from its tokens when there is room.
				r := active[len(active)-1]
				active = active[:len(active)-1]
				if j, err := e.resumeJob(r); err != nil {
					e.endRunning(r, err)
				} else {
					_ = e.batch.Remove(r.seq)
					pending = append([]*job{j}, pending...)
					e.full = true
					e.preemptions.Add(1)
				}
			default:
				e.endRunning(active[0], fmt.Errorf("the KV pool cannot hold the sequence: %w", err))
				active = nil
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.err = err
			return
		}
		steps++
		for k := range chunks {
			cached += int64(outs[len(feeds)-len(chunks)+k].Cached)
		}
		// Decode rows: sample each active sequence's next token.
		for i, r := range active {
			r.s.res.DecodeSteps++
			e.advance(r, outs[i].Logits[0])
		}
		active = slices.DeleteFunc(active, func(r *running) bool { return r.s.res.StopReason != "" || r.s.err != nil })
		// Prompt rows: a prompt prefilled in full starts its samples.
		for k, j := range chunks {
			o := outs[len(feeds)-len(chunks)+k]
			j.done += feeds[len(feeds)-len(chunks)+k].Input.Len(e.g.Model.HiddenSize())
			if j.done < j.rows {
				continue
			}
			prefilling = slices.DeleteFunc(prefilling, func(x *job) bool { return x == j })
			if r := j.resume; r != nil { // a preempted sample goes on
				r.seq = j.seq
				active = append(active, r)
				continue
			}
			for i, s := range j.samples {
				seq := j.seq
				if i > 0 {
					if seq, err = e.batch.Fork(j.seq); err != nil {
						s.end(err)
						continue
					}
				}
				opts := j.opts
				opts.Sampling.Seed += uint64(i)
				s.res.PrefillTime = time.Since(j.started)
				r := &running{s: s, job: j, seq: seq, f: newFollow(e.g, opts, j.prompt.IDs, &s.res), started: time.Now()}
				logits := o.Logits[0]
				if i < len(j.samples)-1 {
					logits = slices.Clone(logits) // the processors change it in place
				}
				e.advance(r, logits)
				if r.s.res.StopReason == "" && r.s.err == nil {
					active = append(active, r)
				}
			}
		}
	}
}

// advance picks r's next token from logits and hands it out; a sample
// that ends is removed from the batch.
func (e *Engine) advance(r *running, logits []float32) {
	tok, err := r.f.next(logits)
	if err != nil {
		e.endRunning(r, err)
		return
	}
	r.s.emit(tok)
	r.next = tok.ID
	if r.s.res.StopReason == "" {
		if n, err := e.batch.Len(r.seq); err == nil && n >= e.batch.Capacity() {
			r.s.res.StopReason = StopContextFull
		}
	}
	if r.s.res.StopReason != "" {
		e.endRunning(r, nil)
	}
}

func (e *Engine) endRunning(r *running, err error) {
	_ = e.batch.Remove(r.seq)
	e.full = false
	r.s.res.DecodeTime = time.Since(r.started)
	r.f.finish(func(t Token) bool { r.s.emit(t); return true })
	if err != nil && r.s.res.StopReason == "" {
		r.s.res.StopReason = StopCaller
	}
	r.s.end(err)
}

// dropRunning ends r when its reader left or its context is done.
func (e *Engine) dropRunning(r *running) bool {
	switch {
	case r.s.left.Load():
		r.s.res.StopReason = StopCaller
	case r.s.ctx.Err() != nil:
		r.s.res.StopReason = StopCancelled
	default:
		return false
	}
	e.endRunning(r, nil)
	return true
}

// dropJob ends a queued or prefilling job whose context is done or whose
// readers all left.
func (e *Engine) dropJob(j *job, started bool) bool {
	reason := StopReason("")
	if j.ctx.Err() != nil {
		reason = StopCancelled
	} else if !slices.ContainsFunc(j.samples, func(s *Sample) bool { return !s.left.Load() }) {
		reason = StopCaller
	}
	if reason == "" {
		return false
	}
	if started {
		_ = e.batch.Remove(j.seq)
		e.full = false
	}
	for _, s := range j.samples {
		s.res.StopReason = reason
		s.end(nil)
	}
	return true
}

func (e *Engine) failJob(j *job, err error) {
	_ = e.batch.Remove(j.seq)
	e.full = false
	for _, s := range j.samples {
		s.end(fmt.Errorf("prompt of %d tokens: %w", j.rows, err))
	}
}
