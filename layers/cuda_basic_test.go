package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/internal/cudatest"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/ops"
)

// The CUDA kernels of cuda_basic.go: on the host, every op's launches at
// the real models' shapes are checked against the kernels' declarations
// and sizes; on a device (TestCUDA..., skipped without a driver), every
// op's output is compared with its CPU kernel's.

// cudaModel is the shapes of a model the zoo runs.
type cudaModel struct {
	name                    string
	hidden, hq, hkv, dh, ff int
	theta                   float64
}

var cudaModels = []cudaModel{
	{"qwen3-0.6b", 1024, 16, 8, 128, 3072, 1e6},
	{"smollm2-135m", 576, 9, 3, 64, 1536, 1e5},
	{"siglip", 768, 12, 12, 64, 3072, 1e4},
}

// cudaCase is one op on host inputs; op groups the cases of one kernel
// for the per-op device tests.
type cudaCase struct {
	op, name string
	k        ops.Kernel
	in       []G.Value
}

func f32Value(data []float32, shape ...int) G.Value { return ops.NewF32(data, shape...) }

func intValue(data []int, shape ...int) G.Value {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// ropePositions is T positions from p0 on; with more than one row the
// last is padding (-1).
func ropePositions(T, p0 int) []int {
	pos := make([]int, T)
	for i := range pos {
		pos[i] = p0 + i
	}
	if T > 1 {
		pos[T-1] = -1
	}
	return pos
}

// cudaCases are every op of cuda_basic.go at the models' shapes, for a
// decode step (T = 1) and a short prefill (T = 7).
func cudaCases() []cudaCase {
	r := rand.New(rand.NewPCG(7, 11))
	var cs []cudaCase
	add1 := func(op, name string, k ops.Kernel, in ...G.Value) {
		cs = append(cs, cudaCase{op: op, name: name, k: k, in: in})
	}
	acts := []struct {
		act  string
		fast bool
	}{{"silu", false}, {"gelu_pytorch_tanh", false}, {"gelu_pytorch_tanh", true}, {"gelu_new", false}, {"gelu", false}, {"relu", false}}
	for _, m := range cudaModels {
		for _, T := range []int{1, 7} {
			tag := func(s string, a ...any) string { return fmt.Sprintf("%s/T%d/", m.name, T) + fmt.Sprintf(s, a...) }
			D, q, kv := m.hidden, m.hq*m.dh, m.hkv*m.dh

			// Norms: the hidden state, per-head (Qwen3's q_norm), Gemma's offset.
			x := randVals(r, T*D, 2)
			w := randVals(r, D, 0.5)
			add1("rmsnorm", tag("hidden"), rmsNorm{eps: 1e-6, offset: 0, dims: 2}, f32Value(x, T, D), f32Value(w, D))
			add1("rmsnorm", tag("offset"), rmsNorm{eps: 1e-6, offset: 1, dims: 2}, f32Value(x, T, D), f32Value(w, D))
			add1("rmsnorm", tag("heads"), rmsNorm{eps: 1e-6, dims: 3},
				f32Value(randVals(r, q*T, 1), T, m.hq, m.dh), f32Value(randVals(r, m.dh, 0.5), m.dh))
			b := randVals(r, D, 0.5)
			shifted := randVals(r, T*D, 3)
			for i := range shifted {
				shifted[i] += 5 // a mean far from 0
			}
			add1("layernorm", tag("hidden"), layerNorm{eps: 1e-6, dims: 2}, f32Value(x, T, D), f32Value(w, D), f32Value(b, D))
			add1("layernorm", tag("shifted"), layerNorm{eps: 1e-5, dims: 2}, f32Value(shifted, T, D), f32Value(w, D), f32Value(b, D))

			// RoPE on q and k, near the start and far into a sequence, with
			// linear scaling.
			for _, p0 := range []int{0, 4000, 39000} {
				for _, factor := range []float64{1, 8} {
					rp := NewRoPE(m.dh, m.theta, factor)
					k := rope{invFreq: rp.InvFreq, id: rp.id}
					pos := intValue(ropePositions(T, p0), T)
					add1("rope", tag("q/p%d/f%g", p0, factor), k, f32Value(randVals(r, T*q, 1), T, m.hq, m.dh), pos)
					add1("rope", tag("k/p%d/f%g", p0, factor), k, f32Value(randVals(r, T*kv, 1), T, m.hkv, m.dh), pos)
				}
			}

			// Activations: gated over the MLP's width, plain over a ViT's.
			for _, a := range acts {
				g, u := randVals(r, T*m.ff, 4), randVals(r, T*m.ff, 1)
				add1("gatedact", tag("%s/fast=%v", a.act, a.fast), gatedAct{act: a.act, fast: a.fast}, f32Value(g, T, m.ff), f32Value(u, T, m.ff))
				add1("activate", tag("%s/fast=%v", a.act, a.fast), activate{act: a.act, dims: 2, fast: a.fast}, f32Value(g, T, m.ff))
			}

			// Pointwise: the embedding scale and a logit softcap.
			add1("pointwise", tag("scale"), pointwise{kind: "scale", p: float32(math.Sqrt(float64(D))), dims: 2}, f32Value(x, T, D))
			add1("pointwise", tag("softcap"), pointwise{kind: "softcap", p: 30, dims: 2}, f32Value(randVals(r, T*D, 40), T, D))

			// The residual add.
			add1("add", tag("hidden"), add{dims: 2}, f32Value(x, T, D), f32Value(randVals(r, T*D, 1), T, D))
			add1("add", tag("heads"), add{dims: 3}, f32Value(randVals(r, T*q, 1), T, m.hq, m.dh), f32Value(randVals(r, T*q, 1), T, m.hq, m.dh))

			// Heads out of a fused QKV projection.
			H := m.hq + 2*m.hkv
			qkv := f32Value(randVals(r, T*H*m.dh, 1), T, H, m.dh)
			add1("headrange", tag("q"), headRange{from: 0, count: m.hq}, qkv)
			add1("headrange", tag("k"), headRange{from: m.hq, count: m.hkv}, qkv)
			add1("headrange", tag("v"), headRange{from: m.hq + m.hkv, count: m.hkv}, qkv)

			// llama.cpp's Q and K rows to HF's and back.
			for _, inv := range []bool{false, true} {
				add1("headrows", tag("q/inverse=%v", inv), headRows{hd: m.dh, dims: 2, inverse: inv}, f32Value(randVals(r, T*q, 1), T, q))
				add1("headrows", tag("k/inverse=%v", inv), headRows{hd: m.dh, dims: 3, inverse: inv}, f32Value(randVals(r, T*kv, 1), T, m.hkv, m.dh))
			}
		}
	}
	// Gemma's head dimension 256, the rope kernel's largest.
	rp := NewRoPE(256, 1e4, 1)
	add1("rope", "gemma/T7/dh256", rope{invFreq: rp.InvFreq, id: rp.id}, f32Value(randVals(r, 7*8*256, 1), 7, 8, 256), intValue(ropePositions(7, 100), 7))
	// YaRN: a blended table and its factor on cos and sin.
	yarn, err := NewScaledRoPE(64, loaders.RoPE{Type: "yarn", Theta: 1e6, Factor: 4, OriginalMaxPositions: 16, BetaFast: 32, BetaSlow: 1, Truncate: true, AttentionFactor: 1.1386})
	if err != nil {
		panic(err)
	}
	add1("rope", "yarn/T7/dh64", yarn.kernel(), f32Value(randVals(r, 7*4*64, 1), 7, 4, 64), intValue(ropePositions(7, 40), 7))
	// Activations at their edges: zeros, ±10 (the table's ends), large.
	edge := []float32{0, float32(math.Copysign(0, -1)), 10, -10, 9.99, -9.99, 1e-3, -1e-3, 30, -30, 88, -88, 100, -100, 0.5, -0.5}
	for _, a := range acts {
		add1("activate", fmt.Sprintf("edges/%s/fast=%v", a.act, a.fast), activate{act: a.act, dims: 1, fast: a.fast}, f32Value(slices.Clone(edge), len(edge)))
	}
	return cs
}

// nArg is, for the elementwise kernels, the parameter that holds the
// number of values.
var nArg = map[*cuda.Kernel]int{
	cuda.Act: 2, cuda.GatedAct: 3, cuda.ScaleF32: 2, cuda.Softcap: 2, cuda.AddF32: 3,
	cuda.HeadRange: 2, cuda.HeadRows: 2,
}

// checkCover checks that an op's calls cover its output: every value of
// an elementwise kernel, every row of a norm, every pair of a rope.
func checkCover(c cudaCase, calls []cuda.Call) error {
	var shapes []tensor.Shape
	for _, v := range c.in {
		shapes = append(shapes, v.Shape())
	}
	shape, err := c.k.Shape(shapes)
	if err != nil {
		return err
	}
	n := shape.TotalSize()
	if len(calls) != 1 {
		return fmt.Errorf("%d calls, want 1", len(calls))
	}
	call := calls[0]
	if i, ok := nArg[call.K]; ok {
		if got := call.Args[i]; got != n {
			return fmt.Errorf("%s: n = %v, want %d", call.K.Name, got, n)
		}
		if call.Grid.X*call.Block.X < n {
			return fmt.Errorf("%s: grid %v of %v covers fewer than %d values", call.K.Name, call.Grid, call.Block, n)
		}
		return nil
	}
	switch call.K {
	case cuda.RMSNorm, cuda.LayerNorm:
		d, rows := shape[len(shape)-1], 3
		if call.K == cuda.LayerNorm {
			rows = 4
		}
		if call.Grid.X != n/d || call.Args[rows] != n/d || call.Args[rows+1] != d || call.Block.X%32 != 0 {
			return fmt.Errorf("%s: grid %v block %v args %v for %d rows", call.K.Name, call.Grid, call.Block, call.Args, n/d)
		}
		if call.K == cuda.LayerNorm {
			eps := c.k.(layerNorm).eps
			if got := call.Args[6].(int64); math.Float64frombits(uint64(got)) != eps {
				return fmt.Errorf("layer norm eps passed as %g, want %g", math.Float64frombits(uint64(got)), eps)
			}
		}
	case cuda.RoPE:
		k := c.k.(rope)
		T, H, half := shape[0], shape[1], shape[2]/2
		if call.Grid.X != T || call.Grid.Y*call.Block.X < H*half {
			return fmt.Errorf("rope: grid %v block %v for %d rows of %d pairs", call.Grid, call.Block, T, H*half)
		}
		if call.Args[3] != H || call.Args[4] != half {
			return fmt.Errorf("rope: H, half = %v, %v, want %d, %d", call.Args[3], call.Args[4], H, half)
		}
		if got := call.Args[5].(float32); got != k.scale {
			return fmt.Errorf("rope: scale %g, want %g", got, k.scale)
		}
		for i := range cuda.RoPEMaxHalf {
			want := float32(0)
			if i < half {
				want = k.invFreq[i]
			}
			if got := call.Args[6+i].(float32); got != want {
				return fmt.Errorf("rope: frequency %d = %g, want %g", i, got, want)
			}
		}
	default:
		return fmt.Errorf("unexpected kernel %s", call.K.Name)
	}
	return nil
}

// TestCUDACalls checks every op's launches on the host: the parameters
// against the kernels' declarations, the grids against the output.
func TestCUDACalls(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range cudaCases() {
		seen[c.op] = true
		calls, err := cudatest.Check(c.k, c.in...)
		if err != nil {
			t.Errorf("%s %s: %v", c.op, c.name, err)
			continue
		}
		if err := checkCover(c, calls); err != nil {
			t.Errorf("%s %s: %v", c.op, c.name, err)
		}
	}
	for _, op := range []string{"rmsnorm", "layernorm", "rope", "gatedact", "activate", "pointwise", "add", "headrange", "headrows"} {
		if !seen[op] {
			t.Errorf("no case of %s", op)
		}
	}
}

// TestCUDACallsRefuse checks that wrong inputs are errors, not launches.
func TestCUDACallsRefuse(t *testing.T) {
	x := f32Value(make([]float32, 7*64), 7, 64)
	w := f32Value(make([]float32, 64), 64)
	ints := intValue(make([]int, 7*64), 7, 64)
	pos := intValue(make([]int, 7), 7)
	big := NewRoPE(512, 1e4, 1)
	cases := []struct {
		name string
		k    ops.Kernel
		in   []G.Value
	}{
		{"rms norm of ints", rmsNorm{eps: 1e-6, dims: 2}, []G.Value{ints, w}},
		{"rms norm, weight too short", rmsNorm{eps: 1e-6, dims: 2}, []G.Value{x, f32Value(make([]float32, 32), 32)}},
		{"layer norm of ints", layerNorm{eps: 1e-6, dims: 2}, []G.Value{ints, w, w}},
		{"rope, float positions", rope{invFreq: NewRoPE(64, 1e4, 1).InvFreq}, []G.Value{f32Value(make([]float32, 7*2*64), 7, 2, 64), f32Value(make([]float32, 7), 7)}},
		{"rope, head dim 512", rope{invFreq: big.InvFreq}, []G.Value{f32Value(make([]float32, 7*512), 7, 1, 512), pos}},
		{"rope, dynamic NTK", rope{invFreq: NewRoPE(64, 1e4, 1).InvFreq, dyn: &dynamicNTK{dim: 64, theta: 1e4, factor: 2, maxPos: 8}}, []G.Value{f32Value(make([]float32, 7*64), 7, 1, 64), pos}},
		{"gated act, unknown", gatedAct{act: "swish"}, []G.Value{x, x}},
		{"gated act of ints", gatedAct{act: "silu"}, []G.Value{x, ints}},
		{"activate, unknown", activate{act: "tanh", dims: 2}, []G.Value{x}},
		{"pointwise, unknown", pointwise{kind: "clip", p: 1, dims: 2}, []G.Value{x}},
		{"add of ints", add{dims: 2}, []G.Value{x, ints}},
		{"head range past the heads", headRange{from: 1, count: 2}, []G.Value{f32Value(make([]float32, 7*2*64), 7, 2, 64)}},
		{"head rows of ints", headRows{hd: 64, dims: 2}, []G.Value{ints}},
	}
	for _, c := range cases {
		if calls, err := cudatest.Check(c.k, c.in...); err == nil {
			t.Errorf("%s: %d calls, want an error", c.name, len(calls))
		}
	}
	// Shapes that the op's Shape would refuse, given to CUDA directly.
	fake := &cudatest.Fake{}
	out := cuda.Tensor{Ptr: 0x7000000000, Shape: []int{7, 64}, Type: cuda.F32}
	direct := []struct {
		name string
		k    ops.Kernel
		out  cuda.Tensor
		in   []G.Value
	}{
		{"rms norm, output of another shape", rmsNorm{eps: 1e-6, dims: 2}, cuda.Tensor{Ptr: 1 << 30, Shape: []int{7, 32}, Type: cuda.F32}, []G.Value{x, w}},
		{"add of two shapes", add{dims: 2}, out, []G.Value{x, f32Value(make([]float32, 64*7), 64, 7)}},
		{"rope, positions too few", rope{invFreq: NewRoPE(64, 1e4, 1).InvFreq}, cuda.Tensor{Ptr: 1 << 30, Shape: []int{7, 1, 64}, Type: cuda.F32}, []G.Value{f32Value(make([]float32, 7*64), 7, 1, 64), intValue(make([]int, 3), 3)}},
		{"layer norm, one input", layerNorm{eps: 1e-6, dims: 2}, out, []G.Value{x}},
	}
	for _, c := range direct {
		if calls, err := ops.New(c.k).CUDA(fake, c.out, cudatest.Tensors(c.in...)); err == nil {
			t.Errorf("%s: %d calls, want an error", c.name, len(calls))
		}
	}
}

// cudaMatch runs the cases of one op on the device and compares each
// with the op's CPU kernel: within 1e-5 relative (1e-7 absolute near 0).
func cudaMatch(t *testing.T, op string) {
	dev := cudatest.Device(t)
	n := 0
	for _, c := range cudaCases() {
		if c.op != op {
			continue
		}
		n++
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			want, err := ops.New(c.k).Do(c.in...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := cudatest.Run(dev, c.k, c.in...)
			if err != nil {
				t.Fatal(err)
			}
			compareCUDA(t, got, want)
		})
	}
	if n == 0 {
		t.Fatalf("no cases of %s", op)
	}
}

// compareCUDA compares a device output with the CPU's.
func compareCUDA(t *testing.T, got *tensor.Dense, want G.Value) {
	t.Helper()
	w, err := ops.Float32s(want)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal([]int(got.Shape()), []int(want.Shape())) {
		t.Fatalf("shape %v, want %v", got.Shape(), want.Shape())
	}
	g := got.Float32s()
	differ, worst := 0, 0.0
	for i := range w {
		if math.Float32bits(g[i]) == math.Float32bits(w[i]) {
			continue
		}
		differ++
		d := math.Abs(float64(g[i]) - float64(w[i]))
		if !(d <= 1e-5*math.Abs(float64(w[i]))+1e-7) {
			t.Fatalf("[%d] = %g, want %g (diff %g)", i, g[i], w[i], d)
		}
		worst = max(worst, d/max(math.Abs(float64(w[i])), 1e-30))
	}
	if differ > 0 {
		t.Logf("%d of %d values differ from the CPU's in their bits, at most %.3g relative", differ, len(w), worst)
	}
}

func TestCUDARMSNorm(t *testing.T)   { cudaMatch(t, "rmsnorm") }
func TestCUDALayerNorm(t *testing.T) { cudaMatch(t, "layernorm") }
func TestCUDARoPE(t *testing.T)      { cudaMatch(t, "rope") }
func TestCUDAGatedAct(t *testing.T)  { cudaMatch(t, "gatedact") }
func TestCUDAActivate(t *testing.T)  { cudaMatch(t, "activate") }
func TestCUDAPointwise(t *testing.T) { cudaMatch(t, "pointwise") }
func TestCUDAAdd(t *testing.T)       { cudaMatch(t, "add") }
func TestCUDAHeadRange(t *testing.T) { cudaMatch(t, "headrange") }
func TestCUDAHeadRows(t *testing.T)  { cudaMatch(t, "headrows") }
