package golden

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/generate"
)

// Fast mode (graphs.Options.Fast) computes as llama.cpp's CPU backend does,
// so a GGUF case checks it against llama.cpp's own outputs on the same
// file, llama_logits and llama_greedy_ids, instead of transformers'.
//
// The tolerance. With llama.cpp's three deviations emulated (8-bit
// activations in quantized products, 16-bit activations in F16/BF16
// products, the F16 GELU table), its logits are reproduced to ~1e-6, the
// float32 noise of a different summation order (the case README's
// emulated_max_abs_diff); fast mode does as well on four of the six cases
// (gpt2_q4_0 9.5e-7, llama_q4_0 1.9e-6; the Qwen3 cases to the F16
// rounding of their stored logits). But that noise can move an activation
// across a rounding boundary of its 8-bit level, and a one-level step of
// one activation shifts the logits of its position and of every later one
// that attends to it by a few 1e-2: the README measures 0.06 after the one
// tie its emulation met in gemma3_q4_k_m (at position 14); fast mode meets
// one at position 2 of that case (an activation 4 float32 ulps from a
// boundary), 0.126 at worst and 0.017 on average after it. So:
//   - FastMaxAtol bounds the worst logit: a few such steps, 0.2.
//   - FastMeanAtol bounds the mean |ours - llama.cpp| over all logits:
//     1.5x the mean of the case where a tie came earliest, 0.025. Exact
//     mode fails it on every quantized case (its means are 0.028 to 0.10,
//     golden.json llama_cpp.logits_mean_abs_diff), so a fast mode that
//     did not emulate llama.cpp's quantization would fail it too.
//
// llama_logits are stored as F16 for the 151,936-entry vocabulary: their
// own rounding (up to 2^-11 of a value) is added to both bounds. The
// greedy continuation must equal llama_greedy_ids exactly (every case's
// top-1 margins are far above these differences), which exact mode fails
// on llama_q4_0 and gpt2_q4_0.
const (
	FastMeanAtol = 0.025
	FastMaxAtol  = 0.2
)

// RunFast checks the GGUF case in dir in fast mode against llama.cpp's
// logits and greedy continuation.
func RunFast(dir string) Result { return RunFastWith(dir, Options{}) }

// RunFastWith is RunFast with options (a batched run).
func RunFastWith(dir string, o Options) Result {
	r := Result{Case: filepath.Base(filepath.Clean(dir))}
	if err := runFast(dir, &r, true, o); err != nil {
		r.Pass, r.Reason = false, err.Error()
	}
	return r
}

// runFast checks against llama.cpp with Options.Fast set to fast (false
// shows that the check tells exact mode apart).
func runFast(dir string, r *Result, fast bool, o Options) error {
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return err
	}
	var m struct {
		Case     string `json:"case"`
		LlamaCPP struct {
			Dtype string `json:"llama_logits_dtype"`
		} `json:"llama_cpp"`
		KV map[string]json.RawMessage `json:"llama_cpp_kv"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("golden.json: %w", err)
	}
	if m.Case != "" {
		r.Case = m.Case
	}
	logitsKey, greedyKey, dtype := "llama_logits", "llama_greedy_ids", m.LlamaCPP.Dtype
	held := true // the references a fast mode is held to
	var refused string
	if o.KVCache.Quantized() {
		kv, err := kvReference(m.KV, o.KVCache)
		if err != nil {
			return err
		}
		logitsKey, greedyKey, dtype, held, refused = kv.LogitsKey, kv.GreedyKey, kv.Dtype, kv.held, kv.Refused
	}
	path, ok := zoo.GGUFPath(dir)
	if !ok {
		return fmt.Errorf("%s holds no GGUF file: fast mode is checked against llama.cpp on GGUF cases", dir)
	}
	model, err := zoo.LoadGGUF(path, nil)
	if err != nil {
		return err
	}
	if o.Device != nil && fast {
		// A device computes fast mode's quantized products exactly
		// (layers/cuda_matmul.go), not with llama.cpp's 8-bit
		// activations, so they cannot follow llama.cpp's logits.
		for _, p := range model.Params().All() {
			if _, q := p.DType.Quant(); q {
				return fmt.Errorf("fast mode on %s computes products with quantized weights (%s is %s) exactly, not as llama.cpp does: the check against llama.cpp applies on the CPU", o.Device, p.Name, p.DType)
			}
		}
	}
	g, err := loaders.OpenSafetensors(filepath.Join(dir, "golden.safetensors"))
	if err != nil {
		return err
	}
	defer g.Close()
	if refused != "" {
		// llama.cpp refused the cache type for this model: so must we.
		sess, err := newRunner(model, graphs.Options{Fast: fast}, o)
		if err == nil {
			sess.Close()
			return fmt.Errorf("llama.cpp refuses a %s KV cache here (golden.json llama_cpp_kv.%s.refused), gozoo accepts it", o.KVCache, o.KVCache)
		}
		r.Detail, r.Pass = fmt.Sprintf("kv %s refused, as llama.cpp refuses it: %v", o.KVCache, err), true
		return nil
	}
	for _, name := range []string{"input_ids", logitsKey, "greedy_prompt", greedyKey} {
		if !g.Has(name) {
			return fmt.Errorf("golden.safetensors has no %q: not a GGUF case", name)
		}
	}
	ids, err := readIDs(g, "input_ids")
	if err != nil {
		return err
	}
	want, _, err := g.Float32s(logitsKey)
	if err != nil {
		return err
	}
	V := model.VocabSize()
	if len(want) != len(ids)*V {
		return fmt.Errorf("%s hold %d values, want %d x %d", logitsKey, len(want), len(ids), V)
	}
	sess, err := newRunner(model, graphs.Options{Fast: fast}, o)
	if err != nil {
		return err
	}
	defer sess.Close()
	rows, err := sess.AppendAll(graphs.IDs(ids...))
	if err != nil {
		return err
	}
	// The F16 rounding of stored llama_logits: at most 2^-11 of a value,
	// for the largest (the max bound) and on average (the mean bound).
	var stored, storedMean float64
	if dtype == "F16" {
		var top, sum float64
		for _, v := range want {
			top = max(top, math.Abs(float64(v)))
			sum += math.Abs(float64(v))
		}
		stored, storedMean = top*math.Exp2(-11), sum/float64(len(want))*math.Exp2(-11)
	}
	var sum float64
	for t, row := range rows {
		for j, v := range row {
			d := math.Abs(float64(v) - float64(want[t*V+j]))
			sum += d
			r.LogitsMaxAbs = max(r.LogitsMaxAbs, d)
		}
	}
	mean := sum / float64(len(want))
	r.Tolerance = FastMaxAtol + stored
	kvNote := ""
	if o.KVCache.Quantized() {
		kvNote = fmt.Sprintf(" kv=%s", o.KVCache)
	}
	if !held {
		// golden.json llama_cpp_kv.checks leaves this type out: llama.cpp's
		// own emulation misses it by more than the tolerance (a rounding
		// tie), so the figures are reported and not judged.
		r.Detail = fmt.Sprintf("fast%s vs llama.cpp: not held (golden.json llama_cpp_kv.checks omits it): logits_max_abs=%.3g logits_mean_abs=%.3g",
			kvNote, r.LogitsMaxAbs, mean)
		r.Pass = true
		return nil
	}
	if mean > FastMeanAtol+storedMean {
		return fmt.Errorf("fast-mode logits differ from llama.cpp's by %.3g on average > %.3g (max %.3g)", mean, FastMeanAtol+storedMean, r.LogitsMaxAbs)
	}
	if r.LogitsMaxAbs > r.Tolerance {
		return fmt.Errorf("fast-mode logits differ from llama.cpp's by %.3g > %.3g", r.LogitsMaxAbs, r.Tolerance)
	}

	prompt, err := readIDs(g, "greedy_prompt")
	if err != nil {
		return err
	}
	greedy, err := readIDs(g, greedyKey)
	if err != nil {
		return err
	}
	dec, err := newRunner(model, graphs.Options{Fast: fast}, o)
	if err != nil {
		return err
	}
	defer dec.Close()
	logits, err := dec.AppendInput(graphs.IDs(prompt...))
	if err != nil {
		return err
	}
	r.GreedyTotal = len(greedy)
	for k := range greedy {
		got := generate.Argmax(logits)
		if got != greedy[k] {
			return fmt.Errorf("llama greedy=%d/%d: step %d chose token %d, llama.cpp %d", r.GreedyMatched, r.GreedyTotal, k, got, greedy[k])
		}
		r.GreedyMatched++
		if k+1 < len(greedy) {
			if logits, err = dec.AppendInput(graphs.IDs(got)); err != nil {
				return err
			}
		}
	}
	r.Detail = fmt.Sprintf("fast%s vs llama.cpp: logits_max_abs=%.3g logits_mean_abs=%.3g (tol %.3g / %.3g) llama_greedy=%d/%d",
		kvNote, r.LogitsMaxAbs, mean, r.Tolerance, FastMeanAtol+storedMean, r.GreedyMatched, r.GreedyTotal)
	r.Pass = true
	return nil
}

// kvRef is golden.json's llama_cpp_kv entry for one cache type.
type kvRef struct {
	LogitsKey string `json:"logits_key"`
	GreedyKey string `json:"greedy_ids_key"`
	Dtype     string `json:"logits_dtype"`
	Refused   string `json:"refused"`
	held      bool
}

// kvReference reads the references of a quantized cache type from
// golden.json's llama_cpp_kv: its keys, or llama.cpp's refusal, and
// whether "checks" holds fast mode to them.
func kvReference(kv map[string]json.RawMessage, t graphs.KVCacheType) (kvRef, error) {
	var ref kvRef
	if kv == nil {
		return ref, fmt.Errorf("golden.json has no llama_cpp_kv: no llama.cpp references with a %s KV cache", t)
	}
	raw, ok := kv[t.String()]
	if !ok {
		return ref, fmt.Errorf("golden.json llama_cpp_kv has no %s entry", t)
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		return ref, fmt.Errorf("golden.json llama_cpp_kv.%s: %w", t, err)
	}
	var checks string
	if c, ok := kv["checks"]; ok {
		if err := json.Unmarshal(c, &checks); err != nil {
			return ref, fmt.Errorf("golden.json llama_cpp_kv.checks: %w", err)
		}
	}
	ref.held = slices.Contains(strings.Fields(checks), t.String())
	if ref.Refused == "" && (ref.LogitsKey == "" || ref.GreedyKey == "") {
		return ref, fmt.Errorf("golden.json llama_cpp_kv.%s names no logits_key and greedy_ids_key", t)
	}
	return ref, nil
}
