package graphs

import (
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/internal/cudaemu"
	"github.com/gozoo/gozoo/ops"
)

// A Program's output is read after the run, so no later op may take its
// buffer, also when a capture of it is its last reader: here the branch b,
// which the sort places after that capture, took it on the CPU (from the
// arena) and on the device (from the tape's free lists), and the output
// came back as b's value.
func outputProgram(t *testing.T, dev cuda.Backend) {
	const T, D = 4, 8
	build := func(s *Step) *G.Node {
		x := s.Input("x", tensor.Float32, T, D)
		e := s.Input("e", tensor.Float32, T, D)
		m := s.Input("m", tensor.Int, T)
		a := ops.Apply(replaceRows{}, x, e, m)
		out := ops.Apply(replaceRows{}, a, x, m) // x
		s.Tap("out", out)
		s.Tap("b", ops.Apply(replaceRows{}, e, a, m)) // e
		return out
	}
	x, e := make([]float32, T*D), make([]float32, T*D)
	for i := range x {
		x[i], e[i] = float32(i), -float32(i)
	}
	p, err := NewProgramOn(dev, "p", build, []string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		got, err := p.Run(map[string]any{"x": x, "e": e, "m": []int{1, 0, 1, 0}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Float32s(), x) {
			t.Errorf("run %d: output %v, want x", run, got.Float32s())
		}
		for name, want := range map[string][]float32{"out": x, "b": e} {
			if c, ok := p.Captured(name); !ok || !slices.Equal(c.Float32s(), want) {
				t.Errorf("run %d: capture %s %v, want %v", run, name, c, want)
			}
		}
	}
}

func TestProgramOutput(t *testing.T) { outputProgram(t, nil) }

func TestProgramOutputEmulated(t *testing.T) { outputProgram(t, cudaemu.New(t)) }
