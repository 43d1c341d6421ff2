package golden

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/cudaemu"
	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

// TestGoldenEmulated runs the golden cases through the device runtime on
// the CUDA emulator (internal/cudaemu): each model's graphs on a
// cuda.Backend, every op's kernels and cuBLAS products, the KV pool in
// device memory. The cases' own tolerances apply. Every vendored case runs
// alone, two inside a batch of 4 sequences too (a sliding window's
// dropped blocks, a MoE's gathered rows), and of the cases in ../shared
// (where present) the Q8_0 MoE alone, the F16 one in fast mode against
// llama.cpp's logits, and the Q5_K_M and IQ4_NL files (with the vendored
// Q3_K_M and Q4_1 ones, the newer GGUF types' device decoders); -short
// runs one case of each kind.
func TestGoldenEmulated(t *testing.T) {
	type run struct {
		kind, name string
		batch      int
		fast       bool
	}
	var runs []run
	for _, kind := range []string{"golden", "gguf"} {
		dirs, _ := filepath.Glob(filepath.Join("..", "testdata", kind, "*"))
		for _, dir := range dirs {
			runs = append(runs, run{kind, filepath.Base(dir), 1, false})
		}
	}
	if len(runs) == 0 {
		t.Fatal("no golden cases in ../testdata")
	}
	runs = append(runs, run{"golden", "gemma3_sliding_mqa", 4, false}, run{"golden", "qwen3_moe_normtopk", 4, false},
		run{"gguf", "qwen3moe_q8_0", 1, false}, run{"gguf", "qwen3_f16", 1, true},
		run{"gguf", "llama_q5_k_m", 1, false}, run{"gguf", "qwen3_iq4_nl", 1, false})
	short := map[run]bool{{"golden", "gemma3_sliding_mqa", 1, false}: true, {"golden", "gemma3_sliding_mqa", 4, false}: true,
		{"golden", "qwen3_moe_normtopk", 1, false}: true, {"gguf", "llama_q4_0", 1, false}: true, {"golden", "smolvlm-full", 1, false}: true}
	for _, r := range runs {
		if testing.Short() && !short[r] {
			continue
		}
		t.Run(fmt.Sprintf("%s/batch=%d/fast=%v", r.name, r.batch, r.fast), func(t *testing.T) {
			dir := testfiles.Fixture(t, r.kind, r.name)
			dev := cudaemu.New(t)
			check := RunWith
			if r.fast {
				check = RunFastWith
			}
			res := check(dir, Options{Device: dev, Batch: r.batch})
			if !res.Pass {
				t.Fatal(res)
			}
			n, bytes := dev.Allocations()
			t.Logf("%v (%d launches and products; %d allocations of %d bytes left)", res, dev.Calls(), n, bytes)
		})
	}
}

// TestOptionsEmulated holds the device runtime on the CUDA emulator to
// the CPU's under the options the golden cases leave at their defaults:
// an F16 KV cache (kv_store's rounding, F16 slabs, their reads), and fast
// mode on BF16 weights (to_half and half-precision products, the F16
// GELU table). Each case's input ids run as a prefill in chunks of 8 (the
// last one padded), then greedy decode steps, on the device and on the
// CPU with the same options, and on the CPU without them. The two
// computations differ in float32 summation order, and where a value lies
// that close to a rounding boundary of F16 or BF16 the two round it apart
// (2^-11 or 2^-8 of it): after that the runs differ by rounding noise of
// the option's own size. So a case passes when its logits agree within
// the case's tolerance, or when on average they differ by less than half
// as much as the option changes them: a device that ignored an option, or
// rounded otherwise, differs by about as much as the option does.
func TestOptionsEmulated(t *testing.T) {
	for _, c := range []struct {
		name string
		opts graphs.Options
	}{
		{"llama_smollm2_gqa_bf16", graphs.Options{Fast: true}},
		{"llama_smollm2_gqa_bf16", graphs.Options{KVCacheF16: true}},
		{"gpt2_original_bf16", graphs.Options{Fast: true, KVCacheF16: true}},
		{"gemma3_sliding_mqa", graphs.Options{KVCacheF16: true}},
	} {
		t.Run(fmt.Sprintf("%s/fast=%v/f16=%v", c.name, c.opts.Fast, c.opts.KVCacheF16), func(t *testing.T) {
			dir := filepath.Join("..", "testdata", "golden", c.name)
			var m meta
			b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			model, err := zoo.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			g, err := loaders.OpenSafetensors(filepath.Join(dir, "golden.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ids, err := readIDs(g, "input_ids")
			if err != nil {
				t.Fatal(err)
			}
			run := func(dev cuda.Backend, opts graphs.Options) [][]float32 {
				opts.Device, opts.Buckets = dev, []int{8}
				s, err := graphs.NewSession(model, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				rows, err := s.AppendAll(graphs.IDs(ids...))
				if err != nil {
					t.Fatal(err)
				}
				for range 6 {
					next := argmax(rows[len(rows)-1])
					logits, err := s.AppendInput(graphs.IDs(next))
					if err != nil {
						t.Fatal(err)
					}
					rows = append(rows, logits)
				}
				return rows
			}
			want, got, plain := run(nil, c.opts), run(cudaemu.New(t), c.opts), run(nil, graphs.Options{})
			var worst, diff, effect float64
			for i := range want {
				worst = max(worst, MaxAbsDiff(got[i], want[i]))
				for j := range want[i] {
					diff += math.Abs(float64(got[i][j] - want[i][j]))
					effect += math.Abs(float64(want[i][j] - plain[i][j]))
				}
			}
			t.Logf("the device's logits within %.3g of the CPU's; on average %.3g of the options' effect", worst, diff/effect)
			if worst > m.Tolerance.LogitsAtol && !(diff < effect/2) {
				t.Fatalf("the device's logits differ from the CPU's by %.3g > %g, on average by %.3g of what the options change",
					worst, m.Tolerance.LogitsAtol, diff/effect)
			}
		})
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TestCapturesEmulated compares what the device brings down besides
// logits with the CPU's: every hidden state and attention probability
// capture of each sequence of a batch of three, over prefills in chunks
// of 8, rows of several sequences in one forward and decode steps, with
// a sliding window among the layers.
func TestCapturesEmulated(t *testing.T) {
	for _, name := range []string{"qwen3_gqa_tied", "gemma3_sliding_mqa"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", "golden", name)
			model, err := zoo.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			type capture struct {
				shape  []int
				values []float32
			}
			run := func(dev cuda.Backend) []map[string]capture {
				b, err := graphs.NewBatch(model, graphs.BatchOptions{BlockTokens: 4, KVBudget: 16 << 20,
					Options: graphs.Options{Device: dev, Buckets: []int{8}, Capacity: 64,
						Capture: []string{graphs.HiddenStates + ".*", graphs.Attentions + ".*"}}})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				seqs := []graphs.SeqID{b.Add(), b.Add(), b.Add()}
				steps := [][][]int{ // per step, each sequence's ids (nil: not fed)
					{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {20, 21, 22}, nil},
					{{12}, {23}, {30, 31, 32, 33, 34}},
					{{13, 14, 15}, nil, {35}},
					{{16}, {24}, {36}},
				}
				var out []map[string]capture
				for _, step := range steps {
					var feeds []graphs.Feed
					for i, ids := range step {
						if ids != nil {
							feeds = append(feeds, graphs.Feed{Seq: seqs[i], Input: graphs.IDs(ids...)})
						}
					}
					outs, err := b.Run(context.Background(), feeds)
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range outs {
						m := map[string]capture{}
						for _, n := range o.CapturedNames() {
							v, _ := o.Captured(n)
							m[n] = capture{[]int(v.Shape().Clone()), slices.Clone(v.Float32s())}
						}
						out = append(out, m)
					}
				}
				return out
			}
			want, got := run(nil), run(cudaemu.New(t))
			if _, ok := want[0][graphs.Attentions+".0"]; !ok {
				t.Fatalf("no %s.0 among the captures", graphs.Attentions)
			}
			for i := range want {
				if len(got[i]) != len(want[i]) || len(want[i]) == 0 {
					t.Fatalf("output %d: %d captures, want %d", i, len(got[i]), len(want[i]))
				}
				for n, w := range want[i] {
					g := got[i][n]
					if !slices.Equal(g.shape, w.shape) {
						t.Fatalf("output %d: %s of shape %v, want %v", i, n, g.shape, w.shape)
					}
					if d := MaxAbsDiff(g.values, w.values); !(d <= 1e-4) {
						t.Errorf("output %d: %s differs by %.3g", i, n, d)
					}
				}
			}
		})
	}
}

// TestInputsEmulated feeds the device embedding rows instead of ids, and
// ids with some rows replaced by embeddings (an image's), in a batch with
// an ids-only sequence, and holds the logits to the CPU's.
func TestInputsEmulated(t *testing.T) {
	model, err := zoo.Load(filepath.Join("..", "testdata", "golden", "qwen3_gqa_tied"))
	if err != nil {
		t.Fatal(err)
	}
	D := model.HiddenSize()
	embeds := func(rows int, seed float32) []float32 {
		e := make([]float32, rows*D)
		for i := range e {
			e[i] = float32(math.Sin(float64(seed) + float64(i)*0.37))
		}
		return e
	}
	inputs := [][]graphs.Input{
		{graphs.Embeddings(embeds(5, 1)), graphs.IDs(1, 2, 3)},
		{graphs.Input{IDs: []int{4, 5, 6, 7, 8, 9}, Replace: []int{1, 2, 4}, Embeds: embeds(3, 2)}, graphs.IDs(10)},
		{graphs.IDs(11), graphs.Embeddings(embeds(1, 3))},
	}
	run := func(dev cuda.Backend) [][]float32 {
		b, err := graphs.NewBatch(model, graphs.BatchOptions{BlockTokens: 4, KVBudget: 16 << 20,
			Options: graphs.Options{Device: dev, Capacity: 64}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		seqs := []graphs.SeqID{b.Add(), b.Add()}
		var out [][]float32
		for _, step := range inputs {
			var feeds []graphs.Feed
			for i, in := range step {
				feeds = append(feeds, graphs.Feed{Seq: seqs[i], Input: in, Logits: graphs.AllLogits})
			}
			outs, err := b.Run(context.Background(), feeds)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range outs {
				out = append(out, o.Logits...)
			}
		}
		return out
	}
	want, got := run(nil), run(cudaemu.New(t))
	if len(got) != len(want) {
		t.Fatalf("%d rows of logits, want %d", len(got), len(want))
	}
	for i := range want {
		if d := MaxAbsDiff(got[i], want[i]); !(d <= 1e-4) {
			t.Errorf("row %d: logits differ by %.3g", i, d)
		}
	}
}

// TestFastRefusesEmulated: the check against llama.cpp's logits does not
// apply to a device's fast mode on quantized weights (its products are
// exact), and says so rather than failing on the numbers.
func TestFastRefusesEmulated(t *testing.T) {
	r := RunFastWith(filepath.Join("..", "testdata", "gguf", "llama_q4_0"), Options{Device: cudaemu.New(t)})
	if r.Pass || !strings.Contains(r.Reason, "exactly") {
		t.Errorf("fast mode on the device: %v", r)
	}
}
