package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gozoo/gozoo/internal/procstat"
	"github.com/gozoo/gozoo/serve"
	"github.com/gozoo/gozoo/zoo/generate"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

func init() {
	register(command{
		name:    "serve",
		summary: "serve a model over HTTP with the OpenAI API (chat, completions, embeddings)",
		run:     runServe,
	})
}

// serveSignals is the context that stops the server: SIGINT or SIGTERM
// (tests replace it).
var serveSignals = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runServe(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder or `FILE.gguf` (required)")
	addr := fs.String("addr", "127.0.0.1:8080", "`host:port` to listen on (loopback by default; 0.0.0.0:8080 for every interface)")
	name := fs.String("name", "", "the model's id in the API (default: the folder's or file's base name)")
	apiKey := fs.String("api-key", "", "require 'Authorization: Bearer `KEY`' on /v1 (default: $GOZOO_API_KEY; none when both are empty)")
	parallel := fs.Int("parallel", 8, "sequences decoding at once (a request with n choices takes n)")
	maxQueue := fs.Int("max-queue", -1, "sequences that may wait beyond --parallel before requests get 429 (default 4 × --parallel; 0: none)")
	ctxLen := fs.Int("ctx", 0, "positions per sequence, prompt and output together (default: the model's, at most 8192)")
	kvMemory := fs.String("kv-memory", "", "`BYTES` of KV cache for all sequences together, e.g. 2GiB (default: two full contexts, at most a quarter of free memory)")
	maxBody := fs.String("max-body", "16MiB", "largest request body, in `BYTES`")
	grace := fs.Duration("grace", 25*time.Second, "on SIGINT/SIGTERM, how long running requests may take to finish")
	pool := fs.String("embed-pool", "mean", "pooling of /v1/embeddings: mean or last")
	normalize := fs.Bool("embed-normalize", true, "scale embeddings to unit length, as OpenAI's are")
	fast := fs.Bool("fast", false, "fast mode: llama.cpp's arithmetic, faster on GGUF files, not exact")
	kvF16 := fs.Bool("kv-f16", false, "keep the KV cache in F16: half its memory, not exact")
	kvCache := kvCacheFlag(fs, kvF16, true)
	device := deviceFlag(fs)
	adapters := adapterFlag(fs, true)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *model == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: gozoo serve --model DIR|FILE.gguf [--addr 127.0.0.1:8080] [--name NAME] [--api-key KEY] [--parallel N] [--max-queue Q] [--ctx C] [--kv-memory BYTES] [--max-body BYTES] [--grace D] [--fast] [--kv-f16] "+kvUsage+" [--adapter [NAME=]DIR]... [--device cuda[:N]]")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "gozoo serve:", err)
		return 1
	}
	opts := serve.Options{Name: *name, APIKey: *apiKey, Parallel: *parallel, MaxQueue: *maxQueue, Context: *ctxLen, EmbedNormalize: *normalize}
	if opts.APIKey == "" {
		opts.APIKey = os.Getenv("GOZOO_API_KEY")
	}
	if *maxQueue < -1 || *parallel < 1 || *ctxLen < 0 {
		return fail(fmt.Errorf("--parallel must be positive, --max-queue and --ctx not negative"))
	}
	switch *maxQueue {
	case -1:
		opts.MaxQueue = 0 // serve's default, 4 × --parallel
	case 0:
		opts.MaxQueue = -1 // none
	}
	var err error
	if *kvMemory != "" {
		if opts.KVMemory, err = serve.ParseSize(*kvMemory); err != nil {
			return fail(fmt.Errorf("--kv-memory: %w", err))
		}
	}
	if opts.MaxBody, err = serve.ParseSize(*maxBody); err != nil || opts.MaxBody < 1 {
		return fail(fmt.Errorf("--max-body: %v", err))
	}
	if opts.EmbedPooling, err = generate.ParsePooling(*pool); err != nil {
		return fail(fmt.Errorf("--embed-pool: %w", err))
	}
	dev, err := openDevice(*device)
	if err != nil {
		return fail(err)
	}
	kvType, err := kvCache.typ(*fast)
	if err != nil {
		return fail(err)
	}
	opts.Session.Fast, opts.Session.KVCache, opts.Session.Device = *fast, kvType, dev
	ctx, stop := serveSignals()
	defer stop()
	err = serve.Run(ctx, serve.Config{
		Addr: *addr, Model: *model, Options: opts, Grace: *grace, Stderr: stderr,
		Setup: func(g *generate.Generator) error {
			g.SessionOptions = opts.Session
			if err := applyAdapters(g.Model, *adapters, false); err != nil {
				return err
			}
			if vlm, ok := g.Model.(*idefics3.Model); ok {
				vlm.SetDevice(dev)
			}
			// Loaded: the code that parsed and packed the model goes back
			// to the page cache (procstat.DropImage).
			procstat.DropImage()
			return nil
		},
	})
	if err != nil {
		return fail(err)
	}
	return 0
}
