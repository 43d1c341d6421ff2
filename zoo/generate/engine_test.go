package generate

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/leaktest"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

func newEngine(t testing.TB, g *Generator, opts EngineOptions) *Engine {
	t.Helper()
	if opts.Batch.Capacity == 0 {
		opts.Batch.Capacity = 64
	}
	e, err := g.NewEngine(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// runSample reads a sample to its end, cancelling after cancelAt tokens
// when cancelAt > 0.
func runSample(s *Sample, cancel func(), cancelAt int) (Result, error) {
	n := 0
	for range s.Tokens() {
		if n++; cancelAt > 0 && n == cancelAt {
			cancel()
		}
	}
	return s.Result()
}

// TestEngineSoak: 64 generations submitted at once to one engine, with
// different prompts, lengths, seeds and samplers; every third is
// cancelled from its loop, every fourth by a timer, and some draw two
// samples from one prefill (a fork). Each that completes equals the same
// generation run alone on a Session; each cancelled one is a prefix of
// it. Run with a KV budget that holds every sequence, and with the
// default one (two sequences of the full context), so tight that samples
// are preempted and recomputed. Meant for -race.
func TestEngineSoak(t *testing.T) {
	m := tinyRandom(t)
	for _, c := range []struct {
		name    string
		budget  int64
		preempt bool
	}{{"room for all", graphs.KVBytes(m, 48*80, false), false}, {"default budget", 0, true}} {
		t.Run(c.name, func(t *testing.T) { engineSoak(t, m, c.budget, c.preempt) })
	}
}

func engineSoak(t *testing.T, m zoo.Model, budget int64, preempt bool) {
	jobs := soakJobs(64)
	for i := range jobs {
		if i%5 == 2 {
			jobs[i].opts.N = 2
		}
	}
	// The second sample of a job samples with Seed+1: alone, it is the
	// job with that seed.
	var aloneJobs []soakJob
	for _, j := range jobs {
		aloneJobs = append(aloneJobs, j)
		if j.opts.N == 2 {
			k := j
			k.opts.Sampling.Seed++
			aloneJobs = append(aloneJobs, k)
		}
	}
	want := alone(t, m, aloneJobs)
	g := New(m, letters{})
	e := newEngine(t, g, EngineOptions{MaxSeqs: 48, MaxPrefillRows: 40, Batch: graphs.BatchOptions{BlockTokens: 8, KVBudget: budget}})
	type outcome struct {
		res Result
		err error
	}
	results := make([][]outcome, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		ctx, cancel := context.WithCancel(context.Background())
		if j.cancelAfter > 0 {
			tm := timeAfter(j.cancelAfter, cancel)
			defer tm.Stop()
		}
		samples, err := e.Submit(ctx, graphs.IDs(j.prompt...), j.opts)
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		results[i] = make([]outcome, len(samples))
		for k, s := range samples {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := runSample(s, cancel, j.cancelAt)
				results[i][k] = outcome{r, err}
			}()
		}
		defer cancel()
	}
	wg.Wait()
	w, cancelled, forked := 0, 0, 0
	for i, rs := range results {
		for k, o := range rs {
			ref := want[w]
			w++
			if k > 0 {
				forked++
			}
			res := o.res
			switch {
			case o.err != nil:
				t.Errorf("job %d sample %d: %v", i, k, o.err)
			case res.StopReason == StopCancelled:
				cancelled++
				if len(res.Tokens) > len(ref.Tokens) || !slices.Equal(res.Tokens, ref.Tokens[:len(res.Tokens)]) {
					t.Errorf("job %d sample %d, cancelled: tokens %v are not a prefix of %v, alone", i, k, res.Tokens, ref.Tokens)
				}
			case !slices.Equal(res.Tokens, ref.Tokens) || res.Text != ref.Text || res.StopReason != ref.StopReason:
				t.Errorf("job %d sample %d: %v %q (%s) batched, %v %q (%s) alone", i, k, res.Tokens, res.Text, res.StopReason, ref.Tokens, ref.Text, ref.StopReason)
			}
		}
	}
	if cancelled < 10 || forked < 10 {
		t.Errorf("%d samples cancelled and %d forked: the soak did not exercise them", cancelled, forked)
	}
	if got := e.Preemptions(); (got > 0) != preempt {
		t.Errorf("%d samples preempted, want preemptions %v", got, preempt)
	}
	t.Logf("%d samples preempted", e.Preemptions())
	if n := e.Batch().Pool().InUse(); n != 0 {
		t.Errorf("the pool holds %d bytes of blocks after every sample ended", n)
	}
	e.Close()
	leaktest.VerifyNone(t)
}

// TestEngineLogprobs: greedy generation with log-probabilities on the
// golden checkpoint; each token's log-probability and its top 5 equal
// log_softmax of the golden step logits (transformers' float32).
func TestEngineLogprobs(t *testing.T) {
	g := newGen(t)
	prompt, greedy := goldenGreedy(t)
	f, err := loaders.OpenSafetensors(filepath.Join(goldenDir, "golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stepLogits, _, err := f.Float32s("greedy_logits")
	if err != nil {
		t.Fatal(err)
	}
	V := g.Model.VocabSize()
	e := newEngine(t, g, EngineOptions{})
	opts := Options{MaxTokens: len(greedy), IgnoreEOS: true, Logprobs: true, TopLogprobs: 5}
	// Beside it, other prompts run, so the check covers batched rows.
	others := []graphs.Input{graphs.IDs(testPrompt(9, 1)...), graphs.IDs(testPrompt(3, 2)...)}
	res, err := e.GenerateBatch(context.Background(), append([]graphs.Input{graphs.IDs(prompt...)}, others...), []Options{opts})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res[0][0].Tokens, greedy) {
		t.Fatalf("tokens %v, golden %v", res[0][0].Tokens, greedy)
	}
	samples, err := e.Submit(context.Background(), graphs.IDs(prompt...), opts)
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for tok := range samples[0].Tokens() {
		if tok.ID < 0 {
			continue
		}
		row := stepLogits[k*V : (k+1)*V]
		lse := refLogSumExp(row)
		if want := float64(row[tok.ID]) - lse; math.Abs(tok.Logprob-want) > 1e-4 {
			t.Errorf("step %d: log-probability %g, golden %g", k, tok.Logprob, want)
		}
		order := make([]int, V)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case row[a] > row[b]:
				return -1
			case row[a] < row[b]:
				return 1
			}
			return 0
		})
		if len(tok.TopLogprobs) != 5 {
			t.Fatalf("step %d: %d top log-probabilities, want 5", k, len(tok.TopLogprobs))
		}
		for i, tl := range tok.TopLogprobs {
			if want := float64(row[order[i]]) - lse; tl.ID != order[i] || math.Abs(tl.Logprob-want) > 1e-4 {
				t.Errorf("step %d top %d: token %d (%g), golden %d (%g)", k, i, tl.ID, tl.Logprob, order[i], want)
			}
		}
		k++
	}
	if k != len(greedy) {
		t.Fatalf("%d tokens, want %d", k, len(greedy))
	}
}

// refLogSumExp is log Σ exp(x), summed in float64 from the largest term.
func refLogSumExp(x []float32) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s)
}

// TestEngineRefusesWhatCannotFit: a prompt longer than the pool's budget
// fails with ErrPoolFull, alone; the other requests run to their end
// unharmed.
func TestEngineRefusesWhatCannotFit(t *testing.T) {
	m := tinyRandom(t)
	g := New(m, letters{})
	budget := graphs.KVBytes(m, 40, false)
	e := newEngine(t, g, EngineOptions{Batch: graphs.BatchOptions{Options: graphs.Options{Capacity: 200}, KVBudget: budget, BlockTokens: 8}})
	short := Options{MaxTokens: 4, IgnoreEOS: true}
	want := alone(t, m, []soakJob{{prompt: testPrompt(5, 1), opts: short}})
	big, err := e.Submit(context.Background(), graphs.IDs(testPrompt(150, 2)...), short)
	if err != nil {
		t.Fatal(err)
	}
	small, err := e.Submit(context.Background(), graphs.IDs(testPrompt(5, 1)...), short)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big[0].Result(); !errors.Is(err, graphs.ErrPoolFull) {
		t.Errorf("a prompt larger than the pool: %v, want ErrPoolFull", err)
	}
	res, err := small[0].Result()
	if err != nil || !slices.Equal(res.Tokens, want[0].Tokens) {
		t.Errorf("the small request beside it: %v %v, want %v", res.Tokens, err, want[0].Tokens)
	}
	if _, err := e.Submit(context.Background(), graphs.IDs(), short); err == nil {
		t.Error("an empty prompt was accepted")
	}
	if _, err := e.Submit(context.Background(), graphs.IDs(1), Options{N: 1000}); err == nil {
		t.Error("1000 samples were accepted by an engine of 64 sequences")
	}
}

func timeAfter(d time.Duration, f func()) *time.Timer { return time.AfterFunc(d, f) }

// TestEngineStats: the loop publishes its load: steps taken, the pool's
// figures, and nothing running or held once every sample has ended.
func TestEngineStats(t *testing.T) {
	m := tinyRandom(t)
	e := newEngine(t, New(m, letters{}), EngineOptions{Batch: graphs.BatchOptions{PrefixCache: true, BlockTokens: 8}})
	opts := Options{MaxTokens: 3, IgnoreEOS: true}
	prompt := graphs.IDs(testPrompt(20, 1)...)
	for range 2 { // the second prompt takes the first's blocks from the cache
		if _, err := e.GenerateBatch(context.Background(), []graphs.Input{prompt}, []Options{opts}); err != nil {
			t.Fatal(err)
		}
	}
	var s EngineStats
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if s = e.Stats(); s.Running+s.Waiting+s.Prefilling == 0 && s.KVInUse == 0 && s.Steps > 0 {
			break
		}
	}
	if s.Running+s.Waiting+s.Prefilling != 0 || s.KVInUse != 0 || s.Steps < 4 || s.KVAllocated == 0 || s.KVBudget < s.KVAllocated || s.CachedTokens != 16 {
		t.Errorf("stats after every sample ended: %+v", s)
	}
}
