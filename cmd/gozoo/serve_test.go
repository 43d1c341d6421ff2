package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeCommand: gozoo serve prints its readiness line, answers
// /health and the API (with its key), and stops on the signal.
func TestServeCommand(t *testing.T) {
	t.Chdir("../..")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	old := serveSignals
	serveSignals = func() (context.Context, context.CancelFunc) { return ctx, stop }
	defer func() { serveSignals = old }()
	var stderr lockedBuffer
	status := make(chan int, 1)
	go func() {
		status <- dispatch([]string{"serve", "--model", "testdata/models/qwen3-tiny", "--addr", "127.0.0.1:0", "--name", "tiny", "--api-key", "k", "--ctx", "256", "--kv-memory", "8MiB", "--parallel", "2"}, nil, io.Discard, &stderr)
	}()
	ready := regexp.MustCompile(`listening on (http://\S+)`)
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := ready.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no readiness line: %s", stderr.String())
		}
	}
	if resp, err := http.Get(base + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"model":"tiny"`) || !strings.Contains(string(body), `"completion_tokens":3`) {
		t.Errorf("chat: %d %s", resp.StatusCode, body)
	}
	stop()
	s := <-status
	serveSignals = old
	if s != 0 {
		t.Errorf("status %d: %s", s, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if _, _, s := gozoo(t, "", "serve"); s != 2 {
		t.Errorf("no --model: status %d", s)
	}
	if _, errb, s := gozoo(t, "", "serve", "--model", "x", "--kv-memory", "lots"); s != 1 || !strings.Contains(errb, "--kv-memory") {
		t.Errorf("bad --kv-memory: status %d, %q", s, errb)
	}
	if _, errb, s := gozoo(t, "", "serve", "--model", t.TempDir(), "--addr", "127.0.0.1:0"); s != 1 || !strings.Contains(errb, "config.json") {
		t.Errorf("no model there: status %d, %q", s, errb)
	}
}
