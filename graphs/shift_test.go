package graphs_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/cudaemu"
)

// TestShiftMatchesRecompute shifts a one-layer model's context (keep 5 of
// 40 positions, drop (40-5)/2 = 17, as llama.cpp's server would) and
// compares the cache and the next logits with the shifted sequence run
// from scratch at its new positions. With one layer a key depends only on
// its token and position, so the two caches hold the same keys up to
// rounding (values are copied unchanged):
//
//   - f32: the shifted key is R(-d)·R(p+d)·u, the recomputed one R(p)·u,
//     each rotation of a pair computed in float32 from a float32 angle
//     fl(pos·f), f <= 1. The angles' rounding errs by at most
//     2⁻²⁴·(|p+d| + d + p) radians, and each rotation's cos, sin, two
//     products and a sum add 4·2⁻²⁴ of the pair's norm: three rotations,
//     so |Δ| <= 2⁻²⁴·(2(p+d) + 12)·|pair|. The bound below doubles it for
//     the projections' float32 noise (they run in other batch shapes).
//   - f16: that, plus one F16 rounding more on the shifted side and one on
//     the recomputed (2⁻¹¹ of an element each, mixed over a pair by the
//     rotation): 3·2⁻¹¹ of the row's largest value.
//   - q8_0, q4_0 (rows compared as stored: interleaved and
//     Hadamard-rotated, where the rotations are orthogonal and keep the
//     L2 norm of an error): the shift dequantizes, rotates and
//     requantizes, so the shifted row carries two quantization errors and
//     the recomputed one one, each at most half a level (q8_0: d =
//     amax/127) or a level (q4_0: |d| = amax/8) per element: in L2 over a
//     head, 3·√Dk times that.
//
// The next token's logits see those keys through the scores (a relative
// key error ε moves a score by about ε·|q·k|) and then the softmax, the
// output projection and the head: tolLogits is 10ε, with ε the keys'
// bound relative to a row's largest value (f32 1.4e-5, f16 1.5e-3, q8_0
// 0.012 per element, q4_0 0.375). Measured: f32 6e-8, f16 7e-5, q8_0
// 2e-3, q4_0 0.03. Shifting without re-rotating the keys fails the key
// bounds by five orders of magnitude (f32: 4.0 against 2.6e-5).
//
// Qwen3 runs every cache type; Llama (whose quantized rows are held in
// the interleaved order) and a SmolLM3 layer without RoPE (its keys move
// unchanged) run f32 and q8_0.
func TestShiftMatchesRecompute(t *testing.T) {
	all := []graphs.KVCacheType{graphs.KVF32, graphs.KVF16, graphs.KVQ8_0, graphs.KVQ4_0}
	some := []graphs.KVCacheType{graphs.KVF32, graphs.KVQ8_0}
	for _, mc := range []struct {
		golden string
		set    map[string]any
		types  []graphs.KVCacheType
	}{
		{"qwen3_gqa_tied", nil, all},
		{"llama_smollm2_gqa_bf16", nil, some},
		{"smollm3_nope", map[string]any{"no_rope_layers": []int{0}}, some},
	} {
		for _, typ := range mc.types {
			t.Run(mc.golden+"/"+typ.String(), func(t *testing.T) { testShift(t, mc.golden, mc.set, typ) })
		}
	}
}

func testShift(t *testing.T, golden string, extra map[string]any, typ graphs.KVCacheType) {
	set := map[string]any{"num_hidden_layers": 1, "head_dim": 64}
	for k, v := range extra {
		set[k] = v
	}
	m := randomModel(t, golden, set)
	r := rand.New(rand.NewPCG(5, 6))
	const n, keep, capacity = 40, 5, 48
	discard := (n - keep) / 2
	ids := make([]int, n+1)
	for i := range ids {
		ids[i] = r.IntN(m.VocabSize())
	}
	opts := graphs.Options{Capacity: capacity, KVCache: typ}
	shifted, err := graphs.NewSession(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer shifted.Close()
	if _, err := shifted.Append(ids[:n]); err != nil {
		t.Fatal(err)
	}
	if err := shifted.Shift(keep, discard); err != nil {
		t.Fatal(err)
	}
	if shifted.Pos() != n-discard {
		t.Fatalf("after the shift the session holds %d positions, want %d", shifted.Pos(), n-discard)
	}
	fresh, err := graphs.NewSession(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	kept := append(slices.Clone(ids[:keep]), ids[keep+discard:n]...)
	if _, err := fresh.Append(kept); err != nil {
		t.Fatal(err)
	}
	dk := 64
	var worstRel float64
	for p := 0; p < n-discard; p++ {
		a, err := shifted.KeyRows(0, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fresh.KeyRows(0, p)
		if err != nil {
			t.Fatal(err)
		}
		var big float64
		for _, x := range b {
			big = max(big, math.Abs(float64(x)))
		}
		for h := 0; h*dk < len(a); h++ {
			ra, rb := a[h*dk:(h+1)*dk], b[h*dk:(h+1)*dk]
			var l2, inf float64
			for i := range ra {
				d := float64(ra[i] - rb[i])
				l2 += d * d
				inf = max(inf, math.Abs(d))
			}
			l2 = math.Sqrt(l2)
			from := p
			if p >= keep {
				from = p + discard
			}
			var bound, got float64
			switch typ {
			case graphs.KVF32:
				bound, got = 2*math.Exp2(-24)*float64(2*from+12)*math.Sqrt2*big, inf
			case graphs.KVF16:
				bound, got = (3*math.Exp2(-11)+2*math.Exp2(-24)*float64(2*from+12)*math.Sqrt2)*big, inf
			case graphs.KVQ8_0:
				bound, got = 3*math.Sqrt(float64(dk))*(big*1.001/127)/2, l2
			case graphs.KVQ4_0:
				bound, got = 3*math.Sqrt(float64(dk))*(big*1.001/8), l2
			}
			if p < keep && got != 0 {
				t.Errorf("position %d (kept in place) changed by %g", p, got)
			}
			if got > bound {
				t.Errorf("position %d head %d: shifted key differs from the recomputed one by %g > %g", p, h, got, bound)
			}
			worstRel = max(worstRel, got/big)
		}
	}
	t.Logf("%s: worst key difference %.3g of the row's largest value", typ, worstRel)

	next := ids[n]
	got, err := shifted.Append([]int{next})
	if err != nil {
		t.Fatal(err)
	}
	want, err := fresh.Append([]int{next})
	if err != nil {
		t.Fatal(err)
	}
	d := maxDiff(got, want)
	eps := 2 * math.Exp2(-24) * float64(2*n+12) * math.Sqrt2
	switch typ {
	case graphs.KVF16:
		eps = 3 * math.Exp2(-11)
	case graphs.KVQ8_0:
		eps = 3.0 / 127 / 2
	case graphs.KVQ4_0:
		eps = 3.0 / 8
	}
	tolLogits := 10 * eps
	t.Logf("%s: next logits differ by %.3g (bound %.3g)", typ, d, tolLogits)
	if d > tolLogits {
		t.Errorf("after the shift the next logits differ from the recomputed ones by %g > %g", d, tolLogits)
	}
}

// TestShiftRefusals: sliding windows and layers whose keys are not
// rotated by position are refused with the layer named; bad ranges name
// keep and discard; a refused shift leaves the sequence as it was.
func TestShiftRefusals(t *testing.T) {
	for _, c := range []struct{ golden, want string }{
		{"gemma3_sliding_mqa", "sliding window"},
		{"gpt2_original_bf16", "cannot move"},
	} {
		m := randomModel(t, c.golden, nil)
		s, err := graphs.NewSession(m, graphs.Options{Capacity: 32})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append([]int{1, 2, 3, 4, 5, 6}); err != nil {
			t.Fatal(err)
		}
		if err := s.Shift(1, 2); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "layer 0") {
			t.Errorf("%s: shift gave %v, want an error naming layer 0 and %q", c.golden, err, c.want)
		}
		if s.Pos() != 6 {
			t.Errorf("%s: a refused shift changed the length to %d", c.golden, s.Pos())
		}
		s.Close()
	}
	m := randomModel(t, "qwen3_gqa_tied", nil)
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append([]int{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	for _, kd := range [][2]int{{-1, 1}, {1, 0}, {2, 3}} {
		if err := s.Shift(kd[0], kd[1]); err == nil || !strings.Contains(err.Error(), "keep") {
			t.Errorf("keep %d discard %d: %v", kd[0], kd[1], err)
		}
	}
}

// TestShiftForkedSequence: a fork shares its parent's blocks; shifting the
// fork copies them first, so the parent's next logits are those of a
// sequence that was never forked.
func TestShiftForkedSequence(t *testing.T) {
	m := randomModel(t, "qwen3_gqa_tied", nil)
	b, err := graphs.NewBatch(m, graphs.BatchOptions{Options: graphs.Options{Capacity: 48}, BlockTokens: 4, PrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ids := []int{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4}
	parent := b.Add()
	if _, err := b.Run(t.Context(), []graphs.Feed{{Seq: parent, Input: graphs.IDs(ids...)}}); err != nil {
		t.Fatal(err)
	}
	child, err := b.Fork(parent)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Shift(child, 2, 9); err != nil {
		t.Fatal(err)
	}
	outs, err := b.Run(t.Context(), []graphs.Feed{{Seq: parent, Input: graphs.IDs(7)}, {Seq: child, Input: graphs.IDs(7)}})
	if err != nil {
		t.Fatal(err)
	}
	alone, err := graphs.NewSession(m, graphs.Options{Capacity: 48})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	want, err := alone.Append(append(slices.Clone(ids), 7))
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(outs[0].Logits[0], want); d > 1e-4 {
		t.Errorf("the parent's logits moved by %g after its fork shifted", d)
	}
	if d := maxDiff(outs[1].Logits[0], want); d < 1e-3 {
		t.Errorf("the shifted fork's logits equal the unshifted parent's (%g): nothing was dropped", d)
	}
	if n, _ := b.Len(child); n != len(ids)-9+1 {
		t.Errorf("the fork holds %d positions, want %d", n, len(ids)-9+1)
	}
}

// TestQuantizedCacheRefusedOnDevice: the device's attention kernels read
// float32 or F16 blocks, so a quantized cache there is refused by name.
func TestQuantizedCacheRefusedOnDevice(t *testing.T) {
	m := randomModel(t, "qwen3_gqa_tied", nil)
	_, err := graphs.NewBatch(m, graphs.BatchOptions{Options: graphs.Options{Capacity: 16, KVCache: graphs.KVQ8_0, Device: cudaemu.New(t)}})
	if err == nil || !strings.Contains(err.Error(), "q8_0") || !strings.Contains(err.Error(), "CPU only") {
		t.Fatalf("a q8_0 cache on a device: %v", err)
	}
}
