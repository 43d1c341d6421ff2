package serve

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are the server's Prometheus figures.
type metrics struct {
	mu       sync.Mutex
	requests map[[2]string]int64 // endpoint, code
	duration map[string]*histogram

	promptTokens, completionTokens atomic.Int64
	running                        atomic.Int64 // generation and embedding requests being answered
	ttft, itl                      *histogram
}

func newMetrics() *metrics {
	return &metrics{
		requests: map[[2]string]int64{},
		duration: map[string]*histogram{},
		ttft:     newHistogram(latencyBuckets),
		itl:      newHistogram(tokenBuckets),
	}
}

var (
	latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	tokenBuckets   = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

// request records an answered request.
func (m *metrics) request(endpoint string, code int, d time.Duration) {
	m.mu.Lock()
	m.requests[[2]string{endpoint, fmt.Sprint(code)}]++
	h := m.duration[endpoint]
	if h == nil {
		h = newHistogram(latencyBuckets)
		m.duration[endpoint] = h
	}
	m.mu.Unlock()
	h.observe(d.Seconds())
}

// histogram is a Prometheus histogram.
type histogram struct {
	mu      sync.Mutex
	bounds  []float64
	counts  []uint64 // per bucket, not cumulative; the last is +Inf
	sum     float64
	samples uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.samples++
	h.mu.Unlock()
}

func (h *histogram) write(w io.Writer, name, labels string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sep := ""
	if labels != "" {
		sep = ","
	}
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"%g\"} %d\n", name, labels, sep, b, cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, labels, sep, cum)
	if labels != "" {
		labels = "{" + labels + "}"
	}
	fmt.Fprintf(w, "%s_sum%s %g\n%s_count%s %d\n", name, labels, h.sum, name, labels, h.samples)
}

// serveMetrics writes the figures in Prometheus' text format.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var b strings.Builder
	m := s.metrics
	head := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	head("gozoo_requests_total", "counter", "HTTP requests answered, by endpoint and status code.")
	m.mu.Lock()
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	for _, k := range keys {
		fmt.Fprintf(&b, "gozoo_requests_total{endpoint=%q,code=%q} %d\n", k[0], k[1], m.requests[k])
	}
	endpoints := make([]string, 0, len(m.duration))
	for e := range m.duration {
		endpoints = append(endpoints, e)
	}
	m.mu.Unlock()
	slices.Sort(endpoints)
	head("gozoo_request_duration_seconds", "histogram", "Time from a request's arrival to its answer's end, by endpoint.")
	for _, e := range endpoints {
		m.mu.Lock()
		h := m.duration[e]
		m.mu.Unlock()
		h.write(&b, "gozoo_request_duration_seconds", fmt.Sprintf("endpoint=%q", e))
	}
	head("gozoo_time_to_first_token_seconds", "histogram", "Time from a generation request's arrival to its first token.")
	m.ttft.write(&b, "gozoo_time_to_first_token_seconds", "")
	head("gozoo_inter_token_latency_seconds", "histogram", "Time between a sample's consecutive tokens.")
	m.itl.write(&b, "gozoo_inter_token_latency_seconds", "")
	head("gozoo_prompt_tokens_total", "counter", "Prompt tokens of the requests answered (embedding inputs included).")
	fmt.Fprintf(&b, "gozoo_prompt_tokens_total %d\n", m.promptTokens.Load())
	head("gozoo_generation_tokens_total", "counter", "Tokens generated, every choice together.")
	fmt.Fprintf(&b, "gozoo_generation_tokens_total %d\n", m.completionTokens.Load())
	head("gozoo_requests_running", "gauge", "Generation and embedding requests being answered.")
	fmt.Fprintf(&b, "gozoo_requests_running %d\n", m.running.Load())

	s.admitMu.Lock()
	admitted, limit := s.admitted, s.opts.Parallel+s.opts.MaxQueue
	s.admitMu.Unlock()
	head("gozoo_sequences_admitted", "gauge", "Sequences the admitted generation requests hold or wait for (beyond --parallel + --max-queue, requests get 429).")
	fmt.Fprintf(&b, "gozoo_sequences_admitted %d\n", admitted)
	head("gozoo_sequences_limit", "gauge", "Sequences admitted at most: --parallel + --max-queue.")
	fmt.Fprintf(&b, "gozoo_sequences_limit %d\n", limit)
	st := s.engine.Stats()
	head("gozoo_sequences_running", "gauge", "Samples decoding in the batch (at most --parallel).")
	fmt.Fprintf(&b, "gozoo_sequences_running %d\n", st.Running)
	head("gozoo_queue_length", "gauge", "Requests submitted to the engine and waiting for a sequence or KV room.")
	fmt.Fprintf(&b, "gozoo_queue_length %d\n", st.Waiting)
	head("gozoo_prompts_prefilling", "gauge", "Prompts being prefilled.")
	fmt.Fprintf(&b, "gozoo_prompts_prefilling %d\n", st.Prefilling)
	head("gozoo_engine_steps_total", "counter", "Steps of the batched runtime.")
	fmt.Fprintf(&b, "gozoo_engine_steps_total %d\n", st.Steps)
	head("gozoo_kv_pool_bytes", "gauge", "KV pool memory: its budget, the blocks made, and those sequences hold.")
	fmt.Fprintf(&b, "gozoo_kv_pool_bytes{state=\"budget\"} %d\ngozoo_kv_pool_bytes{state=\"allocated\"} %d\ngozoo_kv_pool_bytes{state=\"in_use\"} %d\n", st.KVBudget, st.KVAllocated, st.KVInUse)
	head("gozoo_kv_preemptions_total", "counter", "Samples that gave their KV blocks back to let others grow, and were recomputed.")
	fmt.Fprintf(&b, "gozoo_kv_preemptions_total %d\n", st.Preemptions)
	head("gozoo_prefix_cache_hit_tokens_total", "counter", "Prompt tokens whose keys and values came from the prefix cache.")
	fmt.Fprintf(&b, "gozoo_prefix_cache_hit_tokens_total %d\n", st.CachedTokens)
	io.WriteString(w, b.String())
}
