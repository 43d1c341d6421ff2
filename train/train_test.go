package train_test

import (
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/all"
)

// The gradients themselves are checked against transformers' in the
// golden cases (golden/, run by every family's TestGolden) and per op
// against finite differences (layers/grad_test.go). These tests check
// the training forward and the API around them.

// testdata is a vendored case, or one read from ../shared (testfiles.Fixture).
func testdata(t testing.TB, kind, name string) string { return testfiles.Fixture(t, kind, name) }

// sequence is a fixed token sequence of T ids below vocab.
func sequence(T, vocab int) []int {
	ids := make([]int, T)
	for i := range ids {
		ids[i] = (i*7919 + 13) % vocab
	}
	return ids
}

// sessionLoss is the next-token loss of ids from an inference session's
// logits of every row, in float64.
func sessionLoss(t *testing.T, m zoo.Model, ids []int) float64 {
	t.Helper()
	s, err := graphs.NewSession(m, graphs.Options{Capacity: min(64, m.MaxPositions())})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.AppendAll(graphs.IDs(ids...))
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for i, row := range rows[:len(ids)-1] {
		m := math.Inf(-1)
		for _, v := range row {
			m = max(m, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - m)
		}
		sum += m + math.Log(z) - float64(row[ids[i+1]])
	}
	return sum / float64(len(ids)-1)
}

// TestTrainingForwardIsInferenceForward checks that the cache-free
// training forward computes inference's logits on every family, with
// sequences longer than the sliding windows, BF16 weights, GPT-2's fused
// attention and learned positions, and quantized GGUF weights.
func TestTrainingForwardIsInferenceForward(t *testing.T) {
	for _, dir := range []string{
		testdata(t, "golden", "qwen3_gqa_tied"), testdata(t, "golden", "qwen3_moe_normtopk"),
		testdata(t, "golden", "llama_smollm2_gqa_bf16"), testdata(t, "golden", "smollm3_nope"),
		testdata(t, "golden", "gemma3_sliding_mqa"), testdata(t, "golden", "gemma3_pattern_softcap"),
		testdata(t, "golden", "gpt2_prefixed"), testdata(t, "golden", "gpt2_original_bf16"),
		testdata(t, "gguf", "qwen3_q8_0"), testdata(t, "gguf", "gemma3_q4_k_m"), testdata(t, "gguf", "qwen3moe_q8_0"),
		testdata(t, "gguf", "llama_q4_0"), testdata(t, "gguf", "gpt2_q4_0"), testdata(t, "gguf", "qwen3_f16"),
	} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m := familytest.Load(t, dir)
			ids := sequence(min(19, m.MaxPositions()), m.VocabSize())
			g, err := train.LossAndGradients(m, ids)
			if err != nil {
				t.Fatal(err)
			}
			want := sessionLoss(t, m, ids)
			if d := math.Abs(g.Loss - want); !(d <= 1e-5) {
				t.Errorf("training loss %.9g, inference logits give %.9g (diff %.3g)", g.Loss, want, d)
			}
			last := g.InputsEmbeds.Data().([]float32)[(len(ids)-1)*m.HiddenSize():]
			for _, v := range last {
				if v != 0 {
					t.Fatalf("the last row's embedding gradient is %g, want exactly 0: nothing depends on it", v)
				}
			}
		})
	}
}

// TestGradientsNamedLikeTheCheckpoint checks the names, shapes and order
// of the weight gradients, and that the lookup part of an untied
// embedding's gradient is the index-added InputsEmbeds.
func TestGradientsNamedLikeTheCheckpoint(t *testing.T) {
	m := familytest.Load(t, testdata(t, "golden", "llama_mha_untied"))
	ids := sequence(12, m.VocabSize())
	g, err := train.LossAndGradients(m, ids)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range m.Params().All() {
		names = append(names, p.Name)
		got, ok := g.Weights[p.Name]
		if !ok {
			t.Errorf("no gradient for %s", p.Name)
			continue
		}
		if !slices.Equal([]int(got.Shape()), p.Shape) || got.Dtype() != tensor.Float32 {
			t.Errorf("%s: gradient %v %v, want float32 %v", p.Name, got.Dtype(), got.Shape(), p.Shape)
		}
	}
	if !slices.Equal(g.Names, names) || len(g.Weights) != len(names) {
		t.Errorf("gradient names %v, want the declared %v", g.Names, names)
	}
	lookup := make([]float32, m.VocabSize()*m.HiddenSize())
	if err := layers.IndexAdd(lookup, g.InputsEmbeds.Data().([]float32), ids, m.HiddenSize()); err != nil {
		t.Fatal(err)
	}
	if d := familytest.MaxDiff(lookup, g.Weights["model.embed_tokens.weight"].Data().([]float32)); d != 0 {
		t.Errorf("untied embedding gradient differs from the index-added inputs_embeds gradient by %g", d)
	}
}

// TestQuantizedWeightsPassGradients checks that block-quantized weights
// take no gradient but pass it on: the input embeddings' gradient of a
// Q8_0 model equals that of the same model with its weights dequantized
// to float32, which also has gradients for those weights.
func TestQuantizedWeightsPassGradients(t *testing.T) {
	dir := testdata(t, "gguf", "qwen3_q8_0")
	q := familytest.Load(t, dir)
	f := familytest.Load(t, dir)
	quantized := 0
	for _, p := range f.Params().All() {
		if _, ok := p.DType.Quant(); ok {
			quantized++
			v := p.Float32s()
			if err := p.Set(graphs.F32, tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(v))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if quantized == 0 {
		t.Fatal("the case has no quantized weights")
	}
	ids := sequence(10, q.VocabSize())
	gq, err := train.LossAndGradients(q, ids)
	if err != nil {
		t.Fatal(err)
	}
	gf, err := train.LossAndGradients(f, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range q.Params().All() {
		_, isQuant := p.DType.Quant()
		if _, has := gq.Weights[p.Name]; has == isQuant {
			t.Errorf("%s (%s): has a gradient = %v", p.Name, p.DType, has)
		}
		if _, has := gf.Weights[p.Name]; !has {
			t.Errorf("%s dequantized: no gradient", p.Name)
		}
	}
	a, b := gq.InputsEmbeds.Data().([]float32), gf.InputsEmbeds.Data().([]float32)
	var scale float64
	for _, v := range b {
		scale = max(scale, math.Abs(float64(v)))
	}
	if d := familytest.MaxDiff(a, b); scale == 0 || d > 1e-4*scale {
		t.Errorf("inputs_embeds gradient: quantized and dequantized differ by %g (max %g)", d, scale)
	}
	if d := math.Abs(gq.Loss - gf.Loss); d > 1e-5 {
		t.Errorf("losses differ by %g", d)
	}
}

// TestGraphReuse runs one compiled graph on several sequences and after
// an in-place weight update: every run must match a fresh graph's.
func TestGraphReuse(t *testing.T) {
	cfg := familytest.ParseConfig(t, testdata(t, "golden", "gemma3_sliding_mqa"))
	m, err := zoo.NewRandom(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	const T = 9
	gr, err := train.NewGraph(m, T)
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Close()
	a, b := sequence(T, m.VocabSize()), sequence(T+3, m.VocabSize())[3:]
	same := func(what string, x, y *train.Gradients) {
		t.Helper()
		if x.Loss != y.Loss {
			t.Errorf("%s: loss %g vs %g", what, x.Loss, y.Loss)
		}
		for _, n := range x.Names {
			if d := familytest.MaxDiff(x.Weights[n].Data().([]float32), y.Weights[n].Data().([]float32)); d != 0 {
				t.Errorf("%s: gradient of %s differs by %g", what, n, d)
			}
		}
		if d := familytest.MaxDiff(x.InputsEmbeds.Data().([]float32), y.InputsEmbeds.Data().([]float32)); d != 0 {
			t.Errorf("%s: inputs_embeds gradient differs by %g", what, d)
		}
	}
	first, err := gr.Run(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gr.Run(b); err != nil {
		t.Fatal(err)
	}
	again, err := gr.Run(a)
	if err != nil {
		t.Fatal(err)
	}
	same("rerun", first, again)

	p, _ := m.Params().Get("model.layers.0.mlp.up_proj.weight")
	w := p.Data.Data().([]float32)
	for i := range w {
		w[i] *= 1.5
	}
	updated, err := gr.Run(a)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := train.LossAndGradients(m, a)
	if err != nil {
		t.Fatal(err)
	}
	same("after an in-place update", fresh, updated)
	if updated.Loss == first.Loss {
		t.Error("an in-place weight update did not change the loss")
	}
	if _, err := gr.Run(a[:T-1]); err == nil {
		t.Error("a sequence of the wrong length was accepted")
	}
	if _, err := train.NewGraph(m, 1); err == nil {
		t.Error("a one-token training graph was accepted")
	}
}

// TestConcurrentGraphs differentiates one model from two goroutines at
// once (each with its own graph), as sessions run side by side: the
// results must equal a lone run's (go test -race checks the sharing).
func TestConcurrentGraphs(t *testing.T) {
	m := familytest.Load(t, testdata(t, "golden", "qwen3_moe_step2_nonorm"))
	ids := sequence(11, m.VocabSize())
	want, err := train.LossAndGradients(m, ids)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]*train.Gradients, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = train.LossAndGradients(m, ids) })
	}
	wg.Wait()
	for i, g := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if g.Loss != want.Loss {
			t.Errorf("goroutine %d: loss %g, alone %g", i, g.Loss, want.Loss)
		}
		for _, n := range want.Names {
			if d := familytest.MaxDiff(g.Weights[n].Data().([]float32), want.Weights[n].Data().([]float32)); d != 0 {
				t.Errorf("goroutine %d: gradient of %s differs by %g", i, n, d)
			}
		}
	}
}

// TestGPT2GradientsInConv1DLayout: GPT-2 checkpoints store the Conv1D
// weights [in, out]; their gradients come in that layout (as torch gives
// them), every gradient has its checkpoint tensor's shape, and a central
// difference on one weight confirms which element is which.
func TestGPT2GradientsInConv1DLayout(t *testing.T) {
	dir := testdata(t, "golden", "gpt2_original_bf16")
	m := familytest.Load(t, dir)
	if err := train.Trainable(m); err != nil {
		t.Fatal(err)
	}
	ids := sequence(10, m.VocabSize())
	g, err := train.LossAndGradients(m, ids)
	if err != nil {
		t.Fatal(err)
	}
	f, err := loaders.OpenSafetensors(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range g.Names {
		_, shape, err := f.Info(name)
		if err != nil {
			t.Fatalf("gradient %s names no checkpoint tensor: %v", name, err)
		}
		if got := g.Weights[name].Shape(); !slices.Equal([]int(got), shape) {
			t.Errorf("%s: gradient shape %v, checkpoint %v", name, got, shape)
		}
	}
	const name = "h.0.mlp.c_fc.weight" // declared [out, in], stored [in, out]
	p, _ := m.Params().Get(name)
	out, in := p.Shape[0], p.Shape[1]
	grad := g.Weights[name].Data().([]float32) // [in, out]
	best := 0
	for k, v := range grad {
		if math.Abs(float64(v)) > math.Abs(float64(grad[best])) {
			best = k
		}
	}
	j, i := best/out, best%out // row j of the stored [in, out] is input j
	w := p.Data.Data().([]float32)
	at := i*in + j
	orig, eps := w[at], float32(1e-2)
	loss := func(v float32) float64 {
		w[at] = v
		defer func() { w[at] = orig }()
		gv, err := train.LossAndGradients(m, ids)
		if err != nil {
			t.Fatal(err)
		}
		return gv.Loss
	}
	fd := (loss(orig+eps) - loss(orig-eps)) / (2 * float64(eps))
	if d := math.Abs(fd - float64(grad[best])); d > 0.05*math.Abs(fd)+1e-4 {
		t.Errorf("stored [%d, %d] (declared [%d, %d]): gradient %g, central difference %g", j, i, i, j, grad[best], fd)
	}
}
