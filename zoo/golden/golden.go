// Package golden checks a model against a golden case: a tiny Hugging Face
// checkpoint plus the logits and greedy continuation transformers computes
// for it (format: ../shared/golden/README.md). It is what `gozoo golden`
// and the model tests run.
package golden

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
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
	// GreedyMatched counts greedy tokens equal to the golden ones before the
	// first difference, of GreedyTotal.
	GreedyMatched, GreedyTotal int
	Tolerance                  float64
}

// String is the one-line report `gozoo golden` prints.
func (r Result) String() string {
	if !r.Pass {
		return fmt.Sprintf("FAIL %s %s", r.Case, r.Reason)
	}
	return fmt.Sprintf("PASS %s logits_max_abs=%.3g greedy=%d/%d", r.Case, r.LogitsMaxAbs, r.GreedyMatched, r.GreedyTotal)
}

type meta struct {
	Case      string `json:"case"`
	Tolerance struct {
		LogitsAtol float64 `json:"logits_atol"`
	} `json:"tolerance"`
}

// Run checks the case in dir. Errors (unreadable files, unsupported model
// types) come back as a failed Result whose Reason says what went wrong.
func Run(dir string) Result {
	r := Result{Case: filepath.Base(filepath.Clean(dir))}
	if err := run(dir, &r); err != nil {
		r.Pass, r.Reason = false, err.Error()
	}
	return r
}

func run(dir string, r *Result) error {
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
	r.Tolerance = m.Tolerance.LogitsAtol
	if r.Tolerance <= 0 {
		return errors.New("golden.json: no tolerance.logits_atol")
	}
	g, err := loaders.OpenSafetensors(filepath.Join(dir, "golden.safetensors"))
	if err != nil {
		return err
	}
	defer g.Close()
	for _, name := range []string{"input_ids", "logits", "greedy_prompt", "greedy_ids", "greedy_logits"} {
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
	sess, err := graphs.NewSession(model, graphs.Options{})
	if err != nil {
		return err
	}
	defer sess.Close()

	// 1. The full forward over input_ids.
	rows, err := sess.Logits(ids)
	if err != nil {
		return err
	}
	V := model.VocabSize()
	if len(want) != len(ids)*V {
		return fmt.Errorf("golden logits hold %d values, want %d x %d", len(want), len(ids), V)
	}
	for t, row := range rows {
		r.LogitsMaxAbs = max(r.LogitsMaxAbs, maxAbsDiff(row, want[t*V:(t+1)*V]))
	}
	if r.LogitsMaxAbs > r.Tolerance {
		return fmt.Errorf("full-forward logits differ by %.3g > %g", r.LogitsMaxAbs, r.Tolerance)
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
	r.GreedyTotal = len(greedy)
	sess.Reset()
	logits, err := sess.Append(prompt)
	if err != nil {
		return err
	}
	for k := range greedy {
		r.LogitsMaxAbs = max(r.LogitsMaxAbs, maxAbsDiff(logits, stepLogits[k*V:(k+1)*V]))
		got := graphs.Argmax(logits)
		if got != greedy[k] {
			return fmt.Errorf("greedy=%d/%d: step %d chose token %d, golden %d", r.GreedyMatched, r.GreedyTotal, k, got, greedy[k])
		}
		r.GreedyMatched++
		if k+1 < len(greedy) {
			if logits, err = sess.Append([]int{got}); err != nil {
				return err
			}
		}
	}
	if r.LogitsMaxAbs > r.Tolerance {
		return fmt.Errorf("greedy-step logits differ by %.3g > %g", r.LogitsMaxAbs, r.Tolerance)
	}
	r.Pass = true
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

func maxAbsDiff(a, b []float32) float64 {
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
