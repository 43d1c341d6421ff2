package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/procstat"
	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/generate"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

func init() {
	register(command{
		name:    "bench",
		summary: "measure load time, prefill and decode tokens/s and peak memory",
		run:     runBench,
	})
}

type benchResult struct {
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	LoadS       float64 `json:"load_s"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	// DecodeGBs is the weight bytes one decode step reads times decode
	// tokens/s: the effective read bandwidth, against the machine's.
	DecodeGBs float64 `json:"decode_gb_s"`
	// PrefillGFLOPs counts the matrix products of the prompt (2 flops per
	// weight per token, the head once): against the machine's FMA peak.
	PrefillGFLOPs float64 `json:"prefill_gflop_s"`
	Kernels       string  `json:"kernels"`
	// Packed is how many matrices decode reads in a packing: BF16 in 12
	// bits a weight (simd.PackBF16), Q4_0, Q8_0, Q4_K and Q6_K regrouped by 16 rows
	// (simd.PackQuant); and their size before and after.
	Packed       int     `json:"packed,omitempty"`
	PackedFromMB float64 `json:"packed_from_mb,omitempty"`
	PackedToMB   float64 `json:"packed_to_mb,omitempty"`
	// VisionTileS is a vision-language model's time for one tile through
	// the vision tower and connector, and VisionGFLOPs its products' rate.
	VisionTileS  float64 `json:"vision_tile_s,omitempty"`
	VisionGFLOPs float64 `json:"vision_gflop_s,omitempty"`
	// On a GPU: its name, the share of decode's wall time its kernels
	// ran, and the decode bandwidth as a fraction of the card's.
	Device        string  `json:"device,omitempty"`
	KernelShare   float64 `json:"kernel_share,omitempty"`
	BandwidthFrac float64 `json:"bandwidth_fraction,omitempty"`
	// The KV cache's type and its bytes a token (all layers, keys and
	// values), and what an F16 cache takes.
	KVCache            string  `json:"kv_cache"`
	KVBytesPerToken    float64 `json:"kv_bytes_per_token"`
	KVF16BytesPerToken float64 `json:"kv_f16_bytes_per_token"`
}

// deviceFigures fills the GPU's figures of res: busy is the device time
// of the timed decode, wall its wall time.
func deviceFigures(res *benchResult, b cuda.Backend, busy, wall time.Duration) {
	if b == nil {
		return
	}
	res.Device = b.String()
	res.Kernels = "cuda " + b.String()
	dev, ok := b.(*cuda.Device)
	if !ok {
		return
	}
	if wall > 0 {
		res.KernelShare = busy.Seconds() / wall.Seconds()
	}
	if bw := dev.Bandwidth(); bw > 0 {
		res.BandwidthFrac = res.DecodeGBs * 1e9 / bw
	}
}

// packedMB counts the model's weights that decode reads in a packing
// (layers.Packings: their own and their experts'), and their MB before
// and after.
func packedMB(m zoo.Model) (n int, fromMB, toMB float64) {
	for _, p := range m.Params().All() {
		for _, pk := range layers.Packings(p) {
			from, to := pk.Sizes()
			n, fromMB, toMB = n+1, fromMB+float64(from)/1e6, toMB+float64(to)/1e6
		}
	}
	return n, fromMB, toMB
}

func runBench(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder (config.json + safetensors) (required)")
	promptTokens := fs.Int("prompt-tokens", 128, "prompt length (random token ids)")
	genTokens := fs.Int("gen-tokens", 64, "tokens to generate greedily")
	asJSON := fs.Bool("json", false, "print one JSON object")
	seed := fs.Uint64("seed", 1, "seed for the random prompt")
	fast := fs.Bool("fast", false, "fast mode: llama.cpp's arithmetic (8-bit activations against quantized weights)")
	kvF16 := fs.Bool("kv-f16", false, "keep the KV cache in F16, as llama.cpp does by default (half its memory; keys and values rounded)")
	kvCache := kvCacheFlag(fs, kvF16, true)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the timed prefill and decode to `FILE` (go tool pprof)")
	device := deviceFlag(fs)
	batch := fs.Int("batch", 1, "run `S` sequences: each prompt prefilled alone, then decode steps that advance all S in one forward (aggregate tokens/s)")
	adapters := adapterFlag(fs, false)
	merge := fs.Bool("merge-adapter", false, "add the --adapter into the (F32) base weights before timing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *model == "" || *promptTokens < 1 || *genTokens < 1 || *batch < 1 {
		fmt.Fprintln(stderr, "usage: gozoo bench --model DIR|FILE.gguf [--prompt-tokens N] [--gen-tokens M] [--batch S] [--fast] [--kv-f16] "+kvUsage+" [--adapter DIR [--merge-adapter]] [--device cuda[:N]] [--json]")
		return 2
	}
	kvType, err := kvCache.typ(*fast)
	if err != nil {
		fmt.Fprintf(stderr, "gozoo bench: %v\n", err)
		return 2
	}
	opts := graphs.Options{Fast: *fast, KVCache: kvType}
	dev, err := openDevice(*device)
	if err != nil {
		fmt.Fprintf(stderr, "gozoo bench: %v\n", err)
		return 1
	}
	opts.Device = dev
	ad := benchAdapters{*adapters, *merge}
	var res benchResult
	if *batch > 1 {
		res, err = benchBatch(*model, *batch, *promptTokens, *genTokens, opts, *cpuProfile, ad)
	} else {
		res, err = bench(*model, *promptTokens, *genTokens, *seed, opts, *cpuProfile, ad)
	}
	if err != nil {
		fmt.Fprintln(stderr, "gozoo bench:", err)
		return 1
	}
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if *batch > 1 {
		fmt.Fprintf(stdout, "sequences  %d (aggregate tokens/s below)\n", *batch)
	}
	fmt.Fprintf(stdout, "model      %s\nkernels    %s (GOMAXPROCS %d)\nload       %.2f s\nprefill    %.1f tokens/s (%d tokens), %.1f GFLOP/s\ndecode     %.2f tokens/s (%d tokens), %.1f GB/s of weights\n",
		*model, res.Kernels, runtime.GOMAXPROCS(0), res.LoadS, res.PrefillTokS, *promptTokens, res.PrefillGFLOPs, res.DecodeTokS, *genTokens, res.DecodeGBs)
	if res.Packed > 0 {
		fmt.Fprintf(stdout, "packed     %d matrices for decode (BF16 in 12 bits a weight, F32 in 28, quantized ones by 16 rows): %.0f -> %.0f MB\n", res.Packed, res.PackedFromMB, res.PackedToMB)
	}
	if res.VisionTileS > 0 {
		fmt.Fprintf(stdout, "vision     %.3f s per tile, %.1f GFLOP/s\n", res.VisionTileS, res.VisionGFLOPs)
	}
	if res.Device != "" {
		fmt.Fprintf(stdout, "device     %s: kernels ran %.0f%% of decode's wall time; decode read %.0f%% of its memory bandwidth\n", res.Device, 100*res.KernelShare, 100*res.BandwidthFrac)
	}
	if res.KVF16BytesPerToken > 0 {
		fmt.Fprintf(stdout, "kv cache   %s: %.0f bytes a token (%.0f%% of an F16 cache's %.0f)\n", res.KVCache, res.KVBytesPerToken, 100*res.KVBytesPerToken/res.KVF16BytesPerToken, res.KVF16BytesPerToken)
	}
	fmt.Fprintf(stdout, "peak RSS   %.0f MB\n", res.PeakRSSMB)
	return 0
}

// bench times a prompt of n random ids and m greedy steps on a session
// with opts (its capacity set to fit them).
func bench(dir string, n, m int, seed uint64, opts graphs.Options, cpuProfile string, ad benchAdapters) (benchResult, error) {
	res, model, err := loadForBench(dir, n+m+1, &opts, ad)
	if err != nil {
		return res, err
	}
	sess, err := graphs.NewSession(model, opts)
	if err != nil {
		return res, err
	}
	defer sess.Close()
	r := rand.New(rand.NewPCG(seed, 0))
	prompt := make([]int, n)
	for i := range prompt {
		prompt[i] = r.IntN(model.VocabSize())
	}
	// Warm up: build and compile every graph the timed run will use, so
	// the figures are steady-state throughput.
	if _, err := sess.Append(prompt); err != nil {
		return res, err
	}
	if _, err := sess.Append([]int{0}); err != nil {
		return res, err
	}
	sess.Reset()
	// Warm, as a server is after its first requests: the code that loaded
	// and compiled goes back to the page cache.
	procstat.DropImage()

	stopProfile, err := startProfile(cpuProfile)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	logits, err := sess.Append(prompt)
	if err != nil {
		return res, err
	}
	res.PrefillTokS = float64(n) / time.Since(t0).Seconds()
	t0 = time.Now()
	busy := sess.DeviceBusy()
	for i := 0; i < m; i++ {
		if logits, err = sess.Append([]int{generate.Argmax(logits)}); err != nil {
			return res, err
		}
	}
	wall := time.Since(t0)
	busy = sess.DeviceBusy() - busy
	res.DecodeTokS = float64(m) / wall.Seconds()
	stopProfile()
	res.PeakRSSMB = peakRSSMB()
	stepBytes, stepWeights, headWeights := weightTraffic(model)
	// Packed matrices are read in their packing.
	res.Packed, res.PackedFromMB, res.PackedToMB = packedMB(model)
	stepBytes -= int64((res.PackedFromMB - res.PackedToMB) * 1e6)
	res.DecodeGBs = float64(stepBytes) * res.DecodeTokS / 1e9
	deviceFigures(&res, opts.Device, busy, wall)
	res.PrefillGFLOPs = 2 * (float64(stepWeights-headWeights)*float64(n) + float64(headWeights)) * res.PrefillTokS / float64(n) / 1e9
	if vlm, ok := model.(*idefics3.Model); ok {
		if res.VisionTileS, err = benchVision(vlm, r); err != nil {
			return res, err
		}
		res.VisionGFLOPs = vlm.TileFLOPs() / res.VisionTileS / 1e9
		res.PeakRSSMB = peakRSSMB()
	}
	return res, nil
}

// loadForBench loads the model, timed, and sets opts to fit a sequence of
// n positions with a reused logits buffer.
func loadForBench(dir string, n int, opts *graphs.Options, ad benchAdapters) (benchResult, zoo.Model, error) {
	res := benchResult{Kernels: simd.Name()}
	procstat.ResetPeak()
	t0 := time.Now()
	model, err := zoo.Load(dir)
	if err != nil {
		return res, nil, err
	}
	if err := applyAdapters(model, ad.dirs, ad.merge); err != nil {
		return res, nil, err
	}
	res.LoadS = time.Since(t0).Seconds()
	if vlm, ok := model.(*idefics3.Model); ok {
		vlm.SetDevice(opts.Device)
	}
	opts.Capacity, opts.ReuseLogits = min(model.MaxPositions(), n), true
	// The KV cache's bytes a token, over whole blocks of positions, and
	// the same for F16 (llama.cpp's default) to compare with.
	const span = 64 * graphs.DefaultBlockTokens
	res.KVCache = opts.KVCache.String()
	res.KVBytesPerToken = float64(graphs.KVBytesOf(model, span, opts.KVCache)) / span
	res.KVF16BytesPerToken = float64(graphs.KVBytesOf(model, span, graphs.KVF16)) / span
	return res, model, nil
}

// startProfile starts a CPU profile into path (none when path is empty)
// and returns what stops it.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("profiling to %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// benchBatch times S sequences of one Batch: each with its own prompt of
// n ids (token i of sequence s is (i·7919 + 13 + s·104729) mod vocab, as
// ../shared/bench/side_by_side.py gives llama.cpp), prefilled one
// sequence per Run, then m greedy decode steps that each advance all S in
// one Run. Prefill and decode are aggregate tokens/s.
func benchBatch(dir string, S, n, m int, opts graphs.Options, cpuProfile string, ad benchAdapters) (benchResult, error) {
	res, model, err := loadForBench(dir, n+m+1, &opts, ad)
	if err != nil {
		return res, err
	}
	b, err := graphs.NewBatch(model, graphs.BatchOptions{Options: opts, KVBudget: int64(S+1) * graphs.KVBytesOf(model, opts.Capacity, opts.KVCache)})
	if err != nil {
		return res, err
	}
	defer b.Close()
	V := model.VocabSize()
	prompts := make([][]int, S)
	for s := range prompts {
		prompts[s] = make([]int, n)
		for i := range prompts[s] {
			prompts[s][i] = (i*7919 + 13 + s*104729) % V
		}
	}
	ctx := context.Background()
	if err := warmBatch(ctx, b, prompts[0], S); err != nil {
		return res, err
	}
	procstat.DropImage() // as after the single run's warm-up
	stopProfile, err := startProfile(cpuProfile)
	if err != nil {
		return res, err
	}
	seqs := make([]graphs.SeqID, S)
	next := make([]int, S)
	t0 := time.Now()
	for s := range seqs {
		seqs[s] = b.Add()
		out, err := b.Run(ctx, []graphs.Feed{{Seq: seqs[s], Input: graphs.IDs(prompts[s]...)}})
		if err != nil {
			return res, err
		}
		next[s] = generate.Argmax(out[0].Logits[0])
	}
	res.PrefillTokS = float64(S*n) / time.Since(t0).Seconds()
	feeds := make([]graphs.Feed, S)
	t0 = time.Now()
	busy := b.DeviceBusy()
	for i := 0; i < m; i++ {
		for s := range feeds {
			feeds[s] = graphs.Feed{Seq: seqs[s], Input: graphs.IDs(next[s])}
		}
		outs, err := b.Run(ctx, feeds)
		if err != nil {
			return res, err
		}
		for s := range outs {
			next[s] = generate.Argmax(outs[s].Logits[0])
		}
	}
	wall := time.Since(t0)
	busy = b.DeviceBusy() - busy
	res.DecodeTokS = float64(S*m) / wall.Seconds()
	stopProfile()
	res.PeakRSSMB = peakRSSMB()
	stepBytes, stepWeights, headWeights := weightTraffic(model)
	res.Packed, res.PackedFromMB, res.PackedToMB = packedMB(model)
	stepBytes -= int64((res.PackedFromMB - res.PackedToMB) * 1e6)
	res.DecodeGBs = float64(stepBytes) * res.DecodeTokS / float64(S) / 1e9
	res.PrefillGFLOPs = 2 * (float64(stepWeights-headWeights)*float64(n) + float64(headWeights)) * res.PrefillTokS / float64(n) / 1e9
	deviceFigures(&res, opts.Device, busy, wall)
	return res, nil
}

// warmBatch runs what bench's warm-up runs, on S scratch sequences that
// it then removes: one prompt, then one step of all S, so that the timed
// run finds its graphs built, its weights read (those a product reads in
// the file's layout are paged in by their first run) and its buffers
// allocated.
func warmBatch(ctx context.Context, b *graphs.Batch, prompt []int, S int) error {
	seqs := make([]graphs.SeqID, S)
	feeds := make([]graphs.Feed, S)
	for s := range seqs {
		seqs[s] = b.Add()
		feeds[s] = graphs.Feed{Seq: seqs[s], Input: graphs.IDs(0)}
	}
	defer func() {
		for _, id := range seqs {
			b.Remove(id)
		}
	}()
	if _, err := b.Run(ctx, []graphs.Feed{{Seq: seqs[0], Input: graphs.IDs(prompt...)}}); err != nil {
		return err
	}
	_, err := b.Run(ctx, feeds)
	return err
}

// benchVision times the vision tower and connector on one tile of random
// pixels (the config's image_size square: 384x384 for SmolVLM), after a
// warm-up run that builds the graph: seconds per tile, best of three.
func benchVision(m *idefics3.Model, r *rand.Rand) (float64, error) {
	v := m.Config.VisionConfig
	pixels := make([]float32, v.NumChannels*v.ImageSize*v.ImageSize)
	for i := range pixels {
		pixels[i] = 2*r.Float32() - 1
	}
	if _, err := m.EncodeImages(pixels, 1); err != nil {
		return 0, err
	}
	best := math.Inf(1)
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		if _, err := m.EncodeImages(pixels, 1); err != nil {
			return 0, err
		}
		best = min(best, time.Since(t0).Seconds())
	}
	return best, nil
}

// weightTraffic is what one decode step reads: every matrix, except an
// untied embedding table (a step looks up one row of it); and how many of
// those weights are the head's, which a prefill applies to its last row
// only.
func weightTraffic(m zoo.Model) (bytes, weights, head int64) {
	ps := m.Params()
	_, untied := ps.Get("lm_head.weight")
	for _, p := range ps.All() {
		// A vision-language model's tower runs once per image, not per
		// token.
		vision := strings.HasPrefix(p.Name, "model.vision_model.") || strings.HasPrefix(p.Name, "model.connector.")
		if p.Role != graphs.Matrix || vision || (untied && strings.HasSuffix(p.Name, "embed_tokens.weight")) {
			continue
		}
		bytes += p.DType.Bytes(p.Numel(), p.Shape[len(p.Shape)-1])
		weights += p.Numel()
	}
	if p, ok := ps.Get("lm_head.weight"); ok {
		head = p.Numel()
	} else {
		for _, p := range ps.All() {
			if strings.HasSuffix(p.Name, "embed_tokens.weight") {
				head = p.Numel()
			}
		}
	}
	return bytes, weights, head
}

// peakRSSMB reads the resident-set high-water mark (Linux); 0 where the
// kernel does not report it.
func peakRSSMB() float64 {
	kb, _ := procstat.KB("VmHWM")
	return kb / 1024
}

// benchAdapters are the LoRA adapters a bench applies (--adapter), and
// whether it merges them first.
type benchAdapters struct {
	dirs  []string
	merge bool
}
