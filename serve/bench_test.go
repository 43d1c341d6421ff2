package serve

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gozoo/gozoo/graphs"
)

// load is what a run of concurrent clients measured.
type loadResult struct {
	tokens   int
	wall     time.Duration
	ttft     []time.Duration // per client
	itl      []time.Duration // between consecutive tokens, all clients
	failures int
}

func (r loadResult) tokS() float64 { return float64(r.tokens) / r.wall.Seconds() }

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// benchRequest is client i's streaming chat: greedy, its end-of-sequence
// tokens banned, so that every client generates exactly tokens tokens.
func benchRequest(s *Server, i, tokens int) string {
	var bias []string
	for _, id := range s.g.EOS {
		bias = append(bias, fmt.Sprintf(`"%d": -100`, id))
	}
	return fmt.Sprintf(`{"messages": [{"role": "user", "content": "Client %d asks: what is the capital of country number %d?"}], "max_tokens": %d, "temperature": 0, "stream": true, "logit_bias": {%s}}`,
		i, i, tokens, strings.Join(bias, ", "))
}

// loadHTTP runs n streaming clients at once over loopback, each reading
// its events as they come.
func loadHTTP(t testing.TB, s *Server, url string, n, tokens int) loadResult {
	var mu sync.Mutex
	res := loadResult{}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(benchRequest(s, i, tokens)))
			if err != nil {
				mu.Lock()
				res.failures++
				mu.Unlock()
				return
			}
			defer resp.Body.Close()
			var first time.Duration
			var itl []time.Duration
			last, got := time.Time{}, 0
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<16), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "data: {") || !strings.Contains(line, `"content":"`) || strings.Contains(line, `"role":"assistant"`) {
					continue
				}
				now := time.Now()
				if got == 0 {
					first = now.Sub(t0)
				} else {
					itl = append(itl, now.Sub(last))
				}
				last = now
				got++
			}
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != 200 {
				res.failures++
				return
			}
			res.ttft = append(res.ttft, first)
			res.itl = append(res.itl, itl...)
			res.tokens += tokens
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

// loadEngine submits the same n requests straight to the server's engine:
// the throughput the HTTP layer is measured against.
func loadEngine(t testing.TB, s *Server, n, tokens int) loadResult {
	res := loadResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		o, _ := parseObject([]byte(benchRequest(s, i, tokens)), "")
		req, aerr := s.readChat(o)
		if aerr != nil {
			t.Fatal(aerr)
		}
		in, aerr := s.chatPrompt(context.Background(), req)
		if aerr != nil {
			t.Fatal(aerr)
		}
		opts, aerr := s.options(req.sampling, in.Len(s.g.Model.HiddenSize()))
		if aerr != nil {
			t.Fatal(aerr)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			samples, err := s.engine.Submit(context.Background(), in, opts)
			if err != nil {
				t.Error(err)
				return
			}
			var first time.Duration
			var itl []time.Duration
			last, got := time.Time{}, 0
			for tok := range samples[0].Tokens() {
				if tok.ID < 0 {
					continue
				}
				now := time.Now()
				if got == 0 {
					first = now.Sub(t0)
				} else {
					itl = append(itl, now.Sub(last))
				}
				last = now
				got++
			}
			mu.Lock()
			res.ttft = append(res.ttft, first)
			res.itl = append(res.itl, itl...)
			res.tokens += got
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

// TestServeLoad keeps the benchmark's harness working: both ways give
// every client its tokens.
func TestServeLoad(t *testing.T) {
	s, hs := newServer(t, qwen3Tiny, Options{Parallel: 4})
	for name, r := range map[string]loadResult{"http": loadHTTP(t, s, hs.URL, 3, 5), "engine": loadEngine(t, s, 3, 5)} {
		if r.tokens != 15 || r.failures != 0 || len(r.ttft) != 3 || len(r.itl) == 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

// BenchmarkServe runs N concurrent streaming clients over loopback
// (http/N) and the same requests submitted straight to the engine
// (engine/N), reporting aggregate tokens/s, time to first token (p50,
// p99) and inter-token latency (p50, p99): the serving overhead is
// 1 - http/engine. GOZOO_BENCH_MODEL picks the model (default
// qwen3-tiny), GOZOO_BENCH_TOKENS the tokens per client (default 64),
// GOZOO_BENCH_N the client counts (default 1,4,16,64).
func BenchmarkServe(b *testing.B) {
	path := qwen3Tiny
	if p := os.Getenv("GOZOO_BENCH_MODEL"); p != "" {
		path = p
	}
	tokens := 64
	if v, err := strconv.Atoi(os.Getenv("GOZOO_BENCH_TOKENS")); err == nil && v > 0 {
		tokens = v
	}
	ns := []int{1, 4, 16, 64}
	if v := os.Getenv("GOZOO_BENCH_N"); v != "" {
		ns = nil
		for _, f := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				ns = append(ns, n)
			}
		}
	}
	// The KV pool holds every client's sequence at once (a prompt of under
	// 64 tokens and its output), as gozoo bench --batch N's does: the
	// figures are of N running together, not of a queue.
	parallel := slices.Max(ns)
	kv := int64(parallel+1) * graphs.KVBytesOf(load(b, path).g.Model, 64+tokens, graphs.KVF32)
	s, hs := newServer(b, path, Options{Parallel: parallel, Context: graphs.DefaultBuckets[len(graphs.DefaultBuckets)-1] + tokens, KVMemory: kv})
	report := func(b *testing.B, r loadResult) {
		b.ReportMetric(r.tokS(), "tok/s")
		b.ReportMetric(float64(percentile(r.ttft, 0.5).Microseconds())/1e3, "ttft-p50-ms")
		b.ReportMetric(float64(percentile(r.ttft, 0.99).Microseconds())/1e3, "ttft-p99-ms")
		b.ReportMetric(float64(percentile(r.itl, 0.5).Microseconds())/1e3, "itl-p50-ms")
		b.ReportMetric(float64(percentile(r.itl, 0.99).Microseconds())/1e3, "itl-p99-ms")
	}
	loadEngine(b, s, 1, 4) // build the graphs
	for _, n := range ns {
		b.Run(fmt.Sprintf("engine/N=%d", n), func(b *testing.B) {
			var r loadResult
			for b.Loop() {
				r = loadEngine(b, s, n, tokens)
			}
			report(b, r)
		})
		b.Run(fmt.Sprintf("http/N=%d", n), func(b *testing.B) {
			var r loadResult
			for b.Loop() {
				r = loadHTTP(b, s, hs.URL, n, tokens)
			}
			if r.failures > 0 {
				b.Fatalf("%d clients failed", r.failures)
			}
			report(b, r)
		})
	}
}
