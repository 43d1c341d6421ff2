package train_test

import (
	"context"
	"math"
	"os"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
)

// tinyText is a short "text" of token ids repeated: a pattern a model
// learns in a few steps.
func tinyText(vocab int) []int {
	phrase := []int{17, 240, 3, 99, 311, 42, 7, 128, 64, 5, 77, 200}
	var ids []int
	for len(ids) < 400 {
		ids = append(ids, phrase...)
	}
	for i := range ids {
		ids[i] %= vocab
	}
	return ids
}

// newTiny is a fresh random model of a tiny golden config, with its
// config.json.
func newTiny(t *testing.T, seed uint64) (zoo.Model, []byte) {
	t.Helper()
	dir := testdata(t, "golden", "qwen3_gqa_tied")
	data, err := os.ReadFile(dir + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := zoo.NewRandom(familytest.ParseConfig(t, dir), seed)
	if err != nil {
		t.Fatal(err)
	}
	return m, data
}

func trainer(t *testing.T, m graphs.Model, opt train.Options) *train.Trainer {
	t.Helper()
	tr, err := train.NewTrainer(m, tinyText(m.VocabSize()), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestTrainingLowersTheLoss(t *testing.T) {
	m, config := newTiny(t, 1)
	var reports []train.Progress
	tr := trainer(t, m, train.Options{SeqLen: 16, Batch: 2, Steps: 20, LR: 1e-2, Warmup: 2, ClipNorm: 1, Seed: 7,
		Progress: func(p train.Progress) { reports = append(reports, p) }})
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	losses := tr.Losses()
	if len(losses) != 20 || len(reports) != 20 {
		t.Fatalf("%d losses and %d progress reports for 20 steps", len(losses), len(reports))
	}
	first, last := losses[0], losses[len(losses)-1]
	t.Logf("losses %.3f", losses)
	if !(first > 5 && last < first/2) {
		t.Errorf("loss went from %.3f to %.3f in 20 steps on a repeated text, want it at least halved (losses %.3f)", first, last, losses)
	}
	for i, p := range reports {
		if p.Step != i+1 || p.Steps != 20 || p.Loss != losses[i] || !(p.TokensPerSec > 0) || p.Tokens != int64((i+1)*2*17) {
			t.Errorf("report %d: %+v", i, p)
		}
	}
	if reports[0].LR != 5e-3 || reports[1].LR != 1e-2 || reports[19].LR != 0 {
		t.Errorf("learning rates %g, %g ... %g, want warmup 5e-3, 1e-2 and cosine down to 0", reports[0].LR, reports[1].LR, reports[19].LR)
	}

	// The checkpoint reloads and gives the in-memory model's logits, to
	// the rounding of another storage (familytest.StorageTol).
	dir := t.TempDir()
	if err := tr.Save(dir, config); err != nil {
		t.Fatal(err)
	}
	back, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := tinyText(m.VocabSize())[:20]
	want, got := logits(t, m, ids), logits(t, back, ids)
	if d := familytest.MaxDiff(got, want); d > familytest.StorageTol(want) {
		t.Errorf("reloaded checkpoint's logits differ from the trained model's by %g", d)
	}
	if d := math.Abs(sessionLoss(t, back, ids) - sessionLoss(t, m, ids)); d > 1e-6 {
		t.Errorf("reloaded checkpoint's loss differs from the trained model's by %g", d)
	}
}

// logits are the logits of every row of ids, flattened.
func logits(t *testing.T, m zoo.Model, ids []int) []float32 {
	t.Helper()
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.AppendAll(graphs.IDs(ids...))
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

func TestTrainingIsDeterministic(t *testing.T) {
	run := func(seed uint64) []float64 {
		m, _ := newTiny(t, 3)
		tr := trainer(t, m, train.Options{SeqLen: 8, Steps: 4, LR: 1e-2, Seed: seed})
		if err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return tr.Losses()
	}
	a, b, c := run(5), run(5), run(6)
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("step %d: loss %v then %v with the same seed", i+1, a[i], b[i])
		}
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Errorf("seeds 5 and 6 gave the same losses %v: the seed does not order the data", a)
	}
}

// TestAccumulationIsBatching checks that 2 micro-batches of 1 sequence
// make the same update as one batch of 2.
func TestAccumulationIsBatching(t *testing.T) {
	weights := func(batch, accum int) (*train.Trainer, zoo.Model) {
		m, _ := newTiny(t, 4)
		tr := trainer(t, m, train.Options{SeqLen: 8, Batch: batch, Accum: accum, Steps: 2, LR: 1e-2, Seed: 9})
		if err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return tr, m
	}
	ta, a := weights(2, 1)
	tb, b := weights(1, 2)
	for i, l := range ta.Losses() {
		if d := math.Abs(l - tb.Losses()[i]); d > 1e-6 {
			t.Errorf("step %d: batch loss %v, accumulated %v", i+1, l, tb.Losses()[i])
		}
	}
	for _, p := range a.Params().All() {
		q, _ := b.Params().Get(p.Name)
		if d := familytest.MaxDiff(p.Float32s(), q.Float32s()); d > 1e-6 {
			t.Errorf("%s: batched and accumulated weights differ by %g", p.Name, d)
		}
	}
	m, _ := newTiny(t, 4)
	tc := trainer(t, m, train.Options{SeqLen: 8, Batch: 1, Steps: 2, LR: 1e-2, Seed: 9})
	if err := tc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tc.Losses()[1] == ta.Losses()[1] {
		t.Error("a batch of 1 made the same second step as a batch of 2")
	}
}

// TestAdamWStep checks one and two AdamW updates against float64 by hand,
// with decay on a matrix and none on a norm.
func TestAdamWStep(t *testing.T) {
	w := &graphs.Param{Name: "w", Shape: []int{1, 3}, Role: graphs.Matrix}
	n := &graphs.Param{Name: "n", Shape: []int{2}, Role: graphs.Norm}
	w0, n0 := []float64{0.5, -1.25, 2}, []float64{1, 0.75}
	set := func(p *graphs.Param, v []float64) {
		f := make([]float32, len(v))
		for i, x := range v {
			f[i] = float32(x)
		}
		if err := p.Set(graphs.F32, tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(f))); err != nil {
			t.Fatal(err)
		}
	}
	set(w, w0)
	set(n, n0)
	const b1, b2, eps, wd = 0.8, 0.99, 1e-6, 0.1
	opt, err := train.NewAdamW([]*graphs.Param{w, n}, train.AdamWConfig{Beta1: b1, Beta2: b2, Eps: eps, WeightDecay: wd})
	if err != nil {
		t.Fatal(err)
	}
	grads := [][]float64{{0.1, -0.02, 3}, {0.5, -0.25, 0.125}}
	gn := [][]float64{{-1, 0.001}, {2, 0}}
	lrs := []float64{0.01, 0.005}
	// By hand.
	ref := func(p0 []float64, gs [][]float64, decay bool) []float64 {
		p := append([]float64(nil), p0...)
		m, v := make([]float64, len(p)), make([]float64, len(p))
		for s, g := range gs {
			lr, step := lrs[s], float64(s+1)
			for i := range p {
				if decay {
					p[i] -= lr * wd * p[i]
				}
				m[i] = b1*m[i] + (1-b1)*g[i]
				v[i] = b2*v[i] + (1-b2)*g[i]*g[i]
				mh := m[i] / (1 - math.Pow(b1, step))
				vh := v[i] / (1 - math.Pow(b2, step))
				p[i] -= lr * mh / (math.Sqrt(vh) + eps)
			}
		}
		return p
	}
	for s := range lrs {
		g := map[string]*tensor.Dense{}
		for name, v := range map[string][]float64{"w": grads[s], "n": gn[s]} {
			f := make([]float32, len(v))
			for i, x := range v {
				f[i] = float32(x)
			}
			g[name] = tensor.New(tensor.WithShape(len(f)), tensor.WithBacking(f))
		}
		if err := opt.Step(g, lrs[s]); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			p     *graphs.Param
			want  []float64
			decay bool
		}{{w, ref(w0, grads[:s+1], true), true}, {n, ref(n0, gn[:s+1], false), false}} {
			for i, got := range c.p.Float32s() {
				if d := math.Abs(float64(got) - c.want[i]); d > 1e-6*math.Max(1, math.Abs(c.want[i])) {
					t.Errorf("step %d: %s[%d] = %.9g, by hand %.9g", s+1, c.p.Name, i, got, c.want[i])
				}
			}
		}
	}
	if opt.Steps() != 2 {
		t.Errorf("Steps() = %d", opt.Steps())
	}
	bad := map[string]*tensor.Dense{"x": tensor.New(tensor.WithShape(1), tensor.Of(tensor.Float32))}
	if err := opt.Step(bad, 0.1); err == nil {
		t.Error("a gradient for an unknown weight was accepted")
	}
}

func TestSchedule(t *testing.T) {
	s := train.Schedule{Peak: 1, Min: 0.1, Warmup: 4, Total: 14}
	for _, c := range []struct {
		step int
		want float64
	}{{1, 0.25}, {4, 1}, {9, 0.55}, {14, 0.1}, {20, 0.1}} {
		if got := s.LR(c.step); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("LR(%d) = %g, want %g", c.step, got, c.want)
		}
	}
}

func TestTrainerRefusesBadInput(t *testing.T) {
	m, _ := newTiny(t, 1)
	for name, c := range map[string]struct {
		tokens []int
		opt    train.Options
	}{
		"no steps":      {tinyText(512), train.Options{SeqLen: 8}},
		"too few":       {[]int{1, 2, 3}, train.Options{SeqLen: 8, Steps: 1}},
		"outside vocab": {append(tinyText(512), 512), train.Options{SeqLen: 8, Steps: 1}},
		"min above lr":  {tinyText(512), train.Options{SeqLen: 8, Steps: 1, LR: 1e-3, MinLR: 1e-2}},
		"too long":      {tinyText(512), train.Options{SeqLen: m.MaxPositions(), Steps: 1}},
	} {
		if tr, err := train.NewTrainer(m, c.tokens, c.opt); err == nil {
			tr.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestContinueFromBF16Checkpoint trains a loaded BF16 GPT-2 (read-only
// mapped weights, Conv1D weights stored transposed) and checks that its
// F32 checkpoint reloads to the trained model's logits, and that the
// checkpoint it was loaded from is untouched.
func TestContinueFromBF16Checkpoint(t *testing.T) {
	src := testdata(t, "golden", "gpt2_original_bf16")
	m := familytest.Load(t, src)
	before := familytest.Load(t, src)
	config, err := os.ReadFile(src + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	tr := trainer(t, m, train.Options{SeqLen: 8, Steps: 2, LR: 1e-2, Seed: 1})
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := tr.Save(dir, config); err != nil {
		t.Fatal(err)
	}
	back, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range back.Params().All() {
		if p.DType != graphs.F32 {
			t.Errorf("%s reloaded as %s, want F32", p.Name, p.DType)
		}
	}
	ids := tinyText(m.VocabSize())[:12]
	trained := logits(t, m, ids)
	if d := familytest.MaxDiff(logits(t, back, ids), trained); d > familytest.StorageTol(trained) {
		t.Errorf("reloaded checkpoint's logits differ from the trained model's by %g", d)
	}
	if d := familytest.MaxDiff(logits(t, familytest.Load(t, src), ids), logits(t, before, ids)); d != 0 {
		t.Errorf("training changed the checkpoint it loaded from (logits differ by %g)", d)
	}
	if familytest.MaxDiff(trained, logits(t, before, ids)) == 0 {
		t.Error("training did not change the model")
	}
}
