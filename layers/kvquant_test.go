package layers

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/ops"
)

// hadamard64 is the explicit normalised Sylvester-Hadamard matrix,
// H[i][j] = (-1)^popcount(i&j) / sqrt(n), in float64.
func hadamard64(n int) [][]float64 {
	h := make([][]float64, n)
	s := 1 / math.Sqrt(float64(n))
	for i := range h {
		h[i] = make([]float64, n)
		for j := range h[i] {
			h[i][j] = s
			if bits.OnesCount(uint(i&j))%2 == 1 {
				h[i][j] = -s
			}
		}
	}
	return h
}

// TestFWHT checks the fast transform against H·x in float64. Each output is
// ±x_i/√n summed over n values through log2(n) float32 additions after one
// float32 scaling: its rounding is at most (log2(n)+1)·2⁻²⁴·Σ|x_i|/√n,
// the bound used (doubled).
func TestFWHT(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{2, 4, 8, 64, 128, 256} {
		h := hadamard64(n)
		x := randVals(r, n, 1)
		got := append([]float32(nil), x...)
		fwht(got)
		var l1 float64
		for _, v := range x {
			l1 += math.Abs(float64(v))
		}
		tol := 2 * float64(bits.Len(uint(n))) * math.Exp2(-24) * l1 / math.Sqrt(float64(n))
		for i := range n {
			var want float64
			for j := range n {
				want += h[i][j] * float64(x[j])
			}
			if d := math.Abs(float64(got[i]) - want); d > tol {
				t.Fatalf("n=%d: element %d is %g, H·x gives %g (|diff| %g > %g)", n, i, got[i], want, d, tol)
			}
		}
		// H is its own inverse.
		fwht(got)
		for i, v := range x {
			if d := math.Abs(float64(got[i] - v)); d > 2*tol {
				t.Fatalf("n=%d: H·H·x differs from x at %d by %g", n, i, d)
			}
		}
	}
	for dim, want := range map[int]int{32: 0, 64: 64, 96: 0, 128: 128, 192: 64, 256: 256, 320: 64, 512: 512} {
		if got := kvRotation(dim); got != want {
			t.Errorf("kvRotation(%d) = %d, want %d", dim, got, want)
		}
	}
}

// TestQuantizeKV stores blocks whose levels are computed by hand, rounding
// ties included: Q8_0 rounds half to even (x86's quantize_row_q8_0; the
// reference's roundf would round 0.5 to 1), Q4_0 truncates x/d + 8.5.
func TestQuantizeKV(t *testing.T) {
	// Q8_0: amax 127, so d = 1 and q = round_half_even(x).
	x := make([]float32, 32)
	copy(x, []float32{127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.4, -126.6})
	want8 := []int8{127, 0, 2, 2, 0, -2, -2, 3, -127}
	blk := make([]byte, 34)
	quantizeKV(quant.Q8_0, x, blk)
	if blk[0] != 0x00 || blk[1] != 0x3c { // F16 1.0
		t.Errorf("q8_0 scale bits %02x%02x, want 3c00 (1.0)", blk[1], blk[0])
	}
	for i, w := range want8 {
		if got := int8(blk[2+i]); got != w {
			t.Errorf("q8_0 value %d (%g) stored as %d, want %d", i, x[i], got, w)
		}
	}
	back := make([]float32, 32)
	quant.DequantizeRow(quant.Q8_0, blk, back)
	for i, w := range want8 {
		if back[i] != float32(w) {
			t.Errorf("q8_0 value %d reads back as %g, want %d", i, back[i], w)
		}
	}

	// Q4_0: the first value of largest magnitude is -8, so d = -8/-8 = 1
	// and q = min(15, int8(x + 8.5)), read back as q - 8.
	y := make([]float32, 32)
	copy(y, []float32{-8, 7.6, 0.4, -0.6, 0.5, -0.5, 3.2, -7.9})
	y[16], y[17] = 1.49, -2.51 // the high nibbles of bytes 0 and 1
	wantQ := map[int]int{0: 0, 1: 15, 2: 8, 3: 7, 4: 9, 5: 8, 6: 11, 7: 0, 16: 9, 17: 5}
	blk4 := make([]byte, 18)
	quantizeKV(quant.Q4_0, y, blk4)
	if blk4[0] != 0x00 || blk4[1] != 0x3c {
		t.Errorf("q4_0 scale bits %02x%02x, want 3c00 (1.0)", blk4[1], blk4[0])
	}
	quant.DequantizeRow(quant.Q4_0, blk4, back)
	for i, q := range wantQ {
		nib := int(blk4[2+i%16] & 15)
		if i >= 16 {
			nib = int(blk4[2+i%16] >> 4)
		}
		if nib != q || back[i] != float32(q-8) {
			t.Errorf("q4_0 value %d (%g): level %d, reads %g; want %d, %d", i, y[i], nib, back[i], q, q-8)
		}
	}
	// A positive extreme gives a negative scale: max 8 → d = -1.
	z := make([]float32, 32)
	z[0], z[1] = 8, 3
	quantizeKV(quant.Q4_0, z, blk4)
	quant.DequantizeRow(quant.Q4_0, blk4, back)
	if blk4[1] != 0xbc || back[0] != 8 || back[1] != 3 {
		t.Errorf("q4_0 with max 8: scale bits %02x%02x, reads %g %g; want bc00, 8 3", blk4[1], blk4[0], back[0], back[1])
	}
}

// refQuantAttention is llama.cpp's attention over a quantized cache in
// float64, written apart from the kernel: the explicit Hadamard matrix,
// the block quantizers in float64 (ties of half even and truncation as
// ggml), integer block dot products, and a two-pass softmax.
func refQuantAttention(q, k, v []float32, T, hq, hkv, dh, pos0 int, scale float64, window int, typ graphs.KVCacheType, interleaved, preScale bool) []float64 {
	rot := kvRotation(dh)
	prep := func(x []float32, ilv bool, chunk int) []float64 {
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = float64(v)
		}
		if ilv {
			z := make([]float64, len(y))
			for i := 0; i < len(y)/2; i++ {
				z[2*i], z[2*i+1] = y[i], y[len(y)/2+i]
			}
			y = z
		}
		if chunk > 0 {
			h := hadamard64(chunk)
			for c := 0; c < len(y); c += chunk {
				z := make([]float64, chunk)
				for i := range chunk {
					for j := range chunk {
						z[i] += h[i][j] * y[c+j]
					}
				}
				copy(y[c:], z)
			}
		}
		return y
	}
	f16 := func(x float64) float64 { return float64(float16.Fromfloat32(float32(x)).Float32()) }
	// q8 returns the levels and scales of Q8_0 blocks.
	q8 := func(x []float64) ([]float64, []float64) {
		lv, ds := make([]float64, len(x)), make([]float64, len(x)/32)
		for b := range ds {
			var amax float64
			for _, v := range x[b*32 : b*32+32] {
				amax = math.Max(amax, math.Abs(v))
			}
			ds[b] = f16(amax / 127)
			for j := b * 32; j < b*32+32; j++ {
				if amax > 0 {
					lv[j] = math.RoundToEven(x[j] * 127 / amax)
				}
			}
		}
		return lv, ds
	}
	q4 := func(x []float64) ([]float64, []float64) {
		lv, ds := make([]float64, len(x)), make([]float64, len(x)/32)
		for b := range ds {
			var amax, m float64
			for _, v := range x[b*32 : b*32+32] {
				if math.Abs(v) > amax {
					amax, m = math.Abs(v), v
				}
			}
			d := m / -8
			ds[b] = f16(d)
			for j := b * 32; j < b*32+32; j++ {
				l := 8.0
				if d != 0 {
					l = math.Min(15, math.Trunc(x[j]/d+8.5))
				}
				lv[j] = l - 8
			}
		}
		return lv, ds
	}
	store := q8
	if typ == graphs.KVQ4_0 {
		store = q4
	}
	L := pos0 + T
	type row struct{ lv, ds []float64 }
	keys, vals := make([]row, L*hkv), make([]row, L*hkv)
	for j := 0; j < L*hkv; j++ {
		keys[j].lv, keys[j].ds = store(prep(k[j*dh:(j+1)*dh], interleaved, rot))
		vrot := 0
		if dh%64 == 0 {
			vrot = 64
		}
		vals[j].lv, vals[j].ds = store(prep(v[j*dh:(j+1)*dh], false, vrot))
	}
	out := make([]float64, T*hq*dh)
	for t := 0; t < T; t++ {
		p := pos0 + t
		lo := 0
		if window > 0 {
			lo = max(0, p-window+1)
		}
		for h := 0; h < hq; h++ {
			g := h / (hq / hkv)
			qx := q[(t*hq+h)*dh:][:dh]
			sc := scale
			if preScale {
				s := make([]float32, dh)
				for i, x := range qx {
					s[i] = x * float32(scale)
				}
				qx, sc = s, 1
			}
			ql, qd := q8(prep(qx, interleaved, rot))
			scores := make([]float64, p+1-lo)
			m := math.Inf(-1)
			for j := lo; j <= p; j++ {
				kr := keys[j*hkv+g]
				var s float64
				for b := range qd {
					var dot float64
					for i := b * 32; i < b*32+32; i++ {
						dot += kr.lv[i] * ql[i]
					}
					s += kr.ds[b] * qd[b] * dot
				}
				scores[j-lo] = s * sc
				m = math.Max(m, scores[j-lo])
			}
			var sum float64
			acc := make([]float64, dh)
			for j := lo; j <= p; j++ {
				w := math.Exp(scores[j-lo] - m)
				sum += w
				vr := vals[j*hkv+g]
				for i := range acc {
					acc[i] += w * vr.lv[i] * vr.ds[i/32]
				}
			}
			for i := range acc {
				acc[i] /= sum
			}
			if dh%64 == 0 {
				h64 := hadamard64(64)
				for c := 0; c < dh; c += 64 {
					z := make([]float64, 64)
					for i := range 64 {
						for j := range 64 {
							z[i] += h64[i][j] * acc[c+j]
						}
					}
					copy(acc[c:], z)
				}
			}
			copy(out[(t*hq+h)*dh:], acc)
		}
	}
	return out
}

// TestQuantizedCacheAttention runs the kernel over q8_0 and q4_0 pools, a
// prefill and then a chunk over it, against refQuantAttention. Both
// compute the same arithmetic; they differ by float32 rounding (the
// rotation, the block sums, the online softmax's float32 exp and sums),
// a few 1e-6 on outputs of about 1, unless a value lies within that of a
// quantization boundary and takes the next level: the seeds here meet
// none, and 1e-4 would still be far below what a wrong rotation, order
// or rounding rule moves (checked below: about 1e-2).
func TestQuantizedCacheAttention(t *testing.T) {
	const hq, hkv = 4, 2
	cases := []struct {
		dh, window  int
		interleaved bool
		preScale    bool
	}{
		{64, 0, false, false},  // rotation by 64
		{128, 0, true, false},  // by 128, Llama's interleaved order
		{256, 5, false, true},  // by 256, Gemma3's pre-scaled query, a window
		{96, 0, true, false},   // no rotation: 64 does not divide 96
		{192, 0, false, false}, // by 64 chunks for Q/K and V
	}
	for _, typ := range []graphs.KVCacheType{graphs.KVQ8_0, graphs.KVQ4_0} {
		for _, c := range cases {
			name := fmt.Sprintf("%s/dh=%d/window=%d/interleaved=%v/prescale=%v", typ, c.dh, c.window, c.interleaved, c.preScale)
			t.Run(name, func(t *testing.T) {
				kind := graphs.FullCache
				if c.window > 0 {
					kind = graphs.SlidingCache
				}
				f, err := graphs.NewKVFixtureOf(graphs.LayerCache{Kind: kind, KVHeads: hkv, KeyDim: c.dh, ValueDim: c.dh, Window: c.window}, 4, typ)
				if err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(11, uint64(c.dh)))
				const P, T = 7, 3 // a prefill of 7, then 3 rows over it
				L := P + T
				q := randVals(r, L*hq*c.dh, 1)
				k, v := randVals(r, L*hkv*c.dh, 1), randVals(r, L*hkv*c.dh, 1)
				const scale = 0.125
				forward := func(pos, n int, ka cachedAttention) []float32 {
					if err := f.Plan(graphs.FixtureRun{Seq: 0, Row: 0, Len: n, Pos: pos}); err != nil {
						t.Fatal(err)
					}
					positions := make([]int, n)
					for i := range positions {
						positions[i] = pos + i
					}
					g := newGraph(t)
					return g.run(ops.Apply(ka,
						g.input("q", q[pos*hq*c.dh:(pos+n)*hq*c.dh], n, hq, c.dh), g.input("k", k[pos*hkv*c.dh:(pos+n)*hkv*c.dh], n, hkv, c.dh),
						g.input("v", v[pos*hkv*c.dh:(pos+n)*hkv*c.dh], n, hkv, c.dh), g.input("positions", positions, n)))[0]
				}
				ka := cachedAttention{name: "attn", scale: scale, window: c.window, kv: f.KV, interleaved: c.interleaved, preScale: c.preScale}
				pre := forward(0, P, ka)
				want := refQuantAttention(q, k, v, P, hq, hkv, c.dh, 0, scale, c.window, typ, c.interleaved, c.preScale)
				assertClose(t, "prefill", pre, want, 1e-4)
				sink := &graphs.Sink{}
				ka.sink = sink
				got := forward(P, T, ka)
				want = refQuantAttention(q[P*hq*c.dh:], k, v, T, hq, hkv, c.dh, P, scale, c.window, typ, c.interleaved, c.preScale)
				assertClose(t, "chunk over the prefill", got, want, 1e-4)
				// Captured probabilities: each row sums to 1 over the keys
				// it sees and is zero elsewhere.
				pr, _ := ops.Float32s(sinkValue(sink))
				keys := len(pr) / (T * hq)
				for row := 0; row < T; row++ {
					lo := 0
					if c.window > 0 {
						lo = max(0, P+row-c.window+1)
					}
					for h := 0; h < hq; h++ {
						var sum float64
						for j, x := range pr[(row*hq+h)*keys : (row*hq+h+1)*keys] {
							if (j < lo || j > P+row) && x != 0 {
								t.Fatalf("row %d head %d: probability %g at key %d outside %d..%d", row, h, x, j, lo, P+row)
							}
							sum += float64(x)
						}
						if math.Abs(sum-1) > 1e-5 {
							t.Fatalf("row %d head %d: probabilities sum to %g", row, h, sum)
						}
					}
				}
				// The reference tells the order and the rotation apart.
				if kvRotation(c.dh) > 0 {
					other := refQuantAttention(q[P*hq*c.dh:], k, v, T, hq, hkv, c.dh, P, scale, c.window, typ, !c.interleaved, c.preScale)
					var worst float64
					for i, x := range other {
						worst = max(worst, math.Abs(x-want[i]))
					}
					if worst < 1e-3 {
						t.Errorf("the other Q/K order moves the output by only %g", worst)
					}
				}
			})
		}
	}
}
