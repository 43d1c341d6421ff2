package train_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"

	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
)

// TestContinueWithOptimizerState trains 6 steps in one go, and 3 + 3 with
// a checkpoint between: with AdamW's state saved and restored the two
// end bit for bit equal; restarting Adam cold does not. One window of
// data and a constant learning rate make the data order and the schedule
// the same in both.
func TestContinueWithOptimizerState(t *testing.T) {
	window := tinyText(1 << 20)[:17]
	opt := func(steps int) train.Options {
		return train.Options{SeqLen: 16, Steps: steps, LR: 5e-3, MinLR: 5e-3, Warmup: -1, Seed: 3,
			AdamW: train.AdamWConfig{WeightDecay: 0.1}, SaveOptimizer: true}
	}
	run := func(m zoo.Model, steps int) *train.Trainer {
		tr, err := train.NewTrainer(m, window, opt(steps))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		for range steps {
			if _, err := tr.Step(); err != nil {
				t.Fatal(err)
			}
		}
		return tr
	}
	straight, config := newTiny(t, 1)
	run(straight, 6)

	first, _ := newTiny(t, 1)
	dir := t.TempDir()
	if err := run(first, 3).SaveAs(dir, config, safetensors.F32); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, train.OptimizerFile)); err != nil {
		t.Fatalf("SaveOptimizer wrote no optimizer state: %v", err)
	}
	resume := func(load bool) zoo.Model {
		m, err := zoo.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := train.NewTrainer(m, window, opt(3))
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if load {
			ok, err := tr.LoadOptimizer(dir)
			if err != nil || !ok {
				t.Fatalf("LoadOptimizer: %v, %v", ok, err)
			}
			if tr.OptimizerSteps() != 3 {
				t.Fatalf("restored %d AdamW updates, want 3", tr.OptimizerSteps())
			}
		}
		for range 3 {
			if _, err := tr.Step(); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	name := "model.layers.0.self_attn.q_proj.weight"
	want := paramValues(t, straight, name)
	if got := paramValues(t, resume(true), name); !slices.Equal(got, want) {
		t.Errorf("3 + 3 steps with AdamW's state restored differ from 6 straight steps")
	}
	if got := paramValues(t, resume(false), name); slices.Equal(got, want) {
		t.Errorf("restarting AdamW cold gave the same weights: the test cannot tell")
	}
}

func paramValues(t *testing.T, m zoo.Model, name string) []float32 {
	t.Helper()
	p, ok := m.Params().Get(name)
	if !ok {
		t.Fatalf("no weight %s", name)
	}
	return slices.Clone(p.Float32s())
}

// TestOptimizerStateErrors: a state file that lacks a weight's moment, or
// is no safetensors, is an error naming the file and what is missing.
func TestOptimizerStateErrors(t *testing.T) {
	m, config := newTiny(t, 1)
	tr := trainer(t, m, train.Options{SeqLen: 8, Steps: 1, SaveOptimizer: true})
	if _, err := tr.Step(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := tr.Save(dir, config); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if ok, err := tr.LoadOptimizer(other); ok || err != nil {
		t.Errorf("a folder with no optimizer state: %v, %v; want false, nil", ok, err)
	}
	bad := filepath.Join(other, train.OptimizerFile)
	if err := os.WriteFile(bad, []byte("not safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.LoadOptimizer(other); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("garbage state file: %v, want an error naming %s", err, bad)
	}
	// Drop one tensor from a good file by rewriting it without it.
	f, err := os.ReadFile(filepath.Join(dir, train.OptimizerFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.Deserialize(f)
	if err != nil {
		t.Fatal(err)
	}
	views := map[string]safetensors.TensorView{}
	for _, nt := range st.Tensors() {
		if nt.Name != "exp_avg_sq.model.norm.weight" {
			views[nt.Name] = nt.TensorView
		}
	}
	var buf strings.Builder
	if err := safetensors.SerializeToWriter(views, nil, &buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(buf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.LoadOptimizer(other); err == nil || !strings.Contains(err.Error(), "exp_avg_sq.model.norm.weight") {
		t.Errorf("state without a moment: %v, want an error naming it", err)
	}
}
