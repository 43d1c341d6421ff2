package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo/generate"
)

// job is a generation request's work: its prompts, each drawing N
// samples with the same options.
type job struct {
	prompts []graphs.Input
	lens    []int // each prompt's positions
	opts    generate.Options
	// newProc, when set, makes each sample's constraint processor; its
	// samples are then submitted one by one (a processor may keep its
	// sample's state).
	newProc func(promptLen int) generate.LogitsProcessor
}

// samples are a job's running samples, in choice order (prompt by prompt,
// N each), and the constraint failures of each.
type samples struct {
	list   []*generate.Sample
	mu     sync.Mutex
	failed map[int]error
}

func (ss *samples) fail(i int, err error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.failed == nil {
		ss.failed = map[int]error{}
	}
	if ss.failed[i] == nil {
		ss.failed[i] = err
	}
}

func (ss *samples) failure(i int) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.failed[i]
}

// submit hands a job to the engine.
func (s *Server) submit(ctx context.Context, j *job, param string) (*samples, *apiError) {
	ss := &samples{}
	eos := -1
	if len(s.g.EOS) > 0 {
		eos = s.g.EOS[0]
	}
	n := max(j.opts.N, 1)
	for p, in := range j.prompts {
		if j.newProc == nil {
			list, err := s.engine.Submit(ctx, in, j.opts)
			if err != nil {
				return nil, engineError(err, param)
			}
			ss.list = append(ss.list, list...)
			continue
		}
		for i := range n {
			o := j.opts
			o.N = 1
			o.Sampling.Seed += uint64(i)
			choice := p*n + i
			proc := guarded{p: j.newProc(j.lens[p]), eos: eos, failed: func(err error) { ss.fail(choice, err) }}
			o.Sampling.Extra = append([]generate.LogitsProcessor{proc}, j.opts.Sampling.Extra...)
			list, err := s.engine.Submit(ctx, in, o)
			if err != nil {
				return nil, engineError(err, param)
			}
			ss.list = append(ss.list, list...)
		}
	}
	return ss, nil
}

// event is a sample's token, or its end.
type event struct {
	choice int
	tok    generate.Token
	end    bool
	res    generate.Result
	err    error
}

// consumer receives a job's events in the handler's goroutine.
type consumer interface {
	token(choice int, tok generate.Token) error
	end(choice int, res generate.Result, err error) error
}

// consume reads every sample's tokens and end into c, one goroutine per
// sample, until all ended, c fails or ctx is done (then the samples are
// abandoned, which ends them in the engine). It measures the time to the
// first token and between tokens.
func (s *Server) consume(ctx context.Context, start time.Time, ss *samples, c consumer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan event)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the wait: the readers see it and stop
	for i, smp := range ss.list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tok := range smp.Tokens() {
				select {
				case ch <- event{choice: i, tok: tok}:
				case <-ctx.Done():
					return // leaving the loop ends the sample
				}
			}
			res, err := smp.Result()
			if err == nil {
				err = ss.failure(i)
			}
			select {
			case ch <- event{choice: i, end: true, res: res, err: err}:
			case <-ctx.Done():
			}
		}()
	}
	first := true
	last := make([]time.Time, len(ss.list))
	for left := len(ss.list); left > 0; {
		var ev event
		select {
		case ev = <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		if ev.end {
			left--
			if err := c.end(ev.choice, ev.res, ev.err); err != nil {
				return err
			}
			continue
		}
		if ev.tok.ID >= 0 {
			now := time.Now()
			if first {
				s.metrics.ttft.observe(now.Sub(start).Seconds())
				first = false
			}
			if t := last[ev.choice]; !t.IsZero() {
				s.metrics.itl.observe(now.Sub(t).Seconds())
			}
			last[ev.choice] = now
		}
		if err := c.token(ev.choice, ev.tok); err != nil {
			return err
		}
	}
	return nil
}

// finishReason is OpenAI's name for why a choice ended.
func finishReason(r generate.StopReason, calls bool) string {
	switch r {
	case generate.StopMaxTokens, generate.StopContextFull:
		return "length"
	}
	if calls {
		return "tool_calls"
	}
	return "stop"
}

// isEOS reports whether tok is the end-of-sequence token that ended its
// sample (no text, no log-probability in the answer).
func (s *Server) isEOS(tok generate.Token) bool {
	return tok.ID >= 0 && tok.Text == "" && slices.Contains(s.g.EOS, tok.ID)
}

// usage is a response's token counts.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func newUsage(prompt, completion int) *usage {
	return &usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

// sampleError is the API error of a sample that failed.
func sampleError(err error, param string) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return engineError(err, param)
}

// sampleFailed is the error a sample's end answers with: its own, or a
// cancellation when the client went away or the request was stopped.
func sampleFailed(res generate.Result, err error, param string) error {
	if err != nil {
		return sampleError(err, param)
	}
	if res.StopReason == generate.StopCancelled || res.StopReason == generate.StopCaller {
		return engineError(context.Canceled, "")
	}
	return nil
}

// promptTooLong checks a prompt against the context before submitting.
func (s *Server) promptTooLong(n int, param string) *apiError {
	if n >= s.opts.Context {
		return &apiError{Status: 400, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded",
			Message: fmt.Sprintf("the prompt is %d tokens, and this server's context is %d positions (--ctx), prompt and output together", n, s.opts.Context)}
	}
	if n == 0 {
		return invalid(param, "the prompt is empty")
	}
	return nil
}
