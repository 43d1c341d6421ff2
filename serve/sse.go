package serve

import (
	"encoding/json"
	"net/http"
	"time"
)

// streamWriteTimeout bounds each write of a stream: a client that stops
// reading without closing its connection cannot hold a handler, and its
// sequences, for longer.
const streamWriteTimeout = 30 * time.Second

// sseWriter writes server-sent events.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

// newSSE sends a stream's headers.
func newSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	s.flush()
	return s
}

func (s *sseWriter) write(b []byte) error {
	if s.err != nil {
		return s.err
	}
	// The deadline holds for this write and its flush only: the
	// connection's next request starts without one.
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	defer s.rc.SetWriteDeadline(time.Time{})
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error {
	if err := s.rc.Flush(); err != nil && s.err == nil {
		s.err = err
	}
	return s.err
}

// data writes one event of v's JSON.
func (s *sseWriter) data(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	out = append(out, "\n\n"...)
	return s.write(out)
}

// done ends the stream as OpenAI's does.
func (s *sseWriter) done() error { return s.write([]byte("data: [DONE]\n\n")) }

// error ends a stream that failed after its first token: one event whose
// JSON holds an error object, and no [DONE].
func (s *sseWriter) error(e *apiError) error { return s.data(e.body()) }
