package generate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gozoo/gozoo/internal/leaktest"
	"github.com/gozoo/gozoo/zoo"
)

// soakJob is one generation of a soak: its prompt and options, and how it
// is cancelled, if it is.
type soakJob struct {
	prompt []int
	opts   Options
	// cancelAt > 0 cancels from the token loop once that many tokens
	// came; cancelAfter > 0 cancels from a timer, wherever the
	// generation is then (prompt, layers or decode steps).
	cancelAt    int
	cancelAfter time.Duration
}

// soakJobs makes n generations with different prompts, seeds and
// samplers; every third is cancelled from its loop midway, every fourth
// from a timer.
func soakJobs(n int) []soakJob {
	jobs := make([]soakJob, n)
	for i := range jobs {
		j := soakJob{
			prompt: testPrompt(3+(i*7)%29, i),
			opts:   Options{MaxTokens: 12 + i%5, IgnoreEOS: true, Stop: []string{"zz"}},
		}
		switch i % 3 {
		case 0: // greedy
		case 1:
			j.opts.Sampling = Sampling{DoSample: true, Temperature: 0.8, TopK: 40, Seed: uint64(i + 1)}
		case 2:
			j.opts.Sampling = Sampling{DoSample: true, Temperature: 1.1, TopP: 0.9, RepetitionPenalty: 1.2, Seed: uint64(100 + i)}
		}
		if i%3 == 1 {
			j.cancelAt = 2 + i%4
		}
		if i%4 == 3 {
			j.cancelAfter = time.Duration(50*(1+i%5)) * time.Microsecond
		}
		jobs[i] = j
	}
	return jobs
}

// run runs one job on g and returns its result.
func (j soakJob) run(g *Generator) (Result, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if j.cancelAfter > 0 {
		t := time.AfterFunc(j.cancelAfter, cancel)
		defer t.Stop()
	}
	s := g.Stream(ctx, j.prompt, j.opts)
	n := 0
	for range s.Tokens() {
		if n++; j.cancelAt > 0 && n == j.cancelAt {
			cancel()
		}
	}
	return s.Result()
}

// alone runs each job by itself, uncancelled, on a generator of its own
// over the same model: the results the soak must reproduce.
func alone(t testing.TB, m zoo.Model, jobs []soakJob) []Result {
	t.Helper()
	g := New(m, letters{})
	g.SessionOptions.Capacity = 64
	defer g.Close()
	out := make([]Result, len(jobs))
	for i, j := range jobs {
		j.cancelAt, j.cancelAfter = 0, 0
		res, err := j.run(g)
		if err != nil {
			t.Fatalf("job %d alone: %v", i, err)
		}
		out[i] = res
	}
	return out
}

// soak runs the jobs at once on one generator over m and checks each
// result against the job run alone: equal when it completed (tokens,
// text, stop reason), a prefix when it was cancelled.
func soak(t testing.TB, g *Generator, jobs []soakJob, want []Result) (cancelled int) {
	t.Helper()
	results := make([]Result, len(jobs))
	errs := make([]error, len(jobs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = j.run(g)
		}()
	}
	close(start)
	wg.Wait()
	for i, res := range results {
		w := want[i]
		switch {
		case errs[i] != nil:
			t.Errorf("job %d: %v", i, errs[i])
		case res.StopReason == StopCancelled:
			cancelled++
			if len(res.Tokens) > len(w.Tokens) || !slices.Equal(res.Tokens, w.Tokens[:len(res.Tokens)]) {
				t.Errorf("job %d, cancelled: tokens %v are not a prefix of %v, its tokens alone", i, res.Tokens, w.Tokens)
			}
		case jobs[i].cancelAt > 0 && jobs[i].cancelAt < len(w.Tokens):
			t.Errorf("job %d: cancelled after %d tokens but ended %s with %d", i, jobs[i].cancelAt, res.StopReason, len(res.Tokens))
		case !slices.Equal(res.Tokens, w.Tokens) || res.Text != w.Text || res.StopReason != w.StopReason:
			t.Errorf("job %d: %v %q (%s) at once, %v %q (%s) alone", i, res.Tokens, res.Text, res.StopReason, w.Tokens, w.Text, w.StopReason)
		}
	}
	return cancelled
}

// TestSoak: 8 generations at once on one loaded model, with different
// prompts, seeds and samplers, some cancelled midway. Each that completes
// equals the same generation run alone; each cancelled one is a prefix of
// it. Run twice on the same generator, so the second round reuses pooled
// sessions that cancelled runs left. Meant for -race.
func TestSoak(t *testing.T) {
	m := tinyRandom(t)
	jobs := soakJobs(8)
	want := alone(t, m, jobs)
	g := New(m, letters{})
	g.SessionOptions.Capacity = 64
	defer g.Close()
	cancelled := 0
	for round := 0; round < 2; round++ {
		cancelled += soak(t, g, jobs, want)
	}
	if cancelled < 2*3 { // jobs 1, 4 and 7 cancel from their loop
		t.Errorf("%d generations were cancelled, want at least the 6 cancelled from their loop", cancelled)
	}
	leaktest.VerifyNone(t)
}

// BenchmarkSoak runs 64 generations at once on one model, a quarter
// cancelled by timers and a third from their loop, checking each against
// its run alone.
func BenchmarkSoak(b *testing.B) {
	for _, n := range []int{64} {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			m := tinyRandom(b)
			jobs := soakJobs(n)
			want := alone(b, m, jobs)
			g := New(m, letters{})
			g.SessionOptions.Capacity = 64
			defer g.Close()
			b.ResetTimer()
			for b.Loop() {
				soak(b, g, jobs, want)
			}
		})
	}
}
