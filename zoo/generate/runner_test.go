package generate

import (
	"context"
	"slices"
	"testing"

	"github.com/gozoo/gozoo/graphs"
)

// countingRunner is a Runner that is no graph at all: its logits favour
// token (position + 1) % vocab, so greedy generation counts upwards.
type countingRunner struct {
	vocab, hidden, pos, capacity int
	inputs                       []graphs.Input
}

func (r *countingRunner) AppendInput(in graphs.Input) ([]float32, error) {
	r.inputs = append(r.inputs, in)
	r.pos += in.Len(r.hidden)
	l := make([]float32, r.vocab)
	l[r.pos%r.vocab] = 1
	return l, nil
}
func (r *countingRunner) Pos() int      { return r.pos }
func (r *countingRunner) Capacity() int { return r.capacity }
func (r *countingRunner) Reset()        { r.pos = 0 }

// TestRunnerSeam generates through a Runner that is not a graphs.Session,
// from an embeddings prompt, and reports prefill progress per chunk.
func TestRunnerSeam(t *testing.T) {
	g := New(newGen(t).Model, nil)
	D := g.Model.HiddenSize()
	run := &countingRunner{vocab: 50, hidden: D, capacity: 1000}
	g.NewRunner = func() (Runner, error) { return run, nil }
	const rows = 600
	var progress [][2]int
	s := g.StreamInput(context.Background(), graphs.Embeddings(make([]float32, rows*D)), Options{
		MaxTokens: 3, IgnoreEOS: true,
		Progress: func(done, total int) { progress = append(progress, [2]int{done, total}) },
	})
	for range s.Tokens() {
	}
	res, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := [][2]int{{256, rows}, {512, rows}, {rows, rows}}; !slices.Equal(progress, want) {
		t.Errorf("progress %v, want %v", progress, want)
	}
	if res.PromptLen != rows || res.Prompt != nil {
		t.Errorf("prompt recorded as %d rows, ids %v", res.PromptLen, res.Prompt)
	}
	// Each chunk of the prompt went in as embeddings; then one id a step.
	if len(run.inputs) != 3+2 || run.inputs[0].IDs != nil || len(run.inputs[0].Embeds) != 256*D {
		t.Fatalf("runner saw %d inputs", len(run.inputs))
	}
	if len(res.Tokens) != 3 || res.Tokens[1] != (res.Tokens[0]+1)%50 {
		t.Errorf("tokens %v do not count upwards", res.Tokens)
	}
}
