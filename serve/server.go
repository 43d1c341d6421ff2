// Package serve is gozoo's OpenAI-compatible HTTP server: one model
// behind /v1/chat/completions, /v1/completions, /v1/embeddings and
// /v1/models, with /health and Prometheus /metrics, as the official
// OpenAI clients expect them.
//
// Every generation request joins one running generate.Engine: its
// prompt is prefilled beside the sequences already decoding, and its
// samples decode with them (continuous batching). Multi-turn chats reuse
// their earlier turns' keys and values through the engine's prefix
// cache. A client that goes away cancels its sequences. Greedy output
// does not depend on what else runs.
//
// Constrained decoding (response_format json_object and json_schema,
// tool_choice "required" or a named function) plugs in through Grammar;
// without one those requests get a 400 naming the field.
//
// docs/serve.md has the contract's fine print.
package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo/generate"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

// DefaultMaxBody is the largest request body accepted by default.
const DefaultMaxBody = 16 << 20

// bodyTimeout bounds the reading of a request's body.
const bodyTimeout = 2 * time.Minute

// Options configure a Server.
type Options struct {
	// Name is the model's id in the API (required).
	Name string
	// APIKey, when set, is the Bearer token every /v1 request must carry.
	APIKey string
	// Parallel is the most sequences decoding at once (0: 8); a request
	// with n choices takes n.
	Parallel int
	// MaxQueue is how many sequences may wait beyond Parallel before
	// requests are refused with 429 (0: 4 × Parallel; -1: none).
	MaxQueue int
	// Context is the most positions a sequence holds, prompt and output
	// (0: the model's, capped at graphs.DefaultCapacity).
	Context int
	// KVMemory is the KV pool's budget in bytes (0: the engine's default,
	// room for two sequences of Context positions).
	KVMemory int64
	// MaxBody is the largest request body in bytes (0: DefaultMaxBody).
	MaxBody int64
	// Session are the graphs options of the engine (fast mode, F16 cache,
	// device).
	Session graphs.Options
	// EmbedPooling and EmbedNormalize shape /v1/embeddings' vectors:
	// mean (the zero value) or last pooling, scaled to unit length or not
	// (gozoo serve scales them, as OpenAI's are).
	EmbedPooling   generate.Pooling
	EmbedNormalize bool
	// Grammar enforces response_format and forced tool choices; nil
	// refuses them.
	Grammar Grammar
	// Pipeline is the SmolVLM pipeline when the model takes images.
	Pipeline *idefics3.Pipeline
	// MaxPixels caps an image's pixels (0: images.DefaultMaxPixels).
	MaxPixels int64
	// Log receives one line per failed request (nil: discarded).
	Log *log.Logger
}

// Server answers the OpenAI API for one model. It is an http.Handler.
type Server struct {
	g       *generate.Generator
	engine  *generate.Engine
	opts    Options
	created int64
	keyHash [32]byte
	bytes   tokenBytes
	format  *toolFormat
	openID  int // the tool-call opening tag's id when it is one token, else -1
	// noToken are the ids of the model's vocabulary the tokenizer has no
	// token for (Qwen3 pads its 151,669 tokens to 151,936 rows): never
	// drawn, since they could not be written out.
	noToken banned
	metrics *metrics

	admitMu  sync.Mutex
	admitted int
	draining bool

	embedSem chan struct{}
	imageSem chan struct{}
}

// New starts a server's engine on g's model. Close stops it.
func New(g *generate.Generator, opts Options) (*Server, error) {
	if opts.Name == "" {
		return nil, errors.New("serve: the model needs a name")
	}
	if opts.Parallel == 0 {
		opts.Parallel = 8
	}
	if opts.MaxQueue == 0 {
		opts.MaxQueue = 4 * opts.Parallel
	}
	opts.MaxQueue = max(opts.MaxQueue, 0)
	if opts.MaxBody == 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.Parallel < 1 || opts.MaxBody < 1 || opts.Context < 0 || opts.KVMemory < 0 {
		return nil, fmt.Errorf("serve: parallel %d, max body %d, context %d and KV memory %d must be positive", opts.Parallel, opts.MaxBody, opts.Context, opts.KVMemory)
	}
	if opts.Log == nil {
		opts.Log = log.New(io.Discard, "", 0)
	}
	if opts.Context == 0 {
		opts.Context = min(g.Model.MaxPositions(), graphs.DefaultCapacity)
	}
	bo := graphs.BatchOptions{Options: opts.Session, PrefixCache: true, KVBudget: opts.KVMemory}
	bo.Capacity = opts.Context
	e, err := g.NewEngine(generate.EngineOptions{Batch: bo, MaxSeqs: opts.Parallel})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s := &Server{
		g: g, engine: e, opts: opts, created: time.Now().Unix(),
		bytes: tokenBytes{tok: g.Tokenizer}, openID: -1, metrics: newMetrics(),
		embedSem: make(chan struct{}, 1), imageSem: make(chan struct{}, 1),
	}
	if it, ok := g.Tokenizer.(idTokener); ok {
		for id := range g.Model.VocabSize() {
			if _, ok := it.IDToken(id); !ok {
				s.noToken = append(s.noToken, id)
			}
		}
	}
	if opts.APIKey != "" {
		s.keyHash = sha256.Sum256([]byte(opts.APIKey))
	}
	if g.Template != nil {
		s.format = detectToolFormat(g.Template.Source)
	}
	if s.format != nil {
		if t, ok := g.Tokenizer.(interface{ TokenID(string) (int, bool) }); ok {
			if id, ok := t.TokenID(s.format.Open); ok {
				s.openID = id
			}
		}
	}
	return s, nil
}

// ModelID is the model's id for a checkpoint path: the folder's or the
// file's base name.
func ModelID(path string) string {
	return filepath.Base(filepath.Clean(path))
}

// Engine is the server's batched runtime (for inspection).
func (s *Server) Engine() *generate.Engine { return s.engine }

// Drain makes the server refuse new requests with 503 and /health answer
// 503, while the requests running go on.
func (s *Server) Drain() {
	s.admitMu.Lock()
	s.draining = true
	s.admitMu.Unlock()
}

// Close stops the engine: requests still running end with an error.
func (s *Server) Close() error {
	s.Drain()
	return s.engine.Close()
}

func (s *Server) isDraining() bool {
	s.admitMu.Lock()
	defer s.admitMu.Unlock()
	return s.draining
}

// admit reserves n sequences for a generation request, or refuses it: 429
// when the queue is full, 503 while shutting down.
func (s *Server) admit(n int) (release func(), err *apiError) {
	s.admitMu.Lock()
	defer s.admitMu.Unlock()
	if s.draining {
		return nil, unavailable("the server is shutting down")
	}
	limit := s.opts.Parallel + s.opts.MaxQueue
	if n > limit {
		return nil, invalid("n", "the request needs %d sequences, more than this server ever holds (%d: --parallel %d + --max-queue %d)", n, limit, s.opts.Parallel, s.opts.MaxQueue)
	}
	if s.admitted+n > limit {
		return nil, &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded", RetryAfter: 1,
			Message: fmt.Sprintf("the server is busy: %d sequences running or queued of %d (--parallel %d + --max-queue %d); retry later", s.admitted, limit, s.opts.Parallel, s.opts.MaxQueue)}
	}
	s.admitted += n
	var once sync.Once
	return func() {
		once.Do(func() {
			s.admitMu.Lock()
			s.admitted -= n
			s.admitMu.Unlock()
		})
	}, nil
}

// recorder notes a response's status for the metrics.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	endpoint := "other"
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.opts.Log.Printf("%s %s: panic: %v", r.Method, r.URL.Path, p)
			if rec.status == 0 {
				writeError(rec, internal(fmt.Errorf("internal error: %v", p)))
			}
		}
		s.metrics.request(endpoint, max(rec.status, http.StatusOK), time.Since(start))
	}()
	path := r.URL.Path
	type route struct {
		method string
		h      func(http.ResponseWriter, *http.Request)
		open   bool // needs no key
	}
	var rt route
	switch {
	case path == "/health":
		rt = route{http.MethodGet, s.health, true}
	case path == "/metrics":
		rt = route{http.MethodGet, s.serveMetrics, true}
	case path == "/v1/models":
		rt = route{http.MethodGet, s.listModels, false}
	case strings.HasPrefix(path, "/v1/models/"):
		path = "/v1/models/{model}"
		rt = route{http.MethodGet, s.getModel, false}
	case path == "/v1/chat/completions":
		rt = route{http.MethodPost, s.chatCompletions, false}
	case path == "/v1/completions":
		rt = route{http.MethodPost, s.completions, false}
	case path == "/v1/embeddings":
		rt = route{http.MethodPost, s.embeddings, false}
	default:
		writeError(rec, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url", Message: fmt.Sprintf("unknown request URL: %s %s", r.Method, r.URL.Path)})
		return
	}
	endpoint = path
	if r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
		rec.Header().Set("Allow", rt.method)
		writeError(rec, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed", Message: fmt.Sprintf("%s takes %s, not %s", endpoint, rt.method, r.Method)})
		return
	}
	if !rt.open && !s.authorized(r) {
		writeError(rec, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: "missing or wrong API key: send it as 'Authorization: Bearer KEY'"})
		return
	}
	rt.h(rec, r)
}

// authorized checks the Bearer key in constant time (of digests, so that
// the key's length does not show either).
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.APIKey == "" {
		return true
	}
	auth := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		key = ""
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(key)))
	return subtle.ConstantTimeCompare(got[:], s.keyHash[:]) == 1 && ok
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.isDraining() {
		writeError(w, unavailable("the server is shutting down"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, internal(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) model(id string) modelObject {
	return modelObject{ID: id, Object: "model", Created: s.created, OwnedBy: "gozoo"}
}

// listModels lists the base model and, for each LoRA adapter attached to
// it, BASE:ADAPTER: the ids a request's model may name.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	list := []modelObject{s.model(s.opts.Name)}
	for _, a := range s.g.Model.Params().Adapters() {
		if !a.Merged {
			list = append(list, s.model(s.opts.Name+":"+a.Name))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/models/")
	if _, ok := s.adapterOf(id); !ok {
		writeError(w, s.notFound(id))
		return
	}
	writeJSON(w, http.StatusOK, s.model(id))
}

// isModel reports whether id names the served model; a GGUF model's id
// is taken with or without its .gguf.
func (s *Server) isModel(id string) bool {
	name := s.opts.Name
	return id == name || strings.TrimSuffix(id, ".gguf") == strings.TrimSuffix(name, ".gguf") && (strings.HasSuffix(id, ".gguf") || strings.HasSuffix(name, ".gguf"))
}

// adapterOf resolves a request's model id to the generation's adapter
// (generate.Options.Adapter): the base model (or no id) runs without
// one, BASE:NAME with the attached adapter NAME.
func (s *Server) adapterOf(id string) (string, bool) {
	if id == "" || s.isModel(id) {
		return generate.NoAdapter, true
	}
	i := strings.LastIndexByte(id, ':')
	if i < 0 || !s.isModel(id[:i]) {
		return "", false
	}
	for _, a := range s.g.Model.Params().Adapters() {
		if a.Name == id[i+1:] && !a.Merged {
			return a.Name, true
		}
	}
	return "", false
}

// responseModel is the model a response names: BASE:NAME for a request
// that ran an adapter, else the served model's id.
func (s *Server) responseModel(requested string) string {
	if a, ok := s.adapterOf(requested); ok && a != generate.NoAdapter {
		return requested
	}
	return s.opts.Name
}

func (s *Server) notFound(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("the model %q does not exist: this server serves %q", id, s.opts.Name)}
}

// readRequest reads a POST body as a JSON object, within the size limit,
// and checks its model.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (object, *apiError) {
	tooLarge := &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
		Message: fmt.Sprintf("the request body is over the limit of %d bytes (--max-body)", s.opts.MaxBody)}
	if r.ContentLength > s.opts.MaxBody {
		return object{}, tooLarge
	}
	// The body has bodyTimeout to arrive; the deadline is lifted after,
	// so that a long answer is not cut by it.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	_ = rc.SetReadDeadline(time.Time{})
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		return object{}, tooLarge
	case err != nil:
		return object{}, invalid("", "reading the request body: %v", err)
	}
	if !json.Valid(data) {
		return object{}, invalid("", "the request body is not valid JSON")
	}
	o, aerr := parseObject(data, "")
	if aerr != nil {
		return o, aerr
	}
	if id, ok, aerr := o.str("model"); aerr != nil {
		return o, aerr
	} else if _, known := s.adapterOf(id); ok && !known {
		return o, s.notFound(id)
	}
	return o, nil
}

// fail answers a request's error and logs server-side failures.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, e *apiError) {
	if e.Status >= 500 {
		s.opts.Log.Printf("%s %s: %d %s", r.Method, r.URL.Path, e.Status, e.Message)
	}
	writeError(w, e)
}

// engineError maps an error of the engine to an API error.
func engineError(err error, param string) *apiError {
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{Status: 499, Type: "invalid_request_error", Message: "the request was cancelled"}
	case errors.Is(err, graphs.ErrPoolFull):
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded",
			Message: "the prompt does not fit the KV memory (--kv-memory): " + msg}
	case strings.Contains(msg, "does not fit the context"):
		return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded", Message: msg + " (--ctx)"}
	case strings.Contains(msg, "the engine stopped"):
		return unavailable(msg)
	}
	return internal(err)
}
