package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gozoo/gozoo/zoo/generate"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

// Config is what Run needs.
type Config struct {
	// Addr is where to listen (host:port; port 0 picks one).
	Addr string
	// Model is the checkpoint folder or GGUF file; Options.Name defaults
	// to its base name.
	Model string
	// Options configure the server.
	Options Options
	// Grace is how long running requests may take to finish once ctx is
	// done (0: 25 s, inside Kubernetes' default 30 s).
	Grace time.Duration
	// Load loads the model (nil: LoadModel). Setup, when set, prepares
	// the loaded generator (device, session options) before the engine
	// starts.
	Load  func(ctx context.Context, path string) (*generate.Generator, *idefics3.Pipeline, error)
	Setup func(g *generate.Generator) error
	// Stderr receives the progress lines, the readiness line and the
	// request log.
	Stderr io.Writer
	// Ready, when set, is called with the server once it answers
	// requests (tests).
	Ready func(addr string, s *Server)
}

// LoadModel loads a checkpoint folder or a GGUF file for serving; a
// SmolVLM folder comes with its image pipeline.
func LoadModel(ctx context.Context, path string) (*generate.Generator, *idefics3.Pipeline, error) {
	g, err := generate.LoadContext(ctx, path, nil)
	if err != nil {
		return nil, nil, err
	}
	if _, ok := g.Model.(*idefics3.Model); ok {
		p, err := idefics3.NewPipeline(g, path)
		if err != nil {
			g.Close()
			return nil, nil, err
		}
		return g, p, nil
	}
	return g, nil, nil
}

// gate answers for the server while the model loads (503, with
// retry-after) and hands requests to it once it is there.
type gate struct{ srv atomic.Pointer[Server] }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s := g.srv.Load(); s != nil {
		s.ServeHTTP(w, r)
		return
	}
	writeError(w, unavailable("the model is loading"))
}

// Run serves until ctx is done: it listens at once (every request is a
// 503 while the model loads), loads the model, prints "listening on
// http://ADDR" to Stderr once requests are answered, and when ctx is done
// stops accepting, lets running requests finish within the grace period,
// then cancels what is left and returns.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Grace == 0 {
		cfg.Grace = 25 * time.Second
	}
	if cfg.Load == nil {
		cfg.Load = LoadModel
	}
	if cfg.Options.Name == "" {
		cfg.Options.Name = ModelID(cfg.Model)
	}
	if cfg.Options.Log == nil {
		cfg.Options.Log = log.New(cfg.Stderr, "gozoo serve: ", log.LstdFlags)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	if !loopback(ln.Addr()) && cfg.Options.APIKey == "" {
		fmt.Fprintf(cfg.Stderr, "gozoo serve: warning: %s is reachable from other machines and no --api-key is set\n", addr)
	}
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	g := &gate{}
	hs := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		// No ReadTimeout: it would cancel a long answer's context; each
		// request's body gets bodyTimeout, each stream write its own.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		BaseContext:    func(net.Listener) context.Context { return base },
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.Grace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			fmt.Fprintf(cfg.Stderr, "gozoo serve: grace period of %s over: cancelling the requests left\n", cfg.Grace)
			cancelBase()
			hs.Close()
		}
	}

	fmt.Fprintf(cfg.Stderr, "gozoo serve: loading %s (answering 503 on %s meanwhile)\n", cfg.Model, addr)
	t0 := time.Now()
	gen, pipe, err := cfg.Load(ctx, cfg.Model)
	if err == nil && cfg.Setup != nil {
		if err = cfg.Setup(gen); err != nil {
			gen.Close()
		}
	}
	if err != nil {
		stop()
		return err
	}
	defer gen.Close()
	opts := cfg.Options
	opts.Pipeline = pipe
	if opts.Grammar == nil {
		opts.Grammar = SchemaGrammar(gen)
	}
	s, err := New(gen, opts)
	if err != nil {
		stop()
		return err
	}
	g.srv.Store(s)
	fmt.Fprintf(cfg.Stderr, "gozoo serve: %s loaded in %.1f s as %q (context %d, %d sequences at once, queue %d)\n",
		cfg.Model, time.Since(t0).Seconds(), s.opts.Name, s.opts.Context, s.opts.Parallel, s.opts.MaxQueue)
	fmt.Fprintf(cfg.Stderr, "gozoo serve: listening on http://%s\n", addr)
	if cfg.Ready != nil {
		cfg.Ready(addr, s)
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		s.Close()
		return err
	}
	fmt.Fprintf(cfg.Stderr, "gozoo serve: shutting down: finishing running requests (grace %s)\n", cfg.Grace)
	s.Drain()
	stop()
	err = s.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	fmt.Fprintln(cfg.Stderr, "gozoo serve: stopped")
	return err
}

func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// ParseSize reads a byte count: 1048576, 512KiB, 64MiB, 2GiB, 1GB, 1.5G
// (K, M, G, T alone are powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult >= 1<<63 {
		return 0, fmt.Errorf("%q is not a size: want bytes, or a number with KiB, MiB, GiB (or KB, MB, GB)", s)
	}
	return int64(v * mult), nil
}
