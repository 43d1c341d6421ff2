// Package golden checks a model against a golden case: a tiny Hugging Face
// checkpoint plus the logits and greedy continuation transformers computes
// for it (format: ../shared/golden/README.md), and where a case has them
// its gradients (grads.go), SmolVLM's preprocessing and vision tower
// (preprocess.go, vlm.go) and llama.cpp's fast-mode logits (fast.go). It
// is what `gozoo golden` and the model tests run, so it sits above zoo,
// train and generate.
package golden

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/generate"
)

// Result is the outcome of one case.
type Result struct {
	Case string
	Pass bool
	// Reason says why a case failed.
	Reason string
	// LogitsMaxAbs is the largest |ours - golden| over the full forward's
	// logits and the greedy steps' logits.
	LogitsMaxAbs float64
	// HiddenMaxAbs is the largest |ours - golden| over the full forward's
	// hidden states (embedding output, each layer, final norm).
	HiddenMaxAbs float64
	// GreedyMatched counts greedy tokens equal to the golden ones before the
	// first difference, of GreedyTotal.
	GreedyMatched, GreedyTotal int
	Tolerance                  float64
	// GradsChecked says the case's grads.safetensors was checked;
	// GradsMaxRel is the largest max|g - ref| / max(max|ref|, floor)
	// over its tensors, the figure its rtol bounds.
	GradsChecked bool
	GradsMaxRel  float64
	// Detail replaces the figures above in the report of a case that
	// checks something else (an image processor, a vision tower).
	Detail string
}

// String is the one-line report `gozoo golden` prints.
func (r Result) String() string {
	if !r.Pass {
		return fmt.Sprintf("FAIL %s %s", r.Case, r.Reason)
	}
	if r.Detail != "" {
		return fmt.Sprintf("PASS %s %s", r.Case, r.Detail)
	}
	s := fmt.Sprintf("PASS %s logits_max_abs=%.3g hidden_max_abs=%.3g greedy=%d/%d", r.Case, r.LogitsMaxAbs, r.HiddenMaxAbs, r.GreedyMatched, r.GreedyTotal)
	if r.GradsChecked {
		s += fmt.Sprintf(" grads_max_rel=%.3g", r.GradsMaxRel)
	}
	return s
}

type meta struct {
	Case      string `json:"case"`
	Tolerance struct {
		LogitsAtol float64 `json:"logits_atol"`
		HiddenAtol float64 `json:"hidden_states_atol"`
	} `json:"tolerance"`
	Adapter *adapterMeta `json:"adapter"`
}

// Run checks the case in dir. Errors (unreadable files, unsupported model
// types) come back as a failed Result whose Reason says what went wrong.
func Run(dir string) Result { return RunWith(dir, Options{}) }

// RunWith is Run with options (a batched run).
func RunWith(dir string, o Options) Result {
	r := Result{Case: filepath.Base(filepath.Clean(dir))}
	runCase := run
	if isVLMCase(dir) {
		runCase = runVLM
	}
	if err := runCase(dir, &r, o); err != nil {
		r.Pass, r.Reason = false, err.Error()
	}
	return r
}

func run(dir string, r *Result, o Options) error {
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("golden.json: %w", err)
	}
	if m.Case != "" {
		r.Case = m.Case
	}
	model, err := zoo.Load(dir)
	if err != nil {
		var unsupported *zoo.ErrUnsupported
		if errors.As(err, &unsupported) {
			return fmt.Errorf("model_type %q is not supported yet", unsupported.ModelType)
		}
		return err
	}
	if err := applyAdapter(dir, model, m.Adapter, o.Adapter); err != nil {
		return err
	}
	r.Tolerance = m.Tolerance.LogitsAtol
	if r.Tolerance <= 0 {
		return errors.New("golden.json: no tolerance.logits_atol")
	}
	g, err := loaders.OpenSafetensors(filepath.Join(dir, "golden.safetensors"))
	if err != nil {
		return err
	}
	defer g.Close()
	if m.Tolerance.HiddenAtol <= 0 {
		return errors.New("golden.json: no tolerance.hidden_states_atol")
	}
	for _, name := range []string{"input_ids", "logits", "hidden_states", "greedy_prompt", "greedy_ids", "greedy_logits"} {
		if !g.Has(name) {
			return fmt.Errorf("golden.safetensors has no %q: not a decoder case", name)
		}
	}
	ids, err := readIDs(g, "input_ids")
	if err != nil {
		return err
	}
	want, _, err := g.Float32s("logits")
	if err != nil {
		return err
	}
	full, err := newRunner(model, graphs.Options{Capture: []string{graphs.HiddenStates + ".*"}}, o)
	if err != nil {
		return err
	}
	defer full.Close()

	// 1. The full forward over input_ids, with its hidden states.
	rows, err := full.AppendAll(graphs.IDs(ids...))
	if err != nil {
		return err
	}
	V := model.VocabSize()
	if len(want) != len(ids)*V {
		return fmt.Errorf("golden logits hold %d values, want %d x %d", len(want), len(ids), V)
	}
	for t, row := range rows {
		r.LogitsMaxAbs = max(r.LogitsMaxAbs, MaxAbsDiff(row, want[t*V:(t+1)*V]))
	}
	if r.LogitsMaxAbs > r.Tolerance {
		return fmt.Errorf("full-forward logits differ by %.3g > %g%s", r.LogitsMaxAbs, r.Tolerance, adapterHint(m.Adapter, r.LogitsMaxAbs))
	}
	if err := compareHidden(full, g, model.NumLayers(), len(ids), model.HiddenSize(), r); err != nil {
		return err
	}
	if r.HiddenMaxAbs > m.Tolerance.HiddenAtol {
		return fmt.Errorf("hidden states differ by %.3g > %g", r.HiddenMaxAbs, m.Tolerance.HiddenAtol)
	}

	// 2. KV-cached greedy decode from greedy_prompt.
	prompt, err := readIDs(g, "greedy_prompt")
	if err != nil {
		return err
	}
	greedy, err := readIDs(g, "greedy_ids")
	if err != nil {
		return err
	}
	stepLogits, _, err := g.Float32s("greedy_logits")
	if err != nil {
		return err
	}
	if err := greedyDecode(model, graphs.IDs(prompt...), greedy, stepLogits, r, o); err != nil {
		return err
	}
	if r.LogitsMaxAbs > r.Tolerance {
		return fmt.Errorf("greedy-step logits differ by %.3g > %g", r.LogitsMaxAbs, r.Tolerance)
	}
	// 3. The loss's gradients, where the case has them.
	if err := checkGrads(dir, model, ids, r); err != nil {
		return err
	}
	r.Pass = true
	return nil
}

// greedyDecode prefills prompt in a fresh session and decodes greedily
// over the KV cache, checking each step's choice against greedy and its
// logits against stepLogits [steps, V] (the worst difference goes to
// r.LogitsMaxAbs).
func greedyDecode(model zoo.Model, prompt graphs.Input, greedy []int, stepLogits []float32, r *Result, o Options) error {
	V := model.VocabSize()
	r.GreedyTotal = len(greedy)
	if len(stepLogits) != len(greedy)*V {
		return fmt.Errorf("golden step logits hold %d values, want %d x %d", len(stepLogits), len(greedy), V)
	}
	sess, err := newRunner(model, graphs.Options{}, o)
	if err != nil {
		return err
	}
	defer sess.Close()
	logits, err := sess.AppendInput(prompt)
	if err != nil {
		return err
	}
	for k := range greedy {
		r.LogitsMaxAbs = max(r.LogitsMaxAbs, MaxAbsDiff(logits, stepLogits[k*V:(k+1)*V]))
		got := generate.Argmax(logits)
		if got != greedy[k] {
			return fmt.Errorf("greedy=%d/%d: step %d chose token %d, golden %d", r.GreedyMatched, r.GreedyTotal, k, got, greedy[k])
		}
		r.GreedyMatched++
		if k+1 < len(greedy) {
			if logits, err = sess.AppendInput(graphs.IDs(got)); err != nil {
				return err
			}
		}
	}
	return nil
}

func readIDs(f *loaders.SafetensorsFile, name string) ([]int, error) {
	v, _, err := f.ReadInt64(name)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out, nil
}

// compareHidden checks the captured hidden states against golden
// hidden_states [L+1, T, D].
func compareHidden(sess runner, g *loaders.SafetensorsFile, L, T, D int, r *Result) error {
	want, shape, err := g.Float32s("hidden_states")
	if err != nil {
		return err
	}
	if len(shape) != 3 || shape[0] != L+1 || shape[1] != T || shape[2] != D {
		return fmt.Errorf("golden hidden_states has shape %v, want [%d %d %d]", shape, L+1, T, D)
	}
	for i := 0; i <= L; i++ {
		got, ok := sess.Captured(fmt.Sprintf("%s.%d", graphs.HiddenStates, i))
		if !ok {
			return fmt.Errorf("hidden state %d was not captured", i)
		}
		if !slices.Equal([]int(got.Shape()), []int{T, D}) {
			return fmt.Errorf("hidden state %d has shape %v, want [%d %d]", i, got.Shape(), T, D)
		}
		r.HiddenMaxAbs = max(r.HiddenMaxAbs, MaxAbsDiff(got.Data().([]float32), want[i*T*D:(i+1)*T*D]))
	}
	return nil
}

// MaxAbsDiff is the largest |a[i] - b[i]|; a NaN on either side, or a
// length mismatch, gives +Inf, so that no comparison passes on NaN.
func MaxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}
