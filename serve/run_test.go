package serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gozoo/gozoo/zoo/generate"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

// syncBuffer is a bytes.Buffer safe for the server's and the test's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRun: the server answers 503 with retry-after while the model
// loads, prints its readiness line once it answers, and on shutdown
// lets a running stream finish within the grace period; a stream longer
// than the grace period is cut.
func TestRun(t *testing.T) {
	for _, c := range []struct {
		name   string
		grace  time.Duration
		tokens int
		whole  bool
	}{{"finishes within the grace period", time.Minute, 60, true}, {"cut at the grace period", 50 * time.Millisecond, 480, false}} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			var stderr syncBuffer
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			ready := make(chan string, 1)
			ran := make(chan error, 1)
			addr := make(chan string, 1)
			go func() {
				ran <- Run(ctx, Config{
					Addr: "127.0.0.1:0", Model: qwen3Tiny, Grace: c.grace, Stderr: &stderr,
					Load: func(ctx context.Context, path string) (*generate.Generator, *idefics3.Pipeline, error) {
						// The port is open before the model is there.
						for !strings.Contains(stderr.String(), "answering 503 on ") {
							time.Sleep(time.Millisecond)
						}
						line := stderr.String()
						a := line[strings.Index(line, "answering 503 on ")+len("answering 503 on "):]
						addr <- strings.Fields(a)[0]
						<-release
						return LoadModel(ctx, path) // Run closes it
					},
					Ready: func(a string, s *Server) { ready <- a },
				})
			}()
			base := "http://" + <-addr
			resp, err := http.Get(base + "/health")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "loading") {
				t.Errorf("while loading: %d %s", resp.StatusCode, body)
			}
			close(release)
			a := <-ready
			if !strings.Contains(stderr.String(), "listening on http://"+a) {
				t.Errorf("no readiness line: %s", stderr.String())
			}
			if resp, err := http.Get(base + "/health"); err != nil || resp.StatusCode != 200 {
				t.Fatalf("health once ready: %v %v", resp, err)
			}
			// A stream runs; the server is told to stop.
			r, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(
				`{"messages": [{"role": "user", "content": "hi"}], "stream": true, "temperature": 0, "max_tokens": `+itoa(c.tokens)+`, "logit_bias": {"151645": -100, "151643": -100}}`))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Body.Close()
			stop()
			rest, _ := io.ReadAll(r.Body)
			done := strings.HasSuffix(string(rest), "data: [DONE]\n\n")
			if done != c.whole {
				t.Errorf("the stream ended with [DONE]: %v, want %v (%d bytes)", done, c.whole, len(rest))
			}
			if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run: %v", err)
			}
			if !strings.Contains(stderr.String(), "shutting down") || !strings.Contains(stderr.String(), "stopped") {
				t.Errorf("stderr: %s", stderr.String())
			}
			if _, err := http.Get(base + "/health"); err == nil {
				t.Error("still answering after Run returned")
			}
		})
	}
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}

// TestParseSize reads byte counts with units.
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "512KiB": 512 << 10, "64MiB": 64 << 20, "2GiB": 2 << 30, "1GB": 1e9, "1.5G": 3 << 29, "16M": 16 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "lots", "1XB", "1e30GiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) took it", in)
		}
	}
}
