// Package familytest holds the checks every model family's tests run, as
// mlx-lm's model_test_runner: golden cases, the runtime checks of Run (KV
// cache against the full forward, chunked prefill, embeddings as input,
// capture, concurrency, bad input, random checkpoints) and weight
// sensitivity.
package familytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/golden"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/generate"
)

// GoldenDir is a bundled golden case, from a package two levels below the
// repository root (zoo/<family>).
func GoldenDir(name string) string {
	testfiles.MustExpand()
	return filepath.Join("..", "..", "testdata", "golden", name)
}

// Golden runs bundled golden cases: full-forward logits and hidden states
// within each case's tolerance and the 12-token KV-cached greedy
// continuation exactly, alone and inside a batch of 8 sequences.
func Golden(t *testing.T, cases ...string) {
	t.Helper()
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(GoldenDir(name)); err != nil {
				t.Fatalf("golden case %s is not bundled: %v", name, err)
			}
			for _, batch := range []int{1, 8} {
				r := golden.RunWith(GoldenDir(name), golden.Options{Batch: batch})
				if !r.Pass || r.GreedyMatched != r.GreedyTotal || r.GreedyTotal == 0 {
					t.Fatalf("batch %d: %v", batch, r)
				}
				t.Logf("batch %d: %v", batch, r)
			}
			checkParamCount(t, GoldenDir(name))
		})
	}
}

// checkParamCount compares the tensors the model declares with the
// parameter count HF reported for the case (tied embeddings counted once).
func checkParamCount(t *testing.T, dir string) {
	t.Helper()
	var meta struct {
		ParamCount int64 `json:"param_count"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil || meta.ParamCount == 0 {
		t.Fatalf("golden.json param_count: %v", err)
	}
	params, err := zoo.Tensors(ParseConfig(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range params {
		n += p.Numel()
	}
	if n != meta.ParamCount {
		t.Errorf("config implies %d parameters, HF counted %d", n, meta.ParamCount)
	}
}

// ParseConfig parses dir/config.json.
func ParseConfig(t testing.TB, dir string) zoo.Config {
	t.Helper()
	_, data, err := loaders.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := zoo.ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Load loads the checkpoint in dir.
func Load(t testing.TB, dir string) zoo.Model {
	t.Helper()
	m, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ReadConfig returns dir/config.json as a map, for tests that edit keys.
func ReadConfig(t testing.TB, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// EditConfig parses dir/config.json after edit changed its keys.
func EditConfig(t testing.TB, dir string, edit func(m map[string]any)) (zoo.Config, error) {
	t.Helper()
	m := ReadConfig(t, dir)
	edit(m)
	b, _ := json.Marshal(m)
	return zoo.ParseConfig(b)
}

// LastLogits runs ids through a fresh session and returns the last logits.
func LastLogits(t testing.TB, m zoo.Model, ids []int) []float32 {
	t.Helper()
	s, err := graphs.NewSession(m, graphs.Options{Capacity: min(64, m.MaxPositions())})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Append(ids)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// MaxDiff is the largest absolute difference of two logit rows; NaN on
// either side gives +Inf, so a check that logits moved or stayed can never
// pass on NaN.
func MaxDiff(a, b []float32) float64 { return golden.MaxAbsDiff(a, b) }

// StorageTol bounds how far logits want may move when the same weights
// are stored otherwise: on AVX2 a matrix of a file mapping is laid out in
// panels (internal/simd's panels.go), whose products sum each output in
// order, while a matrix in memory runs on the dot tiles, which sum 8
// lanes and fold them. Both are float32 sums of the same products; the
// bound is float32 rounding over a few thousand of them, relative to the
// largest logit (measured: 1.4e-6 to 7.6e-6 on the tiny checkpoints),
// far below a weight lost in storage (a BF16 rounding moves them by 1e-3).
func StorageTol(want []float32) float64 {
	var big float64
	for _, v := range want {
		big = max(big, float64(v), -float64(v))
	}
	return 1e-5 * max(1, big)
}

// EveryWeightMatters perturbs each named tensor in turn and checks that the
// logits move: a weight the forward ignored would pass a golden test only by
// luck. Each tensor's data is swapped for a perturbed float32 copy and
// restored afterwards (loaded weights are read-only file mappings).
func EveryWeightMatters(t *testing.T, m zoo.Model, ids []int, names ...string) {
	t.Helper()
	base := LastLogits(t, m, ids)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			Perturb(t, m, name, func() {
				got := LastLogits(t, m, ids)
				if d := MaxDiff(base, got); d < 1e-4 || math.IsInf(d, 1) {
					t.Fatalf("changing %s moved the logits by %g (want a finite change of at least 1e-4)", name, d)
				}
			})
		})
	}
}

// Perturb runs check with tensor name scaled by 1.5 (and every seventh
// value shifted by 0.1), then restores it. Graphs bind weights when they
// are built, so check must build its own.
func Perturb(t *testing.T, m zoo.Model, name string, check func()) {
	t.Helper()
	p, ok := m.Params().Get(name)
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	dtype, saved, savedSlices, readOnly := p.DType, p.Data, p.Slices, p.ReadOnly
	defer func() { p.DType, p.Data, p.Slices, p.ReadOnly = dtype, saved, savedSlices, readOnly }()
	data := slices.Clone(p.Float32s())
	for i := range data {
		data[i] *= 1.5
		if i%7 == 0 {
			data[i] += 0.1
		}
	}
	if err := p.Set(graphs.F32, tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(data))); err != nil {
		t.Fatal(err)
	}
	check()
}

// Run is the runtime check every family runs on its tiny checkpoint (a
// golden case folder): the same model must give the same logits however
// its context is fed.
func Run(t *testing.T, dir string) {
	t.Helper()
	m := Load(t, dir)
	V := m.VocabSize()
	ids := make([]int, 21)
	for i := range ids {
		ids[i] = (i*7919 + 13) % V
	}
	newSession := func(t *testing.T, opts graphs.Options) *graphs.Session {
		t.Helper()
		if opts.Capacity == 0 {
			opts.Capacity = min(48, m.MaxPositions())
		}
		s, err := graphs.NewSession(m, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	full := newSession(t, graphs.Options{Capture: []string{graphs.HiddenStates + ".0"}})
	want, err := full.AppendAll(graphs.IDs(ids...))
	if err != nil {
		t.Fatal(err)
	}
	embeds, ok := full.Captured(graphs.HiddenStates + ".0")
	if !ok {
		t.Fatal("hidden_states.0 was not captured")
	}
	const tol = 5e-5 // float32 noise of another summation order

	t.Run("planned for a CUDA device", func(t *testing.T) {
		// Without a GPU: every op of a decode step and a prefill chunk has
		// a CUDA kernel whose launches pack, exact and fast.
		for _, fast := range []bool{false, true} {
			opts := graphs.BatchOptions{Options: graphs.Options{Capacity: min(48, m.MaxPositions()), Fast: fast}}
			counts, err := graphs.PlanDevice(m, opts, 1, 4, 8)
			if err != nil {
				t.Fatalf("fast=%v: %v", fast, err)
			}
			if counts[0] < m.NumLayers() {
				t.Errorf("fast=%v: %d launches for %d layers", fast, counts[0], m.NumLayers())
			}
		}
	})

	t.Run("kv cache against full forward", func(t *testing.T) {
		// Prompt of 11 (chunks 8 + 2 + 1), then one token at a time.
		s := newSession(t, graphs.Options{})
		got, err := s.Append(ids[:11])
		for i := 11; err == nil; i++ {
			if d := MaxDiff(got, want[i-1]); d > tol {
				t.Fatalf("position %d: cached logits differ from the full forward by %g", i-1, d)
			}
			if i == len(ids) {
				return
			}
			got, err = s.Append(ids[i : i+1])
		}
		t.Fatal(err)
	})

	t.Run("reused logits buffer", func(t *testing.T) {
		// Options.ReuseLogits: the same logits as fresh slices, in one
		// buffer that every step overwrites.
		s := newSession(t, graphs.Options{ReuseLogits: true})
		got, err := s.Append(ids[:11])
		if err != nil {
			t.Fatal(err)
		}
		first := got
		for i := 11; i <= len(ids); i++ {
			if d := MaxDiff(got, want[i-1]); d > tol {
				t.Fatalf("position %d: reused logits differ from the full forward by %g", i-1, d)
			}
			if &got[0] != &first[0] {
				t.Fatalf("position %d: the logits came in a new slice", i-1)
			}
			if i == len(ids) {
				break
			}
			if got, err = s.Append(ids[i : i+1]); err != nil {
				t.Fatal(err)
			}
		}
		if MaxDiff(first, want[len(ids)-1]) > tol {
			t.Fatal("the first step's slice was not overwritten by the last step's logits")
		}
	})

	t.Run("F16 KV cache", func(t *testing.T) {
		// Options.KVCacheF16: half the cache's bytes; keys and values
		// rounded to F16, which moves the logits a little (and must
		// move them: the rounding happens), stepped or whole. Stepped
		// and whole differ by more than float32 noise: a key that two
		// graphs compute an ulp apart can round to neighbouring F16
		// values, as llama.cpp's own F16 cache does.
		s := newSession(t, graphs.Options{KVCacheF16: true})
		if f32 := newSession(t, graphs.Options{}); 2*s.Pool().Budget() != f32.Pool().Budget() {
			t.Fatalf("F16 cache's budget is %d bytes, float32's %d", s.Pool().Budget(), f32.Pool().Budget())
		}
		whole, err := newSession(t, graphs.Options{KVCacheF16: true}).AppendAll(graphs.IDs(ids...))
		if err != nil {
			t.Fatal(err)
		}
		near := func(got, ref []float32) (float64, bool) {
			scale := 0.0
			for _, v := range ref {
				scale = max(scale, math.Abs(float64(v)))
			}
			d := MaxDiff(got, ref)
			return d, d <= 1e-2*scale+tol
		}
		got, err := s.Append(ids[:11])
		moved := 0.0
		for i := 11; err == nil; i++ {
			if d, ok := near(got, want[i-1]); !ok {
				t.Fatalf("position %d: F16-cache logits differ from float32's by %g", i-1, d)
			} else {
				moved = max(moved, d)
			}
			if d, ok := near(got, whole[i-1]); !ok {
				t.Fatalf("position %d: stepped F16-cache logits differ from the whole sequence's by %g", i-1, d)
			}
			if i == len(ids) {
				break
			}
			got, err = s.Append(ids[i : i+1])
		}
		if err != nil {
			t.Fatal(err)
		}
		if moved == 0 {
			t.Fatal("the F16 cache gave exactly the float32 logits: nothing was rounded")
		}
	})

	t.Run("chunked prefill", func(t *testing.T) {
		// Buckets of 2, 3 and 5 cut the prompt in many places, across
		// every sliding window of the tiny configs.
		for _, buckets := range [][]int{{2}, {3}, {5}, {4, 16}} {
			s := newSession(t, graphs.Options{Buckets: buckets})
			rows, err := s.AppendAll(graphs.IDs(ids...))
			if err != nil {
				t.Fatal(err)
			}
			for i := range rows {
				if d := MaxDiff(rows[i], want[i]); d > tol {
					t.Fatalf("buckets %v: row %d differs from the full forward by %g", buckets, i, d)
				}
			}
		}
	})

	t.Run("embeddings as input", func(t *testing.T) {
		D := m.HiddenSize()
		rows := embeds.Data().([]float32)
		s := newSession(t, graphs.Options{})
		last, err := s.Append(ids)
		if err != nil {
			t.Fatal(err)
		}
		s.Reset()
		got, err := s.AppendInput(graphs.Embeddings(rows))
		if err != nil {
			t.Fatal(err)
		}
		if d := MaxDiff(got, last); d != 0 {
			t.Errorf("the ids' own embeddings as input differ from the ids by %g", d)
		}
		// Rows 3 and 7 replaced by their own embeddings: the same model.
		s.Reset()
		merged := graphs.Input{IDs: ids, Replace: []int{3, 7}, Embeds: append(slices.Clone(rows[3*D:4*D]), rows[7*D:8*D]...)}
		if got, err = s.AppendInput(merged); err != nil {
			t.Fatal(err)
		}
		if d := MaxDiff(got, last); d != 0 {
			t.Errorf("merging the ids' own embeddings changed the logits by %g", d)
		}
		// Other embeddings in those rows change what follows.
		s.Reset()
		other := slices.Clone(merged.Embeds)
		for i := range other {
			other[i] = -other[i]
		}
		if got, err = s.AppendInput(graphs.Input{IDs: ids, Replace: []int{3, 7}, Embeds: other}); err != nil {
			t.Fatal(err)
		}
		if d := MaxDiff(got, last); d < 1e-4 || math.IsInf(d, 1) {
			t.Errorf("replacing rows 3 and 7 moved the logits by %g", d)
		}
	})

	t.Run("capture", func(t *testing.T) {
		L := m.NumLayers()
		s := newSession(t, graphs.Options{Capture: []string{graphs.HiddenStates + ".*", graphs.Attentions + ".*"}})
		if _, err := s.Append(ids[:9]); err != nil {
			t.Fatal(err)
		}
		got, err := s.Append(ids[9:10])
		if err != nil {
			t.Fatal(err)
		}
		if d := MaxDiff(got, want[9]); d > tol {
			t.Errorf("capturing changed the decode logits by %g", d)
		}
		for i := 0; i <= L; i++ {
			h, ok := s.Captured(fmt.Sprintf("%s.%d", graphs.HiddenStates, i))
			if !ok || !slices.Equal([]int(h.Shape()), []int{1, m.HiddenSize()}) {
				t.Fatalf("hidden_states.%d after a decode step: %v %v", i, ok, h)
			}
		}
		for i, c := range m.Params().Caches() {
			if c.Kind == graphs.NoCache {
				continue
			}
			a, ok := s.Captured(fmt.Sprintf("%s.%d", graphs.Attentions, i))
			if !ok {
				t.Fatalf("attentions.%d not captured", i)
			}
			sh := a.Shape()
			if len(sh) != 3 || sh[0] != 1 || sh[2] != 10 {
				t.Fatalf("attentions.%d has shape %v, want [1, heads, 10]", i, sh)
			}
			p := a.Data().([]float32)
			for h := 0; h < sh[1]; h++ {
				row := p[h*10 : (h+1)*10]
				var sum float64
				for k, v := range row {
					sum += float64(v)
					if c.Window > 0 && k <= 9-c.Window && v != 0 {
						t.Errorf("layer %d head %d attends key %d outside its window of %d", i, h, k, c.Window)
					}
				}
				if math.Abs(sum-1) > 1e-5 {
					t.Errorf("layer %d head %d: probabilities sum to %g", i, h, sum)
				}
			}
		}
		plain := newSession(t, graphs.Options{})
		names, err := plain.CaptureNames(1)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, graphs.Attentions) }) {
			t.Error("a session that captures nothing computes attention probabilities")
		}
	})

	t.Run("sliding caches hold their window", func(t *testing.T) {
		s := newSession(t, graphs.Options{})
		// Long enough for a sliding layer to give blocks back.
		long := make([]int, min(s.Capacity()-1, 3*s.Pool().BlockTokens()+40))
		for i := range long {
			long[i] = ids[i%len(ids)]
		}
		if _, err := s.Append(long); err != nil {
			t.Fatal(err)
		}
		for i, c := range m.Params().Caches() {
			if c.Kind == graphs.NoCache {
				continue
			}
			held, err := s.Held(i)
			if err != nil {
				t.Fatal(err)
			}
			// A sliding layer holds its window, in whole blocks: at
			// most a block more on either side.
			want, slack := s.Pos(), 0
			if c.Kind == graphs.SlidingCache && c.Window < want {
				want, slack = c.Window, 2*s.Pool().BlockTokens()
			}
			if held < want || held > want+slack {
				t.Errorf("layer %d (window %d) holds %d of %d positions, want %d (+%d)", i, c.Window, held, s.Pos(), want, slack)
			}
		}
	})

	t.Run("concurrent sessions", func(t *testing.T) {
		greedy := func(prompt []int) ([]int, error) {
			s, err := graphs.NewSession(m, graphs.Options{Capacity: min(48, m.MaxPositions())})
			if err != nil {
				return nil, err
			}
			defer s.Close()
			l, err := s.Append(prompt)
			var out []int
			for i := 0; err == nil && i < 6; i++ {
				next := generate.Argmax(l)
				out = append(out, next)
				l, err = s.Append([]int{next})
			}
			return out, err
		}
		prompts := [][]int{ids[:3], ids[2:13], ids[5:6], ids[:9]}
		wantTokens := make([][]int, len(prompts))
		for i, p := range prompts {
			if wantTokens[i], err = greedy(p); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(prompts))
		for rep := 0; rep < 2; rep++ {
			for i, p := range prompts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, err := greedy(p)
					if err == nil && !slices.Equal(got, wantTokens[i]) {
						err = errors.New("concurrent generation differs from the lone one")
					}
					if err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		s := newSession(t, graphs.Options{Capacity: 8})
		D := m.HiddenSize()
		for _, c := range []struct {
			in     graphs.Input
			errHas string
		}{
			{graphs.Input{}, "no tokens"},
			{graphs.IDs(1, V), fmt.Sprintf("token %d", V)},
			{graphs.IDs(-1), "token -1"},
			{graphs.IDs(1, 2, 3, 4, 5, 6, 7, 8, 9), "capacity of 8"},
			{graphs.Embeddings(make([]float32, D+1)), "hidden size"},
			{graphs.Input{IDs: []int{1, 2}, Replace: []int{2}, Embeds: make([]float32, D)}, "replaced row 2"},
			{graphs.Input{IDs: []int{1, 2}, Replace: []int{0}, Embeds: make([]float32, 2*D)}, "embedding values"},
		} {
			if _, err := s.AppendInput(c.in); err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("AppendInput(%d ids, %d embeds): got %v, want an error mentioning %q", len(c.in.IDs), len(c.in.Embeds), err, c.errHas)
			}
		}
		if s.Pos() != 0 {
			t.Errorf("rejected inputs advanced the session to %d", s.Pos())
		}
		if _, err := graphs.NewSession(m, graphs.Options{Capacity: m.MaxPositions() + 1}); err == nil {
			t.Error("a context larger than max_position_embeddings was accepted")
		}
	})

	t.Run("random checkpoint equals the in-memory model", func(t *testing.T) {
		cfgJSON, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := zoo.ParseConfig(cfgJSON)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := zoo.NewRandom(cfg, 42)
		if err != nil {
			t.Fatal(err)
		}
		prompt := ids[:6]
		wantLogits := LastLogits(t, mem, prompt)
		for _, dtype := range []string{"f32", "bf16"} {
			out := t.TempDir()
			if err := zoo.WriteRandomCheckpoint(cfgJSON, out, dtype, 42); err != nil {
				t.Fatal(err)
			}
			loaded := Load(t, out)
			d := MaxDiff(wantLogits, LastLogits(t, loaded, prompt))
			// The same values; only BLAS's summation order may differ, as
			// its kernels split a dot product by the data's alignment (a
			// mapped file's tensors are 8-byte aligned, heap ones 16).
			if dtype == "f32" && d > 1e-5 {
				t.Errorf("f32 checkpoint differs from the in-memory model by %g", d)
			}
			if dtype == "bf16" && (d == 0 || d > 0.05) {
				t.Errorf("bf16 checkpoint differs by %g, want small but nonzero rounding", d)
			}
		}
		other, err := zoo.NewRandom(cfg, 43)
		if err != nil {
			t.Fatal(err)
		}
		if MaxDiff(wantLogits, LastLogits(t, other, prompt)) == 0 {
			t.Error("seeds 42 and 43 gave the same model")
		}
	})
}

// ReadConfigBytes returns dir/config.json.
func ReadConfigBytes(t testing.TB, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
