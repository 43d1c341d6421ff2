// Package zootest holds the checks every model family's tests run: golden
// cases and weight sensitivity.
package zootest

import (
	"encoding/json"
	"github.com/gozoo/gozoo/loaders"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/golden"
)

// GoldenDir is a bundled golden case, from a package two levels below the
// repository root (zoo/<family>).
func GoldenDir(name string) string { return filepath.Join("..", "..", "testdata", "golden", name) }

// Golden runs bundled golden cases: full-forward logits within each case's
// tolerance and the 12-token KV-cached greedy continuation exactly.
func Golden(t *testing.T, cases ...string) {
	t.Helper()
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(GoldenDir(name)); err != nil {
				t.Fatalf("golden case %s is not bundled: %v", name, err)
			}
			r := golden.Run(GoldenDir(name))
			if !r.Pass || r.GreedyMatched != r.GreedyTotal || r.GreedyTotal == 0 {
				t.Fatal(r)
			}
			t.Log(r)
			checkParamCount(t, GoldenDir(name))
		})
	}
}

// checkParamCount compares the tensors the config implies with the
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
	_, data, err := loaders.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := zoo.ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range cfg.Tensors() {
		k := int64(1)
		for _, d := range s.Shape {
			k *= int64(d)
		}
		n += k
	}
	if n != meta.ParamCount {
		t.Errorf("config implies %d parameters, HF counted %d", n, meta.ParamCount)
	}
}

// LastLogits runs ids through a fresh session and returns the last logits.
func LastLogits(t *testing.T, m zoo.Model, ids []int) []float32 {
	t.Helper()
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 64})
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

// MaxDiff is the largest absolute difference of two logit rows.
func MaxDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// EveryWeightMatters perturbs each named tensor in turn and checks that the
// logits move: a weight the forward ignored would pass a golden test only by
// luck. The tensors are restored afterwards.
func EveryWeightMatters(t *testing.T, m zoo.Model, ids []int, names ...string) {
	t.Helper()
	base := LastLogits(t, m, ids)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			w, ok := m.Weights()[name]
			if !ok {
				t.Fatalf("no tensor %q", name)
			}
			data := w.Data().([]float32)
			saved := append([]float32(nil), data...)
			defer copy(data, saved)
			for i := range data {
				data[i] *= 1.5
				if i%7 == 0 {
					data[i] += 0.1
				}
			}
			if d := MaxDiff(base, LastLogits(t, m, ids)); d < 1e-4 {
				t.Fatalf("changing %s moved the logits by only %g", name, d)
			}
		})
	}
}
