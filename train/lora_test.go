package train_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
)

// qvConfig is LoRA r=8 on q_proj and v_proj, alpha 16.
func qvConfig(t *testing.T) *loaders.LoRAConfig {
	t.Helper()
	c, err := loaders.ParseLoRAConfig([]byte(`{"peft_type":"LORA","r":8,"lora_alpha":16,"target_modules":["q_proj","v_proj"]}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLoRAInit: PEFT's initial adapter leaves the model as it was (B is
// zero), so dLoss/dA is zero and dLoss/dB is not; A is uniform in ±1/√in
// (kaiming_uniform_ with a = √5), spread as a uniform draw is.
func TestLoRAInit(t *testing.T) {
	m, _ := newTiny(t, 3)
	ids := sequence(12, m.VocabSize())
	before, err := train.LossAndGradients(m, ids)
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Params().NewLoRA("a", qvConfig(t), rand.New(rand.NewPCG(1, 1)), 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := train.LossAndGradients(m, ids)
	if err != nil {
		t.Fatal(err)
	}
	if g.Loss != before.Loss {
		t.Errorf("loss %v with a fresh adapter, %v without", g.Loss, before.Loss)
	}
	if len(g.Weights) != 2*len(a.Modules) || len(a.Modules) != 2*m.NumLayers() {
		t.Fatalf("%d gradients for %d adapted modules (%v)", len(g.Weights), len(a.Modules), g.Names)
	}
	for _, p := range a.Params.All() {
		gv := g.Weights[p.Name].Data().([]float32)
		var gmax, sq float64
		for _, x := range gv {
			gmax = max(gmax, math.Abs(float64(x)))
		}
		isA := strings.HasSuffix(p.Name, "lora_A.weight")
		if isA != (gmax == 0) {
			t.Errorf("%s: max |gradient| %g", p.Name, gmax)
		}
		if !isA {
			continue
		}
		bound := 1 / math.Sqrt(float64(p.Shape[1]))
		for _, x := range p.Float32s() {
			if math.Abs(float64(x)) > bound {
				t.Fatalf("%s: %g outside ±%g", p.Name, x, bound)
			}
			sq += float64(x) * float64(x)
		}
		// A uniform draw in ±b has standard deviation b/√3.
		if sd := math.Sqrt(sq / float64(p.Numel())); math.Abs(sd-bound/math.Sqrt(3)) > 0.15*bound/math.Sqrt(3) {
			t.Errorf("%s: standard deviation %g, want about %g", p.Name, sd, bound/math.Sqrt(3))
		}
	}
}

// TestLoRATraining trains r=8 on q and v: AdamW holds state for the
// adapter only (its parameter count × 2 moments × 4 bytes), the base is
// untouched, the loss falls, and the saved PEFT folder has PEFT's keys
// and names and loads back to the same model.
func TestLoRATraining(t *testing.T) {
	m, _ := newTiny(t, 5)
	base := map[string][]float32{}
	var baseN int64
	for _, p := range m.Params().All() {
		base[p.Name] = slices.Clone(p.Float32s())
		baseN += p.Numel()
	}
	a, err := m.Params().NewLoRA("a", qvConfig(t), rand.New(rand.NewPCG(2, 2)), 0)
	if err != nil {
		t.Fatal(err)
	}
	var loraN int64
	for _, mod := range a.Modules {
		w, _ := m.Params().Get(mod + ".weight")
		loraN += int64(8 * (w.Shape[0] + w.Shape[1]))
	}
	tr := trainer(t, m, train.Options{SeqLen: 16, Batch: 2, Steps: 40, LR: 3e-2, Warmup: 2, Seed: 7})
	if got, want := tr.OptimizerBytes(), 2*4*loraN; got != want {
		t.Errorf("AdamW holds %d bytes, want %d (2 moments × %d adapter values × 4)", got, want, loraN)
	}
	t.Logf("optimizer state: %d bytes for the adapter (%d values); full fine-tuning: %d bytes (%d values)", tr.OptimizerBytes(), loraN, 8*baseN, baseN)
	if err := tr.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := tr.Losses()
	first, last := mean(l[:5]), mean(l[len(l)-5:])
	t.Logf("loss: first 5 steps %.4f, last 5 %.4f", first, last)
	// A rank-8 update of q and v moves a random base only so far: 0.7
	// nats over 40 steps (seeded, so the same on every run).
	if !(last < first-0.4) {
		t.Errorf("the loss fell from %.4f to %.4f only", first, last)
	}
	for _, p := range m.Params().All() {
		if !slices.Equal(p.Float32s(), base[p.Name]) {
			t.Errorf("base weight %s changed", p.Name)
		}
	}

	dir := t.TempDir()
	if err := tr.SaveLoRA(dir, "qwen3_gqa_tied"); err != nil {
		t.Fatal(err)
	}
	// The keys PEFT's save_pretrained writes: those of the golden case's
	// adapter_config.json, which PEFT wrote.
	keys := func(path string) []string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	peft := keys(filepath.Join(testdata(t, "golden", "llama_lora_qv"), "adapter", loaders.LoRAConfigFile))
	if got := keys(filepath.Join(dir, loaders.LoRAConfigFile)); !slices.Equal(got, peft) {
		t.Errorf("adapter_config.json keys %v, PEFT writes %v", got, peft)
	}
	back, err := loaders.ReadLoRA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Config.R != 8 || back.Config.Alpha != 16 || back.Config.Scaling() != 2 {
		t.Errorf("config read back: %+v", back.Config)
	}
	for _, x := range back.Tensors {
		w, ok := m.Params().Get(x.Module + ".weight")
		want := []int{8, 0}
		if ok {
			want[1] = w.Shape[1]
			if x.Factor == 'B' {
				want = []int{w.Shape[0], 8}
			}
		}
		if !ok || !strings.HasPrefix(x.Name, "base_model.model.model.layers.") || !slices.Equal(x.Shape, want) {
			t.Errorf("saved %s %v, want a factor of a Linear, %v", x.Name, x.Shape, want)
		}
	}
	// Loaded onto a fresh copy of the base, it gives the trained model's
	// loss.
	ids := sequence(12, m.VocabSize())
	want, err := train.LossAndGradients(m, ids)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := newTiny(t, 5)
	if _, err := fresh.Params().ApplyLoRA("a", back); err != nil {
		t.Fatal(err)
	}
	got, err := train.LossAndGradients(fresh, ids)
	if err != nil {
		t.Fatal(err)
	}
	if got.Loss != want.Loss {
		t.Errorf("loss %v after loading the saved adapter, %v trained", got.Loss, want.Loss)
	}
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// TestLoRAGradientsMoE: an adapter on the attention of a MoE model (base
// frozen, router and experts included) gets the gradients central finite
// differences of the loss give, and only the adapter gets any.
func TestLoRAGradientsMoE(t *testing.T) {
	dir := testdata(t, "golden", "qwen3_moe_normtopk")
	m, err := zoo.NewRandom(familytest.ParseConfig(t, dir), 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loaders.ParseLoRAConfig([]byte(`{"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":["q_proj","v_proj","o_proj"]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Params().NewLoRA("a", cfg, rand.New(rand.NewPCG(5, 5)), 0.05)
	if err != nil {
		t.Fatal(err)
	}
	ids := sequence(10, m.VocabSize())
	g, err := train.LossAndGradients(m, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Weights) != len(a.Params.All()) {
		t.Fatalf("%d gradients for %d adapter tensors: %v", len(g.Weights), len(a.Params.All()), g.Names)
	}
	loss := func() float64 {
		r, err := train.LossAndGradients(m, ids)
		if err != nil {
			t.Fatal(err)
		}
		return r.Loss
	}
	const h = 1e-2
	for _, p := range a.Params.All()[:4] {
		w := p.Data.Data().([]float32)
		gv := g.Weights[p.Name].Data().([]float32)
		// The entry of the largest gradient, well above float32 noise.
		j := 0
		for i := range gv {
			if math.Abs(float64(gv[i])) > math.Abs(float64(gv[j])) {
				j = i
			}
		}
		w0 := w[j]
		w[j] = w0 + h
		up := loss()
		w[j] = w0 - h
		down := loss()
		w[j] = w0
		fd := (up - down) / (2 * h)
		if d := math.Abs(fd - float64(gv[j])); d > 2e-2*math.Abs(fd)+1e-4 {
			t.Errorf("%s[%d]: gradient %g, finite differences %g", p.Name, j, gv[j], fd)
		}
	}
}
