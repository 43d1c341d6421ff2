package layers

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gozoo/gozoo/loaders"
)

// The float64 references below are the formulas of transformers v5's
// modeling_rope_utils.py written out again, in float64; the tables under
// test are float32, op for op, so they agree to a few float32 roundings.

func refDefault(dim int, theta float64) []float64 {
	out := make([]float64, dim/2)
	for i := range out {
		out[i] = 1 / math.Pow(theta, float64(2*i)/float64(dim))
	}
	return out
}

func refLlama3(dim int, r loaders.RoPE) []float64 {
	out := refDefault(dim, r.Theta)
	L := float64(r.OriginalMaxPositions)
	for i, f := range out {
		wave := 2 * math.Pi / f
		switch {
		case wave < L/r.HighFreqFactor:
		case wave > L/r.LowFreqFactor:
			out[i] = f / r.Factor
		default:
			s := (L/wave - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			out[i] = (1-s)*f/r.Factor + s*f
		}
	}
	return out
}

func refYarn(dim int, r loaders.RoPE) []float64 {
	corr := func(n float64) float64 {
		return float64(dim) * math.Log(float64(r.OriginalMaxPositions)/(n*2*math.Pi)) / (2 * math.Log(r.Theta))
	}
	low, high := corr(r.BetaFast), corr(r.BetaSlow)
	if r.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = math.Max(low, 0), math.Min(high, float64(dim-1))
	if low == high {
		high += 0.001
	}
	out := refDefault(dim, r.Theta)
	for i, f := range out {
		ramp := math.Min(math.Max((float64(i)-low)/(high-low), 0), 1)
		out[i] = f/r.Factor*ramp + f*(1-ramp)
	}
	return out
}

func refDynamic(dim int, theta, factor float64, maxPos, seqLen int) []float64 {
	if seqLen <= maxPos {
		return refDefault(dim, theta)
	}
	base := theta * math.Pow(factor*float64(seqLen)/float64(maxPos)-(factor-1), float64(dim)/float64(dim-2))
	return refDefault(dim, base)
}

// yarnBase has a ramp inside the table (pairs 5 to 12 of 16), so that each
// yarn parameter moves it.
var yarnBase = loaders.RoPE{Type: "yarn", Theta: 1e4, Factor: 4, OriginalMaxPositions: 4096,
	BetaFast: 32, BetaSlow: 1, Truncate: true, AttentionFactor: 0.1*math.Log(4) + 1}

func TestScaledRoPETables(t *testing.T) {
	with := func(f func(*loaders.RoPE)) loaders.RoPE { r := yarnBase; f(&r); return r }
	llama3 := loaders.RoPE{Type: "llama3", Theta: 5e5, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 32, AttentionFactor: 1}
	cases := []struct {
		name  string
		dim   int
		r     loaders.RoPE
		want  []float64
		scale float64
	}{
		{"default", 16, loaders.RoPE{Type: "default", Theta: 1e4}, refDefault(16, 1e4), 0},
		{"linear", 16, loaders.RoPE{Type: "linear", Theta: 1e4, Factor: 4}, scaled(refDefault(16, 1e4), 0.25), 0},
		{"llama3 three bands", 32, llama3, refLlama3(32, llama3), 0},
		{"llama3 wide smoothing", 64, with2(llama3, func(r *loaders.RoPE) { r.OriginalMaxPositions, r.HighFreqFactor = 8192, 32 }), nil, 0},
		{"yarn", 32, yarnBase, refYarn(32, yarnBase), yarnBase.AttentionFactor},
		{"yarn untruncated", 32, with(func(r *loaders.RoPE) { r.Truncate = false }), refYarn(32, with(func(r *loaders.RoPE) { r.Truncate = false })), yarnBase.AttentionFactor},
		{"yarn zero-width ramp", 32, with(func(r *loaders.RoPE) { r.BetaFast, r.BetaSlow = 2, 2 }), refYarn(32, with(func(r *loaders.RoPE) { r.BetaFast, r.BetaSlow = 2, 2 })), yarnBase.AttentionFactor},
		{"yarn, no attention factor", 32, with(func(r *loaders.RoPE) { r.AttentionFactor = 1 }), refYarn(32, yarnBase), 0},
		{"dynamic below the threshold", 16, loaders.RoPE{Type: "dynamic", Theta: 1e4, Factor: 2, MaxPositions: 8}, refDefault(16, 1e4), 0},
		{"rope_freqs", 8, loaders.RoPE{Type: "default", Theta: 5e5, FreqFactors: []float64{1, 1.5, 4, 8}}, divided(refDefault(8, 5e5), []float64{1, 1.5, 4, 8}), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.want == nil {
				c.want = refLlama3(c.dim, c.r)
			}
			rp, err := NewScaledRoPE(c.dim, c.r)
			if err != nil {
				t.Fatal(err)
			}
			if len(rp.InvFreq) != len(c.want) {
				t.Fatalf("%d frequencies, want %d", len(rp.InvFreq), len(c.want))
			}
			for i, f := range rp.InvFreq {
				if d := math.Abs(float64(f)-c.want[i]) / c.want[i]; d > 1e-6 {
					t.Errorf("inv_freq[%d] = %g, want %g (relative %g)", i, f, c.want[i], d)
				}
			}
			if float64(rp.Scale) != float64(float32(c.scale)) {
				t.Errorf("scale %g, want %g", rp.Scale, c.scale)
			}
		})
	}
	// The llama3 case keeps, smooths and divides: all three branches ran.
	rp, _ := NewScaledRoPE(32, llama3)
	d := refDefault(32, llama3.Theta)
	var kept, divided, smoothed bool
	for i, f := range rp.InvFreq {
		switch ratio := d[i] / float64(f); {
		case math.Abs(ratio-1) < 1e-6:
			kept = true
		case math.Abs(ratio-8) < 1e-5:
			divided = true
		default:
			smoothed = true
		}
	}
	if !kept || !divided || !smoothed {
		t.Errorf("llama3 bands: kept %v, divided %v, smoothed %v", kept, divided, smoothed)
	}
}

func with2(r loaders.RoPE, f func(*loaders.RoPE)) loaders.RoPE { f(&r); return r }

func scaled(v []float64, by float64) []float64 {
	for i := range v {
		v[i] *= by
	}
	return v
}

func divided(v, by []float64) []float64 {
	for i := range v {
		v[i] /= by[i]
	}
	return v
}

// TestScaledRoPEGoldenTables compares the tables built from the vendored
// cases' config.json with the float32 inv_freq (and yarn's attention
// factor) transformers computed for them, bit for bit.
func TestScaledRoPEGoldenTables(t *testing.T) {
	for _, name := range []string{"llama_rope_llama3", "qwen3_rope_yarn"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", "golden", name)
			var cfg struct {
				loaders.RoPEFields
				HeadDim int `json:"head_dim"`
				MaxPos  int `json:"max_position_embeddings"`
			}
			var gold struct {
				Rope struct {
					InvFreq         []float32 `json:"inv_freq_f32"`
					AttentionFactor *float64  `json:"attention_factor"`
				} `json:"rope"`
			}
			for f, v := range map[string]any{"config.json": &cfg, "golden.json": &gold} {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, v); err != nil {
					t.Fatal(err)
				}
			}
			r, err := cfg.Resolve("", 10000, cfg.MaxPos)
			if err != nil {
				t.Fatal(err)
			}
			rp, err := NewScaledRoPE(cfg.HeadDim, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(rp.InvFreq) != len(gold.Rope.InvFreq) {
				t.Fatalf("%d frequencies, golden has %d", len(rp.InvFreq), len(gold.Rope.InvFreq))
			}
			for i, f := range rp.InvFreq {
				if f != gold.Rope.InvFreq[i] {
					t.Errorf("inv_freq[%d] = %g, transformers %g", i, f, gold.Rope.InvFreq[i])
				}
			}
			want := float32(1)
			if a := gold.Rope.AttentionFactor; a != nil {
				want = float32(*a)
			}
			if got := max(rp.Scale, 0); (got == 0 && want != 1) || (got != 0 && got != want) {
				t.Errorf("cos/sin factor %g, transformers %g", rp.Scale, want)
			}
		})
	}
}

// TestYarnSensitivity shows that each of yarn's optional parameters
// changes the rotated values.
func TestYarnSensitivity(t *testing.T) {
	const T, H, dh = 4, 2, 32
	x := randVals(rand.New(rand.NewPCG(1, 2)), T*H*dh, 1)
	pos := []int{100, 900, 2000, 4000}
	rotate := func(r loaders.RoPE) []float32 {
		rp, err := NewScaledRoPE(dh, r)
		if err != nil {
			t.Fatal(err)
		}
		g := newGraph(t)
		return g.run(rp.kernelOn(g.input("x", x, T, H, dh), g.input("positions", pos, T)))[0]
	}
	base := rotate(yarnBase)
	for _, c := range []struct {
		name string
		edit func(*loaders.RoPE)
	}{
		{"beta_fast", func(r *loaders.RoPE) { r.BetaFast = 16 }},
		{"beta_slow", func(r *loaders.RoPE) { r.BetaSlow = 2 }},
		{"truncate", func(r *loaders.RoPE) { r.Truncate = false }},
		{"attention_factor", func(r *loaders.RoPE) { r.AttentionFactor = 1.5 }},
		{"factor", func(r *loaders.RoPE) { r.Factor = 8 }},
		{"original_max_position_embeddings", func(r *loaders.RoPE) { r.OriginalMaxPositions = 2048 }},
	} {
		r := yarnBase
		c.edit(&r)
		got := rotate(r)
		var d float64
		for i := range got {
			d = math.Max(d, math.Abs(float64(got[i]-base[i])))
		}
		if d < 1e-3 {
			t.Errorf("%s: output moved by %g only", c.name, d)
		}
	}
}

// TestScaledRoPEKernel checks the kernel against the float64 rotation of
// the reference tables: yarn with its factor on cos and sin, and dynamic
// NTK, whose table follows the step's largest position (below the
// threshold the default table, past it the grown base).
func TestScaledRoPEKernel(t *testing.T) {
	const H, dh = 2, 16
	r := rand.New(rand.NewPCG(3, 4))
	dyn := loaders.RoPE{Type: "dynamic", Theta: 1e4, Factor: 2, MaxPositions: 8}
	cases := []struct {
		name  string
		r     loaders.RoPE
		pos   []int
		table []float64
		scale float64
	}{
		{"yarn", yarnBase, []int{0, 7, 300, 4095}, refYarn(dh, yarnBase), yarnBase.AttentionFactor},
		{"dynamic within max", dyn, []int{4, 5, 6, 7}, refDefault(dh, 1e4), 1},
		{"dynamic past max", dyn, []int{5, 6, 7, 8}, refDynamic(dh, 1e4, 2, 8, 9), 1},
		{"dynamic decode step", dyn, []int{40, -1, -1, -1}, refDynamic(dh, 1e4, 2, 8, 41), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			T := len(c.pos)
			x := randVals(r, T*H*dh, 1)
			rp, err := NewScaledRoPE(dh, c.r)
			if err != nil {
				t.Fatal(err)
			}
			g := newGraph(t)
			out := g.run(rp.kernelOn(g.input("x", x, T, H, dh), g.input("positions", c.pos, T)))[0]
			xf := make([]float64, len(x))
			for i, v := range x {
				xf[i] = float64(v)
			}
			want := refRotate(xf, T, H, dh, c.table, c.pos)
			for i := range want {
				want[i] *= c.scale
			}
			assertClose(t, c.name, out, want, 2e-4)
		})
	}
}

// refRotate is refRope over a float64 table.
func refRotate(x []float64, T, H, dh int, inv []float64, pos []int) []float64 {
	out := make([]float64, len(x))
	half := dh / 2
	for t := 0; t < T; t++ {
		if pos[t] < 0 {
			continue
		}
		for h := 0; h < H; h++ {
			o := (t*H + h) * dh
			for i := 0; i < half; i++ {
				c, s := math.Cos(float64(pos[t])*inv[i]), math.Sin(float64(pos[t])*inv[i])
				out[o+i] = x[o+i]*c - x[o+i+half]*s
				out[o+i+half] = x[o+i+half]*c + x[o+i]*s
			}
		}
	}
	return out
}

func TestScaledRoPEErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		dim  int
		r    loaders.RoPE
	}{
		{"odd dimension", 7, loaders.RoPE{Type: "default", Theta: 1e4}},
		{"unknown type", 8, loaders.RoPE{Type: "longrope", Theta: 1e4}},
		{"rope_freqs of another length", 8, loaders.RoPE{Type: "default", Theta: 1e4, FreqFactors: []float64{1, 2}}},
	} {
		if _, err := NewScaledRoPE(c.dim, c.r); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestRoPEStepAngles checks that a RoPE's kept angles rotate as computing
// them afresh does, bit for bit, as steps' positions change and repeat
// and as q and k (other head counts) share them.
func TestRoPEStepAngles(t *testing.T) {
	const dh = 16
	rp, err := NewScaledRoPE(dh, yarnBase)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	steps := [][]int{{0, 1, 2, 3}, {4}, {4}, {5, -1}, {5, -1}, {9, 3}, {9, 4}, {4}, {-1}}
	for i, pos := range steps {
		for _, H := range []int{3, 1} {
			x := randVals(r, len(pos)*H*dh, 1)
			want := make([]float32, len(x))
			got := make([]float32, len(x))
			rotate(want, x, H, rp.InvFreq, rp.Scale, pos)
			rp.step.rotate(got, x, H, rp.InvFreq, rp.Scale, pos)
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("step %d (positions %v), %d heads: value %d is %g, want %g", i, pos, H, j, got[j], want[j])
				}
			}
		}
	}
}
